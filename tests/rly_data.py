"""Score dicts shaped like rliable's notebook examples, and its README aggregate function
written with analysis.rly (shared by tests/test_rly.py and tests/test_rly_checks.py)."""

from __future__ import annotations

import numpy as np

from analysis import rly


def atari_like(rng: np.random.Generator, runs: int = 5, games: int = 55,
               points: int | None = None) -> np.ndarray:
    """Human-normalised-like scores: a level per game spanning orders of magnitude, runs
    spread around it (the shape of the notebook's Atari 200M matrices)."""
    level = rng.lognormal(-0.3, 1.2, games)
    if points is None:
        return level * rng.lognormal(0.0, 0.35, (runs, games))
    progress = np.linspace(0.1, 1.0, points) ** 0.7
    return level[None, :, None] * progress * rng.lognormal(0.0, 0.35, (runs, games, points))


def example_scores() -> dict[str, np.ndarray]:
    """Two algorithms, 5 runs x 55 games (the notebook's Atari 200M shape)."""
    rng = np.random.default_rng(34)
    return {"DQN (Nature)": 0.4 * atari_like(rng), "Rainbow": atari_like(rng)}


def ours_rliable(x):
    return np.array([rly.aggregate_median(x), rly.aggregate_iqm(x), rly.aggregate_mean(x),
                     rly.aggregate_optimality_gap(x)])
