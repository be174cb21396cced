"""Sample-efficiency curves: aggregate normalised score vs frames (or wall time) with
pointwise stratified-bootstrap CIs (same resampled runs at every point, as rliable)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from analysis.errors import AnalysisError
from analysis.scoring.scores import GroupScores
from analysis.stats.bootstrap import Interval, interval_estimates
from analysis.stats.metrics import AGGREGATES

CURVE_REPS = 2_000  # rliable's notebook uses 2,000 reps for curves and profiles


@dataclass
class Curve:
    group: str
    axis: str  # "frames" or "wall_time_s"
    grid: np.ndarray  # (points,)
    metrics: dict[str, Interval]  # metric -> (points,) intervals

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
        grid, values = scores.frame_grid, scores.curves
    elif axis == "wall_time_s":
        grid, values = scores.time_grid, scores.time_curves
        if not np.isfinite(values).all():
            raise AnalysisError(f"group {scores.group!r}: some runs have no wall times")
    else:
        raise AnalysisError(f"unknown curve axis {axis!r}; valid: frames, wall_time_s")
    iv = interval_estimates(values, {m: AGGREGATES[m] for m in metrics}, reps=reps, seed=seed,
                            confidence=confidence, method=method)
    return Curve(scores.group, axis, np.asarray(grid), iv)
