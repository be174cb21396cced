"""The per-game statistics of `reproduce` from summary statistics (mean, sd, seeds):
Welch intervals, the TOST verdict of one interval, and the descriptive power numbers.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from analysis.errors import AnalysisError
from analysis.reproduce.judge import CONSISTENT, HIGHER, INCONCLUSIVE, LOWER, margins
from analysis.stats.welch import WelchInterval, t_quantile, tost_passes, welch_df

POWER_SIMULATIONS = 5_000
"""Draws behind each P(consistent if equal): Monte Carlo sd <= 0.007."""


def summary_stats(mean_a: np.ndarray | float, sd_a: np.ndarray | float, n_a: int,
                  mean_b: np.ndarray | float, sd_b: np.ndarray | float, n_b: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised (diff, se, df) of mean_a - mean_b from summary statistics (sample sds,
    ddof=1), the arithmetic of `welch_from_summary` (which see for the one-seed rule);
    the calibration suite draws through it. se == 0 gives df = inf."""
    if n_a < 1 or n_b < 1:
        raise AnalysisError(f"need at least one value per side, got {n_a} and {n_b}")
    if n_a == 1 and n_b == 1:
        raise AnalysisError("one value on each side: no spread estimate at all")
    mean_a, sd_a, mean_b, sd_b = (np.asarray(x, dtype=np.float64)
                                  for x in (mean_a, sd_a, mean_b, sd_b))
    va = sd_b**2 if n_a == 1 else sd_a**2
    vb = sd_a**2 if n_b == 1 else sd_b**2
    sa, sb = va / n_a, vb / n_b
    se = np.sqrt(sa + sb)
    if n_a == 1 or n_b == 1:
        df = np.where(se > 0, float(max(n_a, n_b) - 1), np.inf)
    else:
        df = welch_df(sa, sb, n_a, n_b)
    return mean_a - mean_b, se, df


def welch_from_summary(mean_a: float, sd_a: float, n_a: int, mean_b: float, sd_b: float,
                       n_b: int) -> WelchInterval:
    """Welch interval of mean_a - mean_b from summary statistics (sample sds, ddof=1).

    A side with n = 1 has no spread estimate: its variance is taken to be the other
    side's (the single value is judged against the other side's spread: a prediction
    interval) and df = the other side's n - 1. Zero spread on both sides gives a CI of
    width 0.
    """
    d, s, f = summary_stats(mean_a, sd_a, n_a, mean_b, sd_b, n_b)
    diff, se, df = float(d), float(s), float(f)
    if se == 0:
        return WelchInterval(diff, 0.0, math.inf, (diff, diff), (diff, diff), n_a, n_b,
                             float(mean_a), float(mean_b))
    t90, t95 = float(t_quantile(0.95, df)), float(t_quantile(0.975, df))
    return WelchInterval(diff, se, df, (diff - t90 * se, diff + t90 * se),
                         (diff - t95 * se, diff + t95 * se), n_a, n_b, float(mean_a),
                         float(mean_b))


def game_verdicts(diff: np.ndarray | float, se: np.ndarray | float, df: np.ndarray | float,
                  margin: np.ndarray | float) -> np.ndarray:
    """Vectorised per-game verdict: CONSISTENT when the 90% CI is inside (-margin,
    +margin); else HIGHER/LOWER when the 95% CI excludes 0; else INCONCLUSIVE.
    `game_verdict` and the calibration package decide through it."""
    diff, se, df, margin = (np.asarray(x, dtype=np.float64) for x in (diff, se, df, margin))
    if np.any(margin <= 0):
        raise AnalysisError(f"margin must be > 0, got {margin.min()}")
    h90 = t_quantile(0.95, df) * se
    h95 = t_quantile(0.975, df) * se
    consistent = (-margin < diff - h90) & (diff + h90 < margin)
    out = np.where(diff - h95 > 0, HIGHER, np.where(diff + h95 < 0, LOWER, INCONCLUSIVE))
    return np.where(consistent, CONSISTENT, out)


def game_verdict(w: WelchInterval, margin: float) -> str:
    """`game_verdicts` of one Welch interval."""
    return str(game_verdicts(np.float64(w.diff), np.float64(w.se), np.float64(w.df),
                             margin))


def game_margin(published_hns: float, relative: float, absolute: float) -> float:
    """The per-game margin in HNS (analysis.reproduce.judge.margins of one game)."""
    return float(margins(np.float64(published_hns), relative, absolute))


def power_consistent(sd: float, n_user: int, n_published: int, margin: float, *,
                     true_diff: float = 0.0, sims: int = POWER_SIMULATIONS,
                     seed: int = 0) -> float:
    """P(CONSISTENT) when the true difference is `true_diff` and both sides' seeds have
    sd `sd`: simulated draws decided by the verdicts' own vectorised TOST core
    (analysis.verdicts.tost_passes, as the seed planner does); one user seed borrows the
    published spread, as welch_from_summary does."""
    if sd == 0:
        return float(abs(true_diff) < margin)
    mine, published = _draws(sd, n_user, n_published, true_diff, sims, seed)
    if n_user >= 2:
        return float(np.mean(tost_passes(mine, published, margin)))
    # One user seed: se from the published sd alone, df = n_published - 1.
    diff = mine[:, 0] - published.mean(axis=1)
    se = published.std(axis=1, ddof=1) * math.sqrt(1 + 1 / n_published)
    half = t_quantile(0.95, n_published - 1) * se
    return float(np.mean((diff - half > -margin) & (diff + half < margin)))


def _draws(sd: float, n_user: int, n_published: int, true_diff: float, sims: int,
           seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Both sides' simulated seeds, as rng.normal(true_diff, sd) draws them. At a true
    difference of +0.0 (every verdict's power) a draw is 0.0 + sd * z, which is sd * z + 0.0
    whether or not the product is fused: the standard draws are the same for every game
    of a comparison, so they are drawn once."""
    if true_diff == 0 and math.copysign(1.0, true_diff) > 0 and sd > 0:
        z_mine, z_published = _standard_draws(sims, n_user, n_published, seed)
        return sd * z_mine + 0.0, sd * z_published + 0.0
    rng = np.random.Generator(np.random.PCG64(seed))
    return (rng.normal(true_diff, sd, (sims, n_user)),
            rng.normal(0.0, sd, (sims, n_published)))


@functools.lru_cache(maxsize=16)
def _standard_draws(sims: int, n_user: int, n_published: int, seed: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.Generator(np.random.PCG64(seed))
    mine, published = rng.standard_normal((sims, n_user)), rng.standard_normal(
        (sims, n_published))
    mine.flags.writeable = published.flags.writeable = False  # shared between calls
    return mine, published


def detectable_shift(sd: float, n_user: int, n_published: int, power: float = 0.8) -> float:
    """Smallest true |difference| flagged HIGHER/LOWER with probability `power` (normal
    approximation of the Welch test at 5% two-sided, df of equal spreads)."""
    if sd == 0:
        return 0.0
    n_a = max(n_user, 1)
    se = sd * math.sqrt(1 / n_a + 1 / n_published)
    df = (n_published - 1) if n_user == 1 else (n_user + n_published - 2)
    return float((t_quantile(0.975, df) + t_quantile(power, df)) * se)


