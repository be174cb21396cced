"""Did it reproduce, against published per-seed runs (openrlbenchmark's cache):
equivalence at matching frames; and the report section "Did it reproduce?" (harness
report with [report] published) for both comparisons.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from analysis.errors import AnalysisError
from analysis.importers.build import is_orb_import
from analysis.importers.declare import Declared
from analysis.importers.orb import UNDECLARED, ColumnMap, load_openrlbenchmark_dir
from analysis.inputs.cache import last_frame
from analysis.inputs.facts import truncated
from analysis.inputs.load import DEFAULT_LAST_N, IMPORTED_PROTOCOL, RunSet, load_runs
from analysis.inputs.protocol import (
    TRAINING_ONLY_KEYS,
    ProtocolMismatch,
    check_frame_budget,
    check_same_protocol,
    run_frame_budget,
)
from analysis.json_file import write_json
from analysis.output import figures as figs
from analysis.output.tables import equivalence_rows
from analysis.reproduce.published import (
    ReproduceResult,
    match_game,
    published_column,
    reproduce,
)
from analysis.scales.normalize import atari_env_id, get_normaliser
from analysis.scoring.scores import efficiency_curve, scores_by_group, suite_name
from analysis.scoring.tables import Column, Estimate, TableData, TableFiles
from analysis.verdicts.equivalence import equivalence
from analysis.verdicts.margins import margin
from analysis.verdicts.seed_pairing import iqm_over_tasks
from analysis.verdicts.seedplan import equivalence_power, given_spread
from runrecord import RecordError, Run
from runrecord.exits import EXIT_FAILED, worst_exit
from runrecord.words import counted

# ---------------------------------------------------------------- against published runs

@dataclass
class RunsComparison:
    """A user's groups against one group of imported (published) runs, at matching frames."""

    imported_group: str
    results: list[Any]  # EquivalenceResult per user group
    groups: dict[str, Any]  # label -> GroupScores (the compared groups, one frame grid)
    frames_note: str
    imported: list[Run]
    warnings: list[str] = field(default_factory=list)
    powers: list[str] = field(default_factory=list)  # one per result (analysis.verdicts.seedplan)

    @property
    def exit_code(self) -> int:
        """0 every group PASS, 1 a DIFFERENT, 4 an INCONCLUSIVE (1 when there is none)."""
        return worst_exit(*(r.exit_code for r in self.results)) if self.results else EXIT_FAILED

    def lines(self, verbose: bool = False) -> list[str]:
        """Per pair: its verdict line (`verbose`: and its design line), notes, power."""
        out = []
        for r, power in zip(self.results, self.powers, strict=True):
            out.append(r.line() + (f"; {self.frames_note}" if self.frames_note else ""))
            out += [r.design_line()] if verbose else []
            out += [f"note: {n}" for n in r.notes]
            out.append(f"note: {power}")
        return out


