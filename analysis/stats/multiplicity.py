"""Multiplicity over many games: Holm (family-wise error: the chance of ANY false flag
stays <= alpha) and Benjamini-Hochberg (false discovery rate: the expected share of
false flags among the flags stays <= alpha). Vectorised over leading axes; NaN p-values
(games not tested) are never rejected and do not count in the family.
"""

from __future__ import annotations

import numpy as np


def holm_reject(p: np.ndarray, alpha: float) -> np.ndarray:
    """(..., k) p-values -> bool (..., k): Holm's step-down rejections at level alpha."""
    p = np.asarray(p, dtype=np.float64)
    tested = ~np.isnan(p)
    k = tested.sum(axis=-1, keepdims=True)
    order = np.argsort(np.where(tested, p, np.inf), axis=-1)
    sorted_p = np.take_along_axis(np.where(tested, p, np.inf), order, axis=-1)
    rank = np.arange(p.shape[-1])
    with np.errstate(divide="ignore", invalid="ignore"):
        ok = sorted_p <= alpha / (k - rank)
    # step down: reject the first run of successes only
    keep = np.cumprod(ok, axis=-1).astype(bool)
    out = np.zeros(p.shape, dtype=bool)
    np.put_along_axis(out, order, keep, axis=-1)
    return out & tested


def bh_reject(p: np.ndarray, alpha: float) -> np.ndarray:
    """(..., k) p-values -> bool (..., k): Benjamini-Hochberg step-up rejections."""
    p = np.asarray(p, dtype=np.float64)
    tested = ~np.isnan(p)
    k = tested.sum(axis=-1, keepdims=True)
    order = np.argsort(np.where(tested, p, np.inf), axis=-1)
    sorted_p = np.take_along_axis(np.where(tested, p, np.inf), order, axis=-1)
    rank = np.arange(1, p.shape[-1] + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ok = sorted_p <= alpha * rank / k
    # step up: reject everything up to the largest rank that passes
    last = np.where(ok.any(axis=-1, keepdims=True),
                    p.shape[-1] - 1 - np.argmax(ok[..., ::-1], axis=-1)[..., None], -1)
    keep = rank - 1 <= last
    out = np.zeros(p.shape, dtype=bool)
    np.put_along_axis(out, order, keep, axis=-1)
    return out & tested
