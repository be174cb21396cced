"""A verdict's seeds: the per-seed metric that reduces a (seeds, tasks) score matrix to one
value per seed (equivalence and the gate both go through SEED_METRICS), and whether the
two sides are paired by seed, one rule for both verdicts, decided from the design, never
from the scores.

The pairing holds when
- both sides ran the same seeds, at least 2 (a side's seeds after its layout copies are
  averaged: analysis.scoring.scores);
- with the same system and architecture: the same trainer, for which a run seed fixes
  the env streams (benchenv.env_seeds), the initial parameters and the action keys;
- under the same recorded env protocol for every game (a run without one is unknown
  and never matches: an imported run's seed 1 need not be our seed 1).
The verdict then tests the per-seed differences (paired t, n - 1 df:
analysis.stats.welch.paired_stats); otherwise Welch's unpaired t, and the line says why.

`unpaired=True` (--unpaired) asks for Welch where the pairing holds. Fix it before
looking at the scores: the paired t is exact at any within-seed correlation, but where
the runs of a seed drift apart (other numerics: another learner device count, another
CPU model or JAX version) the correlation is near 0 and at 3 seeds its n - 1 df cost
power against Welch's (calibration.paired_cells; docs/analysis.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from analysis.atari5.estimate import per_seed_from_normalised
from analysis.inputs.protocol import protocol_differences, run_protocol
from analysis.stats.metrics import iqm
from runrecord import Run
from runrecord.words import counted

SeedMetric = Callable[[np.ndarray, Sequence[str]], np.ndarray]
"""Maps a (seeds, tasks) score matrix and its task names to one value per seed. Every
verdict's per-seed value goes through one of these (equivalence, the gate), so another
metric (e.g. a median over a fixed game subset) plugs in by name in SEED_METRICS."""


def iqm_over_tasks(values: np.ndarray, tasks: Sequence[str] = ()) -> np.ndarray:
    """The default SeedMetric: (seeds, tasks) -> (seeds,), per seed the IQM over tasks
    (the value itself for 1 task)."""
    values = np.asarray(values, dtype=np.float64)
    return np.asarray(iqm(values[:, None, :]), dtype=np.float64)


SEED_METRICS: dict[str, SeedMetric] = {"iqm": iqm_over_tasks,
                                       "atari5-median": per_seed_from_normalised}
"""Per-seed metrics by CLI name: the IQM over tasks, or the Atari-5 estimate of the
57-game median HNS from its five games (analysis.atari5; docs/atari5.md; AnalysisError
names a missing game)."""


PAIRED = "paired by seed"
WELCH = "Welch (unpaired)"


@dataclass(frozen=True)
class SeedDesign:
    """How a verdict compares its two sides: paired by seed, or Welch and why."""

    paired: bool
    why: str = ""  # why the sides are not paired (empty when paired)
    seeds: int = 0  # seeds per side when paired

    def text(self) -> str:
        """`paired by seed (3 seeds on both sides: the CI of the mean per-seed difference,
        2 df)` or `Welch (unpaired: <why>)`."""
        if self.paired:
            return (f"{PAIRED} ({counted(self.seeds, 'seed')} on both sides: the CI of the mean per-seed "
                    f"difference, {self.seeds - 1} df)")
        return f"{WELCH[:-1]}: {self.why})"

    def as_dict(self) -> dict[str, object]:
        return {"paired": self.paired, "why": self.why, "text": self.text()}


def _family(runs: Sequence[Run]) -> set[tuple[str, str]]:
    return {(str(r.manifest.get("system")), str(r.manifest.get("architecture")))
            for r in runs}


def seed_design(runs_a: Sequence[Run], runs_b: Sequence[Run], seeds_a: Sequence[int],
                seeds_b: Sequence[int], *, unpaired: bool = False) -> SeedDesign:
    """The design of a comparison of side a (its runs and its distinct seeds) with side b
    (module docstring)."""
    if unpaired:
        return SeedDesign(False, "--unpaired asked for it")
    if sorted(seeds_a) != sorted(seeds_b):
        return SeedDesign(False, f"the sides ran different seeds ({sorted(seeds_a)} vs "
                                 f"{sorted(seeds_b)})")
    if len(seeds_a) < 2:
        return SeedDesign(False, "one seed per side has no spread of its differences")
    fam_a, fam_b = _family(runs_a), _family(runs_b)
    if len(fam_a) != 1 or fam_a != fam_b:
        names = " vs ".join("/".join(sorted(" / ".join(f) for f in fam))
                            for fam in (fam_a, fam_b))
        return SeedDesign(False, f"different systems or architectures ({names}): a seed "
                                 "fixes the env streams, not the learning")
    first: dict[str, Run] = {}
    for run in [*runs_a, *runs_b]:
        env = str(run.manifest.get("env_id"))
        if run_protocol(run) is None:
            return SeedDesign(False, f"run {run.run_id} recorded no env protocol, so its "
                                     "seed need not give the same env streams")
        ref = first.setdefault(env, run)
        if protocol_differences(run_protocol(ref), run_protocol(run)):
            return SeedDesign(False, f"the env protocols of {env} differ")
    return SeedDesign(True, seeds=len(seeds_a))