def reproduce_runs(
    mine: Sequence[Run], imported: Sequence[Run], *, delta: float | None = None,
    allow_protocol_mismatch: bool = False, allow_budget_mismatch: bool = False,
    last_n: int = DEFAULT_LAST_N, points: int = 50,
) -> RunsComparison:
    """Equivalence (analysis.verdicts) of each of the user's groups (system /
    architecture / layout) against the imported group, on the games both ran, at
    matching frames (match_frames). Guards: same env protocol (training-only keys aside)
    and frame budget; an import whose protocol or budget was not declared is unknown and
    refused unless allowed. `delta`: the margin (default: the suite's, analysis.verdicts.margins).
    Each verdict is followed by its power (analysis.verdicts.seedplan) at the imported group's
    per-seed spread."""
    mine = [r for r in mine if not is_orb_import(r)]
    if not mine:
        raise AnalysisError("no runs of yours to compare (give --runs DIR)")
    if not imported:
        raise AnalysisError("no imported runs to compare with (give --orb CACHE_DIR)")
    exps = sorted({str(r.manifest.get("system")) for r in imported})
    if len(exps) > 1:
        raise AnalysisError(f"the imported runs hold {len(exps)} experiments {exps}: pick one "
                            "with --orb-exp-name")
    warnings: list[str] = []
    envs_mine = {str(r.manifest["env_id"]) for r in mine}
    envs_imp = {str(r.manifest["env_id"]) for r in imported}
    common = envs_mine & envs_imp
    if not common:
        raise AnalysisError(f"no game in common: yours {sorted(envs_mine)}, imported "
                            f"{sorted(envs_imp)}")
    if envs_mine - common:
        warnings.append(f"your runs on {sorted(envs_mine - common)} have no imported "
                        "counterpart: left out")
    if envs_imp - common:
        warnings.append(f"{counted(len(envs_imp - common), 'imported game')} you did not run are left "
                        "out")
    mine = [r for r in mine if r.manifest["env_id"] in common]
    imported = [r for r in imported if r.manifest["env_id"] in common]
    try:
        warnings += check_same_protocol({"imported": imported, "yours": mine},
                                        allow_mismatch=allow_protocol_mismatch,
                                        ignore=TRAINING_ONLY_KEYS)
    except ProtocolMismatch as e:
        if any(r.manifest.get("env_protocol") == IMPORTED_PROTOCOL for r in imported):
            raise ProtocolMismatch(
                f"{e} The imported runs' env protocol is unknown (not declared on import): "
                "if they ran the paper's, declare it with --orb-protocol paper",
                e.differing_keys) from None
        raise
    declared = {run_frame_budget(r) for r in imported}
    expected = declared.pop() if len(declared) == 1 else None
    _, budget_warnings = check_frame_budget(
        [*imported, *mine], expected, allow_mismatch=allow_budget_mismatch,
        expected_label="the imported runs, as declared on import")
    warnings += budget_warnings
    mine_m, imported_m, note = match_frames(mine, imported)
    groups = scores_by_group([*mine_m, *imported_m], ["system", "architecture", "layout.name"],
                             last_n=last_n, points=points)
    imp_ids = {id(r) for r in imported_m}
    imp_groups = [g for g, gs in groups.items() if any(id(r) in imp_ids
                                                       for r in gs.runs.values())]
    ref = groups[imp_groups[0]]
    m = margin(suite_name(sorted(common)[0]), delta)
    results, powers = [], []
    for g, gs in groups.items():
        if g == ref.group:
            continue
        try:
            results.append(equivalence(gs, ref, m.value, margin=m.describe()))
            powers.append(equivalence_power_note(gs, ref, m.value))
        except AnalysisError as e:
            warnings.append(f"no verdict for {g}: {e}")
        warnings += gs.warnings
    if not results:
        raise AnalysisError("no group of yours could be compared: " + "; ".join(warnings))
    return RunsComparison(ref.group, results, groups, note, list(imported), warnings, powers)


def equivalence_power_note(mine: Any, ref: Any, delta: float) -> str:
    """'power: ...' from the seed planner, at the imported group's per-seed spread."""
    final, auc = iqm_over_tasks(ref.final), iqm_over_tasks(ref.auc)
    n = min(len(mine.seeds), len(ref.seeds))
    if len(final) < 2 or n < 2 or not (final.std(ddof=1) > 0 and auc.std(ddof=1) > 0):
        return ("power: not estimable (fewer than 2 seeds, or no spread, in the imported "
                "group)")
    rho = float(np.corrcoef(final, auc)[0, 1]) if len(final) > 2 else 0.0
    spread = given_spread(float(final.std(ddof=1)), float(auc.std(ddof=1)),
                          float(np.clip(np.nan_to_num(rho), -1, 1)))
    p = equivalence_power(spread, delta, n)
    return (f"power: if yours truly equals the published runs, PASS has probability "
            f"{p:.0%} with {n} vs {n} seeds at delta {delta:g} (analysis.verdicts.seedplan, at the "
            f"imported runs' per-seed sd {spread.sd_group:.3f} from {len(final)} seeds: a "
            f"rough estimate); `python -m analysis plan-seeds --sd {spread.sd_group:.3f}` "
            "gives the seeds needed")


