"""Everything the report page needs, from run records to files on disk.

`build_report_assets(inputs, out_dir)` loads every run record under `inputs`, groups
completed runs into suites (all Atari games one suite, every other env its own), groups
each suite's runs by system and `group_by` (dotted manifest keys, e.g. `layout.name`),
and writes into `out_dir` figures (PNG + PDF), tables (.md + .csv) and verdict JSONs
(one subfolder per suite when there are several). It returns their index
(see the function's docstring), which harness/ turns into the HTML page.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from analysis import figures as figs
from analysis.atari5 import report_table as atari5_report_table
from analysis.bootstrap import Interval, interval_estimates
from analysis.curves import CURVE_REPS, efficiency_curve
from analysis.errors import AnalysisError
from analysis.load import DEFAULT_LAST_N, RunSet, load_runs, manifest_get
from analysis.margins import Margin, margin
from analysis.metrics import AGGREGATES
from analysis.protocol import ProtocolMismatch, check_same_protocol
from analysis.scores import DEFAULT_POINTS, GroupScores, group_runs, runs_by_suite, scores_by_group
from analysis.staleness import audit
from analysis.tables import TableData, aggregate_table
from analysis.verdicts import equivalence, write_json
from runrecord import RecordError
from runrecord.layout import LayoutError, parse_layout

AGGREGATE_REPS = 50_000


FAMILY_KEYS = ("system", "architecture")


def group_keys(group_by: str) -> list[str]:
    """Report groups always separate systems and architectures:
    ["system", "architecture", *group_by keys]."""
    keys = [k.strip() for k in group_by.split(",") if k.strip()]
    return [*FAMILY_KEYS, *[k for k in keys if k not in FAMILY_KEYS]]


def _values(gs: GroupScores, keys: Sequence[str]) -> tuple:
    run = next(iter(gs.runs.values()))
    return tuple(manifest_get(run.manifest, k) for k in keys)


def manifest_family(gs: GroupScores) -> tuple:
    """(system, architecture) of a group: equivalence compares groups of one family."""
    return _values(gs, FAMILY_KEYS)


@dataclass
class Analysis:
    """Completed runs scored per group, one dict per suite (Atari, or one other env);
    suite_names[k] names suites[k]."""

    runset: RunSet
    suites: list[dict[str, GroupScores]]
    group_by: list[str]
    warnings: list[str] = field(default_factory=list)
    suite_names: list[str] = field(default_factory=list)


def analyse(
    inputs: Sequence[Path | str] | RunSet,
    *,
    group_by: str | Sequence[str] = "layout.name",
    last_n: int = DEFAULT_LAST_N,
    points: int = DEFAULT_POINTS,
    normalisers: Mapping[str, tuple[float, float]] | None = None,
    separate_systems: bool = True,
    allow_protocol_mismatch: bool = False,
    on_protocol_mismatch: Literal["raise", "skip"] = "raise",
) -> Analysis:
    """Load runs, split them into suites (runs_by_suite), then group and score each
    suite's runs on the suite's own frame grid. Groups that cannot be scored (e.g. no seed
    covers every env) are reported in warnings and skipped.

    Protocol guard: the runs of a suite are pooled and compared only when they recorded
    the same env protocol (analysis.protocol). A mismatch raises ProtocolMismatch (exit 2
    in the CLI) naming the differing keys, or with on_protocol_mismatch="skip" leaves the
    suite out with a warning; allow_protocol_mismatch keeps it, with a warning."""
    runset = inputs if isinstance(inputs, RunSet) else load_runs(inputs)
    if isinstance(group_by, str):
        keys = group_keys(group_by) if separate_systems else [
            k.strip() for k in group_by.split(",") if k.strip()]
    else:
        keys = list(group_by)
    warnings = list(runset.warnings)
    out: list[dict[str, GroupScores]] = []
    names: list[str] = []
    by_suite = runs_by_suite(runset.included)
    for suite_name, runs in by_suite.items():
        pre = f"{suite_name}: " if len(by_suite) > 1 else ""
        try:
            warnings += [pre + w for w in check_same_protocol(
                group_runs(runs, keys), allow_mismatch=allow_protocol_mismatch)]
        except ProtocolMismatch as e:
            if on_protocol_mismatch == "raise":
                raise
            warnings.append(f"{pre}suite left out: {e}")
            continue
        scored: dict[str, GroupScores] = {}
        for g, rs in group_runs(runs, keys).items():
            try:
                scored.update(scores_by_group(rs, keys, last_n=last_n, points=points,
                                              normalisers=normalisers))
            except AnalysisError as e:
                warnings.append(f"{pre}group {g!r} left out of the analysis: {e}")
        if scored:
            # Regrid on the suite's common grid so AUCs and curves compare across groups.
            kept_ids = {id(r) for gs in scored.values() for r in gs.runs.values()}
            kept = [r for r in runs if id(r) in kept_ids]
            scored = scores_by_group(kept, keys, last_n=last_n, points=points,
                                     normalisers=normalisers)
            for gs in scored.values():
                warnings += [pre + w for w in gs.warnings]
            out.append(scored)
            names.append(suite_name)
    return Analysis(runset, out, keys, warnings, names)


# ---------------------------------------------------------------- reference group

def _natural(text: str) -> tuple:
    """Natural sort key: digit runs compare as numbers (a0-l2-d1 before a0-l10-d1)."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p)
                 for p in re.split(r"(\d+)", text) if p)


