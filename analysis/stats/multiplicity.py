"""Multiplicity over many games: Holm (family-wise error: the chance of ANY false flag
stays <= alpha; docs/reproduce.md says why not Benjamini-Hochberg). Vectorised over
leading axes; NaN p-values (games not tested) are never rejected and do not count in the
family.
"""

from __future__ import annotations

import numpy as np


def holm_reject(p: np.ndarray, alpha: float) -> np.ndarray:
    """(..., k) p-values -> bool (..., k): Holm's step-down rejections at level alpha."""
    tested, k, order, sorted_p = _ascending(p)
    rank = np.arange(sorted_p.shape[-1])
    with np.errstate(divide="ignore", invalid="ignore"):
        ok = sorted_p <= alpha / (k - rank)
    # step down: reject the first run of successes only
    keep = np.cumprod(ok, axis=-1).astype(bool)
    return _unsorted(keep, order, tested)


def _ascending(p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(..., k) p-values (NaN: not tested) -> (tested, number tested (..., 1), the order
    that sorts them ascending with untested last, the sorted p-values)."""
    p = np.asarray(p, dtype=np.float64)
    tested = ~np.isnan(p)
    filled = np.where(tested, p, np.inf)
    order = np.argsort(filled, axis=-1)
    return tested, tested.sum(axis=-1, keepdims=True), order, np.take_along_axis(
        filled, order, axis=-1)


def _unsorted(keep: np.ndarray, order: np.ndarray, tested: np.ndarray) -> np.ndarray:
    """Rejections decided in sorted order, back in the p-values' own order."""
    out = np.zeros(keep.shape, dtype=bool)
    np.put_along_axis(out, order, keep, axis=-1)
    return out & tested
