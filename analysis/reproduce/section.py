"""The report section "Did it reproduce?" (harness report with [report] published).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from analysis.errors import AnalysisError
from analysis.inputs.load import load_runs
from analysis.json_file import write_json
from analysis.output import figures as figs
from analysis.output.tables import equivalence_rows
from analysis.reproduce.published import (
    ReproduceResult,
    published_column,
    reproduce,
)
from analysis.reproduce.runs import RunsComparison
from analysis.scales.normalize import get_normaliser
from analysis.scoring.scores import efficiency_curve
from analysis.scoring.tables import Column, Estimate, TableData, TableFiles
from runrecord import RecordError

# ---------------------------------------------------------------- the HTML report

def report_assets(inputs: Sequence[Path], out_dir: Path, *, table: Path | str, column: str,
                  reps: int = 50_000, seed: int = 0, **options: Any) -> dict[str, Any]:
    """The report's 'Did it reproduce?' entries, in build_report_assets' shapes:
    {"figures": [...], "tables": [...], "verdicts": [...], "warnings": [...]}. Never
    raises for data that cannot be compared: it says why in warnings. `options`:
    relative_margin, absolute_margin, allow_budget_mismatch, allow_protocol_mismatch."""
    out: dict[str, Any] = {"figures": [], "tables": [], "verdicts": [], "warnings": []}
    try:
        col = published_column(table, column)
        res = reproduce(load_runs(inputs), col, reps=reps, seed=seed, **options)
    except (AnalysisError, RecordError) as e:
        out["warnings"].append(f"no 'Did it reproduce?' section: {e}")
        return out
    files, figure = write_published_comparison(res, Path(out_dir))
    out["tables"].append(res.table().asset(files))
    info = figure.as_dict()
    info["caption"] += " " + " ".join(res.limits())
    out["figures"].append(info)
    path = Path(out_dir) / "reproduce.json"
    verdict = res.headline  # the CI's words: REPRODUCED, NOT REPRODUCED, NOT SHOWN
    out["verdicts"].append({"kind": "reproduce", "subject": f"vs '{col.column}'",
                            "verdict": verdict, "line": res.summary_line(),
                            "cells": res.cells(), "detail": res.detail_lines(),
                            "json": str(path)})
    for line in res.aggregate_lines():  # descriptive: no cells of their own
        out["verdicts"].append({"kind": "reproduce", "subject": f"vs '{col.column}'",
                                "verdict": verdict, "line": line, "json": str(path)})
    out["warnings"] += res.warnings
    return out


def write_published_comparison(res: ReproduceResult, out: Path
                               ) -> tuple[TableFiles, figs.FigureInfo]:
    """The table (.md/.csv/.tex), reproduce.json and the scatter figure into `out`."""
    files = res.table().write(out)
    write_json(out / "reproduce.json", res.as_dict())
    return files, figs.reproduce_scatter_figure(figure_points(res), out,
                                                column=res.published.column,
                                                budget=res.budget_text)


def write_runs_comparison(comp: RunsComparison, out: Path, seed: int = 0) -> figs.FigureInfo:
    """reproduce_runs.json and the IQM-vs-frames curves of both sides into `out`."""
    write_json(out / "reproduce_runs.json",
               {"imported_group": comp.imported_group, "frames_note": comp.frames_note,
                "comparisons": [r.as_dict() for r in comp.results], "warnings": comp.warnings})
    curves = [efficiency_curve(gs, metrics=("iqm",), seed=seed) for gs in comp.groups.values()]
    return figs.efficiency_curves_figure(curves, out, metric="iqm",
                                         name="reproduce_iqm_vs_frames")


def figure_points(res: ReproduceResult) -> Mapping[str, Any]:
    """What the scatter figure plots: per game published and user HNS with sds."""
    games = [g.game for g in res.games]
    pub = np.array([g.published_hns for g in res.games])
    pub_sd = np.array([g.published_sd / abs(get_normaliser(g.game).high
                                            - get_normaliser(g.game).low) for g in res.games])
    user = np.array([g.user_hns for g in res.games])
    user_sd = np.array([float(np.std(get_normaliser(g.game)(np.array(g.finals)), ddof=1))
                        if len(g.finals) > 1 else 0.0 for g in res.games])
    return {"games": games, "published": pub, "published_sd": pub_sd, "user": user,
            "user_sd": user_sd, "verdicts": [g.verdict for g in res.games]}


GAME_COLUMNS = (
    Column("game", "game"), Column("published_hns", "published HNS", "number"),
    Column("user_hns", "your HNS", "number"),
    Column("diff", "difference [90% CI]", "estimate", signed=True),
    Column("margin", "margin", "number"), Column("seeds", "your seeds", "count"),
    Column("published_seeds", "published seeds", "count"), Column("verdict", "verdict"))


def published_rows(res: ReproduceResult) -> TableData:
    """One row per game: both HNS, your - published with its 90% CI (what CONSISTENT
    reads), the game's margin, the seeds and the verdict."""
    return TableData.keyed(GAME_COLUMNS, [
        {"game": g.game, "published_hns": g.published_hns, "user_hns": g.user_hns,
         "diff": Estimate(g.welch.diff, g.welch.ci90[0], g.welch.ci90[1]),
         "margin": g.margin, "seeds": len(g.seeds), "published_seeds": g.published_n,
         "verdict": g.verdict} for g in res.games])


def runs_rows(comp: RunsComparison) -> TableData:
    """Two rows per group of yours (final score and AUC), as `equivalence` has them."""
    return equivalence_rows([r.as_dict() for r in comp.results])
