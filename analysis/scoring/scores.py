"""From runs to score matrices: final scores, learning curves and AUC per (seed, task).

Definitions (docs/analysis.md):
- final score of a run: mean return of its last `last_n` (100) finished episodes,
  normalised per env (HNS on Atari);
- curve point at frame grid value g_k: mean return of the episodes that finished in
  (g_{k-1}, g_k]; empty bins are filled by linear interpolation between the neighbouring
  non-empty bins (constant before the first and after the last);
- frame grid: `points` evenly spaced values up to the smallest last-episode frame of the
  runs compared, so every run covers the whole grid;
- normalised AUC: the mean of the normalised curve over that grid;
- wall-time curves: the same on a grid of seconds per group, up to the group's longest
  run; a run that has finished keeps its last value.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis.errors import AnalysisError
from analysis.inputs.cache import last_frame, longest_wall_time
from analysis.inputs.derived import Quantity, run_values
from analysis.inputs.facts import ScoringColumns, final_window_mean
from analysis.inputs.load import DEFAULT_LAST_N, group_key, manifest_get
from analysis.scales.normalize import (
    ATARI_RANDOM_HUMAN,
    Normaliser,
    atari_env_id,
    get_normaliser,
)
from analysis.stats.metrics import AGGREGATES, Interval, interval_estimates
from runrecord import Run

DEFAULT_POINTS = 50


@dataclass
class GroupScores:
    """Normalised scores of one group as (seeds, tasks[, points]) arrays.

    Rows are seeds (each seed has a run on every task), columns tasks (env ids).
    """

    group: str
    tasks: list[str]
    seeds: list[int]
    final: np.ndarray  # (seeds, tasks) normalised final score
    final_raw: np.ndarray  # (seeds, tasks) raw mean return of the last N episodes
    frame_grid: np.ndarray  # (points,) common to every group scored together (AUC)
    curves: np.ndarray  # (seeds, tasks, points) normalised, on frame_grid
    time_grid: np.ndarray  # (points,) seconds
    time_curves: np.ndarray  # (seeds, tasks, points) normalised, on time_grid
    wall_time_s: np.ndarray  # (seeds, tasks) each run's wall time
    reach_grid: np.ndarray  # (points,) frames, up to this group's longest run
    reach_curves: np.ndarray  # (seeds, tasks, points) normalised, on reach_grid
    frames: np.ndarray  # (seeds, tasks) each run's trained frames
    runs: dict[tuple[int, str], Run] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def auc(self) -> np.ndarray:
        """(seeds, tasks): mean of the normalised curve over the frame grid."""
        return self.curves.mean(axis=-1)


def binned_curve(x: np.ndarray, returns: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Mean of `returns` whose `x` falls in each bin (grid[k-1], grid[k]] (first bin from
    -inf); empty bins interpolated linearly, held constant at the ends."""
    x = np.asarray(x, dtype=np.float64)
    returns = np.asarray(returns, dtype=np.float64)
    if len(returns) == 0:
        raise AnalysisError("cannot make a curve without episodes")
    k = np.searchsorted(grid, x, side="left")  # bin index: grid[k-1] < x <= grid[k]
    inside = k < len(grid)
    sums = np.bincount(k[inside], returns[inside], minlength=len(grid))
    counts = np.bincount(k[inside], minlength=len(grid))
    filled = counts > 0
    if not filled.any():  # every episode ended after the grid: use the first ones
        return np.full(len(grid), float(returns[np.argsort(x)][:1].mean()))
    idx = np.arange(len(grid))
    return np.interp(idx, idx[filled], sums[filled] / counts[filled])


def _frames_trained(run: Run) -> float:
    """The frames a run trained: its summary's, else (or when its last episode ended
    later) the frame its last episode ended at."""
    f = manifest_get(run.manifest, "summary.frames")
    last = last_frame(run)
    return float(last if f is None or not np.isfinite(f) else max(float(f), last))


def _grid_to(end: float, points: int) -> np.ndarray:
    """`points` values up to `end` (NaN throughout when `end` is not a positive number)."""
    if np.isfinite(end) and end > 0:
        return np.linspace(end / points, end, points)
    return np.full(points, np.nan)


def _wall_time(run: Run) -> float:
    w = manifest_get(run.manifest, "summary.wall_time_s")
    if w is None or not np.isfinite(w):
        w = longest_wall_time(run)
    return float(w)