def match_frames(mine: Sequence[Run], imported: Sequence[Run], tolerance: float = 0.02
                 ) -> tuple[list[Run], list[Run], str]:
    """Cut both sides to the frames both reached: the smaller of the two sides' shortest
    runs. Returns (mine, imported, a note saying what was cut, '' when nothing was)."""
    end_mine = min(last_frame(r) for r in mine)
    end_imp = min(last_frame(r) for r in imported)
    end = min(end_mine, end_imp)
    if max(end_mine, end_imp) <= end * (1 + tolerance):
        return list(mine), list(imported), ""
    if end_mine < end_imp:
        note = (f"your runs end at {end_mine:,.0f} frames, the imported ones at "
                f"{end_imp:,.0f}: compared on your frame range 0..{end:,.0f} (the imported "
                "runs' scores are taken at that frame, not at their end)")
    else:
        note = (f"the imported runs end at {end_imp:,.0f} frames, yours at {end_mine:,.0f}: "
                f"compared on 0..{end:,.0f}")
    return ([truncated(r, end) for r in mine], [truncated(r, end) for r in imported],
            note)


def imported_runs(orb: Sequence[Path | str], *, columns: ColumnMap = ColumnMap(),
                  declared: Declared = UNDECLARED, exp_names: Sequence[str] = ()
                  ) -> RunSet:
    """The published runs of openrlbenchmark caches `orb`, only those of `exp_names`
    (their manifest's system) when given."""
    imported = RunSet()
    for d in orb:
        imported.extend(load_openrlbenchmark_dir(d, columns=columns, declared=declared))
    imported.included = [r for r in imported.included
                         if not exp_names or r.manifest.get("system") in exp_names]
    return imported


def only_games(runs: Sequence[Run], games: Sequence[str], known: Sequence[Run]) -> list[Run]:
    """The runs of `games` (names matched as match_game does, among the games of `known`)."""
    have = sorted({atari_env_id(str(r.manifest["env_id"])) for r in known})
    names = {match_game(g, have) for g in games}
    return [r for r in runs if atari_env_id(str(r.manifest["env_id"])) in names]


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
    # the scatter: per game published and user HNS with sds
    norms = [get_normaliser(g.game) for g in res.games]
    points = {"games": [g.game for g in res.games],
              "published": np.array([g.published_hns for g in res.games]),
              "published_sd": np.array([g.published_sd / abs(n.high - n.low)
                                        for g, n in zip(res.games, norms, strict=True)]),
              "user": np.array([g.user_hns for g in res.games]),
              "user_sd": np.array([float(np.std(n(np.array(g.finals)), ddof=1))
                                   if len(g.finals) > 1 else 0.0
                                   for g, n in zip(res.games, norms, strict=True)]),
              "verdicts": [g.verdict for g in res.games]}
    return files, figs.reproduce_scatter_figure(points, out, column=res.published.column,
                                                budget=res.budget_text)


def write_runs_comparison(comp: RunsComparison, out: Path, seed: int = 0) -> figs.FigureInfo:
    """reproduce_runs.json and the IQM-vs-frames curves of both sides into `out`."""
    write_json(out / "reproduce_runs.json",
               {"imported_group": comp.imported_group, "frames_note": comp.frames_note,
                "comparisons": [r.as_dict() for r in comp.results], "warnings": comp.warnings})
    curves = [efficiency_curve(gs, metrics=("iqm",), seed=seed) for gs in comp.groups.values()]
    return figs.efficiency_curves_figure(curves, out, metric="iqm",
                                         name="reproduce_iqm_vs_frames")


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
