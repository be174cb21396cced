"""Seeded draws for the calibration suite: per-seed values of two sides (one number per
seed, or a (seeds, games) score matrix on a 57-game suite), under the scenarios a
reviewer would try (unequal seed counts and spreads, heavy tails, collapsed seeds,
regressing games). Pure NumPy; no verdict logic here.
"""

from __future__ import annotations

import math
import zlib

import numpy as np

from analysis.scales.normalize import ATARI_RANDOM_HUMAN

NORMAL = "normal"
T3 = "t3"
COLLAPSE = "collapse"
DISTRIBUTIONS = (NORMAL, T3, COLLAPSE)

METRIC_CORRELATION = 0.5
"""Correlation of the two equivalence metrics (final and AUC) per seed."""

COLLAPSE_PROBABILITY = 0.1
"""Chance that a seed collapses (scenario 'collapse'): its value drops by COLLAPSE_DROP sd."""
COLLAPSE_DROP = 5.0


def rng_for(seed: int, *key: object) -> np.random.Generator:
    """One generator per (seed, cell key), so cells do not depend on each other's order."""
    h = zlib.crc32("/".join(str(k) for k in key).encode())
    return np.random.Generator(np.random.PCG64([seed, h]))


def unit_noise(rng: np.random.Generator, dist: str, shape: tuple[int, ...]) -> np.ndarray:
    """Noise of mean 0 and sd 1 of the named shape: normal; Student t with 3 df (scaled to
    sd 1); or normal with a COLLAPSE_PROBABILITY chance per seed of a COLLAPSE_DROP drop
    (centred and scaled to mean 0, sd 1, so both sides share one distribution)."""
    if dist == NORMAL:
        return rng.standard_normal(shape)
    if dist == T3:
        return rng.standard_t(3, shape) / math.sqrt(3.0)
    if dist == COLLAPSE:
        p, d = COLLAPSE_PROBABILITY, COLLAPSE_DROP
        x = rng.standard_normal(shape) - d * (rng.random(shape) < p)
        mean, var = -p * d, 1 + p * (1 - p) * d * d
        return (x - mean) / math.sqrt(var)
    raise ValueError(f"unknown distribution {dist!r}")


def mixed(first: np.ndarray, other: np.ndarray, rho: float) -> np.ndarray:
    """`other` mixed with `first` (both sd 1, independent) to correlation `rho`, sd 1."""
    return rho * first + math.sqrt(1 - rho * rho) * other


def correlated_pair(rng: np.random.Generator, dist: str, shape: tuple[int, ...],
                    rho: float = METRIC_CORRELATION) -> tuple[np.ndarray, np.ndarray]:
    """Two noises of `dist` and `shape` (sd 1) correlated `rho`: by default one side's
    final and AUC."""
    first, other = unit_noise(rng, dist, shape), unit_noise(rng, dist, shape)
    return first, mixed(first, other, rho)


def suite_games() -> list[str]:
    """The 57 Atari games (the normaliser table's ids, sorted)."""
    return sorted(ATARI_RANDOM_HUMAN)


def synthetic_column(seed: int = 0, not_learned: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """(mean HNS, per-seed sd HNS) of a 57-game published-like column: log-normal HNS
    (median about 1.3, from 0.05 to ~60), relative sd 10-40%, and `not_learned` games
    near the random score (HNS 0-0.05), as in the paper's tables. Fixed by `seed`."""
    rng = np.random.Generator(np.random.PCG64(seed))
    n = len(suite_games())
    mean = np.exp(rng.normal(0.3, 1.3, n))
    idx = rng.choice(n, not_learned, replace=False)
    mean[idx] = rng.uniform(0.0, 0.05, not_learned)
    sd = mean * rng.uniform(0.1, 0.4, n) + 0.005
    return mean, sd
