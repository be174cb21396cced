"""`python -m analysis` subcommands on scores and verdicts: summary, aggregate, curves,
plan-seeds, plan-sequential, staleness, figures, equivalence and regression. Each parses
its flags and calls one analysis function (equivalence: analysis.verdicts.compare;
regression: analysis.verdicts.gate).

The figure, report and verdict modules (matplotlib, scipy) are imported in the run() that
draws or decides, so that a command that prints numbers does not pay ~1 s for them at
start-up.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import tyro

from analysis.cli.common import (
    Grouping,
    RecordArgs,
    RunFilter,
    ScoreOptions,
    TableFormat,
    included_runs,
    print_imported,
    print_left_out,
    print_warnings,
)
from analysis.errors import AnalysisError
from analysis.importers.build import is_imported
from analysis.inputs.load import check_keys
from analysis.json_file import write_json
from analysis.output.tables import equivalence_rows, regression_rows
from analysis.scales.normalize import parse_normalisers
from analysis.scoring.grouping import (
    group_keys,
    labelled_groups,
    user_group_keys,
)
from analysis.scoring.scores import CURVE_REPS
from analysis.scoring.tables import AGGREGATE_REPS, aggregate_groups, summary_table
from analysis.verdicts.compare import choose_pairs
from analysis.verdicts.margins import DEFAULT_SEEDS, DEFAULT_SIMS, DEFAULT_WORST
from analysis.verdicts.staleness import audit
from runrecord import Run
from runrecord.exits import EXIT_OK, strict_exit
from runrecord.words import counted

if TYPE_CHECKING:  # the planner imports scipy: loaded only by the commands that plan
    from analysis.verdicts.seedplan import Spread


@dataclass(kw_only=True)
class Summary(RecordArgs):
    """Runs found, which were left out and why, and per-group point estimates."""

    def run(self) -> int:
        a = self.analysis()
        rs = a.runset
        print(f"{counted(len(rs.included), 'completed run')}, {len(rs.left_out)} left out")
        print_left_out(rs)
        print_imported([r for r in rs.included if is_imported(r)])
        print(summary_table(labelled_groups(a)).markdown())
        print_warnings(a.warnings)
        return EXIT_OK


@dataclass(kw_only=True)
class Aggregate(RecordArgs, TableFormat):
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
    """Also write the tables here: aggregates.md/.csv/.tex (booktabs),
    probability_of_improvement.md/.csv/.tex and aggregates.json (they are printed either
    way)."""
    reference: str | None = None
    """P(X > Y) of every group against this group (label or layout name); default the
    smallest hardware of each system, e.g. a0-l0-d1."""
    pair: tuple[str, ...] = ()
    """P(X > Y) only for these pairs, 'X vs Y' (labels or layout names). Repeatable."""
    all_pairs: bool = False
    """P(X > Y) for every ordered pair of groups (cost grows with the square of groups)."""

    def run(self) -> int:
        a = self.analysis()
        groups = labelled_groups(a)
        pairs, which = choose_pairs(a, groups, reference=self.reference, named=self.pair,
                                    all_pairs=self.all_pairs)
        agg = aggregate_groups(groups, reps=self.reps, seed=self.seed, pairs=pairs,
                               which=which, confidence=self.confidence, method=self.method)
        self.print_lines(agg.lines())
        self.print_table(lambda: agg.table)
        if self.out:
            self.say("wrote " + ", ".join(str(p) for p in agg.write(self.out)))
        print_warnings(a.warnings)
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
        from analysis.output.report import write_curves

        a = self.analysis()
        figures, csv_path = write_curves(a, self.out, axis=self.axis, metrics=self.metric,
                                         reps=self.reps, seed=self.seed)
        for info in figures:
            print(f"wrote {info.png} and {info.pdf}")
        print(f"wrote {csv_path}")
        print_warnings(a.warnings)
        return EXIT_OK


@dataclass(kw_only=True)
class SpreadArgs(RecordArgs):
    """A per-seed spread, from pilot runs (folders) or stated with --sd, and margins:
    what the seed planners (plan-seeds, plan-sequential) simulate with."""

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
    """Equivalence margin (default: the suite's, analysis.verdicts.margins)."""
    gate_delta: float | None = None
    """Regression gate margin (default: --delta)."""
    sims: int = DEFAULT_SIMS
    """Simulations per (verdict, seed count)."""
    seed: int = 0
    """Seed of the simulations (same seed, same table)."""

    def spread_and_suite(self) -> tuple[Spread, str]:
        """The stated spread and --suite, or the pilot runs' pooled spread and suite."""
        from analysis.verdicts.seedplan import given_spread, spread_from_analysis

        if self.sd is not None:
            if self.inputs or self.orb:
                raise AnalysisError("give pilot run folders or --sd, not both")
            return given_spread(self.sd, self.auc_sd, self.correlation), self.suite
        a = self.analysis()
        print_warnings(a.warnings)
        if len(a.suites) != 1:
            raise AnalysisError(f"pilot runs form {len(a.suites)} suites {a.suite_names}; "
                                "plan one at a time (--where env_id=...)")
        return spread_from_analysis(a), a.suite_names[0]


@dataclass(kw_only=True)
class PlanSeeds(SpreadArgs):
    """Seed planner: power of the equivalence test (TOST, both metrics) and of the
    regression gate at 3/5/10/20 seeds, seeds needed for 80% and 90% power, and the
    smallest margin reachable at 80% for --for-seeds seeds, by simulating the verdict code
    with the per-seed spread of pilot runs (folders) or a given --sd."""

    seeds: tuple[int, ...] = DEFAULT_SEEDS
    """Seeds per side at which to give the power."""
    for_seeds: int = 3
    """Seeds per side for the smallest margin reachable at 80% power."""

    def run(self) -> int:
        from analysis.verdicts.seedplan import seed_plan_lines

        spread, suite = self.spread_and_suite()
        print("\n".join(seed_plan_lines(
            spread, suite, delta=self.delta, gate_delta=self.gate_delta,
            normalisers=parse_normalisers(self.normaliser), seeds=self.seeds,
            for_seeds=self.for_seeds, sims=self.sims, seed=self.seed)))
        return EXIT_OK


@dataclass(kw_only=True)
class Staleness(RecordArgs):
    """Staleness audit from updates.csv: distribution per run and group (per suite where
    the runs span several: Atari, or one other env), mid-rollout
    policy changes, and the cleanba/sync rules. Exit 1 on a violation."""

    json_out: Path | None = None
    """Write the audit as JSON here."""
    out: Path | None = None
    """Folder for the staleness histogram figure."""
    per_run: bool = False
    """Also print one row per run."""

    def run(self) -> int:
        rs = self.runset()
        print_left_out(rs)
        if not rs.included:
            raise AnalysisError("no completed runs to audit")
        print_warnings(check_keys(rs.included, user_group_keys(self.group_by), "--group-by"))
        rep = audit(rs.included, group_keys(self.group_by))
        print("\n".join(rep.lines(self.per_run)))
        if self.json_out:
            write_json(self.json_out, rep.as_dict())
        if self.out:
            from analysis.output import figures as figs

            info = figs.staleness_figure(rep, self.out)
            print(f"wrote {info.png} and {info.pdf}")
        return rep.exit_code


@dataclass(kw_only=True)
class Figures(ScoreOptions, Grouping):
    """Every figure, table and verdict of the report into one folder (what the HTML
    report embeds)."""

    inputs: tyro.conf.Positional[tuple[Path, ...]]
    """Run folders, sweep folders or results roots."""
    out: Path = Path("analysis-out")
    """Output folder."""
    delta: float | None = None
    """Equivalence margin (normalised units); default per suite (analysis.verdicts.margins)."""
    seed: int = 0
    """Bootstrap seed."""
    reps: int = CURVE_REPS
    """Bootstrap reps for curves and performance profiles."""
    aggregate_reps: int = AGGREGATE_REPS
    """Bootstrap reps for aggregate CIs."""
    reference: str | None = None
    """Reference group of the equivalence verdicts (label or layout name, e.g. a0-l0-d1);
    default: the group with the smallest hardware."""

    def run(self) -> int:
        from analysis.output.report import build_report_assets

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
            if "determinism" in v:  # equivalence verdicts: the bitwise tier they allow
                print(v["determinism"])
        print(f"{counted(res['runs']['included'], 'run')} included, {len(res['runs']['left_out'])} "
              "left out")
        print_warnings(res["warnings"])
        (self.out / "index.json").write_text(json.dumps(res, indent=2) + "\n")
        return EXIT_OK


@dataclass(kw_only=True)
class PlanSequential(SpreadArgs):
    """A sequential (adaptive-seed) design at the per-seed spread of pilot runs (folders)
    or a given --sd: its boundaries per look, and for equivalence and the gate the
    simulated P(PASS) by the cap and expected seeds per side when nothing differs, the
    seeds the fixed design of the same power needs, and the false-pass rate at the margin
    over all looks (docs/analysis.md, "Sequential designs")."""

    first_seeds: int = 3
    """Independent seeds per side at the first look (>= 2)."""
    batch_seeds: int = 2
    """Seeds added per side at each later look."""
    max_seeds: int = 9
    """The cap: seeds per side at the last look."""
    alpha: float = 0.05
    """One-sided error rate held over all looks."""
    spending: str = "obrien-fleming"
    """Alpha-spending function: obrien-fleming or pocock."""
    reference_seeds: int | None = None
    """The gate's fixed reference seeds (default: the cap)."""

    def run(self) -> int:
        # Imported here: the sequential package loads scipy.stats (~0.5 s), which the
        # other subcommands would otherwise pay at start-up.
        from analysis.sequential.design import SequentialDesign, design_plan_lines

        design = SequentialDesign(self.first_seeds, self.batch_seeds, self.max_seeds,
                                  self.alpha, self.spending)
        design.validate()
        spread, suite = self.spread_and_suite()
        print("\n".join(design_plan_lines(
            design, spread, suite, delta=self.delta, gate_delta=self.gate_delta,
            reference_seeds=self.reference_seeds,
            normalisers=parse_normalisers(self.normaliser), sims=self.sims,
            seed=self.seed)))
        return EXIT_OK


@dataclass(kw_only=True)
class Equivalence(RecordArgs, TableFormat):
    """TOST of groups (e.g. hardware layouts) against a reference group on per-seed IQM of
    final score and of normalised AUC at margin delta, within each suite (Atari, or one
    other env): paired by seed where both groups ran the same seeds (at least 2) with the
    same trainer and env protocol, Welch otherwise (--unpaired asks for Welch). Exit 0
    every pair PASS, 1 a DIFFERENT, 4 an INCONCLUSIVE (1 with --strict), 2 error."""

    a: str | None = None
    """Compare only this group (label or layout name, e.g. a0-l1-d1) with the reference;
    default: every group of each system and architecture."""
    reference: str | None = None
    """Reference group (label or layout name, e.g. a0-l0-d1); default: the group with the
    smallest hardware (fewest processes, then devices, then layout name)."""
    delta: float | None = None
    """Equivalence margin in normalised units, fixed beforehand; default per suite: 0.16
    HNS on Atari, 0.2 of the normalised range elsewhere (analysis.verdicts.margins). Check the power
    of your seeds with `python -m analysis plan-seeds`."""
    json_out: Path | None = None
    """Write the verdict as JSON here (a list under "comparisons" when there are several)."""
    bitwise_only: bool = False
    """Only check whether each group's records are bitwise identical to the reference's."""
    metric: Literal["iqm", "atari5-median"] = "iqm"
    """Per-seed value: the IQM over games, or the Atari-5 estimate of the 57-game median
    HNS from BattleZone, DoubleDunk, NameThisGame, Phoenix, Qbert (Atari suite only;
    docs/atari5.md)."""
    unpaired: bool = False
    """Welch's unpaired t even where the pairing by seed holds (same seeds, system and
    env protocol on both sides; the line says which was used). Decide before looking:
    pairing loses power at few seeds where the runs of a seed drift apart."""
    strict: bool = False
    """Exit 1 on INCONCLUSIVE too (default: exit 4, runrecord.exits.EXIT_UNDECIDED)."""
    verbose: bool = False
    """Also print each verdict's per-metric table (means, the 90% CI PASS reads and the
    97.5% CI DIFFERENT reads) and its design (paired by seed or Welch, and its df);
    --json-out and the report hold them either way."""

    def run(self) -> int:
        from analysis.verdicts.compare import equivalence_verdicts

        a = self.analysis()
        print_warnings(a.warnings)
        res = equivalence_verdicts(a, group=self.a, reference=self.reference,
                                   delta=self.delta,
                                   normalisers=parse_normalisers(self.normaliser),
                                   metric=self.metric, bitwise_only=self.bitwise_only,
                                   unpaired=self.unpaired, tables=self.verbose)
        print_warnings(res.warnings)
        self.print_lines(res.lines)
        self.print_table(lambda: equivalence_rows(res.results))
        if self.json_out:
            write_json(self.json_out, res.as_json())
        return strict_exit(res.exit_code, self.strict)


@dataclass(kw_only=True)
class Regression(RunFilter, ScoreOptions, TableFormat):
    """CI gate, three outcomes: PASS when the one-sided lower bound of new - reference
    (per independent seed: IQM over games of the final normalised score; layout copies
    of a seed are averaged first) is above -delta; REGRESSION on evidence of a drop (the
    upper bound below -delta, a game flagged or COLLAPSED); UNDECIDED otherwise, with
    the seeds that would decide it. The same gate as `harness regress`
    (analysis.verdicts.gate). Exit 0 PASS, 1 REGRESSION, 4 UNDECIDED (1 with --strict),
    2 error (including different games, env protocols or suites on the two sides,
    several systems on a side, or a selected layout without a completed run)."""

    new: Path
    """Run/sweep folder of the new version (one system; --where to select one)."""
    reference: str
    """Run/sweep folder of the reference, or a published number in the gate's unit: the
    per-seed metric in normalised units (HNS on Atari; (return - low) / (high - low)
    elsewhere, e.g. CartPole-v1 (return - 22.1) / 477.9), not a raw return (see
    --reference-unit). A number the metric cannot take is refused (exit 2)."""
    reference_unit: Literal["normalised", "return"] = "normalised"
    """Unit of a reference number and its --reference-sd: normalised (the gate's), or
    return (a raw final return of a one-game suite, as per_game.md prints it; converted
    with the game's normaliser)."""
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
    reference_sd: float | None = None
    """With a published reference number: its sample sd over its seeds (ddof=1, as
    per_game.md and reproduce print it; a table's ddof=0 std x sqrt(n / (n - 1))), in
    the unit of --reference-unit. The number's own noise then enters the bound."""
    reference_seeds: int | None = None
    """With a published reference number: how many seeds its mean is over (3 in the
    paper's tables)."""
    reference_exact: bool = False
    """Take a reference number as exact (a fixed threshold with no noise of its own)."""
    assume_equal_spread: bool = False
    """Vouch that both sides share one per-seed spread, so a side with one seed may
    borrow the other's variance (refused otherwise: the rate holds only then)."""
    worst: int = DEFAULT_WORST
    """Games listed in the per-game breakdown (worst new - reference first)."""
    json_out: Path | None = None
    """Write the verdict as JSON here."""
    strict: bool = False
    """Exit 1 on UNDECIDED too (default: exit 4, runrecord.exits.EXIT_UNDECIDED)."""
    unpaired: bool = False
    """Welch's unpaired bound even where the pairing by seed holds (same seeds, system and
    env protocol on both sides; --verbose says which was used). Decide before looking."""
    verbose: bool = False
    """Also print the verdict's design (paired by seed or Welch, and its df) and the
    numbers' unit under its line; --json-out holds them either way ("detail")."""

    def _runs(self, path: Path) -> list[Run]:
        rs = self.records((path,))
        print_warnings(rs.warnings)
        return included_runs(rs)

    def run(self) -> int:
        from analysis.verdicts.gate import gate
        from analysis.verdicts.regression import ReferenceSpread

        new = self._runs(self.new)
        try:
            reference: list[Run] | float = float(self.reference)
        except ValueError:
            reference = self._runs(Path(self.reference))
        out = gate(new, reference, delta=self.delta, metric=self.metric,
                   layouts=self.layout or None, confidence=self.confidence,
                   last_n=self.last_n, normalisers=parse_normalisers(self.normaliser),
                   allow_protocol_mismatch=self.allow_protocol_mismatch,
                   spread=ReferenceSpread(self.reference_sd, self.reference_seeds,
                                          self.reference_exact, self.assume_equal_spread),
                   strict=self.strict, unpaired=self.unpaired,
                   reference_unit=self.reference_unit)
        print_warnings(out.warnings)
        self.print_lines(out.lines(self.worst, self.verbose))
        self.print_table(lambda: regression_rows(out.result))
        if self.json_out:
            write_json(self.json_out, out.result.as_dict())
        return out.exit_code
