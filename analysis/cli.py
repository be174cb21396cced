"""`python -m analysis <subcommand>`: numbers, verdicts and figures from run records.

Exit codes: 0 pass (or done), 1 fail (DIFFERENT, INCONCLUSIVE, REGRESSION, staleness
violation), 2 usage or data error (message on stderr, no traceback).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import tyro

from analysis.errors import AnalysisError
from analysis.inputs.load import DEFAULT_LAST_N, RunSet, load_runs, manifest_get
from analysis.inputs.orb import (
    ColumnMap,
    declaration,
    imported_text,
    is_imported,
    load_openrlbenchmark_dir,
)
from analysis.output import figures as figs
from analysis.output.json_file import write_json
from analysis.output.report import AGGREGATE_REPS, build_report_assets
from analysis.scales.normalize import parse_normalisers
from analysis.scoring.curves import CURVE_REPS, efficiency_curve
from analysis.scoring.grouping import (
    Analysis,
    analyse,
    labelled_groups,
)
from analysis.scoring.scores import DEFAULT_POINTS
from analysis.scoring.tables import TableData, aggregate_table, paper_table
from analysis.stats.bootstrap import interval_estimates
from analysis.stats.metrics import AGGREGATES
from analysis.verdicts.compare import compare_pairs
from analysis.verdicts.gate import DEFAULT_WORST, gate
from analysis.verdicts.margins import margin
from analysis.verdicts.pairing import analysis_pairs
from analysis.verdicts.poi_pairs import poi_table
from analysis.verdicts.seedplan import DEFAULT_SEEDS, DEFAULT_SIMS
from analysis.verdicts.staleness import audit
from runrecord import RecordError, Run
from runrecord.exits import EXIT_BAD_INPUT, EXIT_OK


@dataclass(kw_only=True)
class RecordArgs:
    """Where the runs are and how to group and score them."""

    inputs: tyro.conf.Positional[tuple[Path, ...]] = ()
    """Run folders, sweep folders or results roots (searched for manifest.json)."""
    orb: tuple[Path, ...] = ()
    """Folders of openrlbenchmark-style per-run CSV exports (run_df.csv + run.json, or
    <system>/<env_id>/<seed>.csv)."""
    step_column: str = "global_step"
    """openrlbenchmark CSVs: the column of agent steps."""
    return_column: str = "charts/episodic_return"
    """openrlbenchmark CSVs: the column of episode returns."""
    time_column: str = "_runtime"
    """openrlbenchmark CSVs: the column of seconds since the start."""
    frames_per_step: int | None = None
    """openrlbenchmark CSVs: frames per agent step (default 4 on Atari, 1 elsewhere)."""
    orb_protocol: str | None = None
    """--orb runs: the env protocol you vouch they ran under: 'paper' or a JSON file of
    EnvPool settings. Undeclared = unknown: the protocol guard refuses it."""
    orb_frames: float | None = None
    """--orb runs: the frame budget you vouch they ran for, e.g. 200e6. Undeclared =
    unknown."""
    group_by: str = "layout.name"
    """Comma-separated dotted manifest keys that define groups, e.g. layout.name or
    system,layout.name. Systems and architectures are always kept apart."""
    where: tuple[str, ...] = ()
    """Keep only runs whose manifest matches KEY=VALUE (dotted keys), e.g.
    system=cleanba-ppo. Repeatable; all must match."""
    last_n: int = DEFAULT_LAST_N
    """Final score of a run = mean return of its last N episodes."""
    points: int = DEFAULT_POINTS
    """Points of the common frame grid for curves and AUC."""
    normaliser: tuple[str, ...] = ()
    """Extra score normalisers ENV=LOW,HIGH (e.g. MyEnv-v0=0,100); Atari and CartPole-v1
    are built in."""
    allow_protocol_mismatch: bool = False
    """Pool or compare runs whose recorded env protocols differ (sticky actions, episode
    cap, ...); without it such runs are refused (exit 2). A warning says so."""
    no_cache: bool = False
    """Parse every record instead of using <results root>/.analysis-cache (same numbers;
    the cache only saves time)."""

    def runset(self) -> RunSet:
        if self.last_n < 1:
            raise AnalysisError(f"--last-n must be >= 1, got {self.last_n}")
        if self.points < 2:
            raise AnalysisError(f"--points must be >= 2, got {self.points}")
        if not self.inputs and not self.orb:
            raise AnalysisError("give at least one run/sweep folder (or --orb DIR)")
        rs = load_runs(self.inputs, use_cache=not self.no_cache) if self.inputs else RunSet()
        cols = ColumnMap(self.step_column, self.return_column, self.time_column)
        for d in self.orb:
            if not Path(d).is_dir():
                raise AnalysisError(f"{d}: no such folder of openrlbenchmark CSVs")
            rs.extend(load_openrlbenchmark_dir(d, columns=cols,
                                               frames_per_step=self.frames_per_step,
                                               declared=declaration(self.orb_protocol,
                                                                    self.orb_frames)))
        for cond in self.where:
            if "=" not in cond:
                raise AnalysisError(f"bad --where {cond!r}: expected KEY=VALUE")
            key, value = cond.split("=", 1)
            rs.included = [r for r in rs.included
                           if str(manifest_get(r.manifest, key.strip())) == value.strip()]
        return rs

    def analysis(self, separate_systems: bool = True) -> Analysis:
        rs = self.runset()
        if not rs.included:
            _print_left_out(rs)
            raise AnalysisError("no completed runs with episodes to analyse")
        return analyse(rs, group_by=self.group_by, last_n=self.last_n, points=self.points,
                       normalisers=parse_normalisers(self.normaliser),
                       separate_systems=separate_systems,
                       allow_protocol_mismatch=self.allow_protocol_mismatch)


def _print_left_out(rs: RunSet) -> None:
    for x in rs.left_out:
        print(f"left out: {x.run_id} [{x.status}] {x.reason}", file=sys.stderr)


def _print_warnings(ws: list[str]) -> None:
    for w in ws:
        print(f"warning: {w}", file=sys.stderr)


@dataclass(kw_only=True)
class Summary(RecordArgs):
    """Runs found, which were left out and why, and per-group point estimates."""

    def run(self) -> int:
        a = self.analysis()
        rs = a.runset
        print(f"{len(rs.included)} completed run(s), {len(rs.left_out)} left out")
        _print_left_out(rs)
        for r in rs.included:
            if is_imported(r):
                print(f"imported: {r.run_id} {r.manifest.get('env_id')} seed "
                      f"{r.manifest.get('seed')}: {imported_text(r)}")
        rows = []
        for g, gs in labelled_groups(a).items():
            rows.append([g, len(gs.seeds), len(gs.tasks), float(np.median(gs.final.mean(0))),
                         float(AGGREGATES["iqm"](gs.final)), float(AGGREGATES["iqm"](gs.auc)),
                         float(np.nanmean(gs.wall_time_s) / 60)])
        print(TableData("summary", "summary", ["group", "seeds", "tasks", "median final",
                                               "IQM final", "IQM AUC", "minutes/run"],
                        rows).markdown())
        _print_warnings(a.warnings)
        return EXIT_OK


@dataclass(kw_only=True)
class Aggregate(RecordArgs):
    """Median, IQM, mean and optimality gap of final scores with stratified bootstrap
    CIs per group, and the probability of improvement between groups."""

    reps: int = AGGREGATE_REPS
    """Bootstrap replicates."""
    seed: int = 0
    """Bootstrap seed (same seed, same CIs)."""
    confidence: float = 0.95
    """Two-sided CI level."""
    method: Literal["percentile", "basic"] = "percentile"
    """Bootstrap CI method."""
    out: Path | None = None
    """Folder for aggregates.md/.csv/.json (printed only when not given)."""
    reference: str | None = None
    """P(X > Y) of every group against this group (label or layout name); default the
    smallest hardware, e.g. a0-l0-d1."""
    pair: tuple[str, ...] = ()
    """P(X > Y) only for these pairs, 'X vs Y' (labels or layout names). Repeatable."""
    all_pairs: bool = False
    """P(X > Y) for every ordered pair of groups (cost grows with the square of groups)."""

    def run(self) -> int:
        a = self.analysis()
        groups = labelled_groups(a)
        res = {g: interval_estimates(gs.final, AGGREGATES, reps=self.reps, seed=self.seed,
                                     confidence=self.confidence, method=self.method)
               for g, gs in groups.items()}
        table = aggregate_table(res, title=f"Aggregate final normalised scores, "
                                f"{self.confidence:.0%} CIs, {self.reps} reps, seed {self.seed}")
        print(table.markdown())
        # A group's rows are distinct seeds (one run per seed and env), so the bootstrap
        # resamples independent seeds, never layout copies.
        for g, gs in groups.items():
            print(f"{g}: {len(gs.seeds)} independent seeds x {len(gs.tasks)} task(s) "
                  "(CIs resample seeds within each task)")
        poi, which = poi_table(a, groups, reference=self.reference, named=self.pair,
                               all_pairs=self.all_pairs, reps=self.reps, seed=self.seed,
                               confidence=self.confidence, method=self.method)
        print(f"P(X > Y) computed for {which}")
        if poi.rows:
            print(poi.markdown())
        if self.out:
            table.write(self.out)
            poi.write(self.out)
            write_json(self.out / "aggregates.json",
                       {g: {m: iv.as_dict() for m, iv in d.items()} for g, d in res.items()})
        _print_warnings(a.warnings)
        return EXIT_OK


@dataclass(kw_only=True)
class Curves(RecordArgs):
    """Sample-efficiency curves (median/IQM normalised score vs frames or wall time) with
    pointwise bootstrap CIs: figures and a CSV."""

    out: Path = Path("analysis-out")
    """Folder for the figures (PNG + PDF) and curves.csv."""
    axis: Literal["frames", "wall_time_s"] = "frames"
    """x axis."""
    metric: tuple[Literal["median", "iqm", "mean", "optimality_gap"], ...] = ("median", "iqm")
    """Aggregates to plot, one figure each."""
    reps: int = CURVE_REPS
    """Bootstrap replicates per curve."""
    seed: int = 0
    """Bootstrap seed."""

    def run(self) -> int:
        a = self.analysis()
        import csv

        self.out.mkdir(parents=True, exist_ok=True)
        rows = []
        multi = len(a.suites) > 1
        for name, suite in zip(a.suite_names, a.suites, strict=True):
            sfx = "_" + name.replace("/", "_") if multi else ""
            pre = f"{name}: " if multi else ""
            curves = [efficiency_curve(gs, axis=self.axis, metrics=self.metric, reps=self.reps,
                                       seed=self.seed) for gs in suite.values()]
            for metric in self.metric:
                info = figs.efficiency_curves_figure(curves, self.out, metric=metric,
                                                     name=f"{metric}_vs_{self.axis}{sfx}")
                print(f"wrote {info.png} and {info.pdf}")
            for c in curves:
                for m, iv in c.metrics.items():
                    for x, p, lo, hi in zip(c.grid, iv.point, iv.low, iv.high, strict=True):
                        rows.append([pre + c.group, self.axis, float(x), m, float(p), float(lo),
                                     float(hi)])
        with open(self.out / f"curves_{self.axis}.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["group", "axis", "x", "metric", "point", "low", "high"])
            w.writerows(rows)
        print(f"wrote {self.out / f'curves_{self.axis}.csv'}")
        _print_warnings(a.warnings)
        return EXIT_OK


@dataclass(kw_only=True)
class Equivalence(RecordArgs):
    """Welch TOST of groups (e.g. hardware layouts) against a reference group on per-seed
    IQM of final score and of normalised AUC at margin delta, within each suite (Atari, or
    one other env). Exit 0 all PASS, 1 a DIFFERENT/INCONCLUSIVE, 2 error."""

    a: str | None = None
    """Compare only this group (label or layout name, e.g. a0-l1-d1) with the reference;
    default: every group of each system and architecture."""
    reference: str | None = None
    """Reference group (label or layout name, e.g. a0-l0-d1); default: the group with the
    smallest hardware (fewest processes, then devices, then layout name)."""
    delta: float | None = None
    """Equivalence margin in normalised units, fixed beforehand; default per suite: 0.16
    HNS on Atari, 0.2 of the normalised range elsewhere (analysis.margins). Check the power
    of your seeds with `python -m analysis plan-seeds`."""
    json_out: Path | None = None
    """Write the verdict as JSON here (a list under "comparisons" when there are several)."""
    bitwise_only: bool = False
    """Only check whether each group's records are bitwise identical to the reference's."""
    metric: Literal["iqm", "atari5-median"] = "iqm"
    """Per-seed value: the IQM over games, or the Atari-5 estimate of the 57-game median
    HNS from BattleZone, DoubleDunk, NameThisGame, Phoenix, Qbert (Atari suite only;
    docs/atari5.md)."""

    def run(self) -> int:
        a = self.analysis()
        _print_warnings(a.warnings)
        suites = ["Atari"] if self.metric == "atari5-median" else None
        if suites:
            _print_warnings([f"{name}: no verdict (--metric atari5-median is for Atari)"
                             for name in a.suite_names if name != "Atari"])
        pairs, warnings = analysis_pairs(a, self.a, self.reference, suites)
        _print_warnings(warnings)
        res = compare_pairs(pairs, delta=self.delta, normalisers=parse_normalisers(
            self.normaliser), metric=self.metric, bitwise_only=self.bitwise_only)
        print("\n".join(res.lines))
        if self.json_out:
            write_json(self.json_out, res.as_json())
        return res.exit_code


@dataclass(kw_only=True)
class Regression:
    """CI gate: PASS when the one-sided lower bound of new - reference (per independent
    seed: IQM over games of the final normalised score; layout copies of a seed are
    averaged first) is above -delta. The same gate as `harness regress`
    (analysis.verdicts.gate). Exit 0 PASS, 1 REGRESSION, 2 error (including different
    games, env protocols or suites on the two sides, several systems on a side, or a
    selected layout without a completed run)."""

    new: Path
    """Run/sweep folder of the new version (one system; --where to select one)."""
    reference: str
    """Run/sweep folder of the reference, or a published number (same units)."""
    delta: float | None = None
    """Tolerated drop in normalised units; default: the suite's margin (0.16 HNS on
    Atari, 0.2 of the normalised range elsewhere; analysis.verdicts.margins)."""
    metric: Literal["iqm", "final", "auc", "atari5-median"] = "iqm"
    """Per-seed value (analysis.verdicts.gate.GATE_METRICS): IQM over tasks of the final
    score (iqm; `final` is the same), or of the normalised AUC (auc), or the Atari-5
    estimate of the 57-game median HNS from the final scores of BattleZone, DoubleDunk,
    NameThisGame, Phoenix, Qbert (atari5-median; docs/atari5.md)."""
    layout: tuple[str, ...] = ()
    """Layouts to gate; each must have a completed run on both sides. Default: every
    layout either side ran."""
    confidence: float = 0.95
    """One-sided confidence level of the lower bound."""
    where: tuple[str, ...] = ()
    """Keep only runs whose manifest matches KEY=VALUE (repeatable)."""
    last_n: int = DEFAULT_LAST_N
    """Final score = mean return of the last N episodes."""
    normaliser: tuple[str, ...] = ()
    """Extra normalisers ENV=LOW,HIGH."""
    allow_protocol_mismatch: bool = False
    """Compare runs whose recorded env protocols differ (a note says so)."""
    worst: int = DEFAULT_WORST
    """Games listed in the per-game breakdown (worst new - reference first)."""
    json_out: Path | None = None
    """Write the verdict as JSON here."""

    def _runs(self, path: Path) -> list[Run]:
        rs = RecordArgs(inputs=(path,), where=self.where, last_n=self.last_n).runset()
        if not rs.included:
            _print_left_out(rs)
            raise AnalysisError("no completed runs with episodes to analyse")
        return rs.included

    def run(self) -> int:
        new = self._runs(self.new)
        try:
            reference: list[Run] | float = float(self.reference)
        except ValueError:
            reference = self._runs(Path(self.reference))
        out = gate(new, reference, delta=self.delta, metric=self.metric,
                   layouts=self.layout or None, confidence=self.confidence,
                   last_n=self.last_n, normalisers=parse_normalisers(self.normaliser),
                   allow_protocol_mismatch=self.allow_protocol_mismatch)
        _print_warnings(out.warnings)
        print("\n".join(out.lines(self.worst)))
        if self.json_out:
            write_json(self.json_out, out.result.as_dict())
        return out.exit_code


@dataclass(kw_only=True)
class PlanSeeds(RecordArgs):
    """Seed planner: power of the equivalence test (TOST, both metrics) and of the
    regression gate at 3/5/10/20 seeds, seeds needed for 80% and 90% power, and the
    smallest margin reachable at 80% for --for-seeds seeds, by simulating the verdict code
    with the per-seed spread of pilot runs (folders) or a given --sd."""

    sd: float | None = None
    """Per-seed sd of the metric (normalised units) instead of pilot runs."""
    auc_sd: float | None = None
    """With --sd: the AUC metric's sd (default: --sd)."""
    correlation: float = 0.0
    """With --sd: correlation of final score and AUC per seed (0 is the cautious choice:
    requiring two metrics to pass costs most power when they are independent)."""
    suite: str = "Atari"
    """With --sd: the suite whose default margin applies (Atari or an env id)."""
    delta: float | None = None
    """Equivalence margin (default: the suite's, analysis.margins)."""
    gate_delta: float | None = None
    """Regression gate margin (default: --delta)."""
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    """Seeds per side at which to give the power."""
    for_seeds: int = 3
    """Seeds per side for the smallest margin reachable at 80% power."""
    sims: int = DEFAULT_SIMS
    """Simulations per (verdict, seed count)."""
    seed: int = 0
    """Seed of the simulations (same seed, same table)."""

    def run(self) -> int:
        from analysis.verdicts.seedplan import given_spread, plan, spread_from_analysis

        if self.sd is not None:
            if self.inputs or self.orb:
                raise AnalysisError("give pilot run folders or --sd, not both")
            spread, suite = given_spread(self.sd, self.auc_sd, self.correlation), self.suite
        else:
            a = self.analysis()
            _print_warnings(a.warnings)
            if len(a.suites) != 1:
                raise AnalysisError(f"pilot runs form {len(a.suites)} suites {a.suite_names}; "
                                    "plan one at a time (--where env_id=...)")
            spread, suite = spread_from_analysis(a), a.suite_names[0]
        norms = parse_normalisers(self.normaliser)
        eq = margin(suite, self.delta, norms)
        gate = margin(suite, self.gate_delta if self.gate_delta is not None else self.delta,
                      norms)
        print(f"margins: equivalence {eq.describe()}; regression gate {gate.describe()}")
        print(plan(spread, eq.value, gate.value, seeds=self.seeds, for_seeds=self.for_seeds,
                   sims=self.sims, seed=self.seed).text())
        return EXIT_OK


