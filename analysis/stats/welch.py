"""Welch's t for two independent samples of per-seed values, and the paired t for two
sides that ran the same seeds: intervals of the mean difference, vectorised over
simulated draws, and TOST.

Degrees of freedom (`welch_df`): Welch-Satterthwaite when both sides have the same seed
count; Hsu's min(n, m) - 1 when they differ. Welch-Satterthwaite is liberal at small,
unequal n (a nominal 5% one-sided test measured 7.6% at 2 vs 12 seeds and 5.8% at 3 vs
12 at equal spreads, more when the smaller side is the noisier: `python -m analysis
calibrate`); Hsu's df is never above Welch's, so the rate stays at or below nominal.

The paired t (`paired_stats`): runs of one seed on two layouts (or two versions of one
trainer) share the seed's env streams, initial parameters and action keys, so where their
results stay together the per-seed difference varies far less than either side: the
paired se is sqrt((s_a^2 + s_b^2 - 2 cov) / n) with n - 1 df, where Welch's is
sqrt(s_a^2/n + s_b^2/n) with up to 2n - 2. The pairing is exact at any correlation; it
gains power when the within-seed correlation is high and costs some at few seeds when it
is near 0 (the df halve): `python -m calibration` shows both (calibration.paired_cells).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from analysis.errors import AnalysisError


@dataclass
class WelchInterval:
    """Welch difference of means a - b with two-sided CIs."""

    diff: float
    se: float
    df: float
    ci90: tuple[float, float]
    ci95: tuple[float, float]
    n_a: int
    n_b: int
    mean_a: float
    mean_b: float
    paired: bool = False  # the paired t of per-seed differences (paired_stats)


def welch_stats(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised Welch: a (..., n), b (..., m) with n, m >= 2 -> (diff, se, df), each
    of shape (...); df by `welch_df`. The core of every Welch verdict here and of the seed planner's
    simulations (analysis.verdicts.seedplan), so both run the same arithmetic. se == 0 gives
    df = inf."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return welch_from_summary(*_mean_var(a), a.shape[-1], *_mean_var(b), b.shape[-1])


def welch_from_summary(mean_a: np.ndarray, var_a: np.ndarray, n: int, mean_b: np.ndarray,
                       var_b: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`welch_stats` from each side's mean, sample variance (ddof=1) and count (a
    published mean ± sd of its seeds has only these: analysis.verdicts.regression)."""
    sa, sb = var_a / n, var_b / m
    return mean_a - mean_b, np.sqrt(sa + sb), welch_df(sa, sb, n, m)


