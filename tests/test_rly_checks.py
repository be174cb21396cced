"""analysis.rly without rliable (these run in the core-only venv too): its plots draw
the estimates they are given, random_state is honoured, rows are checked to be seeds,
and the verdicts on score dicts."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from rly_data import atari_like, example_scores, ours_rliable

from analysis import rly
from analysis.errors import AnalysisError


@pytest.fixture(scope="module")
def score_dict() -> dict[str, np.ndarray]:
    return example_scores()


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
    with pytest.raises(AnalysisError, match="valid: \\['basic', 'percentile', 'norm', 'bc', "
                                            "'bca'\\]"):
        rly.get_interval_estimates(one, ours_rliable, reps=10, method="studentised")


def test_seeds_are_checked():
    rng = np.random.default_rng(9)
    with pytest.warns(rly.SeedWarning, match="look like episodes"):
        rly.get_interval_estimates({"eps": rng.normal(size=(500, 3))}, ours_rliable, reps=10)
    copies = rng.normal(size=(6, 4))
    copies[3] = copies[1]
    with pytest.warns(rly.SeedWarning, match=r"runs \[1, 3\] have identical scores"):
        rly.get_interval_estimates({"copies": copies}, ours_rliable, reps=10)
    with pytest.warns(rly.SeedWarning, match="3 runs per task"):
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
