"""`python -m analysis equivalence` and `regression`: flags, then one call each
(analysis.verdicts.compare + compare, analysis.verdicts.gate).

The verdict modules (scipy.stats) are imported in run(): the other subcommands do not
pay for them at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from analysis.cli.common import (
    RecordArgs,
    RunFilter,
    ScoreOptions,
    TableFormat,
    included_runs,
    print_warnings,
)
from analysis.json_file import write_json
from analysis.output.tables import equivalence_rows, regression_rows
from analysis.scales.normalize import parse_normalisers
from analysis.verdicts.margins import DEFAULT_WORST
from runrecord import Run
from runrecord.exits import strict_exit


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