@dataclass(kw_only=True)
class Staleness(RecordArgs):
    """Staleness audit from updates.csv: distribution per run and group, mid-rollout
    policy changes, and the cleanba/sync rules. Exit 1 on a violation."""

    json_out: Path | None = None
    """Write the audit as JSON here."""
    out: Path | None = None
    """Folder for the staleness histogram figure."""
    per_run: bool = False
    """Also print one row per run."""

    def run(self) -> int:
        rs = self.runset()
        _print_left_out(rs)
        if not rs.included:
            raise AnalysisError("no completed runs to audit")
        from analysis.scoring.grouping import group_keys

        rep = audit(rs.included, group_keys(self.group_by))
        rows = [[g, d["runs"], d["updates"],
                 " ".join(f"{k}:{v}" for k, v in d["histogram"].items()),
                 f"{d['mean']:.3f}", f"{d['mid_rollout_share']:.3f}", d["violating_runs"]]
                for g, d in rep.groups.items()]
        print(TableData("st", "st", ["group", "runs", "updates", "staleness: count",
                                     "mean", "mid-rollout share", "violating runs"],
                        rows).markdown())
        if self.per_run:
            print(TableData("runs", "runs", ["run", "group", "arch", "updates", "staleness: count",
                                             "mid-rollout share", "check"],
                            [[r.run_id, r.group, r.architecture, r.updates,
                              " ".join(f"{k}:{v}" for k, v in r.histogram.items()),
                              f"{r.mid_rollout_share:.3f}", r.check]
                             for r in rep.runs]).markdown())
        for r in rep.runs:
            for v in r.violations:
                print(f"VIOLATION {v}")
            if r.num_violations > len(r.violations):
                print(f"  ... {r.num_violations - len(r.violations)} more in run {r.run_id}")
        print(rep.line())
        if self.json_out:
            write_json(self.json_out, rep.as_dict())
        if self.out:
            info = figs.staleness_figure(rep, self.out)
            print(f"wrote {info.png} and {info.pdf}")
        return rep.exit_code


