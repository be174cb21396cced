"""Everything the report page needs, from run records to files on disk:
`build_report_assets` writes the figures (PNG + PDF), tables (.md, .csv and .tex) and
verdict JSONs and returns their index, which harness/ turns into the HTML page;
`write_curves` writes the `curves` command's figures and CSV.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from analysis.atari5.estimate import report_table as atari5_report_table
from analysis.errors import AnalysisError
from analysis.importers.build import IMPORTED_HEADER, imported_rows
from analysis.inputs.load import DEFAULT_LAST_N, RunSet, check_keys, load_runs
from analysis.json_file import write_json
from analysis.output import figures as figs
from analysis.scales.normalize import get_normaliser
from analysis.scoring.grouping import (
    FAMILY_KEYS,
    Analysis,
    analyse,
    group_keys,
    group_values,
    user_group_keys,
)
from analysis.scoring.scores import CURVE_REPS, Curve, GroupScores, efficiency_curve
from analysis.scoring.tables import (
    AGGREGATE_REPS,
    TableData,
    aggregate_intervals,
    aggregate_table,
    runtime_minutes,
)
from analysis.verdicts.compare import Pairing, SuitePair, by_family, pair_groups, pair_verdicts
from analysis.verdicts.margins import Margin, margin
from analysis.verdicts.staleness import audit
from runrecord import RecordError
from runrecord.words import counted


def per_game_table(suite: Mapping[str, GroupScores], name: str) -> TableData:
    """Paper-style table: raw final score mean ± sd over seeds per game, the sample sd
    (ddof=1): the sd `regression --reference-sd` takes (the paper's own tables print
    the ddof=0 std, sqrt((n - 1) / n) of it)."""
    groups = list(suite)
    tasks = sorted({t for gs in suite.values() for t in gs.tasks})
    rows = []
    for t in tasks:
        row: list[Any] = [t]
        for g in groups:
            gs = suite[g]
            if t in gs.tasks:
                v = gs.final_raw[:, gs.tasks.index(t)]
                # One seed has no spread: say so rather than print "± 0.00".
                row.append(f"{v.mean():.2f} (1 seed)" if len(v) < 2
                           else f"{v.mean():.2f} ± {v.std(ddof=1):.2f}")
            else:
                row.append("-")
        rows.append(row)
    return TableData(name, "Final score per game: mean ± sd (ddof=1) over seeds of the mean "
                     "return of each run's last 100 episodes (raw game score; the gate's "
                     "--reference-unit return)", ["env", *groups], rows)


def build_report_assets(
    inputs: list[Path],
    out_dir: Path,
    *,
    group_by: str = "layout.name",
    delta: float | None = None,
    seed: int = 0,
    reps: int = CURVE_REPS,
    aggregate_reps: int = AGGREGATE_REPS,
    last_n: int = DEFAULT_LAST_N,
    normalisers: Mapping[str, tuple[float, float]] | None = None,
    reference: str | None = None,
    allow_protocol_mismatch: bool = False,
) -> dict:
    """Write the report's figures, tables and verdicts into `out_dir`; return their index:

    {"figures": [{"name", "title", "caption", "png", "pdf"}],
     "tables": [TableData.asset: {"name", "title", "markdown", "header", "cells", "csv",
                "latex"}] (cells: as Markdown shows them; latex: a booktabs tabular, .tex),
     "verdicts": [{"kind", "subject", "verdict", "line", "json"}] (a verdict with an
                  estimate: "cells", the report's verdict table's estimate, ci, margin
                  and seeds, and "detail", its design lines; equivalence: and
                  "one_seed", whether the line shows an interval as n/a (1 seed),
                  "bitwise", whether the records are bitwise identical, "determinism",
                  the bitwise tier line, and "stacks", whether both sides ran the same
                  jax, jaxlib, EnvPool and device kind),
     "runs": {"included": int, "left_out": [{"run_id", "status", "reason"}]},
     "warnings": [str]}

    Runs are split into suites first (all Atari games one suite, every other env its
    own); with several suites each writes into `out_dir/<suite>/` and its names get a
    `_<suite>` suffix, its titles, verdict lines and warnings a `<suite>: ` prefix.
    Groups are (system, architecture, *group_by); equivalence compares, within each
    (system, architecture) of each suite, every group with the reference group at margin
    `delta` (None: each suite's default, analysis.verdicts.margins): the group that `reference` names (group label or layout name, e.g.
    "a0-l0-d1"), by default the one with the smallest hardware (choose_reference). `reps`: bootstrap reps for curves and
    performance profiles; `aggregate_reps`: for aggregate CIs. Never raises for data that
    merely cannot be compared (a single group, unfinished runs, envs without normaliser):
    it says why in warnings. A suite whose runs recorded different env protocols is left
    out with a warning naming the keys, unless `allow_protocol_mismatch` (then a warning
    says the comparison crosses protocols).
    """
    out_dir = Path(out_dir)
    result: dict[str, Any] = {"figures": [], "tables": [], "verdicts": [],
                              "runs": {"included": 0, "left_out": []}, "warnings": []}
    warnings: list[str] = result["warnings"]
    try:
        runset = load_runs(inputs)
    except (AnalysisError, RecordError) as e:
        warnings.append(f"could not load run records: {e}")
        return result
    # A --group-by key no run has is a typo, refused before anything is written (the
    # warnings about runs lacking a key come from analyse below).
    check_keys(runset.included, user_group_keys(group_by), "--group-by")
    out_dir.mkdir(parents=True, exist_ok=True)
    result["runs"]["included"] = len(runset.included)
    result["runs"]["left_out"] = [
        {"run_id": x.run_id, "status": x.status, "reason": x.reason} for x in runset.left_out]
    if runset.left_out:
        t = TableData("left_out_runs", "Runs left out of aggregates",
                      ["run_id", "status", "reason"],
                      [[x.run_id, x.status, x.reason] for x in runset.left_out])
        _add_table(result, t, out_dir)

    if rows := imported_rows(runset.included):  # published runs: say where they came from
        _add_table(result, TableData("imported_runs", "Imported runs (wandb via "
                                     "openrlbenchmark's cache, or `analysis import`): "
                                     "provenance and what was declared on import", IMPORTED_HEADER, rows), out_dir)

    # Staleness needs no normaliser: audit every completed run first.
    if runset.included:
        rep = audit(runset.included, group_keys(group_by))
        path = write_json(out_dir / "staleness.json", rep.as_dict())
        result["verdicts"].append({"kind": "staleness", "subject": "all completed runs",
                                   "verdict": rep.verdict, "line": rep.line(),
                                   "cells": rep.cells(), "json": str(path)})
        if any(r.updates for r in rep.runs):
            result["figures"].append(figs.staleness_figure(rep, out_dir).as_dict())
    else:
        warnings.append("no completed runs: no scores, curves or verdicts")
        return result

    # Runs whose env has no normaliser are reported and left out, not fatal.
    usable = RunSet(warnings=list(runset.warnings))
    for r in runset.included:
        try:
            get_normaliser(str(r.manifest["env_id"]), normalisers)
            usable.included.append(r)
        except AnalysisError as e:
            warnings.append(f"run {r.run_id} left out of scores: {e}")
    analysis = analyse(usable, group_by=group_by, last_n=last_n, normalisers=normalisers,
                       allow_protocol_mismatch=allow_protocol_mismatch,
                       on_protocol_mismatch="skip")
    warnings += analysis.warnings
    if not analysis.suites:
        warnings.append("no group could be scored")
        return result

    multi = len(analysis.suites) > 1
    for suite_name, suite in zip(analysis.suite_names, analysis.suites, strict=True):
        envs = sorted({t for gs in suite.values() for t in gs.tasks})
        label = envs[0] if len(envs) == 1 else f"{len(envs)} envs"
        score = "HNS" if suite_name == "Atari" else "normalised score"
        slug = _slug(suite_name)
        part: dict[str, Any] = (
            {"figures": [], "tables": [], "verdicts": [], "warnings": []} if multi else result)
        _suite_assets(part, suite, out_dir / slug if multi else out_dir,
                      f"_{slug}" if multi else "", label, score, group_by=analysis.group_by,
                      delta=margin(suite_name, delta, normalisers), seed=seed, reps=reps,
                      aggregate_reps=aggregate_reps, reference=reference)
        if not multi:
            continue
        pre = f"{suite_name}: "
        for kind in ("figures", "tables"):
            result[kind] += [{**x, "title": pre + x["title"], "suite": suite_name}
                             for x in part[kind]]
        result["verdicts"] += [{**v, "subject": pre + v["subject"], "line": pre + v["line"],
                                "suite": suite_name,
                                **{k: pre + v[k] for k in ("determinism", "stacks") if k in v}}
                               for v in part["verdicts"]]
        warnings += [pre + w for w in part["warnings"]]
    return result


def _add_table(result: dict, table: TableData, out_dir: Path) -> None:
    result["tables"].append(table.asset(table.write(out_dir)))


def _runtime_references(suite: dict[str, GroupScores], pairing: Pairing
                        ) -> list[int] | None:
    """Per group, the index of the group its runtime ratio is taken against: its
    equivalence reference (the `pairing` the verdicts compare), so the figure and the
    verdicts name the same reference; None (the fastest bar) when the suite has no pair."""
    pairs = pairing.pairs
    if not pairs:
        return None
    index = {g: i for i, g in enumerate(suite)}
    ref_of = {a.group: index[b.group] for a, b in pairs}
    return [ref_of.get(g, i) for i, g in enumerate(suite)]


def _suite_assets(result: dict, suite: dict[str, GroupScores], out_dir: Path, sfx: str,
                  label: str, score: str, *, group_by: list[str], delta: Margin, seed: int,
                  reps: int, aggregate_reps: int, reference: str | None) -> None:
    warnings: list[str] = result["warnings"]
    add_fig = result["figures"].append
    # The pairs `python -m analysis equivalence` compares: verdicts and runtime ratios.
    try:
        pairing = pair_groups(suite, reference=reference)
    except AnalysisError as e:
        pairing = Pairing(warnings=[f"no equivalence verdicts: {e}"])
    # Aggregates
    agg = aggregate_intervals(suite, reps=aggregate_reps, seed=seed)
    seeds = {g: len(gs.seeds) for g, gs in suite.items()}
    t = aggregate_table(agg, {g: (len(gs.seeds), len(gs.tasks)) for g, gs in suite.items()},
                        f"aggregates{sfx}", f"Aggregate final {score} ({label}), "
                        f"95% CIs, {aggregate_reps} bootstrap reps, seed {seed}")
    _add_table(result, t, out_dir)
    add_fig(figs.aggregate_intervals_figure(agg, out_dir, name=f"aggregates{sfx}",
                                            score_label=score, seeds=seeds).as_dict())
    # Curves: one figure per aggregate, or one for aggregates whose curves coincide
    timed = [gs for gs in suite.values() if np.isfinite(gs.time_curves).all()]
    if len(timed) < len(suite):
        warnings.append(f"{label}: {counted(len(suite) - len(timed), 'group')} lack{'s' if len(suite) - len(timed) == 1 else ''} wall times: "
                        "left out of the wall-time curves")
    for axis, sfx_axis, curved in (("frames", "_vs_frames", list(suite.values())),
                                   ("wall_time_s", "_vs_time", timed)):
        curves = [efficiency_curve(gs, axis=axis, reps=reps, seed=seed) for gs in curved]
        if curves:
            result["figures"] += [f.as_dict() for f in curve_figures(
                curves, out_dir, sfx_axis + sfx, score_label=score)]
    add_fig(figs.performance_profile_figure(suite, out_dir, reps=reps, seed=seed,
                                            name=f"performance_profile{sfx}",
                                            score_label=score).as_dict())
    _add_table(result, per_game_table(suite, f"per_game{sfx}"), out_dir)
    # Atari-5 (docs/atari5.md): estimated 57-game median per group, beside the per-game table.
    a5, a5_warnings = atari5_report_table(suite, f"atari5{sfx}", reps=reps, seed=seed)
    warnings += a5_warnings
    if a5 is not None:
        _add_table(result, a5, out_dir)
    times = [runtime_minutes(gs) for gs in suite.values()]
    _add_table(result, TableData(
        f"runtimes{sfx}", "Training wall time per run in minutes, mean and std over runs "
        "(the trainer's own clock, from its first step to its last record: without process "
        "start-up, imports and compilation, which the harness's per-run console time "
        "includes)", ["group", "seeds", "tasks", "minutes (mean)", "minutes (std)"],
        [[g, len(gs.seeds), len(gs.tasks), f"{mean:.2f}",
          f"{std:.2f}" if gs.wall_time_s.size > 1 else "n/a (1 run)"]
         for (g, gs), (mean, std) in zip(suite.items(), times, strict=True)]), out_dir)
    if all(math.isfinite(m) for m, _ in times):
        add_fig(figs.runtime_bars_figure(list(suite), [m for m, _ in times],
                                         [s for _, s in times], out_dir,
                                         name=f"runtimes{sfx}",
                                         what="training wall time per run, mean over runs",
                                         error_what="std over runs",
                                         reference=_runtime_references(suite, pairing))
                .as_dict())
    # Per-game curves of each (system, architecture) with two groups or more.
    for family, fam in by_family(suite).items():
        if len(fam) >= 2 and len({t for gs in fam.values() for t in gs.tasks}) <= 60:
            name = _slug("_".join(str(v) for v in family))
            add_fig(figs.per_game_curves_figure(fam, out_dir,
                                                name=f"per_game_curves_{name}{sfx}").as_dict())
    # Equivalence verdicts of the pairs
    warnings += pairing.warnings
    pairs = [SuitePair(label, "", other, ref) for other, ref in pairing.pairs]
    for v in pair_verdicts(pairs, lambda _suite: delta):
        subject, res = v.subject, v.result
        if res is None:
            warnings.append(f"no equivalence verdict for {subject}: {v.error}")
            continue
        path = write_json(out_dir / f"equivalence_{_slug(subject)}.json", res.as_dict())
        result["verdicts"].append({"kind": "equivalence", "subject": subject,
                                   "verdict": res.label, "line": res.line(),
                                   "one_seed": res.one_seed_interval(),
                                   "bitwise": res.bitwise.identical,
                                   "determinism": res.determinism_line(),
                                   "stacks": res.stack_line(),
                                   "cells": res.cells(), "detail": [res.design_line()],
                                   "json": str(path)})
    if len(suite) < 2:
        warnings.append(
            f"{label}: a single group under --group-by "
            f"{','.join(group_by[len(FAMILY_KEYS):]) or 'system'}: no equivalence verdict "
            "(needs two groups, e.g. two layouts)")
    # Sync vs cleanba: same system and same other keys, architectures sync and cleanba.
    rest = group_by[len(FAMILY_KEYS):]
    by_arch: dict[tuple, dict[str, GroupScores]] = {}
    for gs in suite.values():
        system, arch = group_values(gs, FAMILY_KEYS)
        by_arch.setdefault((system, *group_values(gs, rest)), {})[str(arch)] = gs
    for key, archs in by_arch.items():
        if "sync" in archs and "cleanba" in archs:
            name = _slug("_".join(str(v) for v in key))
            add_fig(figs.paired_final_scores_figure(
                archs["sync"], archs["cleanba"], out_dir, name=f"sync_vs_cleanba_{name}{sfx}",
                title=f"{' / '.join(map(str, key))}: sync vs cleanba").as_dict())


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text).strip("_")


def curve_figures(curves: Sequence[Curve], out_dir: Path, suffix: str, *,
                  metrics: Sequence[str] = ("median", "iqm"),
                  score_label: str = "normalised score") -> list[figs.FigureInfo]:
    """One efficiency-curve figure per metric, `<metric><suffix>`, or one for metrics whose
    curves coincide."""
    return [figs.efficiency_curves_figure(curves, out_dir, metric=first, name=first + suffix,
                                          score_label=score_label, same_as=same)
            for first, *same in figs.coinciding({m: [c.metrics[m] for c in curves]
                                                 for m in metrics})]


def write_curves(a: Analysis, out: Path, *, axis: str = "frames",
                 metrics: Sequence[str] = ("median", "iqm"), reps: int, seed: int = 0
                 ) -> tuple[list[figs.FigureInfo], Path]:
    """The `curves` command's files in `out`: the figures (curve_figures) and every curve
    point with its CI in curves_<axis>.csv; returns (the figures, the CSV's path). With
    several suites, figure names get a `_<suite>` suffix and CSV groups a `<suite>: `
    prefix."""
    out.mkdir(parents=True, exist_ok=True)
    written: list[figs.FigureInfo] = []
    rows = []
    multi = len(a.suites) > 1
    for name, suite in zip(a.suite_names, a.suites, strict=True):
        sfx = f"_{_slug(name)}" if multi else ""  # as the report names its files
        pre = f"{name}: " if multi else ""
        curves = [efficiency_curve(gs, axis=axis, metrics=tuple(metrics), reps=reps,
                                   seed=seed) for gs in suite.values()]
        written += curve_figures(curves, out, f"_vs_{axis}{sfx}", metrics=metrics)
        rows += [[pre + c.group, axis, float(x), m, float(p), float(lo), float(hi)]
                 for c in curves for m, iv in c.metrics.items()
                 for x, p, lo, hi in zip(c.grid, iv.point, iv.low, iv.high, strict=True)]
    path = out / f"curves_{axis}.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["group", "axis", "x", "metric", "point", "low", "high"])
        w.writerows(rows)
    return written, path
