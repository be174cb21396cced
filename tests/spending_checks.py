"""Monte Carlo checks of the sequential boundaries (analysis.sequential.spending)."""

import numpy as np

from analysis.sequential.spending import as_correlation


def canonical_correlation(fractions) -> np.ndarray:
    """corr(Z_j, Z_k) = sqrt(t_min / t_max): statistics of independent increments."""
    t = np.asarray(fractions, dtype=np.float64)
    lo, hi = np.minimum.outer(t, t), np.maximum.outer(t, t)
    return np.sqrt(lo / hi)


def crossing_rates(correlation: np.ndarray, boundaries: np.ndarray, draws: int = 200_000,
                   seed: int = 0) -> np.ndarray:
    """Monte Carlo check: P(first crossing at look k) for normal statistics with the
    given correlation (canonical_correlation: the law `boundaries` integrates by default); their
    cumulative sums are alpha(t_k) when the boundaries are exact, below it for the union
    bound."""
    r = as_correlation(correlation)
    rng = np.random.default_rng(seed)
    z = rng.multivariate_normal(np.zeros(len(r)), r, size=draws, method="eigh")
    crossed = z >= np.asarray(boundaries)
    first = np.where(crossed.any(axis=-1), crossed.argmax(axis=-1), -1)
    return np.array([np.mean(first == k) for k in range(len(r))])
