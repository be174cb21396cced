"""The unit of replication is the seed: reduce layout copies to one value per seed.

Runs of one seed on several layouts share their env streams, initial parameters and
action keys, so they are copies of one replicate (often bitwise identical), not extra
samples. Before any test that treats rows as independent (the regression gate, a
comparison with published seeds) the runs of a side are reduced to ONE row per distinct
seed: the mean, over the groups (layouts) that ran that seed, of the seed's value. The
mean of copies is the seed's value itself when the copies are identical, and the
natural estimate of it when hardware float differences make them differ slightly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from analysis.errors import AnalysisError
from analysis.scoring.scores import GroupScores


@dataclass
class SeedValues:
    """One row per independent seed.

    values: (seeds, tasks) array; copies[i]: how many groups (layouts) ran seeds[i].
    """

    label: str
    tasks: list[str]
    seeds: list[int]
    values: np.ndarray
    copies: list[int]

    @property
    def n_seeds(self) -> int:
        return len(self.seeds)

    @property
    def n_runs(self) -> int:
        """Rows before the reduction (seed x layout copies)."""
        return int(sum(self.copies))

    def describe(self) -> str:
        """'3 seeds' or '3 seeds (12 runs: layout copies averaged per seed)'."""
        text = f"{self.n_seeds} seed{'s' if self.n_seeds != 1 else ''}"
        if self.n_runs != self.n_seeds:
            text += f" ({self.n_runs} runs: layout copies averaged per seed)"
        return text


def collapse_seed_copies(groups: Sequence[GroupScores], label: str,
                         attr: str = "final") -> SeedValues:
    """Rows of `groups` (e.g. one system's layouts) -> one row per distinct seed.

    attr: the (seeds, tasks) array of each GroupScores to reduce ("final", "final_raw"
    or "auc"). Every group must cover the same tasks (a gate over different games is no
    comparison): AnalysisError names the difference otherwise.
    """
    if not groups:
        raise AnalysisError(f"{label}: no group to take seeds from")
    tasks = list(groups[0].tasks)
    for g in groups[1:]:
        if list(g.tasks) != tasks:
            raise AnalysisError(
                f"{label}: groups cover different games: {groups[0].group!r} has "
                f"{tasks}, {g.group!r} has {list(g.tasks)}")
    rows: dict[int, list[np.ndarray]] = {}
    for g in groups:
        values = np.asarray(getattr(g, attr), dtype=np.float64)
        for i, seed in enumerate(g.seeds):
            rows.setdefault(int(seed), []).append(values[i])
    seeds = sorted(rows)
    values = np.array([np.mean(rows[s], axis=0) for s in seeds]).reshape(len(seeds), len(tasks))
    return SeedValues(label, tasks, seeds, values, [len(rows[s]) for s in seeds])
