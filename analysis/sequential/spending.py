"""Alpha spending (Lan & DeMets 1983) and the group-sequential boundaries it gives.

A spending function alpha(t) says how much of the one-sided error rate `alpha` may have
been used by information fraction t in [0, 1] (alpha(0) = 0, alpha(1) = alpha, never
decreasing). The boundaries c_1..c_K on the normal scale are the values with
P(Z_1 < c_1, ..., Z_{k-1} < c_{k-1}, Z_k >= c_k) = alpha(t_k) - alpha(t_{k-1}) for the
canonical joint distribution of the standardised statistics at information fractions
t_k (Brownian motion: corr(Z_j, Z_k) = sqrt(t_j / t_k), j < k), so the chance that any
look crosses is exactly alpha (`boundaries`: found look by look by numerical
integration of the density of the paths that have not crossed, on a fixed grid:
deterministic, no simulation).

Spending functions (Lan & DeMets 1983; Kim & DeMets 1987):
- "obrien-fleming": alpha(t) = 2 - 2 Phi(z_{1 - alpha/2} / sqrt(t)): almost nothing at
  the first looks, nearly the whole alpha at the last (the final boundary stays close to
  the fixed design's, so a sweep that runs to its cap loses little power);
- "pocock": alpha(t) = alpha ln(1 + (e - 1) t): about equal boundaries at every look
  (earlier stops, a higher final boundary).

Looks along training time see the same seeds again, later: their statistics have another
joint law. `boundaries` solves P(Z_1 < c_1, ..., Z_k < c_k) = 1 - alpha(t_k) for any
correlation matrix R on a seeded scrambled Sobol sample of the law (Genz), or takes the
union bound (Bonferroni over the spending increments, c_k = Phi^-1(1 - (alpha(t_k) -
alpha(t_{k-1})))), which holds for any correlation, when R is unknown.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np
from scipy import optimize, stats

from analysis.errors import AnalysisError
from analysis.stats.welch import t_upper

OBRIEN_FLEMING = "obrien-fleming"
POCOCK = "pocock"


def _obrien_fleming(t: np.ndarray, alpha: float) -> np.ndarray:
    z = stats.norm.isf(alpha / 2)
    with np.errstate(divide="ignore"):
        return np.where(t > 0, 2 * stats.norm.sf(z / np.sqrt(np.maximum(t, 1e-300))), 0.0)


def _pocock(t: np.ndarray, alpha: float) -> np.ndarray:
    return alpha * np.log1p((math.e - 1) * t)


SPENDING: dict[str, Callable[[np.ndarray, float], np.ndarray]] = {
    OBRIEN_FLEMING: _obrien_fleming,
    POCOCK: _pocock,
}
"""Spending functions by name (the design's `spending`)."""


def spent_alpha(fractions: Sequence[float] | np.ndarray, alpha: float, spending: str
                ) -> np.ndarray:
    """alpha(t) of the named spending function at each information fraction (clipped to
    [0, 1]): the one-sided error rate allowed to be used by then."""
    if spending not in SPENDING:
        raise AnalysisError(f"unknown alpha-spending function {spending!r}; valid: "
                            f"{', '.join(SPENDING)}")
    t = np.clip(np.asarray(fractions, dtype=np.float64), 0.0, 1.0)
    return np.asarray(SPENDING[spending](t, alpha), dtype=np.float64)


def t_scale(c: np.ndarray | float, df: np.ndarray | float) -> np.ndarray:
    """A normal-scale boundary carried to Student t with `df` degrees of freedom at the
    same nominal tail probability (Jennison & Turnbull 2000, sec. 11.1: boundaries for
    estimated variances); df = inf keeps c, c = inf stays inf."""
    return t_upper(stats.norm.sf(np.asarray(c, dtype=np.float64)), df)


# How the looks' joint law is taken: estimated from the reference's curves, the union
# bound (any correlation), or the canonical independent-increments law (calibration only:
# the textbook law, wrong for looks along a curve, kept to show why).
UNION = "union"
CANONICAL = "canonical"
ESTIMATED = "reference"

QMC_POINTS = 2**18
"""Quasi-Monte Carlo points of the joint law the boundaries are solved on (~0.2 s)."""


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


@lru_cache(maxsize=8)
def _base_normals(dims: int, points: int, seed: int) -> np.ndarray:
    """Independent standard normals from a scrambled Sobol sequence (made once per
    shape: the calibration asks for boundaries thousands of times)."""
    u = stats.qmc.Sobol(d=dims, scramble=True, seed=seed).random(points)
    out = stats.norm.ppf(np.clip(u, 1e-12, 1 - 1e-12))
    out.setflags(write=False)
    return out


def boundaries(fractions: Sequence[float] | np.ndarray, alpha: float, spending: str,
               correlation: np.ndarray | str = CANONICAL, points: int = QMC_POINTS,
               seed: int = 0) -> np.ndarray:
    """One-sided upper boundaries c_1..c_K (normal scale) for increasing information
    fractions t_1 < ... < t_K = 1 that spend `alpha` by the named function (module
    docstring) under the looks' joint law `correlation`: CANONICAL (independent
    increments), UNION (the union bound, any correlation) or a K x K correlation matrix.
    A look that may spend (almost) nothing gets c = inf: it cannot cross.

    Each law has one method. The canonical law is integrated on a grid: its paths are
    Markov, so one density carries from look to look, and O'Brien-Fleming's early
    increments (~1e-5) come out exact, where a sample holds only a few of its paths
    beyond them (0.17 off on the normal scale). Any other law has no such recursion; it
    is solved on one seeded quasi-Monte Carlo sample of the law, look by look."""
    t = np.asarray(fractions, dtype=np.float64)
    if t.ndim != 1 or len(t) == 0 or np.any(np.diff(t) <= 0) or t[0] <= 0 or t[-1] > 1 + 1e-12:
        raise AnalysisError(f"look fractions must increase within (0, 1], got "
                            f"{list(map(float, t))}")
    if not 0 < alpha < 0.5:
        raise AnalysisError(f"alpha must be in (0, 0.5), got {alpha}")
    # alpha(t_k) - alpha(t_{k-1}) per look
    increments = np.diff(np.concatenate([[0.0], spent_alpha(t, alpha, spending)]))
    if isinstance(correlation, str):
        if correlation == CANONICAL:
            return _integrated(t, increments)
        if correlation == UNION:
            with np.errstate(divide="ignore"):
                return np.where(increments > 1e-15,
                                stats.norm.isf(np.maximum(increments, 1e-300)), math.inf)
        raise AnalysisError(f"joint law {correlation!r}; valid: {CANONICAL}, {UNION} or a "
                            "correlation matrix")
    if np.shape(correlation) != (len(t), len(t)):
        raise AnalysisError(f"correlation matrix of shape {np.shape(correlation)} for "
                            f"{len(t)} looks")
    # (points, K) standard normals with the given correlation, from a scrambled Sobol
    # sequence (quasi-Monte Carlo: far less error than as many random draws); a
    # rank-deficient matrix through its symmetric square root
    r = as_correlation(correlation)
    values, vectors = np.linalg.eigh(r)
    root = vectors * np.sqrt(np.clip(values, 0.0, None))
    # einsum, not @: a multi-threaded BLAS call on this small product is 30x slower on
    # a loaded machine, and the calibration makes thousands of them
    return _sampled(increments, np.einsum("nk,jk->nj", _base_normals(len(r), points, seed),
                                          root))


GRID_POINTS = 601
"""Points of the integration grid per look (over [-LOWEST, c_k]): the boundaries of 5
equally spaced looks agree with a 4,001-point grid to 1e-4 (and with the published
O'Brien-Fleming-type values to the 3 decimals printed), in ~0.1 s."""
LOWEST = 10.0


def _integrated(t: np.ndarray, increments: np.ndarray) -> np.ndarray:
    """The canonical law's boundaries: c_1 = Phi^-1(1 - increment_1); each later one
    solves the crossing probability of the not-yet-stopped paths, whose density is
    carried on a grid (Armitage, McPherson & Rowe 1969; Jennison & Turnbull 2000, ch. 19)."""
    out = [float(stats.norm.isf(increments[0]))]
    # Density of Z_1 on the grid of the paths that did not cross at look 1.
    z = np.linspace(-LOWEST, min(out[0], LOWEST + 5.0), GRID_POINTS)
    dens = stats.norm.pdf(z)
    for k in range(1, len(t)):
        step = math.sqrt(t[k] - t[k - 1])
        h = np.diff(z)  # trapezoid weights x density: the mass of each continuing point
        w = np.concatenate([h / 2, [0.0]]) + np.concatenate([[0.0], h / 2])
        w = w * dens
        prev = z * math.sqrt(t[k - 1])  # the paths on the score scale S = Z sqrt(t)

        def excess(c: float, k=k, w=w, prev=prev, step=step) -> float:
            """Crossing probability at look k with boundary c, minus what may be spent."""
            return float(w @ stats.norm.sf((c * math.sqrt(t[k]) - prev) / step)
                         - increments[k])

        if increments[k] <= 1e-15:
            c = math.inf
        else:
            c = float(optimize.brentq(excess, -LOWEST, 40.0, xtol=1e-10))
        out.append(c)
        if k == len(t) - 1:
            break
        upper = min(c, LOWEST + 5.0)
        y = np.linspace(-LOWEST, upper, GRID_POINTS)
        kernel = stats.norm.pdf((y[:, None] * math.sqrt(t[k]) - prev[None, :]) / step)
        dens = kernel @ w * math.sqrt(t[k]) / step
        z = y
    return np.array(out)


def _sampled(increments: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Boundaries on a sample z (points, K) of the looks' law: c_1 exact as the
    canonical law's; c_k the quantile of Z_k among the paths that have not crossed such
    that the share of all paths that cross first at look k is increment_k."""
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
    return np.array(out + [math.inf] * (len(increments) - len(out)))
