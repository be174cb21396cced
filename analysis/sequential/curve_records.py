"""Run records as they stood at a frame count: what a look along training time sees.

`truncated(run, frames)` keeps the episodes that ended by `frames` (a run still in
flight, or a completed one looked at earlier); `seed_values` reduces one side's runs to
the gate's per-seed metric there, through the gate's own reduction: scored per layout
(analysis.scoring.grouping.analyse), layout copies of a seed averaged
(analysis.scoring.replicates.collapse_seed_copies), then the metric over games
(analysis.verdicts.gate.GATE_METRICS).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from analysis.errors import AnalysisError
from analysis.inputs.facts import episode_x
from analysis.inputs.load import DEFAULT_LAST_N, RunSet
from analysis.scoring.grouping import analyse, layout_names
from analysis.scoring.replicates import collapse_seed_copies
from analysis.scoring.scores import GroupScores
from analysis.verdicts.gate import GATE_METRICS
from analysis.verdicts.seed_metrics import SEED_METRICS
from runrecord import Run
from runrecord.reader import Table


class NoEpisodeYet(AnalysisError):
    """A look too early for some run: none of its episodes had ended by then."""


def truncated(run: Run, frames: float | None) -> Run:
    """The run as it stood at `frames`: only the episodes that ended by then (None: the
    whole run). A plain Run, never cached (its values are computed, not read)."""
    if frames is None:
        return Run(run.run_dir, run.manifest, run.episodes, run.updates, list(run.warnings))
    keep = episode_x(run.episodes) <= frames
    episodes = Table({k: v[keep] for k, v in run.episodes.columns.items()}, int(keep.sum()))
    return Run(run.run_dir, run.manifest, episodes, run.updates, list(run.warnings))


def reached(run: Run, frames: float) -> bool:
    """Whether an episode of the run ended at or after `frames` (its look can be read)."""
    x = episode_x(run.episodes)
    return bool(len(x)) and float(np.nanmax(x)) >= frames


def _chosen(groups: Sequence[GroupScores], layouts: Sequence[str] | None
            ) -> list[GroupScores]:
    """The groups of the selected layouts (all when None), each once."""
    if layouts is None:
        return list(groups)
    by_layout = {lay: gs for gs in groups for lay in layout_names(gs)}
    out: list[GroupScores] = []
    for lay in layouts:
        gs = by_layout.get(lay)
        if gs is not None and all(gs is not g for g in out):
            out.append(gs)
    return out


def seed_values(runs: Sequence[Run], frames: float | None, side: str, *, metric: str,
                layouts: Sequence[str] | None = None, last_n: int = DEFAULT_LAST_N,
                normalisers: Mapping[str, tuple[float, float]] | None = None
                ) -> tuple[list[int], np.ndarray]:
    """(seeds, values (n,)): one side's runs of one system and suite reduced to the gate's
    per-seed `metric` at `frames` (None: the whole runs). AnalysisError when no episode
    ended by then or the runs form no group."""
    if metric not in GATE_METRICS:
        raise AnalysisError(f"regression metric {metric!r}; valid: {', '.join(GATE_METRICS)}")
    score, seed_metric = GATE_METRICS[metric]
    cut = [truncated(r, frames) for r in runs]
    empty = [r.run_id for r in cut if len(r.episodes) == 0]
    if empty:
        at = "" if frames is None else f" by frame {frames:,.0f}"
        raise NoEpisodeYet(f"{side}: no episode ended{at} in run(s) {', '.join(empty)}; "
                           "look later (a larger fraction of the budget)")
    a = analyse(RunSet(included=cut), group_by="layout.name", last_n=last_n,
                normalisers=normalisers, allow_protocol_mismatch=True)
    if len(a.suites) != 1:
        raise AnalysisError(f"{side}: runs form {len(a.suites)} suites; one gate is one suite")
    groups = _chosen(list(a.suites[0].values()), layouts)
    seeds = collapse_seed_copies(groups, side, attr=score)
    values = SEED_METRICS[seed_metric](seeds.values, seeds.tasks)
    return list(seeds.seeds), np.asarray(values, dtype=np.float64)


def reference_curves(runs: Sequence[Run], frames: Sequence[float], *, metric: str,
                     layouts: Sequence[str] | None = None, last_n: int = DEFAULT_LAST_N,
                     normalisers: Mapping[str, tuple[float, float]] | None = None
                     ) -> tuple[list[int], np.ndarray]:
    """(seeds, values (m, K)): the reference's per-seed metric at every look's frames
    (the last look: the whole runs, as the gate reads them)."""
    columns, seeds = [], None
    for k, f in enumerate(frames):
        s, v = seed_values(runs, None if k == len(frames) - 1 else f, "reference",
                           metric=metric, layouts=layouts, last_n=last_n,
                           normalisers=normalisers)
        if seeds is not None and s != seeds:
            raise AnalysisError(f"reference: seeds {s} at look {k + 1}, {seeds} before")
        seeds = s
        columns.append(v)
    assert seeds is not None
    return seeds, np.stack(columns, axis=1)

