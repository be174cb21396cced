"""GroupScores built from numbers, for the verdict tests that need no run records' curves:
a two-point frame, time and reach grid whose curves the caller gives (their mean over the
grid is the AUC)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from analysis.scoring.scores import GroupScores
from runrecord import Run

GRID = np.arange(2.0)


def group_scores(name: str, tasks: Sequence[str], seeds: Sequence[int], final: np.ndarray,
                 curves: np.ndarray, runs: dict[tuple[int, str], Run] | None = None
                 ) -> GroupScores:
    """final (seeds, tasks), normalised and raw alike; curves (seeds, tasks, 2) on every
    grid; wall times 0."""
    return GroupScores(name, list(tasks), list(seeds), final, final, GRID, curves, GRID,
                       curves, np.zeros_like(final), GRID, curves, np.zeros_like(final),
                       runs=runs or {})
