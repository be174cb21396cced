"""Aggregate metrics on hand-checkable matrices, and the vectorised stratified bootstrap."""

import numpy as np
import pytest
from scipy import stats

from analysis.errors import AnalysisError
from analysis.stats import metrics
from analysis.stats.metrics import (
    _resample,
    interval_estimates,
    probability_of_improvement_ci,
    replicates,
)

HAND = np.array([[1, 2], [2, 2], [1, 1], [2, 1]], dtype=float)  # 4 runs x 2 tasks


def test_iqm_by_hand():
    # pooled sorted: 1 1 1 1 2 2 2 2; drop 2 lowest and 2 highest -> mean(1, 1, 2, 2)
    assert metrics.iqm(HAND) == 1.5
    assert metrics.iqm(np.array([[0.0, 10.0, 1.0, 2.0]])) == 1.5  # keeps 1, 2


def test_median_mean_by_hand():
    x = np.array([[0.0, 1.0, 10.0], [2.0, 3.0, 20.0]])  # per-task means 1, 2, 15
    assert metrics.median(x) == 2.0
    assert metrics.mean(x) == 6.0
    assert metrics.median(np.array([[1.0, 3.0, 5.0, 100.0]])) == 4.0  # even: mean of middle


def test_optimality_gap_by_hand():
    x = np.array([[0.5, 2.0], [1.0, 0.0]])  # min(x, 1) = .5 1 1 0 -> mean .625
    assert metrics.optimality_gap(x) == pytest.approx(0.375)
    assert metrics.optimality_gap(x, gamma=2.0) == pytest.approx(2 - 3.5 / 4)


def test_probability_of_improvement_by_hand():
    x = np.array([[1.0, 5.0], [3.0, 5.0]])
    y = np.array([[2.0, 5.0], [0.0, 6.0]])
    # task 0: pairs (1>2 no, 1>0 yes, 3>2 yes, 3>0 yes) = 3/4
    # task 1: (5 vs 5 tie .5, 5 vs 6 no) x 2 runs = 1/4
    assert metrics.probability_of_improvement(x, y) == pytest.approx(0.5)
    assert metrics.probability_of_improvement(y, x) == pytest.approx(0.5)
    # matches Mann-Whitney U / (n_x n_y) per task
    u = stats.mannwhitneyu(x[:, 0], y[:, 0]).statistic / 4
    assert u == pytest.approx(0.75)


def test_iqm_matches_scipy_trim_mean_and_batches():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(7, 5, 11))  # 7 matrices of 5 runs x 11 tasks
    want = [stats.trim_mean(m.ravel(), 0.25) for m in x]
    np.testing.assert_allclose(metrics.iqm(x), want)
    np.testing.assert_allclose(metrics.median(x), [np.median(m.mean(0)) for m in x])


def test_performance_profile():
    x = np.array([[0.0, 1.0], [2.0, 3.0]])
    np.testing.assert_allclose(metrics.performance_profile(x, [-1, 0.5, 2.5, 3]),
                               [1.0, 0.75, 0.25, 0.0])


def test_bad_shapes_raise():
    with pytest.raises(AnalysisError, match="runs, tasks"):
        metrics.iqm(np.ones(3))
    with pytest.raises(AnalysisError, match="same tasks"):
        metrics.probability_of_improvement(np.ones((2, 3)), np.ones((2, 4)))


def test_resample_is_stratified():
    x = np.arange(12.0).reshape(3, 4) * 10 + np.arange(4)  # value % 10 = task index
    s = _resample(x, np.random.default_rng(0), 50)
    assert s.shape == (50, 3, 4)
    np.testing.assert_array_equal(s % 10, np.broadcast_to(np.arange(4.0), s.shape))
    curves = np.stack([x, x + 100], axis=-1)  # (3, 4, 2 points)
    sc = _resample(curves, np.random.default_rng(0), 50)
    assert sc.shape == (50, 2, 3, 4)
    np.testing.assert_array_equal(sc[:, 1] - sc[:, 0], 100)  # same runs at every point
    np.testing.assert_array_equal(sc[:, 0], s)


