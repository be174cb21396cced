"""The gate's per-game rules: does any single game drop by more than a relative margin,
or collapse to the random score?

The aggregate (an IQM over games) trims the top and bottom quarter of games, so halving
the highest-scoring games can leave it unchanged. Beside it, per game, a one-sided test
that the new mean is below (1 - relative margin) x the reference mean (the contrast
new - (1 - margin) x reference, free of any scale). Three seeds per side give a per-game
test 2-4 df, useless after a correction over 57 games; and one spread pooled over games
breaks on the published columns, whose per-game coefficients of variation run from 0 to
over 100% (measured: 10% of no-change draws flagged a game, 25% on the worst column).
So each game's spread, on the scale of its score above random (both sides' seeds
pooled), is moderated towards a prior fitted across the games (analysis.stats.moderated,
a limma-style moderated t), never below the game's own variance nor the prior's, and the
p-values are Holm-corrected (family-wise: the chance that a game is flagged by noise
alone stays <= alpha).

A per-game test cannot see a moderate drop on several games (halving a game is within 2
sd of 3 seeds' relative noise), so a second, untrimmed aggregate sits beside it: each
seed's MEAN over the tested games of its relative score; the gate needs its lower bound
above -MEAN_MARGIN to PASS, and its upper bound below -MEAN_MARGIN is a REGRESSION.

COLLAPSED: a game the reference clearly learned on every seed (its mean above
LEARNED_MIN and COLLAPSE_T per-seed sds above the random score) where every new seed
sits at the random score, within COLLAPSE_LEVEL of the reference's score above random on
either side: the agent no longer learns it (a fault, not noise). The per-seed sd, not
the standard error, and seeds near random on both sides: on games whose seeds learn
only sometimes (Venture, Skiing, Kangaroo: coefficients of variation over 100% in the
published tables) faithful seeds far from the mean are common, and a one-sided rule on
the standard error fired on 1-3% of faithful reproductions per column.
Games the reference did not learn have no relative scale and are not tested.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from analysis.stats.moderated import holm_reject, moderated_variance
from analysis.stats.welch import paired_stats, t_upper, welch_stats

RELATIVE_MARGIN = 0.25
"""A game regresses when it loses more than this share of its reference score."""
LEARNED_MIN = 0.05
"""Normalised score a game's reference mean must exceed to be tested (0 = random)."""
LEARNED_T = 3.0
"""... and by this many of its standard errors."""
ALPHA = 0.05
MEAN_MARGIN = 0.10
"""Tolerated drop of the untrimmed mean relative score (share of the reference's)."""
COLLAPSE_LEVEL = 0.10
"""A collapsed seed scores at most this share of the reference's score above random."""
COLLAPSE_T = 2.0
"""The reference's mean must be this many per-seed sds above random for a collapse."""