def layout_names(gs: GroupScores) -> list[str]:
    """Sorted layout names of a group's runs (empty when the records have none)."""
    names = set()
    for r in gs.runs.values():
        lay = r.manifest.get("layout")
        name = lay.get("name") if isinstance(lay, dict) else lay
        if name:
            names.add(str(name))
    return sorted(names, key=_natural)


def hardware_key(gs: GroupScores) -> tuple:
    """Order of groups by hardware: fewest processes, then fewest devices (distinct
    actor/learner device ids x processes), then layout name in natural order, then label.
    A group without a parseable layout sorts last."""
    keys = []
    for name in layout_names(gs):
        try:
            lay = parse_layout(name)
        except LayoutError:
            continue
        devices = len(set(lay.actor_device_ids) | set(lay.learner_device_ids))
        keys.append((lay.num_processes, lay.num_processes * devices, _natural(name)))
    best = min(keys) if keys else (math.inf, math.inf, ())
    return (*best, _natural(gs.group))


def match_groups(groups: Mapping[str, GroupScores], name: str) -> list[str]:
    """Labels of the groups that `name` names: the whole label, its last part(s) after
    ' / ' (e.g. a0-l0-d1), or the layout name of every run of the group."""
    name = name.strip()
    return [g for g, gs in groups.items()
            if g == name or g.endswith(f" / {name}") or layout_names(gs) == [name]]


def choose_reference(groups: Mapping[str, GroupScores], reference: str | None = None) -> str:
    """Label of the reference group: the one `reference` names (label or layout name), or
    by default the smallest hardware (hardware_key), e.g. a0-l0-d1 when present."""
    if not groups:
        raise AnalysisError("no groups to choose a reference from")
    if reference is None:
        return min(groups, key=lambda g: hardware_key(groups[g]))
    found = match_groups(groups, reference)
    if len(found) != 1:
        raise AnalysisError(
            f"reference group {reference!r} {'is ambiguous' if found else 'not found'}"
            f"{': ' + str(found) if found else ''}; groups: {list(groups)} (name a group "
            "label or a layout name, e.g. a0-l0-d1)")
    return found[0]


def aggregate_intervals(
    suite: Mapping[str, GroupScores], *, reps: int = AGGREGATE_REPS, seed: int = 0,
    confidence: float = 0.95, method: str = "percentile",
) -> dict[str, dict[str, Interval]]:
    """group -> metric -> CI of the final normalised scores."""
    return {g: interval_estimates(gs.final, AGGREGATES, reps=reps, seed=seed,
                                  confidence=confidence, method=method)
            for g, gs in suite.items()}