_DEFINING_KEYS = ("sweep", "system", "architecture", "layout", "hyperparameters", "env_protocol")


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(d, dict):
        return {prefix: d}
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def differing_keys(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Dotted manifest keys (of the run's definition) whose values differ between a and b."""
    fa = _flatten({k: a.get(k) for k in _DEFINING_KEYS})
    fb = _flatten({k: b.get(k) for k in _DEFINING_KEYS})
    return sorted(k for k in set(fa) | set(fb) if fa.get(k) != fb.get(k))


def group_runs(runs: Sequence[Run], group_by: str | Sequence[str]) -> dict[str, list[Run]]:
    """Runs by group label, groups sorted by label."""
    out: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        out[group_key(r, group_by)].append(r)
    return dict(sorted(out.items()))


def common_frame_grid(runs: Sequence[Run], points: int = DEFAULT_POINTS) -> np.ndarray:
    """`points` frame values up to the smallest last-episode frame over `runs`."""
    if not runs:
        raise AnalysisError("no runs to build a frame grid from")
    end = min(last_frame(r) for r in runs)
    if not np.isfinite(end) or end <= 0:
        raise AnalysisError("runs have no episode with a positive frame count")
    return _grid_to(end, points)


def _final_window(last_n: int) -> Quantity:
    """Raw final score: mean return of the last `last_n` episodes by env step."""
    def compute(run: Run, cols: ScoringColumns) -> np.ndarray:
        return np.array([final_window_mean(cols.ret, cols.steps, last_n)])
    return Quantity("final", f"last_n={last_n}", 1, lambda run: "", compute)


def _norm_of(norms: Mapping[str, Normaliser]) -> Callable[[Run], Normaliser]:
    return lambda run: norms[str(run.manifest["env_id"])]


def _norm_key(norms: Mapping[str, Normaliser]) -> Callable[[Run], str]:
    return lambda run: repr((_norm_of(norms)(run).low, _norm_of(norms)(run).high))


def _frame_curve(grid: np.ndarray, norms: Mapping[str, Normaliser]) -> Quantity:
    """Normalised curve on the frame grid."""
    def compute(run: Run, cols: ScoringColumns) -> np.ndarray:
        return binned_curve(cols.x, _norm_of(norms)(run)(cols.ret), grid)
    return Quantity("curve", f"frame_grid={grid.tolist()!r}", len(grid), _norm_key(norms),
                    compute)


def _time_curve(grid: np.ndarray, norms: Mapping[str, Normaliser]) -> Quantity:
    """Normalised curve on the time grid (NaN when the grid or a wall time is not finite)."""
    def compute(run: Run, cols: ScoringColumns) -> np.ndarray:
        if np.isfinite(grid).all() and np.isfinite(cols.wall).all():
            return binned_curve(cols.wall, _norm_of(norms)(run)(cols.ret), grid)
        return np.full(len(grid), np.nan)
    return Quantity("time", f"time_grid={grid.tolist()!r}", len(grid), _norm_key(norms),
                    compute)


def group_cells(group: str, runs: Sequence[Run]) -> tuple[dict[tuple[int, str], Run],
                                                           list[int], list[str], list[str]]:
    """(run by (seed, env), seeds that have a run on every task, tasks, warnings).

    Raises AnalysisError when two runs share (seed, env) (group by more keys) or when no
    seed covers every task.
    """
    warnings: list[str] = []
    by_cell: dict[tuple[int, str], Run] = {}
    for r in runs:
        # load_runs left out runs whose seed is not an integer (analysis.inputs.load.is_seed).
        cell = (int(r.manifest["seed"]), str(r.manifest["env_id"]))
        if cell in by_cell:
            differ = differing_keys(by_cell[cell].manifest, r.manifest)
            hint = (f"they differ in {differ[:4]}; add one to --group-by (e.g. --group-by "
                    f"layout.name,{differ[0]}) or filter with --where" if differ else
                    "their definitions are identical (duplicate records?); filter with --where")
            raise AnalysisError(
                f"group {group!r} has two runs for seed {cell[0]} on {cell[1]} "
                f"({by_cell[cell].run_id}, {r.run_id}): {hint}"
            )
        by_cell[cell] = r
    tasks = sorted({env for _, env in by_cell})
    all_seeds = sorted({s for s, _ in by_cell})
    seeds = [s for s in all_seeds if all((s, t) in by_cell for t in tasks)]
    for s in all_seeds:
        if s not in seeds:
            lacking = [t for t in tasks if (s, t) not in by_cell]
            warnings.append(f"group {group!r}: seed {s} left out, no completed run on {lacking}")
    if not seeds:
        raise AnalysisError(
            f"group {group!r}: no seed has a completed run on every task {tasks}"
        )
    return by_cell, seeds, tasks, warnings


def scores_by_group(
    runs: Sequence[Run],
    group_by: str | Sequence[str],
    *,
    last_n: int = DEFAULT_LAST_N,
    points: int = DEFAULT_POINTS,
    normalisers: Mapping[str, tuple[float, float]] | None = None,
) -> dict[str, GroupScores]:
    """GroupScores of every group, all on one common frame grid (so AUCs compare). Each
    group's cells and normalisers are checked in turn (the first error raises); then the
    final score, frame curve and time curve (on its group's time grid) of every run come
    from one pass over the derived layer."""
    if not runs:
        raise AnalysisError("no completed runs to analyse")
    frame_grid = common_frame_grid(runs, points)
    cells: dict[str, tuple[dict[tuple[int, str], Run], list[int], list[str], list[str]]] = {}
    norms: dict[str, Normaliser] = {}
    for g, rs in group_runs(runs, group_by).items():
        cells[g] = group_cells(g, rs)
        norms.update((t, get_normaliser(t, normalisers)) for t in cells[g][2])
    runs = [by_cell[s, t] for by_cell, seeds, tasks, _ in cells.values()
            for s in seeds for t in tasks]
    spans, walls, time_grids, frames, reach_grids = {}, {}, {}, {}, {}
    start = 0
    for g, (by_cell, seeds, tasks, _) in cells.items():
        spans[g] = slice(start, start + len(seeds) * len(tasks))
        start = spans[g].stop
        walls[g] = np.array([[_wall_time(by_cell[s, t]) for t in tasks] for s in seeds])
        frames[g] = np.array([[_frames_trained(by_cell[s, t]) for t in tasks] for s in seeds])
        time_grids[g] = _grid_to(_largest(walls[g]), points)
        reach_grids[g] = _grid_to(_largest(frames[g]), points)

    def per_run(grids: Mapping[str, np.ndarray],
                quantity: Callable[[np.ndarray, Mapping[str, Normaliser]], Quantity]
                ) -> list[Quantity]:
        of: dict[bytes, Quantity] = {}  # one Quantity per distinct grid (bit for bit)
        for grid in grids.values():
            if grid.tobytes() not in of:
                of[grid.tobytes()] = quantity(grid, norms)
        return [of[grids[g].tobytes()] for g in cells
                for _ in range(spans[g].stop - spans[g].start)]

    final_rows, curve_rows, time_rows, reach_rows = run_values(
        runs, [_final_window(last_n), _frame_curve(frame_grid, norms),
               per_run(time_grids, _time_curve), per_run(reach_grids, _frame_curve)])
    out = {}
    for g, (by_cell, seeds, tasks, warnings) in cells.items():
        shape = (len(seeds), len(tasks))
        final_raw = final_rows[spans[g]].reshape(shape)
        final = np.stack([norms[t](final_raw[:, j]) for j, t in enumerate(tasks)], axis=1)
        out[g] = GroupScores(g, tasks, seeds, final, final_raw, frame_grid,
                             curve_rows[spans[g]].reshape(*shape, len(frame_grid)),
                             time_grids[g], time_rows[spans[g]].reshape(*shape, points),
                             walls[g], reach_grids[g],
                             reach_rows[spans[g]].reshape(*shape, points), frames[g],
                             {k: v for k, v in by_cell.items() if k[0] in seeds}, warnings)
    return out


def _largest(values: np.ndarray) -> float:
    return float(np.nanmax(values)) if np.isfinite(values).any() else np.nan


def suite_name(env_id: str) -> str:
    """The benchmark a run belongs to: "Atari" for every Atari game, else the env id."""
    return "Atari" if atari_env_id(env_id) in ATARI_RANDOM_HUMAN else str(env_id)


def runs_by_suite(runs: Sequence[Run]) -> dict[str, list[Run]]:
    """Split runs into suites BEFORE grouping: all Atari games form one suite, every other
    env its own, so a group that ran both CartPole and Atari is compared in each. Largest
    suite first (then by name)."""
    out: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        out[suite_name(str(r.manifest["env_id"]))].append(r)
    return dict(sorted(out.items(), key=lambda kv: (-len(kv[1]), kv[0])))


# ---------------------------------------------------------------- seed replicates
# The unit of replication is the seed: reduce layout copies to one value per seed.
#
# Runs of one seed on several layouts share their env streams, initial parameters and
# action keys, so they are copies of one replicate (often bitwise identical), not extra
# samples. Before any test that treats rows as independent (the regression gate, a
# comparison with published seeds) the runs of a side are reduced to ONE row per distinct
# seed: the mean, over the groups (layouts) that ran that seed, of the seed's value. The
# mean of copies is the seed's value itself when the copies are identical, and the
# natural estimate of it when hardware float differences make them differ slightly.

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


# ---------------------------------------------------------------- efficiency curves
# Sample-efficiency curves: aggregate normalised score vs frames (or wall time) with
# pointwise stratified-bootstrap CIs (same resampled runs at every point, as rliable).

CURVE_REPS = 2_000  # rliable's notebook uses 2,000 reps for curves and profiles


@dataclass
class Curve:
    group: str
    axis: str  # "frames" or "wall_time_s"
    grid: np.ndarray  # (points,)
    metrics: dict[str, Interval]  # metric -> (points,) intervals
    seeds: int = 0  # seeds of the group (one seed: no band)
    band_end: float | None = None
    """x (frames or wall time) up to which every run has data and the band is drawn
    (None: the whole grid); past it the line aggregates the runs still going, and no band
    is drawn."""

    def as_dict(self) -> dict:
        return {"group": self.group, "axis": self.axis, "grid": self.grid.tolist(),
                "metrics": {k: v.as_dict() for k, v in self.metrics.items()}}


def efficiency_curve(
    scores: GroupScores,
    *,
    axis: str = "frames",
    metrics: Sequence[str] = ("median", "iqm"),
    reps: int = CURVE_REPS,
    seed: int = 0,
    confidence: float = 0.95,
    method: str = "percentile",
) -> Curve:
    """Aggregate curve of a group over `axis` ("frames" or "wall_time_s")."""
    unknown = [m for m in metrics if m not in AGGREGATES]
    if unknown:
        raise AnalysisError(f"unknown metric(s) {unknown}; valid: {list(AGGREGATES)}")
    if axis == "frames":
        grid, values, ends = scores.reach_grid, scores.reach_curves, scores.frames
    elif axis == "wall_time_s":
        grid, values, ends = scores.time_grid, scores.time_curves, scores.wall_time_s
        if not np.isfinite(values).all():
            raise AnalysisError(f"group {scores.group!r}: some runs have no wall times")
    else:
        raise AnalysisError(f"unknown curve axis {axis!r}; valid: frames, wall_time_s")
    iv = interval_estimates(values, {m: AGGREGATES[m] for m in metrics}, reps=reps, seed=seed,
                            confidence=confidence, method=method)
    grid = np.asarray(grid)
    # The curves cut where the runs end, on either axis (`ends`: each run's wall time or
    # trained frames): a run's binned curve holds its last value past its last record, which
    # would draw a flat line (and a flat band) where it had stopped. The grid runs to the
    # group's longest run. At each grid point the line aggregates the runs still going (NaN
    # once a task has none); the band, a bootstrap over every seed, only where every run
    # still has data, up to band_end (None: it spans the grid). A run has data at grid[k]
    # when it reached that far (tolerance: the grid's last point is the longest run's end,
    # computed in another order).
    alive = grid[None, None, :] <= ends[:, :, None] * (1 + 1e-9)  # (seeds, tasks, points)
    everyone = alive.all(axis=(0, 1))
    band_end = None
    if not everyone.all():
        for name, interval in iv.items():
            point = np.asarray(interval.point, dtype=np.float64).copy()
            for k in np.flatnonzero(~everyone):
                point[k] = _point_of_running(name, values[:, :, k], alive[:, :, k])
            iv[name] = Interval(point, np.where(everyone, interval.low, np.nan),
                                np.where(everyone, interval.high, np.nan))
        band_end = float(grid[everyone][-1]) if everyone.any() else float(grid[0])
    return Curve(scores.group, axis, grid, iv, len(scores.seeds), band_end)


def _point_of_running(metric: str, values: np.ndarray, alive: np.ndarray) -> float:
    """`metric` over the runs (seeds, tasks) that are `alive`: per task for the aggregates
    of per-task means (median, mean), pooled for those of all runs x tasks (IQM,
    optimality gap); NaN when a task has no run left."""
    if not alive.any(axis=0).all():
        return float("nan")
    if metric in ("median", "mean"):
        per_task = np.array([values[alive[:, t], t].mean() for t in range(values.shape[1])])
        return float(AGGREGATES[metric](per_task[None, :]))
    return float(AGGREGATES[metric](values[alive][:, None]))