@dataclass(kw_only=True)
class Figures:
    """Every figure, table and verdict of the report into one folder (what the HTML
    report embeds)."""

    inputs: tyro.conf.Positional[tuple[Path, ...]]
    """Run folders, sweep folders or results roots."""
    out: Path = Path("analysis-out")
    """Output folder."""
    group_by: str = "layout.name"
    """Dotted manifest keys that define groups (comma-separated)."""
    delta: float | None = None
    """Equivalence margin (normalised units); default per suite (analysis.margins)."""
    seed: int = 0
    """Bootstrap seed."""
    reps: int = CURVE_REPS
    """Bootstrap reps for curves and performance profiles."""
    aggregate_reps: int = AGGREGATE_REPS
    """Bootstrap reps for aggregate CIs."""
    normaliser: tuple[str, ...] = ()
    """Extra normalisers ENV=LOW,HIGH."""
    reference: str | None = None
    """Reference group of the equivalence verdicts (label or layout name, e.g. a0-l0-d1);
    default: the group with the smallest hardware."""
    allow_protocol_mismatch: bool = False
    """Compare runs whose recorded env protocols differ (a warning says so)."""

    def run(self) -> int:
        for d in self.inputs:
            if not Path(d).is_dir():
                raise AnalysisError(f"{d}: no such folder (expected a run or sweep folder)")
        if not any(True for d in self.inputs for _ in Path(d).rglob("manifest.json")):
            raise AnalysisError(f"no run records (manifest.json) under "
                                f"{', '.join(map(str, self.inputs))}")
        res = build_report_assets(list(self.inputs), self.out, group_by=self.group_by,
                                  delta=self.delta, seed=self.seed, reps=self.reps,
                                  aggregate_reps=self.aggregate_reps,
                                  normalisers=parse_normalisers(self.normaliser),
                                  reference=self.reference,
                                  allow_protocol_mismatch=self.allow_protocol_mismatch)
        for f in res["figures"]:
            print(f"figure {f['name']}: {f['png']}")
        for t in res["tables"]:
            print(f"table {t['name']}: {t['csv']}")
        for v in res["verdicts"]:
            print(v["line"])
        print(f"{res['runs']['included']} run(s) included, {len(res['runs']['left_out'])} "
              "left out")
        _print_warnings(res["warnings"])
        (self.out / "index.json").write_text(json.dumps(res, indent=2) + "\n")
        return EXIT_OK


