"""Per-seed metrics: a (seeds, tasks) score matrix -> one value per seed. Every
verdict's per-seed value goes through one of these (equivalence, the gate).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from analysis.atari5.estimate import per_seed_from_normalised
from analysis.stats.metrics import iqm


def per_seed_iqm(values: np.ndarray) -> np.ndarray:
    """(seeds, tasks) -> (seeds,): IQM over tasks of each seed (the value itself for 1 task)."""
    values = np.asarray(values, dtype=np.float64)
    return np.asarray(iqm(values[:, None, :]), dtype=np.float64)


SeedMetric = Callable[[np.ndarray, Sequence[str]], np.ndarray]
"""Maps a (seeds, tasks) score matrix and its task names to one value per seed. Every
verdict's per-seed value goes through one of these (equivalence, the gate), so another
metric (e.g. a median over a fixed game subset) plugs in by name in SEED_METRICS."""


def iqm_over_tasks(values: np.ndarray, tasks: Sequence[str]) -> np.ndarray:
    """The default SeedMetric: per seed, the IQM over tasks (the value itself for 1 task)."""
    return per_seed_iqm(values)


def atari5_median(values: np.ndarray, tasks: Sequence[str]) -> np.ndarray:
    """SeedMetric: per seed, the Atari-5 estimate of the 57-game median HNS from its five
    games (analysis.atari5; docs/atari5.md). AnalysisError names a missing game."""
    return per_seed_from_normalised(values, tasks)


SEED_METRICS: dict[str, SeedMetric] = {"iqm": iqm_over_tasks, "atari5-median": atari5_median}
"""Per-seed metrics by CLI name."""
