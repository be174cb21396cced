"""analysis.rly, the rliable drop-in, against rliable 1.2.0 itself (the test oracle) on
the cells of rliable's README and notebook: aggregates with CIs, sample-efficiency
curves, probability of improvement, performance profiles (what rliable lacks:
tests/test_rly_checks.py).

"Within Monte Carlo error": our CI endpoints at seed 0 differ from rliable's (global RNG,
seeded) by at most 4 standard deviations of the difference of two independent bootstrap
runs of the same size, the standard deviation measured from our own bootstrap over 20
seeds (rliable's endpoints have the same sampling distribution).
"""

from __future__ import annotations

import numpy as np
import pytest
from rly_data import atari_like, example_scores, ours_rliable

from analysis import rly

rliable_lib = pytest.importorskip("rliable.library", reason="rliable is the test oracle")
rliable_metrics = pytest.importorskip("rliable.metrics")

MC_SEEDS = 20


@pytest.fixture(scope="module")
def score_dict() -> dict[str, np.ndarray]:
    return example_scores()


def theirs(x):
    m = rliable_metrics
    return np.array([m.aggregate_median(x), m.aggregate_iqm(x), m.aggregate_mean(x),
                     m.aggregate_optimality_gap(x)])


def assert_within_mc(ours_ci: dict, their_ci: dict, spread: dict, floor: float = 0.0) -> None:
    """Endpoints within 4 sd of the difference of two independent bootstraps; the bound is
    checked to be tighter than the CI itself, so a wrong bootstrap could not pass."""
    for key in their_ci:
        sd = spread[key]
        tol = 4 * np.sqrt(2) * sd + floor
        gap = np.abs(np.asarray(ours_ci[key]) - np.asarray(their_ci[key]))
        assert np.all(gap <= tol), (key, gap.max(), tol)
        width = np.asarray(ours_ci[key][1]) - np.asarray(ours_ci[key][0])
        assert np.median(tol[0] / np.maximum(width, 1e-12)) < 0.25


def our_spread(score_dict, func, reps, **kw) -> dict[str, np.ndarray]:
    runs = [rly.get_interval_estimates(score_dict, func, reps=reps, random_state=s, **kw)[1]
            for s in range(MC_SEEDS)]
    return {k: np.std([r[k] for r in runs], axis=0, ddof=1) for k in score_dict}


def test_point_estimates_equal_rliable():
    rng = np.random.default_rng(3)
    for shape in [(5, 55), (3, 57), (10, 26), (7, 5), (1, 4), (100, 26)]:
        x = atari_like(rng, *shape)
        np.testing.assert_allclose(ours_rliable(x), theirs(x), rtol=1e-12, atol=1e-14)
        y = atari_like(rng, shape[0] + 1, shape[1])
        y[0] = x[0]  # ties
        assert rly.probability_of_improvement(x, y) == pytest.approx(
            rliable_metrics.probability_of_improvement(x, y), abs=1e-12)
        assert isinstance(rly.aggregate_iqm(x), np.floating)


def test_readme_aggregates_cell(score_dict):
    # README: aggregate_func = lambda x: np.array([median, iqm, mean, optimality gap])
    reps = 2000
    np.random.seed(0)  # rliable draws from NumPy's global RNG
    their_points, their_ci = rliable_lib.get_interval_estimates(score_dict, theirs, reps=reps)
    points, ci = rly.get_interval_estimates(score_dict, ours_rliable, reps=reps)
    for key in score_dict:
        np.testing.assert_allclose(points[key], their_points[key], rtol=1e-12)
        assert ci[key].shape == their_ci[key].shape == (2, 4)
    assert_within_mc(ci, their_ci, our_spread(score_dict, ours_rliable, reps))
    # rliable's own metric functions (one call per replicate) give the same CIs as ours
    _, ci_loop = rly.get_interval_estimates(score_dict, theirs, reps=reps)
    for key in score_dict:
        np.testing.assert_allclose(ci_loop[key], ci[key], rtol=1e-9)


def test_basic_method_and_task_bootstrap_match_rliable(score_dict):
    reps = 2000
    one = {"Rainbow": score_dict["Rainbow"]}
    for kw in ({"method": "basic"}, {"task_bootstrap": True}):
        np.random.seed(1)
        _, their_ci = rliable_lib.get_interval_estimates(one, theirs, reps=reps, **kw)
        _, ci = rly.get_interval_estimates(one, ours_rliable, reps=reps, **kw)
        assert_within_mc(ci, their_ci, our_spread(one, ours_rliable, reps, **kw))
    _, runs_only = rly.get_interval_estimates(one, ours_rliable, reps=reps)
    _, with_tasks = rly.get_interval_estimates(one, ours_rliable, reps=reps, task_bootstrap=True)
    width = np.diff(runs_only["Rainbow"], axis=0)
    assert np.all(np.diff(with_tasks["Rainbow"], axis=0)[:, :3] > 2 * width[:, :3])


