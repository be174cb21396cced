"""Aggregate scores of groups: per-group point summaries, stratified bootstrap CIs of
median, IQM, mean and optimality gap, and the probability of improvement between
chosen pairs of groups that ran the same tasks."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from analysis.json_file import write_json
from analysis.scoring.scores import GroupScores
from analysis.scoring.tables import ONE_SEED, TableData, aggregate_table, ci_text
from analysis.stats.metrics import (
    AGGREGATES,
    Interval,
    interval_estimates,
    probability_of_improvement_pairs,
)
from runrecord.words import counted

AGGREGATE_REPS = 50_000
"""Bootstrap replicates of the aggregate intervals (the CLI's and the report's default)."""


def summary_table(groups: Mapping[str, GroupScores]) -> TableData:
    """Per group: seeds, tasks, median and IQM of the final score, IQM of the AUC, and
    minutes per run (point estimates, no intervals)."""
    rows = [[g, len(gs.seeds), len(gs.tasks), float(np.median(gs.final.mean(0))),
             float(AGGREGATES["iqm"](gs.final)), float(AGGREGATES["iqm"](gs.auc)),
             runtime_minutes(gs)[0]] for g, gs in groups.items()]
    return TableData("summary", "summary", ["group", "seeds", "tasks", "median final",
                                            "IQM final", "IQM AUC", "minutes/run"], rows)


def runtime_minutes(gs: GroupScores) -> tuple[float, float]:
    """(mean, std) over a group's runs of the training wall time in minutes; NaN (no
    warning) when no run recorded its time (an import of a table without a time column)."""
    minutes = gs.wall_time_s.ravel() / 60
    minutes = minutes[np.isfinite(minutes)]
    return (float(minutes.mean()), float(minutes.std())) if len(minutes) else (math.nan,
                                                                               math.nan)


def aggregate_intervals(
    groups: Mapping[str, GroupScores], *, reps: int = AGGREGATE_REPS, seed: int = 0,
    confidence: float = 0.95, method: str = "percentile",
) -> dict[str, dict[str, Interval]]:
    """group -> metric -> CI of the final normalised scores."""
    return {g: interval_estimates(gs.final, AGGREGATES, reps=reps, seed=seed,
                                  confidence=confidence, method=method)
            for g, gs in groups.items()}


@dataclass
class Aggregates:
    intervals: dict[str, dict[str, Interval]]  # group -> metric -> CI
    table: TableData
    improvement: TableData  # P(X > Y) with CIs; no rows when no two groups share tasks
    seeds: dict[str, tuple[int, int]]  # group -> (independent seeds, tasks)
    which: str = ""  # which P(X > Y) pairs were computed, in words

    def lines(self) -> list[str]:
        # A group's rows are distinct seeds (one run per seed and env), so the bootstrap
        # resamples independent seeds, never layout copies.
        out = [self.table.markdown()]
        out += [f"{g}: {counted(s, 'independent seed')} x {counted(t, 'task')} (CIs resample seeds within each "
                "task)" for g, (s, t) in self.seeds.items()]
        fewest = min((s for s, _ in self.seeds.values()), default=0)
        if 1 < fewest <= FEW_SEEDS:
            out.append(f"note: {fewest} seeds: percentile bootstrap CIs are too narrow at so "
                       "few seeds (the bootstrap variance is (n-1)/n of the true one; at 3 "
                       "seeds a nominal 5% test fired 14% of the time). Read them as "
                       "descriptive; to decide, use `equivalence` or `regression` (t on "
                       "per-seed values), or run more seeds")
        if self.which:
            out.append(f"P(X > Y) computed for {self.which}")
        return out + ([self.improvement.markdown()] if self.improvement.rows else [])

    def write(self, out: Path) -> list[Path]:
        """aggregates.md/.csv/.tex, probability_of_improvement.md/.csv/.tex and
        aggregates.json."""
        paths = [*self.table.write(out), *self.improvement.write(out)]
        return paths + [write_json(out / "aggregates.json", {
            g: {m: iv.as_dict() for m, iv in d.items()} for g, d in self.intervals.items()})]


FEW_SEEDS = 3
"""At this many seeds or fewer percentile bootstrap CIs are too narrow (docs/analysis.md):
the aggregate table carries a note, and analysis.rly.checks a SeedWarning."""


def improvement_reading(iv: Interval, n_x: int, n_y: int) -> str:
    """P(X > Y) [CI] in words: which group the interval favours, or that it cannot tell
    (with 3 vs 3 seeds a task's P(X > Y) takes 10 values and its interval can span 0..1)."""
    lo, hi = float(iv.low), float(iv.high)
    if lo > 0.5:
        return "X tends to score higher (CI above 0.5)"
    if hi < 0.5:
        return "Y tends to score higher (CI below 0.5)"
    if lo <= 0.05 and hi >= 0.95:
        return (f"cannot tell: the CI spans almost all of 0..1 ({n_x} vs {n_y} seeds per "
                "task)")
    return f"no evidence either way: the CI contains 0.5 ({n_x} vs {n_y} seeds per task)"


def improvement_cells(iv: Interval, n_x: int, n_y: int) -> list[str]:
    """P(X > Y) [CI] and its reading; with one seed on a side the bootstrap resamples
    that one seed only, so its [p, p] is no interval: "n/a (1 seed)" instead."""
    if min(n_x, n_y) < 2:
        return [f"{float(iv.point):.3f} [{ONE_SEED}]",
                "cannot tell: one seed on a side gives no interval"]
    return [ci_text(iv), improvement_reading(iv, n_x, n_y)]


def aggregate_groups(groups: Mapping[str, GroupScores], *, reps: int, seed: int = 0,
                     confidence: float = 0.95, method: str = "percentile",
                     pairs: Sequence[tuple[str, str]] | None = None,
                     which: str = "") -> Aggregates:
    """Bootstrap CIs of every aggregate per group (final normalised scores), and P(X > Y)
    for `pairs` (default: every ordered pair of groups with the same tasks; the CLI
    chooses fewer, analysis.verdicts.compare). `which` says in words which pairs."""
    res = aggregate_intervals(groups, reps=reps, seed=seed, confidence=confidence,
                              method=method)
    table = aggregate_table(res, title=f"Aggregate final normalised scores, "
                            f"{confidence:.0%} CIs, {reps} reps, seed {seed}",
                            seeds={g: len(gs.seeds) for g, gs in groups.items()})
    if pairs is None:
        pairs = [(x, y) for x, gx in groups.items() for y, gy in groups.items()
                 if x != y and gx.tasks == gy.tasks]
        which = which or f"all {len(pairs)} ordered pairs"
    ivs = probability_of_improvement_pairs({g: gs.final for g, gs in groups.items()}, pairs,
                                           reps=reps, seed=seed, confidence=confidence,
                                           method=method)
    rows = [[x, y, *improvement_cells(iv, len(groups[x].seeds), len(groups[y].seeds))]
            for (x, y), iv in ivs.items()]
    poi = TableData("probability_of_improvement",
                    "P(X > Y) with CIs" + (f": {which}" if which else ""),
                    ["X", "Y", "P(X > Y) [CI]", "what it says"], rows)
    return Aggregates(res, table, poi, {g: (len(gs.seeds), len(gs.tasks))
                                        for g, gs in groups.items()}, which)