@dataclass(kw_only=True)
class PaperTables:
    """Recompute a published table and its _runtimes twin: median HNS per column (%) and
    mean runtime relative to the Cleanba IMPALA column, next to the paper's claims."""

    table: Path
    """A published `mean ± std` CSV, e.g. ../shared/paper-data/main_10CPU.csv."""
    out: Path | None = None
    """Folder for the table (.md/.csv) and a runtime bar figure."""

    def run(self) -> int:
        res = paper_table(self.table)
        t = res.table_data()
        print(t.title)
        print(t.markdown())
        for n in res.notes:
            print(f"note: {n}")
        if self.out:
            t.write(self.out)
            if not all(np.isnan(res.runtime_ratio)):
                from analysis.inputs.load import load_published_table, runtimes_twin

                rt = load_published_table(runtimes_twin(self.table))
                ref = res.columns.index(res.reference_column) if res.reference_column \
                    else None
                info = figs.runtime_bars_figure(rt.columns, rt.mean.mean(axis=0),
                                                rt.mean.std(axis=0), self.out,
                                                name=f"runtimes_{res.table}",
                                                what=f"{res.table}, mean over games",
                                                error_what="std over games", reference=ref)
                print(f"wrote {info.png} and {info.pdf}")
        return EXIT_OK


