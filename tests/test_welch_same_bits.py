"""The cheaper Welch arithmetic gives the direct computation's bits: `t_upper` is
scipy's t.isf, `tost_inside` is the 90% CI inside the margin with every quantile
evaluated, `_mean_var` is NumPy's mean and var, and the power's draws are rng.normal's."""

from __future__ import annotations

import numpy as np
from scipy import stats

from analysis.reproduce.judge import _draws
from analysis.stats.welch import TOST_TAIL, _mean_var, t_upper, tost_inside, welch_stats


def test_t_upper_is_scipys():
    rng = np.random.default_rng(0)
    df = np.concatenate([rng.uniform(0, 60, 20_000), 10 ** rng.uniform(-3, 6, 2_000),
                         [np.inf, np.nan, 0.0, -1.0, 1e-300]])
    for tail in (0.4, 0.2, 0.05, 0.025, 0.0125, 1e-5, 1e-12):
        assert np.array_equal(t_upper(tail, df), stats.t.isf(tail, df), equal_nan=True), tail
        assert t_upper(tail, 3.0) == stats.t.isf(tail, 3.0)
    for tail in (0.0, 1.0, np.array([0.05, 0.0])):
        assert np.array_equal(t_upper(tail, 5.0), stats.t.isf(tail, 5.0)), tail


def test_tost_inside_is_the_direct_computation():
    rng = np.random.default_rng(1)
    for i in range(400):
        n, m = (int(x) for x in rng.integers(2, 8, 2))
        sd = float(rng.uniform(0, 2))
        a = rng.normal(rng.normal(0, 0.3), sd, (int(rng.choice([50, 3000])), n))
        b = rng.normal(0, sd, (a.shape[0], m))
        if i % 7 == 0:
            a[:, :] = a[:, :1]  # zero spread: df inf
        if i % 11 == 0:
            a[int(rng.integers(a.shape[0])), 0] = np.nan
        delta = float(rng.uniform(0, 2))
        diff, se, df = welch_stats(a, b)
        half = t_upper(TOST_TAIL, df) * se
        direct = (-delta < diff - half) & (diff + half < delta)
        assert np.array_equal(tost_inside(diff, se, df, delta), direct), i


def test_mean_var_is_numpys():
    rng = np.random.default_rng(2)
    for i in range(300):
        shape = (*rng.integers(1, 20, int(rng.integers(1, 3))), int(rng.integers(2, 30)))
        x = rng.standard_normal(shape) * 10 ** rng.uniform(-5, 5) + rng.normal() * 1e3
        mean, var = _mean_var(x)
        assert np.array_equal(mean, x.mean(-1)) and np.array_equal(var, x.var(-1, ddof=1)), i


def test_power_draws_are_rng_normal():
    rng = np.random.default_rng(3)
    for _ in range(50):
        sd, n, m = float(10 ** rng.uniform(-4, 3)), int(rng.integers(1, 8)), 3
        for true_diff in (0.0, -0.0, float(rng.normal())):
            g = np.random.Generator(np.random.PCG64(0))
            want = g.normal(true_diff, sd, (500, n)), g.normal(0.0, sd, (500, m))
            got = _draws(sd, n, m, true_diff, 500, 0)
            assert all(np.array_equal(x, y) and np.array_equal(np.signbit(x), np.signbit(y))
                       for x, y in zip(got, want, strict=True))