def test_same_seed_same_cis_other_seed_differs():
    x = np.random.default_rng(1).gamma(2.0, 1.0, (3, 20))
    a = interval_estimates(x, metrics.AGGREGATES, reps=3000, seed=7)
    b = interval_estimates(x, metrics.AGGREGATES, reps=3000, seed=7)
    c = interval_estimates(x, metrics.AGGREGATES, reps=3000, seed=8)
    for m in metrics.AGGREGATES:
        assert a[m].low == b[m].low and a[m].high == b[m].high
        assert a[m].low <= a[m].point <= a[m].high
    assert any(a[m].low != c[m].low for m in metrics.AGGREGATES)
    # point estimates are the plain metrics
    assert float(a["iqm"].point) == float(metrics.iqm(x))


def test_chunking_does_not_change_the_distribution_shape():
    x = np.random.default_rng(2).normal(size=(3, 10))
    small = replicates(x, {"mean": metrics.mean}, reps=1000, seed=0, max_chunk_bytes=1000)
    big = replicates(x, {"mean": metrics.mean}, reps=1000, seed=0)
    assert small["mean"].shape == big["mean"].shape == (1000,)
    # different chunking = different draws, same distribution
    assert abs(small["mean"].std() - big["mean"].std()) < 0.2 * big["mean"].std()


def test_basic_interval_reflects_percentiles():
    x = np.random.default_rng(4).gamma(2.0, 1.0, (4, 9))
    p = interval_estimates(x, {"mean": metrics.mean}, reps=2000, seed=0)["mean"]
    b = interval_estimates(x, {"mean": metrics.mean}, reps=2000, seed=0,
                           method="basic")["mean"]
    assert b.low == pytest.approx(2 * p.point - p.high)
    assert b.high == pytest.approx(2 * p.point - p.low)
    with pytest.raises(AnalysisError, match="unknown CI method"):
        interval_estimates(x, {"mean": metrics.mean}, reps=10, method="bca")


def test_curve_intervals_have_one_value_per_point():
    x = np.random.default_rng(5).normal(size=(3, 6, 8))
    iv = interval_estimates(x, {"iqm": metrics.iqm}, reps=500, seed=0)["iqm"]
    assert iv.point.shape == iv.low.shape == (8,)
    np.testing.assert_allclose(iv.point, [metrics.iqm(x[..., k]) for k in range(8)])
    assert np.all(iv.low <= iv.point) and np.all(iv.point <= iv.high)


def test_probability_of_improvement_ci_brackets_point():
    rng = np.random.default_rng(6)
    x, y = rng.normal(0.3, 1, (3, 30)), rng.normal(0, 1, (3, 30))
    iv = probability_of_improvement_ci(x, y, reps=2000, seed=1)
    assert iv.low < iv.point < iv.high
    assert iv.point == pytest.approx(metrics.probability_of_improvement(x, y))


def test_cis_agree_with_rliable():
    rliable_lib = pytest.importorskip("rliable.library")
    rm = pytest.importorskip("rliable.metrics")
    x = np.random.default_rng(11).gamma(3.0, 0.5, (3, 57))
    reps = 10_000
    ours = interval_estimates(x, metrics.AGGREGATES, reps=reps, seed=0)

    def agg(s):
        return np.array([rm.aggregate_median(s), rm.aggregate_iqm(s), rm.aggregate_mean(s),
                         rm.aggregate_optimality_gap(s)])

    np.random.seed(0)  # rliable ignores random_state and draws from the global RNG
    pts, cis = rliable_lib.get_interval_estimates({"x": x}, agg, reps=reps)
    for i, m in enumerate(metrics.AGGREGATES):
        assert float(ours[m].point) == pytest.approx(pts["x"][i], abs=1e-12)
        width = float(ours[m].high - ours[m].low)
        # Monte-Carlo error of a 2.5% quantile at 10k reps: ~1% of the width
        assert abs(float(ours[m].low) - cis["x"][0, i]) < 0.08 * width, m
        assert abs(float(ours[m].high) - cis["x"][1, i]) < 0.08 * width, m
