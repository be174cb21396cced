"""Welch's t for two independent samples of per-seed values: intervals of the mean
difference, vectorised over simulated draws, and TOST.

Degrees of freedom (`welch_df`): Welch-Satterthwaite when both sides have the same seed
count; Hsu's min(n, m) - 1 when they differ. Welch-Satterthwaite is liberal at small,
unequal n (a nominal 5% one-sided test measured 7.6% at 2 vs 12 seeds and 5.8% at 3 vs
12 at equal spreads, more when the smaller side is the noisier: `python -m analysis
calibrate`); Hsu's df is never above Welch's, so the rate stays at or below nominal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

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
    paired: bool = False  # the paired t of per-seed differences (analysis.stats.paired)


def welch_stats(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised Welch: a (..., n), b (..., m) with n, m >= 2 -> (diff, se, df), each
    of shape (...); df by `welch_df`. The core of every Welch verdict here and of the seed planner's
    simulations (analysis.verdicts.seedplan), so both run the same arithmetic. se == 0 gives
    df = inf."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    n, m = a.shape[-1], b.shape[-1]
    diff = a.mean(axis=-1) - b.mean(axis=-1)
    sa = a.var(axis=-1, ddof=1) / n
    sb = b.var(axis=-1, ddof=1) / m
    se = np.sqrt(sa + sb)
    return diff, se, welch_df(sa, sb, n, m)


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


def t_quantile(q: float, df: np.ndarray | float) -> np.ndarray:
    """Student t quantile, vectorised; df = inf gives the normal quantile."""
    return np.asarray(stats.t.ppf(q, np.asarray(df, dtype=np.float64)))


def welch_interval(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray
                   ) -> WelchInterval:
    """Difference of means with Welch's se and `welch_df` df. Zero variance gives a CI of
    width 0.

    Needs >= 2 values per side unless both sides have zero spread.
    """
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if len(a) == 0 or len(b) == 0:
        raise AnalysisError(f"Welch test needs values on both sides, got {len(a)} and {len(b)}")
    diff = float(a.mean() - b.mean())
    if len(a) == 1 or len(b) == 1:
        # No spread estimate on one side: only a perfectly flat comparison is decidable.
        if np.all(a == a[0]) and np.all(b == b[0]) and diff == 0:
            return WelchInterval(diff, 0.0, math.inf, (diff, diff), (diff, diff), len(a),
                                 len(b), float(a.mean()), float(b.mean()))
        nan2 = (math.nan, math.nan)
        return WelchInterval(diff, math.nan, math.nan, nan2, nan2, len(a), len(b),
                             float(a.mean()), float(b.mean()))
    _, se, df = welch_stats(a, b)
    return t_interval(a, b, diff, float(se), float(df))


def t_interval(a: np.ndarray, b: np.ndarray, diff: float, se: float, df: float,
               paired: bool = False) -> WelchInterval:
    """The 90% and 95% t intervals of `diff` with standard error `se` and `df` (width 0
    at se 0), for sides a and b: Welch's (welch_interval) or the paired t's
    (analysis.stats.paired)."""
    if se == 0:
        ci90 = ci95 = (diff, diff)
    else:
        t90, t95 = float(t_quantile(0.95, df)), float(t_quantile(0.975, df))
        ci90 = (diff - t90 * se, diff + t90 * se)
        ci95 = (diff - t95 * se, diff + t95 * se)
    return WelchInterval(diff, se, df, ci90, ci95, len(a), len(b), float(a.mean()),
                         float(b.mean()), paired)


def tost_passes(a: np.ndarray, b: np.ndarray, delta: float) -> np.ndarray:
    """Vectorised TOST of one metric: a (..., n), b (..., m), n, m >= 2 -> bool (...):
    the 90% Welch CI of mean(a) - mean(b) lies inside (-delta, +delta). What
    `tost_verdict` calls PASS for that metric; the seed planner simulates with it."""
    diff, se, df = welch_stats(a, b)
    half = t_quantile(0.95, df) * se
    return (-delta < diff - half) & (diff + half < delta)


def tost_required_margin(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The smallest delta at which one metric's TOST passes: max |90% CI endpoint|.
    PASS at delta iff this is < delta (vectorised; the planner's 'smallest delta')."""
    diff, se, df = welch_stats(a, b)
    return np.abs(diff) + t_quantile(0.95, df) * se