@dataclass(kw_only=True)
class Atari5(RecordArgs):
    """Atari-5 (Aitchison et al. 2023): each group's 57-game median HNS estimated from
    BattleZone, DoubleDunk, NameThisGame, Phoenix and Qbert, with an interval combining
    seed uncertainty (stratified bootstrap) and model error (docs/atari5.md)."""

    subset: Literal["atari5", "atari3"] = "atari5"
    """atari5, or atari3 (BattleZone, NameThisGame, Phoenix: development only, larger error)."""
    confidence: float = 0.9
    """Two-sided level of the interval."""
    reps: int = 20_000
    """Bootstrap replicates."""
    seed: int = 0
    """Bootstrap seed (same seed, same interval)."""
    pool_layouts: bool = False
    """One estimate per system/architecture over all its layouts (a seed's layout copies
    averaged into one row) instead of one per group."""
    allow_protocol_mismatch: bool = False
    """Estimate groups whose runs mix env protocols anyway (the output says so)."""
    table: Path | None = None
    """Instead of runs: a published `mean ± std` table (e.g.
    ../shared/paper-data/main_10CPU.csv): estimate per column vs its own median."""
    json_out: Path | None = None
    """Write the estimates as JSON here."""

    def run(self) -> int:
        from analysis import atari5

        model = atari5.load_model(self.subset)
        if self.table is not None:
            if self.inputs or self.orb:
                raise AnalysisError("give either run folders or --table, not both")
            rows = atari5.estimate_published_table(self.table, model)
            print(atari5.published_estimates_table(rows, model).markdown())
            if self.json_out:
                write_json(self.json_out, {"table": str(self.table), "columns": rows})
            return EXIT_OK
        a = self.analysis()
        if "Atari" not in a.suite_names:
            raise AnalysisError(f"no Atari runs among the inputs (suites: {a.suite_names}); "
                                f"{model.label} needs {', '.join(model.env_ids)}")
        suite = a.suites[a.suite_names.index("Atari")]
        estimates, warnings = atari5.estimate_suite(
            suite, subset=self.subset, pool_layouts=self.pool_layouts,
            allow_protocol_mismatch=self.allow_protocol_mismatch,
            confidence=self.confidence, reps=self.reps, seed=self.seed)
        for e in estimates:
            print(e.line())
            for n in e.notes:
                print(f"note: {n}")
        print(atari5.per_game_table(estimates).markdown())
        print(f"model: {model.label}, fitted on {model.n} published algorithms with all 57 "
              f"games; leave-one-out error {atari5.relative_error_percent(model.loo_mae):.1f}% "
              "(mean), see docs/atari5.md")
        _print_warnings(a.warnings + warnings)
        if self.json_out:
            write_json(self.json_out, {"model": model.as_dict(),
                                       "estimates": [e.as_dict() for e in estimates],
                                       "warnings": warnings})
        return EXIT_OK