def test_notebook_sample_efficiency_cell():
    # Notebook: iqm = lambda scores: np.array([metrics.aggregate_iqm(scores[..., frame])
    #                                           for frame in range(scores.shape[-1])])
    rng = np.random.default_rng(5)
    curves = {"IQN": atari_like(rng, 5, 55, points=6)}
    reps = 600

    def iqm_curve(m):
        return lambda scores: np.array([m.aggregate_iqm(scores[..., f])
                                        for f in range(scores.shape[-1])])

    np.random.seed(2)
    their_points, their_ci = rliable_lib.get_interval_estimates(
        curves, iqm_curve(rliable_metrics), reps=reps)
    points, ci = rly.get_interval_estimates(curves, iqm_curve(rly), reps=reps)
    np.testing.assert_allclose(points["IQN"], their_points["IQN"], rtol=1e-12)
    assert ci["IQN"].shape == (2, 6)
    assert_within_mc(ci, their_ci, our_spread(curves, iqm_curve(rly), reps))
    # the output's batch axis is last here: found by the probe, evaluated batched
    assert rly.bootstraps.batch_axis(iqm_curve(rly), [curves["IQN"]]) == "last"
    assert rly.bootstraps.batch_axis(iqm_curve(rliable_metrics), [curves["IQN"]]) is None


def test_readme_probability_of_improvement_cell():
    # README: pairs {'x,y': (score_x, score_y)}, metrics.probability_of_improvement, 2000 reps
    rng = np.random.default_rng(7)
    base = rng.lognormal(0, 0.5, 16)
    pairs = {"PPG,PPO": (base * rng.lognormal(0.15, 0.3, (5, 16)),
                         base * rng.lognormal(0.0, 0.3, (5, 16)))}
    reps = 300
    np.random.seed(3)
    their_points, their_ci = rliable_lib.get_interval_estimates(
        pairs, rliable_metrics.probability_of_improvement, reps=reps)
    points, ci = rly.get_interval_estimates(pairs, rly.probability_of_improvement, reps=reps)
    assert points["PPG,PPO"] == pytest.approx(their_points["PPG,PPO"], abs=1e-12)
    assert ci["PPG,PPO"].shape == their_ci["PPG,PPO"].shape == (2, 1)
    spread = our_spread(pairs, rly.probability_of_improvement, reps)
    assert_within_mc(ci, their_ci, spread, floor=1 / (5 * 5 * 16))


def test_notebook_performance_profile_cell(score_dict):
    taus = np.linspace(0.0, 8.0, 81)
    reps = 500
    for use_dist in (True, False):
        np.random.seed(4)
        their_p, their_ci = rliable_lib.create_performance_profile(
            score_dict, taus, use_score_distribution=use_dist, reps=reps)
        p, ci = rly.create_performance_profile(score_dict, taus,
                                               use_score_distribution=use_dist, reps=reps)
        runs = [rly.create_performance_profile(score_dict, taus, use_score_distribution=use_dist,
                                               reps=reps, random_state=s)[1]
                for s in range(MC_SEEDS)]
        spread = {k: np.std([r[k] for r in runs], axis=0, ddof=1) for k in score_dict}
        for key in score_dict:
            np.testing.assert_allclose(p[key], their_p[key], rtol=1e-12)
            step = 1 / score_dict[key].size if use_dist else 1 / score_dict[key].shape[1]
            gap = np.abs(ci[key] - their_ci[key])
            assert np.all(gap <= 4 * np.sqrt(2) * spread[key] + step), key


def test_docs_cells_both_ways():
    """docs/from-rliable.md: the README cell with rliable and with analysis.rly (only the
    imports differ) gives equal points and CIs within Monte Carlo error; the doc's other
    blocks run."""
    import re
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    text = (Path(__file__).resolve().parent.parent / "docs" / "from-rliable.md").read_text()
    blocks = [re.sub(r"(?m)^  ", "", b) for b in re.findall(r"```python\n(.*?)```", text, re.S)]
    data, theirs_cell, ours_cell, *rest = blocks
    assert theirs_cell.replace("from rliable", "from analysis.rly") == ours_cell
    reps = 2000
    out = {}
    for name, cell in (("theirs", theirs_cell), ("ours", ours_cell)):
        ns: dict = {}
        exec(data, ns)
        np.random.seed(5)
        exec(cell.replace("reps=50000", f"reps={reps}"), ns)
        out[name] = ns
        plt.close("all")
    spread = our_spread(out["ours"]["score_dict"], out["ours"]["aggregate_func"], reps)
    for key in out["ours"]["score_dict"]:
        np.testing.assert_allclose(out["ours"]["aggregate_scores"][key],
                                   out["theirs"]["aggregate_scores"][key], rtol=1e-12)
    assert_within_mc(out["ours"]["aggregate_score_cis"], out["theirs"]["aggregate_score_cis"],
                     spread)
    ns = dict(out["ours"])
    for block in rest:
        exec(block, ns)
    shown = re.findall(r"```\n *(equivalence .*?)\n *(regression: .*?)\n *```", text)
    assert shown == [(ns["res"].line(), ns["gate"].line())]  # the lines the doc prints
    assert ns["poi_cis"]["Rainbow,DQN"].shape == (2, 1)
    plt.close("all")
