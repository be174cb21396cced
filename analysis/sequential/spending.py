"""Alpha spending (Lan & DeMets 1983) and the group-sequential boundaries it gives.

A spending function alpha(t) says how much of the one-sided error rate `alpha` may have
been used by information fraction t in [0, 1] (alpha(0) = 0, alpha(1) = alpha, never
decreasing). The boundaries c_1..c_K on the normal scale are the values with
P(Z_1 < c_1, ..., Z_{k-1} < c_{k-1}, Z_k >= c_k) = alpha(t_k) - alpha(t_{k-1}) for the
canonical joint distribution of the standardised statistics at information fractions
t_k (Brownian motion: corr(Z_j, Z_k) = sqrt(t_j / t_k), j < k), so the chance that any
look crosses is exactly alpha. They are found look by look by numerical integration of
the density of the paths that have not crossed (Armitage, McPherson & Rowe 1969;
Jennison & Turnbull 2000, ch. 19), on a fixed grid: deterministic, no simulation.

Spending functions (Lan & DeMets 1983; Kim & DeMets 1987):
- "obrien-fleming": alpha(t) = 2 - 2 Phi(z_{1 - alpha/2} / sqrt(t)): almost nothing at
  the first looks, nearly the whole alpha at the last (the final boundary stays close to
  the fixed design's, so a sweep that runs to its cap loses little power);
- "pocock": alpha(t) = alpha ln(1 + (e - 1) t): about equal boundaries at every look
  (earlier stops, a higher final boundary).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from scipy import optimize, stats

from analysis.errors import AnalysisError

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


GRID_POINTS = 601
"""Points of the integration grid per look (over [-LOWEST, c_k]): the boundaries of 5
equally spaced looks agree with a 4,001-point grid to 1e-4 (and with the published
O'Brien-Fleming-type values to the 3 decimals printed), in ~0.1 s."""
LOWEST = 10.0


def normal_boundaries(fractions: Sequence[float] | np.ndarray, alpha: float, spending: str
                      ) -> np.ndarray:
    """One-sided upper boundaries c_1..c_K (normal scale) for increasing information
    fractions t_1 < ... < t_K = 1 that spend `alpha` by the named function (module
    docstring). c_1 = Phi^-1(1 - alpha(t_1)); later ones solve the crossing probability of
    the not-yet-stopped paths by integration over a grid."""
    t = np.asarray(fractions, dtype=np.float64)
    if t.ndim != 1 or len(t) == 0 or np.any(np.diff(t) <= 0) or t[0] <= 0 or t[-1] > 1 + 1e-12:
        raise AnalysisError(f"information fractions must increase within (0, 1], got "
                            f"{list(map(float, t))}")
    if not 0 < alpha < 0.5:
        raise AnalysisError(f"alpha must be in (0, 0.5), got {alpha}")
    cumulative = spent_alpha(t, alpha, spending)
    increments = np.diff(np.concatenate([[0.0], cumulative]))
    out = [float(stats.norm.isf(increments[0]))]
    # Density of Z_1 on the grid of the paths that did not cross at look 1.
    z = np.linspace(-LOWEST, min(out[0], LOWEST + 5.0), GRID_POINTS)
    dens = stats.norm.pdf(z)
    for k in range(1, len(t)):
        step = math.sqrt(t[k] - t[k - 1])
        w = _trapezoid_weights(z) * dens  # mass of each continuing grid point
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


def crossing_probabilities(fractions: Sequence[float] | np.ndarray,
                           boundaries: Sequence[float] | np.ndarray,
                           draws: int = 200_000, seed: int = 0) -> np.ndarray:
    """Monte Carlo check of `normal_boundaries`: P(first crossing at look k) under the
    canonical joint distribution (Brownian motion at the fractions), from `draws` seeded
    paths. Their sum is the error rate the boundaries keep."""
    t = np.asarray(fractions, dtype=np.float64)
    rng = np.random.default_rng(seed)
    steps = rng.standard_normal((draws, len(t))) * np.sqrt(np.diff(np.concatenate([[0], t])))
    z = np.cumsum(steps, axis=1) / np.sqrt(t)
    crossed = z >= np.asarray(boundaries)
    first = np.where(crossed.any(axis=1), crossed.argmax(axis=1), -1)
    return np.array([np.mean(first == k) for k in range(len(t))])


def _trapezoid_weights(x: np.ndarray) -> np.ndarray:
    h = np.diff(x)
    w = np.zeros_like(x)
    w[:-1] += h / 2
    w[1:] += h / 2
    return w


def t_scale(c: np.ndarray | float, df: np.ndarray | float) -> np.ndarray:
    """A normal-scale boundary carried to Student t with `df` degrees of freedom at the
    same nominal tail probability (Jennison & Turnbull 2000, sec. 11.1: boundaries for
    estimated variances); df = inf keeps c, c = inf stays inf."""
    p = stats.norm.sf(np.asarray(c, dtype=np.float64))
    return np.asarray(stats.t.isf(p, np.asarray(df, dtype=np.float64)))
