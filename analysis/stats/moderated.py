"""Moderated variances (empirical Bayes, Smyth 2004 "limma"): with many games and few
seeds, each game's variance s_g^2 (d_g df) is shrunk towards a prior s0^2 (d0 df)
fitted across games by the method of moments on log variances:

    s~_g^2 = (d0 s0^2 + d_g s_g^2) / (d0 + d_g),   a t-test on it has d0 + d_g df.

A per-game test on 3 + 3 seeds has 2-4 df; after a correction over 57 games only huge
shifts could be flagged. Borrowing the spread across games restores the df, as long as
the scale makes spreads comparable across games (the callers use the score relative to
the published score above random). Vectorised over leading axes (games last).

The flags over the games are corrected by Holm (`holm_reject`: family-wise error, the
chance of ANY false flag stays <= alpha; docs/reproduce.md says why not
Benjamini-Hochberg); NaN p-values (games not tested) are never rejected and do not count
in the family.
"""

from __future__ import annotations

import numpy as np
from scipy import special

MAX_PRIOR_DF = 1e6
"""Prior df when the games' variances vary no more than sampling noise would (d0 = inf)."""


def prior(s2: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fit (s0^2, d0) across games: s2 (..., games) sample variances (NaN: game left
    out) with df d (games,) or (..., games). Returns arrays of shape (...)."""
    s2 = np.asarray(s2, dtype=np.float64)
    d = np.broadcast_to(np.asarray(d, dtype=np.float64), s2.shape)
    ok = ~np.isnan(s2) & (s2 > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.where(ok, np.log(np.where(ok, s2, 1.0)) - special.digamma(d / 2)
                     + np.log(d / 2), np.nan)
        g = ok.sum(axis=-1)
        emean = np.nanmean(e, axis=-1)
        evar = np.nansum((e - emean[..., None]) ** 2, axis=-1) / (g - 1) \
            - np.nanmean(np.where(ok, special.polygamma(1, d / 2), np.nan), axis=-1)
    # d0 / 2 = x with trigamma(x) = evar (> 0), by Newton's method on 1 / x (as limma does)
    y = np.where(evar > 0, evar, 1.0)
    x = 0.5 + 1.0 / y
    for _ in range(50):
        tri = special.polygamma(1, x)
        step = tri * (1 - tri / y) / special.polygamma(2, x)
        x = x + step
        if np.all(np.abs(step) < 1e-8 * x):
            break
    d0 = np.where(evar > 0, 2 * x, MAX_PRIOR_DF)
    d0 = np.minimum(d0, MAX_PRIOR_DF)
    s0 = np.exp(emean + special.digamma(d0 / 2) - np.log(d0 / 2))
    return s0, d0


def moderated_variance(s2: np.ndarray, d: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(s~^2 (..., games), df (..., games), s0^2 (..., 1)): each game's variance shrunk
    towards the prior fitted across its games (games with s2 NaN stay NaN), and the
    prior's variance."""
    s2 = np.asarray(s2, dtype=np.float64)
    d = np.broadcast_to(np.asarray(d, dtype=np.float64), s2.shape)
    s0, d0 = prior(s2, d)
    s0, d0 = s0[..., None], d0[..., None]
    post = (d0 * s0 + d * np.where(np.isnan(s2), np.nan, s2)) / (d0 + d)
    return post, d0 + d, s0


def holm_reject(p: np.ndarray, alpha: float) -> np.ndarray:
    """(..., k) p-values (NaN: not tested) -> bool (..., k): Holm's step-down rejections
    at level alpha."""
    p = np.asarray(p, dtype=np.float64)
    tested = ~np.isnan(p)
    filled = np.where(tested, p, np.inf)
    order = np.argsort(filled, axis=-1)  # ascending, untested last
    sorted_p = np.take_along_axis(filled, order, axis=-1)
    k = tested.sum(axis=-1, keepdims=True)
    rank = np.arange(sorted_p.shape[-1])
    with np.errstate(divide="ignore", invalid="ignore"):
        ok = sorted_p <= alpha / (k - rank)
    # step down: reject the first run of successes only, then back to the p-values' order
    keep = np.cumprod(ok, axis=-1).astype(bool)
    out = np.zeros(keep.shape, dtype=bool)
    np.put_along_axis(out, order, keep, axis=-1)
    return out & tested