def _mean_var(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x.mean(-1) and x.var(-1, ddof=1) with the same ufunc steps NumPy takes, so the
    same bits, from one sum instead of two (the seed planner's and the reproduce power's
    simulations spend most of their time here)."""
    n = x.shape[-1]
    mean = np.add.reduce(x, axis=-1) / n
    dev = x - mean[..., None]
    np.multiply(dev, dev, out=dev)
    return mean, np.add.reduce(dev, axis=-1) / (n - 1)


def welch_df(sa: np.ndarray, sb: np.ndarray, n: int, m: int) -> np.ndarray:
    """df of the Welch t from the two variance-of-mean terms sa = s_a^2 / n, sb = s_b^2 / m:
    Welch-Satterthwaite when n == m (calibrated there), Hsu's min(n, m) - 1 otherwise
    (module docstring). Zero se gives df = inf."""
    sa, sb = np.asarray(sa, dtype=np.float64), np.asarray(sb, dtype=np.float64)
    se = np.sqrt(sa + sb)
    with np.errstate(divide="ignore", invalid="ignore"):
        if n == m:
            df = (sa + sb) ** 2 / (sa**2 / (n - 1) + sb**2 / (m - 1))
        else:
            df = np.full(np.shape(se), float(min(n, m) - 1))
        return np.where(se > 0, df, np.inf)


def t_upper(tail: np.ndarray | float, df: np.ndarray | float) -> np.ndarray:
    """The value a Student t with `df` degrees of freedom exceeds with probability `tail`
    (stats.t.isf, bit for bit, without its argument handling where 0 < tail < 1); df = inf
    gives the normal's, tail 0 gives inf. The one t quantile of every interval and bound:
    exact at any tail, where a lower-tail quantile at 1 - tail keeps only the digits of
    1 - tail (a sequential first look's tail is ~1e-5). Without scipy's argument handling
    (~45 us a call), which dominated a simulated power's time."""
    tail, df = np.asarray(tail, dtype=np.float64), np.asarray(df, dtype=np.float64)
    if not np.all((tail > 0) & (tail < 1)):
        return np.asarray(stats.t.isf(tail, df))
    with np.errstate(invalid="ignore"):
        return np.asarray(np.where(df > 0, -special.stdtrit(df, tail) * 1.0 + 0.0, np.nan))


def half_width(tail: np.ndarray | float, se: np.ndarray, df: np.ndarray) -> np.ndarray:
    """t_upper(tail, df) se: half the interval of a difference that leaves `tail` on each
    side; 0 at zero spread, where the interval is the estimate itself whatever the
    quantile (an infinite one, a look that cannot decide, would give nan)."""
    with np.errstate(invalid="ignore"):
        return np.where(se > 0, t_upper(tail, df) * se, 0.0)


TOST_TAIL = 0.05
"""Each of the TOST's two one-sided tests: the 90% interval inside the margin."""

QUANTILE_GRID = 33
"""Grid points of df at which `tost_inside` evaluates the t quantile to bracket it."""


def _inside(diff: np.ndarray, half: np.ndarray, delta: np.ndarray | float) -> np.ndarray:
    return (-delta < diff - half) & (diff + half < delta)


def tost_inside(diff: np.ndarray, se: np.ndarray, df: np.ndarray, delta: np.ndarray | float
                ) -> np.ndarray:
    """(-delta < diff - h) & (diff + h < delta), h = t_upper(TOST_TAIL, df) * se: the 90% CI
    inside the margin, element by element, exactly as computed directly.

    The quantile (about 0.4 us a value) is evaluated only where the answer depends on it:
    it falls as df grows, so quantiles at a grid of df bracket each element's, and the
    product with se >= 0 and the two sums are monotone in floating point too; an element
    inside with its upper bound, or outside with its lower bound, has its answer."""
    diff, se, df = (np.asarray(x, dtype=np.float64) for x in np.broadcast_arrays(diff, se, df))
    ok = np.isfinite(df) & (df > 0)
    if df.size < 4 * QUANTILE_GRID or not ok.any():
        return _inside(diff, t_upper(TOST_TAIL, df) * se, delta)
    grid = np.unique(np.linspace(df[ok].min(), df[ok].max(), QUANTILE_GRID))
    t_grid = t_upper(TOST_TAIL, grid)
    k = np.clip(np.searchsorted(grid, df, side="right") - 1, 0, len(grid) - 1)
    upper = t_grid[k] * (1 + 1e-9)  # grid[k] <= df: t(df) <= t(grid[k])
    lower = t_grid[np.minimum(k + 1, len(grid) - 1)] * (1 - 1e-9)
    out = _inside(diff, upper * se, delta)
    unsure = (out != _inside(diff, lower * se, delta)) | ~ok
    if unsure.any():
        d = np.broadcast_to(delta, out.shape)[unsure]
        out[unsure] = _inside(diff[unsure], t_upper(TOST_TAIL, df[unsure]) * se[unsure], d)
    return out


def welch_interval(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray,
                   paired: bool = False) -> WelchInterval:
    """The difference of means a - b with its 90% and 95% t intervals (width 0 at se 0):
    Welch's se and `welch_df` df, or, `paired` (a[s] and b[s] the same seed), the mean
    per-seed difference with the paired t's (`paired_stats`). A side with one value has
    no spread estimate: nan CIs, unless both sides are flat and the difference is
    exactly 0 (a CI of width 0)."""
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if paired and (len(a) == 0 or len(a) != len(b)):
        raise AnalysisError(f"a paired comparison needs the same seeds on both sides, got "
                            f"{len(a)} and {len(b)}")
    if len(a) == 0 or len(b) == 0:
        raise AnalysisError(f"Welch test needs values on both sides, got {len(a)} and {len(b)}")
    diff = float((a - b).mean()) if paired else float(a.mean() - b.mean())
    sides = (len(a), len(b), float(a.mean()), float(b.mean()), paired)
    if len(a) == 1 or len(b) == 1:
        if np.all(a == a[0]) and np.all(b == b[0]) and diff == 0:
            return WelchInterval(diff, 0.0, math.inf, (diff, diff), (diff, diff), *sides)
        nan2 = (math.nan, math.nan)
        return WelchInterval(diff, math.nan, math.nan, nan2, nan2, *sides)
    se, df = (float(x) for x in (paired_stats if paired else welch_stats)(a, b)[1:])
    if se == 0:
        ci90 = ci95 = (diff, diff)
    else:
        t90, t95 = float(t_upper(TOST_TAIL, df)), float(t_upper(0.025, df))
        ci90 = (diff - t90 * se, diff + t90 * se)
        ci95 = (diff - t95 * se, diff + t95 * se)
    return WelchInterval(diff, se, df, ci90, ci95, *sides)


def tost_passes(a: np.ndarray, b: np.ndarray, delta: float) -> np.ndarray:
    """Vectorised TOST of one metric: a (..., n), b (..., m), n, m >= 2 -> bool (...):
    the 90% Welch CI of mean(a) - mean(b) lies inside (-delta, +delta). What
    `tost_verdict` calls PASS for that metric; the reproduce power simulates with it
    (analysis.reproduce.judge)."""
    return tost_inside(*welch_stats(a, b), delta)


def tost_required_margin(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The smallest delta at which one metric's TOST passes: max |90% CI endpoint|.
    PASS at delta iff this is < delta (vectorised; the planner's 'smallest delta')."""
    diff, se, df = welch_stats(a, b)
    return np.abs(diff) + t_upper(TOST_TAIL, df) * se


def paired_stats(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised paired t: a, b (..., n) aligned by seed, n >= 2 -> (diff, se, df), each
    of shape (...): the mean of a - b, its standard error and n - 1 df. se == 0 gives
    df = inf (the differences are all equal: an interval of width 0), as welch_stats."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape[-1] != b.shape[-1]:
        raise AnalysisError(f"a paired comparison needs the same seeds on both sides, got "
                            f"{a.shape[-1]} and {b.shape[-1]}")
    d = a - b
    n = d.shape[-1]
    diff = d.mean(axis=-1)
    se = d.std(axis=-1, ddof=1) / math.sqrt(n)
    return diff, se, np.where(se > 0, float(n - 1), np.inf)
