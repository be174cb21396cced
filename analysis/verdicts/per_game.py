"""The gate's per-game rule: does any single game drop by more than a relative margin?

The aggregate (an IQM over games) trims the top and bottom quarter of games, so halving
the highest-scoring games can leave it unchanged. Beside it, per game, the new side's
scores are put on the reference's scale (score / reference mean of that game, so 1.0 is
"as before" and spreads are comparable across games) and tested one-sided against
1 - relative margin. Three seeds per side give a per-game test 2-4 df, useless after a
correction over 57 games; so the spread is pooled over games on that relative scale
(every game's within-side variance, df = games x (n + m - 2)), and the p-values are
Holm-corrected (family-wise: the chance that a game is flagged by noise alone stays
<= alpha). A per-game test cannot see a moderate drop on several games (halving a game is within
2 sd of 3 seeds' relative noise), so a second, untrimmed aggregate sits beside it: each
seed's MEAN over the tested games of its relative score, whose one-sided 95% Welch lower
bound of new - reference must stay above -MEAN_MARGIN (10% of the average game's
reference score). Games the reference did not learn (mean below LEARNED_MIN normalised units,
or not clearly above 0) have no relative scale and are not tested.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from analysis.stats.multiplicity import holm_reject
from analysis.stats.welch import t_quantile, welch_stats

RELATIVE_MARGIN = 0.25
"""A game regresses when it loses more than this share of its reference score."""
LEARNED_MIN = 0.05
"""Normalised score a game's reference mean must exceed to be tested (0 = random)."""
ALPHA = 0.05
MEAN_MARGIN = 0.10
"""Tolerated drop of the untrimmed mean relative score (share of the reference's)."""


def per_game_drops(new: np.ndarray, reference: np.ndarray, *,
                   relative_margin: float = RELATIVE_MARGIN, alpha: float = ALPHA
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """new (..., n, games), reference (..., m, games) normalised scores ->
    (flagged bool (..., games), p-values (..., games; NaN: not tested), relative
    new / reference mean (..., games)). Needs n + m >= 3."""
    n, m = np.shape(new)[-2], np.shape(reference)[-2]
    x, y = relative_scale(new, reference)
    learned = ~np.isnan(y[..., 0, :])
    ss = ((x - x.mean(axis=-2, keepdims=True)) ** 2).sum(axis=-2) \
        + ((y - y.mean(axis=-2, keepdims=True)) ** 2).sum(axis=-2)
    games = learned.sum(axis=-1)
    df = games * (n + m - 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        pooled = np.nansum(ss, axis=-1) / df
        se = np.sqrt(pooled * (1 / n + 1 / m))[..., None]
        relative = x.mean(axis=-2)
        t = (relative - (1 - relative_margin)) / se
        p = np.where(learned, stats.t.cdf(t, np.maximum(df, 1)[..., None]), np.nan)
    return holm_reject(p, alpha), p, relative


def relative_scale(new: np.ndarray, reference: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(new, reference) / the reference's per-game mean, NaN on games not learned."""
    new = np.asarray(new, dtype=np.float64)
    ref = np.asarray(reference, dtype=np.float64)
    m = ref.shape[-2]
    ref_mean = ref.mean(axis=-2)
    ref_se = ref.std(axis=-2, ddof=1) / np.sqrt(m) if m > 1 else np.zeros_like(ref_mean)
    learned = (ref_mean > LEARNED_MIN) & (ref_mean > 3 * ref_se)
    scale = np.where(learned, ref_mean, np.nan)[..., None, :]
    return new / scale, ref / scale


def mean_relative_drop(new: np.ndarray, reference: np.ndarray, *,
                       margin: float = MEAN_MARGIN, confidence: float = 0.95
                       ) -> tuple[np.ndarray, np.ndarray]:
    """The untrimmed rule: new (..., n, games), reference (..., m, games), n, m >= 2 ->
    (regressed bool (...), new - reference mean relative score (...))."""
    x, y = relative_scale(new, reference)
    with np.errstate(all="ignore"):
        a, b = np.nanmean(x, axis=-1), np.nanmean(y, axis=-1)
    diff, se, df = welch_stats(a, b)
    with np.errstate(invalid="ignore"):
        lower = np.where(se > 0, diff - t_quantile(confidence, df) * se, diff)
    return ~(lower > -margin), diff