@dataclass(kw_only=True)
class Reproduce:
    """Did it reproduce? Your runs against a published table column (--published FILE
    --column NAME: per game and aggregate verdicts) or against published per-seed runs
    imported from openrlbenchmark's cache (--orb DIR: equivalence at matching frames).
    Exit 0 all consistent/PASS, 1 otherwise, 2 bad input or a protocol/budget mismatch."""

    runs: tuple[Path, ...]
    """Your run/sweep folders (searched for manifest.json)."""
    published: Path | None = None
    """A published `mean ± std` table, e.g. ../shared/paper-data/main_10CPU.csv."""
    column: str | None = None
    """The table's column to compare with, e.g. "Cleanba IMPALA, 1 A100, 10 CPU"."""
    published_seeds: int = 3
    """Seeds behind each published cell (3 in the paper's tables)."""
    orb: tuple[Path, ...] = ()
    """openrlbenchmark cache folders (<entity>/<project>/<run id>/run.json + run_df.csv)
    of the published runs to compare with."""
    orb_protocol: str | None = None
    """The env protocol you vouch the imported runs ran under ('paper' or a JSON file);
    undeclared = unknown, refused by the protocol guard."""
    orb_frames: float | None = None
    """The frame budget you vouch the imported runs ran for (e.g. 200e6); undeclared =
    unknown, refused by the budget guard."""
    orb_exp_name: tuple[str, ...] = ()
    """Keep only imported runs of these exp_names (e.g. cleanba_impala_a0_l0_d1_cpu10)."""
    orb_metric: str = "charts/avg_episodic_return"
    """History column of the imported runs' returns (the paper's metric)."""
    orb_step: str = "global_step"
    """History column of agent steps (frames = steps x 4 on Atari)."""
    orb_time: str = "_runtime"
    """History column of seconds since the start."""
    games: tuple[str, ...] = ()
    """Compare only these games (e.g. Breakout-v5 Pong); default: every game you ran."""
    where: tuple[str, ...] = ()
    """Keep only your runs whose manifest matches KEY=VALUE (dotted keys; repeatable)."""
    relative_margin: float = 0.25
    """Table verdicts: per-game margin = max(relative x |published HNS|, absolute)."""
    absolute_margin: float = 0.1
    """Table verdicts: smallest per-game margin in HNS."""
    delta: float | None = None
    """Runs verdicts (--orb): equivalence margin on per-seed IQM (default: the suite's,
    0.16 HNS on Atari; analysis.margins)."""
    allow_protocol_mismatch: bool = False
    """Compare runs made under another env protocol (every line says so)."""
    allow_budget_mismatch: bool = False
    """Compare runs with another frame budget ("at N frames against 200M" on every line)."""
    last_n: int = DEFAULT_LAST_N
    """Final score = mean return of the last N episodes."""
    reps: int = AGGREGATE_REPS
    """Bootstrap replicates of the aggregate CIs."""
    seed: int = 0
    """Bootstrap seed."""
    out: Path | None = None
    """Folder for the table (.md/.csv), reproduce.json and the figure (PNG + PDF)."""

    def run(self) -> int:
        from analysis import reproduce as rp

        if (self.published is None) == (not self.orb):
            raise AnalysisError("give either --published TABLE --column NAME (the paper's "
                                "tables) or --orb CACHE_DIR (its per-seed runs)")
        mine = RecordArgs(inputs=self.runs, where=self.where, last_n=self.last_n).runset()
        _print_left_out(mine)
        if self.published is not None:
            if self.column is None:
                from analysis.inputs.load import load_published_table

                cols = load_published_table(self.published).columns
                raise AnalysisError(f"--column is required; {self.published} has columns: "
                                    + "; ".join(repr(c) for c in cols))
            col = rp.published_column(self.published, self.column, self.published_seeds)
            res = rp.reproduce(mine, col, games=self.games or None,
                               relative_margin=self.relative_margin,
                               absolute_margin=self.absolute_margin,
                               allow_protocol_mismatch=self.allow_protocol_mismatch,
                               allow_budget_mismatch=self.allow_budget_mismatch,
                               last_n=self.last_n, reps=self.reps, seed=self.seed)
            table = res.table()
            print(table.title)
            print(table.markdown())
            for g in res.games:
                print(res.game_line(g))
            for line in res.aggregate_lines():
                print(line)
            print(res.summary_line())
            for line in res.limits():
                print(f"note: {line}")
            _print_warnings(res.warnings)
            if self.out:
                table.write(self.out)
                write_json(self.out / "reproduce.json", res.as_dict())
                info = figs.reproduce_scatter_figure(rp.figure_points(res), self.out,
                                                     column=col.column,
                                                     budget=res.budget_text)
                print(f"wrote {info.png} and {info.pdf}")
            return res.exit_code
        orb_cols = ColumnMap(self.orb_step, self.orb_metric, self.orb_time)
        imported = RunSet()
        for d in self.orb:
            imported.extend(load_openrlbenchmark_dir(
                d, columns=orb_cols, declared=declaration(self.orb_protocol, self.orb_frames)))
        _print_left_out(imported)
        chosen = [r for r in imported.included
                  if not self.orb_exp_name or r.manifest.get("system") in self.orb_exp_name]
        if self.games:
            from analysis.scales.normalize import atari_env_id

            have = sorted({atari_env_id(str(r.manifest["env_id"]))
                           for r in [*chosen, *mine.included]})
            names = {rp.match_game(g, have) for g in self.games}
            chosen = [r for r in chosen if atari_env_id(str(r.manifest["env_id"])) in names]
            mine.included = [r for r in mine.included
                             if atari_env_id(str(r.manifest["env_id"])) in names]
        comp = rp.reproduce_runs(mine.included, chosen, delta=self.delta,
                                 allow_protocol_mismatch=self.allow_protocol_mismatch,
                                 allow_budget_mismatch=self.allow_budget_mismatch,
                                 last_n=self.last_n)
        for r in comp.imported:
            print(f"imported: {r.run_id} {r.manifest.get('env_id')} seed "
                  f"{r.manifest.get('seed')}: {imported_text(r)}")
        for line in comp.lines():
            print(line)
        _print_warnings(comp.warnings)
        if self.out:
            write_json(self.out / "reproduce_runs.json",
                       {"imported_group": comp.imported_group, "frames_note": comp.frames_note,
                        "comparisons": [r.as_dict() for r in comp.results],
                        "warnings": comp.warnings})
            curves = [efficiency_curve(gs, metrics=("iqm",), seed=self.seed)
                      for gs in comp.groups.values()]
            info = figs.efficiency_curves_figure(curves, self.out, metric="iqm",
                                                 name="reproduce_iqm_vs_frames")
            print(f"wrote {info.png} and {info.pdf}")
        return comp.exit_code


