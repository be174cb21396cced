"""Alpha-spending boundaries for looks whose statistics have ANY joint normal law.

Looks along training time (analysis.sequential.curve_looks) see the same seeds again,
later: their statistics are correlated, and not as independent increments are (the
canonical law of analysis.sequential.spending, corr(Z_j, Z_k) = sqrt(t_j / t_k)). Given
the looks' correlation matrix R, the one-sided boundaries c_1..c_K spend alpha(t_k) by
look k exactly:

    P(Z_1 < c_1, ..., Z_k < c_k) = 1 - alpha(t_k)    for every k,

solved look by look with the multivariate normal distribution function (Genz's
sample of the joint law: a scrambled Sobol sequence, seeded, so the same boundaries
every time). The
union bound (Bonferroni over the spending increments, c_k = Phi^-1(1 - (alpha(t_k) -
alpha(t_{k-1})))) holds for any correlation; it is the fallback when R is unknown.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from scipy import stats

from analysis.errors import AnalysisError
from analysis.sequential.spending import spent_alpha

UNION = "union"
CANONICAL = "canonical"
ESTIMATED = "reference"
CORRELATIONS = (ESTIMATED, UNION, CANONICAL)
"""How the looks' joint law is taken: estimated from the reference's curves, the union
bound (any correlation), or the canonical independent-increments law (calibration only:
the textbook law, wrong for looks along a curve, kept to show why)."""

QMC_POINTS = 2**18
"""Quasi-Monte Carlo points of the joint law the boundaries are solved on (~0.2 s)."""


def canonical_correlation(fractions: Sequence[float] | np.ndarray) -> np.ndarray:
    """corr(Z_j, Z_k) = sqrt(t_min / t_max): statistics of independent increments."""
    t = np.asarray(fractions, dtype=np.float64)
    lo, hi = np.minimum.outer(t, t), np.maximum.outer(t, t)
    return np.sqrt(lo / hi)


def _check(fractions: np.ndarray, alpha: float) -> None:
    if fractions.ndim != 1 or len(fractions) == 0 or np.any(np.diff(fractions) <= 0) \
            or fractions[0] <= 0 or fractions[-1] > 1 + 1e-12:
        raise AnalysisError(f"look fractions must increase within (0, 1], got "
                            f"{list(map(float, fractions))}")
    if not 0 < alpha < 0.5:
        raise AnalysisError(f"alpha must be in (0, 0.5), got {alpha}")


def union_boundaries(fractions: Sequence[float] | np.ndarray, alpha: float, spending: str
                     ) -> np.ndarray:
    """c_k = Phi^-1(1 - increment_k): P(any crossing) <= alpha whatever the correlation
    (an increment of 0 gives c = inf: that look cannot cross)."""
    t = np.asarray(fractions, dtype=np.float64)
    _check(t, alpha)
    increments = np.diff(np.concatenate([[0.0], spent_alpha(t, alpha, spending)]))
    with np.errstate(divide="ignore"):
        return np.where(increments > 1e-15, stats.norm.isf(np.maximum(increments, 1e-300)),
                        math.inf)


def as_correlation(matrix: np.ndarray) -> np.ndarray:
    """A covariance (or correlation) matrix scaled to unit diagonal, symmetrised;
    AnalysisError when a variance is not positive."""
    m = np.asarray(matrix, dtype=np.float64)
    d = np.sqrt(np.diag(m))
    if not np.all(np.isfinite(d)) or np.any(d <= 0):
        raise AnalysisError("a look's statistic has no variance: its correlation with the "
                            "others is undefined")
    r = m / np.outer(d, d)
    return np.clip((r + r.T) / 2, -1.0, 1.0)


def correlated_normals(correlation: np.ndarray, points: int = QMC_POINTS, seed: int = 0
                       ) -> np.ndarray:
    """(points, K) standard normal vectors with the given correlation, from a scrambled
    Sobol sequence (quasi-Monte Carlo: far less error than as many random draws); a
    rank-deficient matrix through its symmetric square root."""
    r = as_correlation(correlation)
    values, vectors = np.linalg.eigh(r)
    root = vectors * np.sqrt(np.clip(values, 0.0, None))
    # einsum, not @: a multi-threaded BLAS call on this small product is 30x slower on
    # a loaded machine, and the calibration makes thousands of them
    return np.einsum("nk,jk->nj", _base_normals(len(r), points, seed), root)


@lru_cache(maxsize=8)
def _base_normals(dims: int, points: int, seed: int) -> np.ndarray:
    """Independent standard normals from a scrambled Sobol sequence (made once per
    shape: the calibration asks for boundaries thousands of times)."""
    u = stats.qmc.Sobol(d=dims, scramble=True, seed=seed).random(points)
    out = stats.norm.ppf(np.clip(u, 1e-12, 1 - 1e-12))
    out.setflags(write=False)
    return out


def joint_boundaries(fractions: Sequence[float] | np.ndarray, alpha: float, spending: str,
                     correlation: np.ndarray | None, points: int = QMC_POINTS,
                     seed: int = 0) -> np.ndarray:
    """One-sided upper boundaries c_1..c_K for standard normal look statistics with
    correlation matrix `correlation` (K x K), spending `alpha` by the named function at
    the look fractions (module docstring). None: the union bound.

    Look by look on one fixed quasi-random sample of the joint law: c_k is the quantile
    of Z_k among the paths that have not crossed, such that the share of all paths that
    cross first at look k is the spending increment. Deterministic; the boundaries of the
    canonical law agree with analysis.sequential.spending's integration to ~1e-3."""
    t = np.asarray(fractions, dtype=np.float64)
    if correlation is None:
        return union_boundaries(t, alpha, spending)
    _check(t, alpha)
    if np.shape(correlation) != (len(t), len(t)):
        raise AnalysisError(f"correlation matrix of shape {np.shape(correlation)} for "
                            f"{len(t)} looks")
    z = correlated_normals(np.asarray(correlation), points, seed)
    increments = np.diff(np.concatenate([[0.0], spent_alpha(t, alpha, spending)]))
    alive = np.ones(len(z), dtype=bool)
    out = []
    for k, spend in enumerate(increments):
        if k == 0:
            out.append(float(stats.norm.isf(spend)) if spend > 0 else math.inf)
            alive &= z[:, 0] < out[0]
            continue
        crossing = int(round(spend * len(z)))
        if crossing <= 0:  # less than one path's worth: this look (almost) never crosses
            out.append(math.inf)
            continue
        survivors = z[alive, k]
        if crossing >= len(survivors):
            out.append(-math.inf)
            break
        at = len(survivors) - crossing
        c = float(np.partition(survivors, at)[at])
        out.append(c)
        alive &= z[:, k] < c
    return np.array(out + [math.inf] * (len(t) - len(out)))


def first_crossing(z: np.ndarray, boundaries: np.ndarray) -> np.ndarray:
    """Index of the first look where z (..., K) >= its boundary, -1 where none."""
    crossed = np.asarray(z) >= np.asarray(boundaries)
    return np.where(crossed.any(axis=-1), crossed.argmax(axis=-1), -1)


def crossing_rates(correlation: np.ndarray, boundaries: np.ndarray, draws: int = 200_000,
                   seed: int = 0) -> np.ndarray:
    """Monte Carlo check: P(first crossing at look k) for normal statistics with the
    given correlation; their cumulative sums are alpha(t_k) when the boundaries are
    exact, below it for the union bound."""
    r = as_correlation(correlation)
    rng = np.random.default_rng(seed)
    z = rng.multivariate_normal(np.zeros(len(r)), r, size=draws, method="eigh")
    first = first_crossing(z, boundaries)
    return np.array([np.mean(first == k) for k in range(len(r))])
