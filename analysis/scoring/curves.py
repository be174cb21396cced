"""Sample-efficiency curves: aggregate normalised score vs frames (or wall time) with
pointwise stratified-bootstrap CIs (same resampled runs at every point, as rliable)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from analysis.errors import AnalysisError
from analysis.scoring.scores import GroupScores
from analysis.stats.metrics import AGGREGATES, Interval, interval_estimates

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
    iv, band_end = _until_runs_end(values, grid, ends, iv)
    return Curve(scores.group, axis, grid, iv, len(scores.seeds), band_end)


def _until_runs_end(values: np.ndarray, grid: np.ndarray, ends: np.ndarray,
                    iv: dict[str, Interval]) -> tuple[dict[str, Interval], float | None]:
    """The curves cut where the runs end, on either axis (`ends`: each run's wall time or
    trained frames): a run's binned curve holds its last value past its last record, which
    would draw a flat line (and a flat band) where it had stopped. The grid runs to the
    group's longest run. At each grid point the line aggregates the runs still going (NaN
    once a task has none); the band, a bootstrap over every seed, only where every run
    still has data. Returns the intervals and the x the band ends (None: it spans the
    grid)."""
    # A run has data at grid[k] when it reached that far (tolerance: the grid's last point
    # is the longest run's end, computed in another order).
    alive = grid[None, None, :] <= ends[:, :, None] * (1 + 1e-9)  # (seeds, tasks, points)
    everyone = alive.all(axis=(0, 1))
    if everyone.all():
        return iv, None
    out = {}
    for name, interval in iv.items():
        point = np.asarray(interval.point, dtype=np.float64).copy()
        for k in np.flatnonzero(~everyone):
            point[k] = _point_of_running(name, values[:, :, k], alive[:, :, k])
        low = np.where(everyone, interval.low, np.nan)
        high = np.where(everyone, interval.high, np.nan)
        out[name] = Interval(point, low, high)
    band_end = float(grid[everyone][-1]) if everyone.any() else float(grid[0])
    return out, band_end


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