@dataclass(kw_only=True)
class OrbImport:
    """Write runs from openrlbenchmark's cache as run records (with their wandb
    provenance and the protocol/budget you declare), so summary, report and verdicts
    show them, marked as imported."""

    cache: tyro.conf.Positional[Path]
    """openrlbenchmark cache folder (<entity>/<project>/<run id>/run.json + run_df.csv)."""
    out: Path
    """Folder for the records (runs/<id>/ below it)."""
    protocol: str | None = None
    """The env protocol you vouch they ran under ('paper' or a JSON file); default unknown."""
    frames: float | None = None
    """The frame budget you vouch they ran for (e.g. 200e6); default unknown."""
    metric: str = "charts/avg_episodic_return"
    """History column of the returns."""
    step: str = "global_step"
    """History column of agent steps."""
    exp_name: tuple[str, ...] = ()
    """Keep only runs of these exp_names."""

    def run(self) -> int:
        from analysis.inputs.orb import load_orb_cache, write_imported_records

        rs = load_orb_cache(self.cache, declaration(self.protocol, self.frames),
                            columns=ColumnMap(self.step, self.metric))
        _print_left_out(rs)
        runs = [r for r in rs.included
                if not self.exp_name or r.manifest.get("system") in self.exp_name]
        if not runs:
            raise AnalysisError(f"{self.cache}: no finished run to import"
                                + (f" with exp_name in {list(self.exp_name)}"
                                   if self.exp_name else ""))
        for d in write_imported_records(runs, self.out):
            print(f"wrote {d}")
        _print_warnings(rs.warnings)
        return EXIT_OK