def per_game_table(suite: Mapping[str, GroupScores], name: str) -> TableData:
    """Paper-style table: raw final score mean ± std (ddof=0) over seeds per game."""
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
                           else f"{v.mean():.2f} ± {v.std():.2f}")
            else:
                row.append("-")
        rows.append(row)
    return TableData(name, "Final score per game: mean ± std over seeds of the mean return of "
                     "each run's last 100 episodes (raw game score)", ["env", *groups], rows)


def runtime_minutes(gs: GroupScores) -> tuple[float, float]:
    """(mean, std) over a group's runs of the training wall time in minutes."""
    minutes = gs.wall_time_s.ravel() / 60
    return float(np.nanmean(minutes)), float(np.nanstd(minutes))


def runtime_table(suite: Mapping[str, GroupScores], name: str) -> TableData:
    rows: list[list[Any]] = []
    for g, gs in suite.items():
        mean, std = runtime_minutes(gs)
        runs = gs.wall_time_s.size
        rows.append([g, len(gs.seeds), len(gs.tasks), f"{mean:.2f}",
                     f"{std:.2f}" if runs > 1 else "n/a (1 run)"])
    return TableData(name, "Training wall time per run in minutes, mean and std over runs "
                     "(the trainer's own clock, from its first step to its last record: "
                     "without process start-up, imports and compilation, which the "
                     "harness's per-run console time includes)",
                     ["group", "seeds", "tasks", "minutes (mean)", "minutes (std)"], rows)


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
     "tables": [{"name", "title", "markdown", "csv"}],
     "verdicts": [{"kind", "subject", "verdict", "line", "json"}],
     "runs": {"included": int, "left_out": [{"run_id", "status", "reason"}]},
     "warnings": [str]}

    Runs are split into suites first (all Atari games one suite, every other env its
    own); with several suites each writes into `out_dir/<suite>/` and its names get a
    `_<suite>` suffix, its titles, verdict lines and warnings a `<suite>: ` prefix.
    Groups are (system, architecture, *group_by); equivalence compares, within each
    (system, architecture) of each suite, every group with the reference group at margin
    `delta` (None: each suite's default, analysis.margins): the group that `reference` names (group label or layout name, e.g.
    "a0-l0-d1"), by default the one with the smallest hardware (choose_reference). `reps`: bootstrap reps for curves and
    performance profiles; `aggregate_reps`: for aggregate CIs. Never raises for data that
    merely cannot be compared (a single group, unfinished runs, envs without normaliser):
    it says why in warnings. A suite whose runs recorded different env protocols is left
    out with a warning naming the keys, unless `allow_protocol_mismatch` (then a warning
    says the comparison crosses protocols).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"figures": [], "tables": [], "verdicts": [],
                              "runs": {"included": 0, "left_out": []}, "warnings": []}
    warnings: list[str] = result["warnings"]
    try:
        runset = load_runs(inputs)
    except (AnalysisError, RecordError) as e:
        warnings.append(f"could not load run records: {e}")
        return result
    result["runs"]["included"] = len(runset.included)
    result["runs"]["left_out"] = [
        {"run_id": x.run_id, "status": x.status, "reason": x.reason} for x in runset.left_out]
    if runset.left_out:
        t = TableData("left_out_runs", "Runs left out of aggregates",
                      ["run_id", "status", "reason"],
                      [[x.run_id, x.status, x.reason] for x in runset.left_out])
        _add_table(result, t, out_dir)
    from analysis.orb import IMPORTED_HEADER, imported_rows

    if rows := imported_rows(runset.included):  # published runs: say where they came from
        _add_table(result, TableData("imported_runs", "Imported runs (wandb, via "
                                     "openrlbenchmark's cache): provenance and what was "
                                     "declared on import", IMPORTED_HEADER, rows), out_dir)

    # Staleness needs no normaliser: audit every completed run first.
    if runset.included:
        rep = audit(runset.included, group_keys(group_by))
        path = write_json(out_dir / "staleness.json", rep.as_dict())
        result["verdicts"].append({"kind": "staleness", "subject": "all completed runs",
                                   "verdict": rep.verdict, "line": rep.line(),
                                   "json": str(path)})
        if any(r.updates for r in rep.runs):
            result["figures"].append(figs.staleness_figure(rep, out_dir).as_dict())
    else:
        warnings.append("no completed runs: no scores, curves or verdicts")
        return result

    # Runs whose env has no normaliser are reported and left out, not fatal.
    usable = RunSet(warnings=list(runset.warnings))
    from analysis.normalize import get_normaliser
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
        if not multi:
            _suite_assets(result, suite, out_dir, "", label, score,
                          group_by=analysis.group_by,
                          delta=margin(suite_name, delta, normalisers), seed=seed, reps=reps,
                          aggregate_reps=aggregate_reps, reference=reference)
            continue
        part: dict[str, Any] = {"figures": [], "tables": [], "verdicts": [], "warnings": []}
        slug = _slug(suite_name)
        _suite_assets(part, suite, out_dir / slug, f"_{slug}", label, score,
                      group_by=analysis.group_by,
                      delta=margin(suite_name, delta, normalisers), seed=seed, reps=reps,
                      aggregate_reps=aggregate_reps, reference=reference)
        pre = f"{suite_name}: "
        result["figures"] += [{**f, "title": pre + f["title"], "suite": suite_name}
                              for f in part["figures"]]
        result["tables"] += [{**t, "title": pre + t["title"], "suite": suite_name}
                             for t in part["tables"]]
        result["verdicts"] += [{**v, "subject": pre + v["subject"], "line": pre + v["line"],
                                "suite": suite_name} for v in part["verdicts"]]
        warnings += [pre + w for w in part["warnings"]]
    return result


