"""Sample-efficiency curves of an analysis as files: one figure per aggregate (PNG + PDF)
per suite, and every curve point with its CI in curves_<axis>.csv."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from analysis.output import figures as figs
from analysis.scoring.curves import efficiency_curve
from analysis.scoring.grouping import Analysis

CURVES_HEADER = ["group", "axis", "x", "metric", "point", "low", "high"]


def write_curves(a: Analysis, out: Path, *, axis: str = "frames",
                 metrics: Sequence[str] = ("median", "iqm"), reps: int, seed: int = 0
                 ) -> tuple[list[figs.FigureInfo], Path]:
    """Write the figures and the CSV into `out`; return (the figures, the CSV's path).
    With several suites, figure names get a `_<suite>` suffix and CSV groups a
    `<suite>: ` prefix."""
    out.mkdir(parents=True, exist_ok=True)
    written: list[figs.FigureInfo] = []
    rows = []
    multi = len(a.suites) > 1
    for name, suite in zip(a.suite_names, a.suites, strict=True):
        sfx = "_" + name.replace("/", "_") if multi else ""
        pre = f"{name}: " if multi else ""
        curves = [efficiency_curve(gs, axis=axis, metrics=tuple(metrics), reps=reps,
                                   seed=seed) for gs in suite.values()]
        for first, *same in figs.coinciding({m: [c.metrics[m] for c in curves]
                                             for m in metrics}):
            written.append(figs.efficiency_curves_figure(curves, out, metric=first,
                                                         name=f"{first}_vs_{axis}{sfx}",
                                                         same_as=same))
        rows += [[pre + c.group, axis, float(x), m, float(p), float(lo), float(hi)]
                 for c in curves for m, iv in c.metrics.items()
                 for x, p, lo, hi in zip(c.grid, iv.point, iv.low, iv.high, strict=True)]
    path = out / f"curves_{axis}.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CURVES_HEADER)
        w.writerows(rows)
    return written, path