@dataclass(kw_only=True)
class OrbFetch:
    """Download runs of a public wandb project into openrlbenchmark's cache layout (needs
    network and wandb; e.g. --entity openrlbenchmark --project cleanba --filter
    config.exp_name=cleanba_impala_a0_l0_d1_cpu10 --filter config.env_id=Breakout-v5)."""

    entity: str
    """wandb entity (user or team)."""
    project: str
    """wandb project."""
    cache: Path
    """Cache folder to write into (<entity>/<project>/<run id>/)."""
    filter: tuple[str, ...] = ()
    """KEY=VALUE wandb filters (ANDed), e.g. config.env_id=Breakout-v5."""

    def run(self) -> int:
        from analysis.inputs.orb import fetch_wandb

        filters: dict[str, str] = {}
        for f in self.filter:
            if "=" not in f:
                raise AnalysisError(f"bad --filter {f!r}: expected KEY=VALUE")
            key, value = f.split("=", 1)
            filters[key.strip()] = value.strip()
        for d in fetch_wandb(self.entity, self.project, self.cache, filters):
            print(f"cached {d}")
        return EXIT_OK


Command = (
    Annotated[Summary, tyro.conf.subcommand("summary")]
    | Annotated[Aggregate, tyro.conf.subcommand("aggregate")]
    | Annotated[Curves, tyro.conf.subcommand("curves")]
    | Annotated[Equivalence, tyro.conf.subcommand("equivalence")]
    | Annotated[Regression, tyro.conf.subcommand("regression")]
    | Annotated[PlanSeeds, tyro.conf.subcommand("plan-seeds")]
    | Annotated[Staleness, tyro.conf.subcommand("staleness")]
    | Annotated[Figures, tyro.conf.subcommand("figures")]
    | Annotated[PaperTables, tyro.conf.subcommand("paper-tables")]
    | Annotated[Atari5, tyro.conf.subcommand("atari5")]
    | Annotated[Reproduce, tyro.conf.subcommand("reproduce")]
    | Annotated[OrbImport, tyro.conf.subcommand("orb-import")]
    | Annotated[OrbFetch, tyro.conf.subcommand("orb-fetch")]
)


def _subcommands() -> dict[str, type]:
    """{name: config class} of every subcommand in Command."""
    import typing

    out = {}
    for member in typing.get_args(Command):
        cls, *meta = typing.get_args(member)
        out[next(m.name for m in meta if hasattr(m, "name"))] = cls
    return out


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    sub = _subcommands()
    cmd: Any
    if args and args[0] in sub:
        # Parse one subcommand on its own, so that an unknown flag's "perhaps you meant"
        # suggestions come from the flags this subcommand accepts, not from the others'.
        cmd = tyro.cli(sub[args[0]], args=args[1:],  # type: ignore[call-overload]
                       prog=f"python -m analysis {args[0]}")
    else:
        cmd = tyro.cli(Command, args=args, prog="python -m analysis",  # type: ignore[call-overload]
                       description=__doc__)
    try:
        return int(cmd.run())
    except (AnalysisError, RecordError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