def learned(mean: np.ndarray, sd: np.ndarray, n: int | np.ndarray) -> np.ndarray:
    """Games clearly above the random score (0): mean > LEARNED_MIN and > LEARNED_T se
    (sd ddof=1 of n seeds; one seed: its mean alone decides)."""
    mean = np.asarray(mean, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        se = np.where(np.asarray(n) > 1, np.asarray(sd, dtype=np.float64)
                      / np.sqrt(np.asarray(n, dtype=np.float64)), 0.0)
        return (mean > LEARNED_MIN) & (mean > LEARNED_T * np.nan_to_num(se))


def collapsed(new_max: np.ndarray, reference_mean: np.ndarray, reference_sd: np.ndarray,
              new_min: np.ndarray | None = None) -> np.ndarray:
    """COLLAPSED per game (...): every new seed (their max and min) within COLLAPSE_LEVEL
    x the reference's score above random of the random score (0), on a game the
    reference learned on every seed (mean > LEARNED_MIN and > COLLAPSE_T x its per-seed
    sd, ddof=1; NaN sd: not judged). new_min None: the max alone (one seed)."""
    mean = np.asarray(reference_mean, dtype=np.float64)
    low = np.asarray(new_max if new_min is None else new_min, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        clearly = (mean > LEARNED_MIN) & (mean > COLLAPSE_T * np.asarray(reference_sd))
        level = COLLAPSE_LEVEL * mean
        return clearly & (np.asarray(new_max) <= level) & (low >= -level)


def per_game_drops(new: np.ndarray, reference: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """new (..., n, games), reference (..., m, games) normalised scores ->
    (flagged bool (..., games) at ALPHA, p-values (..., games; NaN: not tested), relative
    new / reference mean (..., games)). Needs n + m >= 3."""
    new = np.asarray(new, dtype=np.float64)
    ref = np.asarray(reference, dtype=np.float64)
    n, m = new.shape[-2], ref.shape[-2]
    a, b = new.mean(axis=-2), ref.mean(axis=-2)
    tested = _reference_learned(ref)
    keep = 1 - RELATIVE_MARGIN
    with np.errstate(all="ignore"):
        # the scale of a game's spread: all its seeds' mean (independent of the
        # difference under the null), so spreads are comparable across games
        scale = np.where(tested, (n * a + m * b) / (n + m), np.nan)
        scale = np.where(scale > 0, scale, np.nan)
        ss = ((new - a[..., None, :]) ** 2).sum(axis=-2) \
            + ((ref - b[..., None, :]) ** 2).sum(axis=-2)
        d = float(n + m - 2)
        s2 = ss / d / scale**2
        post, df, prior_s2 = moderated_variance(s2, np.full(s2.shape, d))
        post = np.fmax(np.fmax(post, s2), prior_s2)
        se = np.sqrt(post * (1 / n + keep**2 / m)) * scale
        t = (a - keep * b) / se
        p = np.where(tested & (se > 0), stats.t.cdf(t, df),
                     np.where(tested, (a < keep * b).astype(float), np.nan))
        relative = np.where(tested, a / b, np.nan)
    return holm_reject(p, ALPHA), p, relative


def _seed_sd(ref: np.ndarray) -> np.ndarray:
    """The per-seed sd (ddof=1) of each game of (..., m, games); 0 with one seed."""
    return ref.std(axis=-2, ddof=1) if ref.shape[-2] > 1 else np.zeros(ref.shape[:-2]
                                                                       + ref.shape[-1:])


def _reference_learned(ref: np.ndarray) -> np.ndarray:
    return learned(ref.mean(axis=-2), _seed_sd(ref), ref.shape[-2])


def collapsed_games(new: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """`collapsed` of (..., n, games) and (..., m, games) score matrices."""
    ref = np.asarray(reference, dtype=np.float64)
    new = np.asarray(new, dtype=np.float64)
    return collapsed(new.max(axis=-2), ref.mean(axis=-2), _seed_sd(ref), new.min(axis=-2))


def mean_relative_bounds(new: np.ndarray, reference: np.ndarray, *,
                         confidence: float = 0.95, paired: bool = False
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The untrimmed rule: new (..., n, games), reference (..., m, games), n, m >= 2 ->
    (new - reference mean relative score, its one-sided lower and upper `confidence`
    bounds), each (...). Zero spread: both bounds are the difference. `paired`: row s of
    both sides is the same seed (paired t of the per-seed differences), else Welch."""
    new = np.asarray(new, dtype=np.float64)
    ref = np.asarray(reference, dtype=np.float64)
    # relative to the reference's per-game mean, NaN on games not learned
    scale = np.where(_reference_learned(ref), ref.mean(axis=-2), np.nan)[..., None, :]
    x, y = new / scale, ref / scale
    with np.errstate(all="ignore"):
        a, b = np.nanmean(x, axis=-1), np.nanmean(y, axis=-1)
    diff, se, df = paired_stats(a, b) if paired else welch_stats(a, b)
    with np.errstate(invalid="ignore"):
        half = np.where(se > 0, t_upper(1 - confidence, df) * se, 0.0)
    return diff, diff - half, diff + half
