"""analysis.rly, the rliable drop-in, against rliable 1.2.0 itself (the test oracle) on
the cells of rliable's README and notebook: aggregates with CIs, sample-efficiency
curves, probability of improvement, performance profiles; plus what rliable lacks
(seed checks, random_state honoured, the verdicts).

"Within Monte Carlo error": our CI endpoints at seed 0 differ from rliable's (global RNG,
seeded) by at most 4 standard deviations of the difference of two independent bootstrap
runs of the same size, the standard deviation measured from our own bootstrap over 20
seeds (rliable's endpoints have the same sampling distribution).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from analysis import rly
from analysis.errors import AnalysisError

rliable_lib = pytest.importorskip("rliable.library", reason="rliable is the test oracle")
rliable_metrics = pytest.importorskip("rliable.metrics")

MC_SEEDS = 20


def atari_like(rng: np.random.Generator, runs: int = 5, games: int = 55,
               points: int | None = None) -> np.ndarray:
    """Human-normalised-like scores: a level per game spanning orders of magnitude, runs
    spread around it (the shape of the notebook's Atari 200M matrices)."""
    level = rng.lognormal(-0.3, 1.2, games)
    if points is None:
        return level * rng.lognormal(0.0, 0.35, (runs, games))
    progress = np.linspace(0.1, 1.0, points) ** 0.7
    return level[None, :, None] * progress * rng.lognormal(0.0, 0.35, (runs, games, points))


@pytest.fixture(scope="module")
def score_dict() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(34)
    return {"DQN (Nature)": 0.4 * atari_like(rng), "Rainbow": atari_like(rng)}


def ours_rliable(x):
    return np.array([rly.aggregate_median(x), rly.aggregate_iqm(x), rly.aggregate_mean(x),
                     rly.aggregate_optimality_gap(x)])


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
    assert rly.library.batch_axis(iqm_curve(rly), [curves["IQN"]]) == "last"
    assert rly.library.batch_axis(iqm_curve(rliable_metrics), [curves["IQN"]]) is None


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


def test_plots_draw_the_estimates(score_dict):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points, ci = rly.get_interval_estimates(score_dict, ours_rliable, reps=500)
    fig, axes = rly.plot_interval_estimates(points, ci, ["Median", "IQM", "Mean", "Gap"],
                                            algorithms=list(score_dict), xlabel="HNS")
    bars = axes[1].patches
    assert [round(b.get_x(), 9) for b in bars] == [round(ci[k][0, 1], 9) for k in score_dict]
    assert [round(b.get_x() + b.get_width(), 9) for b in bars] == \
        [round(ci[k][1, 1], 9) for k in score_dict]
    plt.close(fig)

    rng = np.random.default_rng(1)
    curves = {"a": atari_like(rng, 5, 10, points=4), "b": atari_like(rng, 5, 10, points=4)}
    p, c = rly.get_interval_estimates(
        curves, lambda s: np.array([rly.aggregate_iqm(s[..., f]) for f in range(4)]), reps=300)
    frames = np.array([1, 50, 100, 200])
    ax = rly.plot_sample_efficiency_curve(frames, p, c, algorithms=["a", "b"])
    np.testing.assert_allclose(ax.lines[1].get_ydata(), p["b"])
    np.testing.assert_allclose(ax.lines[0].get_xdata(), frames)
    plt.close(ax.figure)

    taus = np.linspace(0, 8, 33)
    prof, prof_ci = rly.create_performance_profile(score_dict, taus, reps=200)
    for scaling in (False, True):
        ax = rly.plot_performance_profiles(prof, taus, performance_profile_cis=prof_ci,
                                           use_non_linear_scaling=scaling)
        np.testing.assert_allclose(ax.lines[0].get_ydata(), prof["DQN (Nature)"])
        assert len(ax.collections) == 2  # a CI band per algorithm
        plt.close(ax.figure)
    with pytest.raises(AnalysisError, match="metric_names"):
        rly.plot_interval_estimates(points, ci, ["Median"])


def test_random_state_is_honoured(score_dict):
    one = {"Rainbow": score_dict["Rainbow"]}
    a = rly.get_interval_estimates(one, ours_rliable, reps=300)[1]["Rainbow"]
    b = rly.get_interval_estimates(one, ours_rliable, reps=300)[1]["Rainbow"]
    c = rly.get_interval_estimates(one, ours_rliable, reps=300, random_state=5)[1]["Rainbow"]
    d = rly.get_interval_estimates(one, ours_rliable, reps=300,
                                   random_state=np.random.RandomState(1))[1]["Rainbow"]
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c) and not np.array_equal(a, d)
    with pytest.raises(AnalysisError, match="random_state"):
        rly.get_interval_estimates(one, ours_rliable, reps=10, random_state="x")
    with pytest.raises(AnalysisError, match="valid: \\['percentile', 'basic'\\]"):
        rly.get_interval_estimates(one, ours_rliable, reps=10, method="bca")


def test_seeds_are_checked():
    rng = np.random.default_rng(9)
    with pytest.warns(rly.SeedWarning, match="look like episodes"):
        rly.get_interval_estimates({"eps": rng.normal(size=(500, 3))}, ours_rliable, reps=10)
    copies = rng.normal(size=(6, 4))
    copies[3] = copies[1]
    with pytest.warns(rly.SeedWarning, match=r"runs \[1, 3\] have identical scores"):
        rly.get_interval_estimates({"copies": copies}, ours_rliable, reps=10)
    with pytest.warns(rly.SeedWarning, match="3 run\\(s\\) per task"):
        rly.get_interval_estimates({"few": rng.normal(size=(3, 4))}, ours_rliable, reps=10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rly.get_interval_estimates({"fine": rng.normal(size=(10, 4))}, ours_rliable, reps=10)
    bad = rng.normal(size=(5, 4))
    bad[2, 1] = np.nan
    with pytest.raises(AnalysisError, match="run 2, task 1"):
        rly.get_interval_estimates({"nan": bad}, ours_rliable, reps=10)
    with pytest.raises(AnalysisError, match="share their tasks"):
        rly.get_interval_estimates({"p": (rng.normal(size=(5, 4)), rng.normal(size=(5, 3)))},
                                   rly.probability_of_improvement, reps=10)


def test_verdicts_one_call_away():
    rng = np.random.default_rng(12)
    level = rng.lognormal(0, 0.5, 20)
    same = {k: level * (1 + 0.01 * rng.standard_normal((10, 20))) for k in ("a", "b")}
    res = rly.equivalence(same, "a", "b", delta=0.5)
    assert res.verdict == "PASS" and set(res.metrics) == {"final"}
    assert "equivalence a vs reference b: PASS" in res.line()
    shifted = dict(same, c=same["b"] + 5.0)
    assert rly.equivalence(shifted, "c", "b", delta=0.5).verdict == "DIFFERENT"
    assert rly.regression(shifted, "b", "c", delta=0.5).verdict == "REGRESSION"
    assert rly.regression(shifted, "c", "b", delta=0.5).verdict == "PASS"
    curves = {k: v[..., None] * np.linspace(0.2, 1, 5) for k, v in same.items()}
    res = rly.equivalence(curves, "a", "b", delta=0.5)
    assert set(res.metrics) == {"final", "auc"} and res.verdict == "PASS"
    with pytest.raises(AnalysisError, match="valid: \\['a', 'b'\\]"):
        rly.equivalence(same, "a", "z")