def _add_table(result: dict, table: TableData, out_dir: Path) -> None:
    _, csv_path = table.write(out_dir)
    result["tables"].append({"name": table.name, "title": table.title,
                             "markdown": table.markdown(), "csv": str(csv_path)})


def _suite_assets(result: dict, suite: dict[str, GroupScores], out_dir: Path, sfx: str,
                  label: str, score: str, *, group_by: list[str], delta: Margin, seed: int,
                  reps: int, aggregate_reps: int, reference: str | None) -> None:
    warnings: list[str] = result["warnings"]
    add_fig = result["figures"].append
    # Aggregates
    agg = aggregate_intervals(suite, reps=aggregate_reps, seed=seed)
    t = aggregate_table(agg, name=f"aggregates{sfx}",
                        title=f"Aggregate final {score} ({label}), 95% CIs, "
                              f"{aggregate_reps} bootstrap reps, seed {seed}",
                        seeds={g: len(gs.seeds) for g, gs in suite.items()})
    _add_table(result, t, out_dir)
    add_fig(figs.aggregate_intervals_figure(agg, out_dir, name=f"aggregates{sfx}",
                                            score_label=score).as_dict())
    # Curves
    for metric in ("median", "iqm"):
        curves = [efficiency_curve(gs, metrics=(metric,), reps=reps, seed=seed)
                  for gs in suite.values()]
        add_fig(figs.efficiency_curves_figure(curves, out_dir, metric=metric,
                                              name=f"{metric}_vs_frames{sfx}",
                                              score_label=score).as_dict())
    timed = [gs for gs in suite.values() if np.isfinite(gs.time_curves).all()]
    if len(timed) < len(suite):
        warnings.append(f"{label}: {len(suite) - len(timed)} group(s) lack wall times: "
                        "left out of the wall-time curves")
    if timed:
        curves = [efficiency_curve(gs, axis="wall_time_s", metrics=("median", "iqm"),
                                   reps=reps, seed=seed) for gs in timed]
        for metric in ("median", "iqm"):
            add_fig(figs.efficiency_curves_figure(curves, out_dir, metric=metric,
                                                  name=f"{metric}_vs_time{sfx}",
                                                  score_label=score).as_dict())
    add_fig(figs.performance_profile_figure(suite, out_dir, reps=reps, seed=seed,
                                            name=f"performance_profile{sfx}",
                                            score_label=score).as_dict())
    _add_table(result, per_game_table(suite, f"per_game{sfx}"), out_dir)
    # Atari-5 (docs/atari5.md): estimated 57-game median per group, beside the per-game table.
    a5, a5_warnings = atari5_report_table(suite, f"atari5{sfx}", reps=reps, seed=seed)
    warnings += a5_warnings
    if a5 is not None:
        _add_table(result, a5, out_dir)
    _add_table(result, runtime_table(suite, f"runtimes{sfx}"), out_dir)
    times = [runtime_minutes(gs) for gs in suite.values()]
    if all(math.isfinite(m) for m, _ in times):
        add_fig(figs.runtime_bars_figure(list(suite), [m for m, _ in times],
                                         [s for _, s in times], out_dir,
                                         name=f"runtimes{sfx}",
                                         what="training wall time per run, mean over runs",
                                         error_what="std over runs").as_dict())
    # Equivalence within each (system, architecture) across the other group keys.
    families: dict[tuple, list[str]] = {}
    for g, gs in suite.items():
        families.setdefault(_values(gs, FAMILY_KEYS), []).append(g)
    compared = False
    for family, groups in families.items():
        if len(groups) < 2:
            continue
        compared = True
        name = _slug("_".join(str(v) for v in family))
        if len({t for g in groups for t in suite[g].tasks}) <= 60:
            add_fig(figs.per_game_curves_figure({g: suite[g] for g in groups}, out_dir,
                                                name=f"per_game_curves_{name}{sfx}").as_dict())
        try:
            ref = suite[choose_reference({g: suite[g] for g in groups}, reference)]
        except AnalysisError as e:
            warnings.append(f"no equivalence verdicts for {' / '.join(map(str, family))}: {e}")
            continue
        for g in groups:
            other = suite[g]
            if other is ref:
                continue
            subject = f"{other.group} vs {ref.group}"
            try:
                res = equivalence(other, ref, delta.value, margin=delta.describe())
            except AnalysisError as e:
                warnings.append(f"no equivalence verdict for {subject}: {e}")
                continue
            path = write_json(out_dir / f"equivalence_{_slug(subject)}.json", res.as_dict())
            result["verdicts"].append({"kind": "equivalence", "subject": subject,
                                       "verdict": res.label, "line": res.line(),
                                       "json": str(path)})
    if not compared:
        warnings.append(
            f"{label}: every (system, architecture) has a single group under --group-by "
            f"{','.join(group_by[len(FAMILY_KEYS):]) or 'system'}: no equivalence verdict "
            "(needs two groups of the same system, e.g. two layouts)")
    # Sync vs cleanba: same system and same other keys, architectures sync and cleanba.
    rest = group_by[len(FAMILY_KEYS):]
    by_arch: dict[tuple, dict[str, GroupScores]] = {}
    for gs in suite.values():
        system, arch = _values(gs, FAMILY_KEYS)
        by_arch.setdefault((system, *_values(gs, rest)), {})[str(arch)] = gs
    for key, archs in by_arch.items():
        if "sync" in archs and "cleanba" in archs:
            name = _slug("_".join(str(v) for v in key))
            add_fig(figs.paired_final_scores_figure(
                archs["sync"], archs["cleanba"], out_dir, name=f"sync_vs_cleanba_{name}{sfx}",
                title=f"{' / '.join(map(str, key))}: sync vs cleanba").as_dict())


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text).strip("_")
