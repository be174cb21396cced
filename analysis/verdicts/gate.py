"""The regression gate on run records: one implementation for `python -m analysis
regression` and `harness regress`.

`gate(new, reference, ...)` takes one system's runs of one suite on each side (or a
published number as the reference) and applies, in this order, the checks both entry
points need, so that neither can gate what the other would refuse:
1. the metric is one of GATE_METRICS;
2. each side has completed runs, of ONE system/architecture and ONE suite (select with
   --where, or a sweep's [regression] systems/games);
3. both sides cover the same games (the message names what each side lacks);
4. both sides recorded the same env protocol (or the mismatch is allowed: a note says so);
5. every selected layout has a completed run on each side: a layout that stops working
   fails the gate too (default selection: every layout either side ran);
then the seed-level gate (analysis.verdicts.regression.regression_gate). A failed check
raises AnalysisError (exit 2). `GateOutcome.lines()` are the verdict lines both entry
points print.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from analysis.errors import AnalysisError
from analysis.inputs.load import DEFAULT_LAST_N, RunSet
from analysis.inputs.protocol import check_same_protocol
from analysis.scales.normalize import check_reference_number, return_to_normalised, unit_name
from analysis.scoring.grouping import analyse, layout_names, manifest_family
from analysis.scoring.scores import GroupScores, collapse_seed_copies, runs_by_suite, suite_name
from analysis.verdicts.equivalence import UNDECIDED
from analysis.verdicts.margins import DEFAULT_WORST, margin
from analysis.verdicts.regression import (
    ReferenceSpread,
    RegressionResult,
    check_same_games,
    regression,
    regression_gate,
)
from analysis.verdicts.seed_pairing import SEED_METRICS
from analysis.verdicts.seedplan import gate_undecided
from runrecord import Run
from runrecord.words import counted


class GateMetric(NamedTuple):
    score: str  # "final" or "auc": which normalised score of each run
    seed_metric: str  # a SEED_METRICS key: how a seed's games become one number


GATE_METRICS: dict[str, GateMetric] = {
    "iqm": GateMetric("final", "iqm"),
    "final": GateMetric("final", "iqm"),
    "auc": GateMetric("auc", "iqm"),
    "atari5-median": GateMetric("final", "atari5-median"),
}
"""The gate's metrics by name, the same in both entry points: iqm (IQM over games of the
final normalised score; `final` is the same metric under a second name, so that commands
written with `--metric final` still run), auc (IQM over games of the normalised AUC), atari5-median
(the Atari-5 estimate of the 57-game median HNS, docs/atari5.md)."""

DEFAULT_GATE_METRIC = "iqm"


def gate_metric(name: str) -> GateMetric:
    """The gate metric called `name`; AnalysisError naming the valid ones otherwise."""
    if name not in GATE_METRICS:
        raise AnalysisError(f"regression metric {name!r}; valid: {', '.join(GATE_METRICS)}")
    return GATE_METRICS[name]


@dataclass
class GateOutcome:
    """A gate verdict and the analysis warnings met on the way (printed to stderr)."""

    result: RegressionResult
    warnings: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return self.result.exit_code

    def lines(self, worst: int = DEFAULT_WORST, verbose: bool = False) -> list[str]:
        """The verdict line, the `worst` games when there are several, and the notes;
        `verbose`: the design and unit lines under the verdict line."""
        res = self.result
        out = [res.line(), *(res.detail_lines() if verbose else []), *res.why_lines()]
        if len(res.per_game) > 1:
            out.append("worst games (new - reference):")
            out += res.game_lines(worst)
        return out + [f"note: {n}" for n in res.notes]


def _side(runs: Sequence[Run], side: str, *, last_n: int,
          normalisers: Mapping[str, tuple[float, float]] | None
          ) -> tuple[str, str, dict[str, GroupScores], list[str]]:
    """(system, suite, {layout: GroupScores}, warnings) of one side: one system, one suite."""
    if not runs:
        raise AnalysisError(f"{side}: no completed runs with episodes to analyse")
    a = analyse(RunSet(included=list(runs)), group_by="layout.name", last_n=last_n,
                normalisers=normalisers)
    if len(a.suites) != 1:
        raise AnalysisError(f"{side}: runs form {len(a.suites)} suites {a.suite_names}; "
                            "select one with --where env_id=... (a sweep: [regression] games)")
    groups = list(a.suites[0].values())
    families = {manifest_family(gs) for gs in groups}
    if len(families) != 1:
        raise AnalysisError(f"{side}: runs of {len(families)} systems/architectures "
                            f"{sorted(map(str, families))}; select one with --where "
                            "system=... (a sweep: [regression] systems)")
    by_layout = {lay: gs for gs in groups for lay in layout_names(gs)}
    return str(next(iter(families))[0]), a.suite_names[0], by_layout, a.warnings


def _games(runs: Sequence[Run]) -> list[str]:
    return sorted({str(r.manifest["env_id"]) for r in runs})


def _on_layouts(runs: Sequence[Run], layouts: Sequence[str] | None) -> list[Run]:
    if layouts is None:
        return list(runs)
    return [r for r in runs if (r.manifest.get("layout") or {}).get("name") in layouts]


def gate(
    new: Sequence[Run],
    reference: Sequence[Run] | float,
    *,
    delta: float | None = None,
    metric: str = DEFAULT_GATE_METRIC,
    layouts: Sequence[str] | None = None,
    confidence: float = 0.95,
    last_n: int = DEFAULT_LAST_N,
    normalisers: Mapping[str, tuple[float, float]] | None = None,
    allow_protocol_mismatch: bool = False,
    spread: ReferenceSpread = ReferenceSpread(),
    strict: bool = False,
    unpaired: bool = False,
    reference_unit: str = "normalised",
) -> GateOutcome:
    """The regression gate of `new` against `reference` (run records, or a published
    number in the same normalised units); checks and their order in the module docstring.
    layouts: the selected layouts (runs on others are ignored); None: every layout either
    side ran (the new side's against a published number).
    delta None: the suite's margin (analysis.verdicts.margins). spread: what the user
    vouches for where a spread is unknown (a published number's sd and seeds, or exact;
    equal spreads for a one-seed side): analysis.verdicts.regression.ReferenceSpread.
    strict: UNDECIDED exits EXIT_FAILED instead of EXIT_UNDECIDED. unpaired: Welch even
    where the pairing by seed holds (analysis.verdicts.seed_pairing). reference_unit: a
    reference number's unit, "normalised" (the gate's, checked against the range the
    metric can take: analysis.scales.normalize) or "return" (a raw return of a one-game suite,
    converted with its sd)."""
    score, seed_metric = gate_metric(metric)
    new = _on_layouts(new, layouts)
    system, suite, new_groups, warnings = _side(new, "new runs", last_n=last_n,
                                                normalisers=normalisers)
    m = margin(suite, delta, normalisers)
    notes: list[str] = []
    if isinstance(reference, Sequence):
        reference = _on_layouts(reference, layouts)
        check_same_games(_games(new), _games(reference))
        ref_system, ref_suite, ref_groups, ref_warnings = _side(
            reference, "reference", last_n=last_n, normalisers=normalisers)
        if ref_suite != suite:
            raise AnalysisError(f"new runs are {suite}, the reference {ref_suite}: nothing "
                                "to compare")
        notes = check_same_protocol({"new": new, "reference": reference},
                                    allow_mismatch=allow_protocol_mismatch)
        selected = list(layouts) if layouts is not None else sorted({*new_groups,
                                                                      *ref_groups})
        _check_layouts(new_groups, selected, "new runs", system, _games(new), warnings)
        _check_layouts(ref_groups, selected, "reference", ref_system, _games(reference),
                       ref_warnings)
        warnings += ref_warnings
        res = regression_gate(chosen_groups(new_groups, selected), chosen_groups(ref_groups, selected),
                              m.value, confidence=confidence, score=score,
                              margin=m.describe(), metric=SEED_METRICS[seed_metric],
                              metric_name=seed_metric, spread=spread, unpaired=unpaired)
    else:  # a published number: one-sample bound on the new seeds
        selected = list(layouts) if layouts is not None else sorted(new_groups)
        _check_layouts(new_groups, selected, "new runs", system, _games(new), warnings)
        seeds = collapse_seed_copies(chosen_groups(new_groups, selected), "new", attr=score)
        # the number (and its sd) in the gate's normalised units, refused (exit 2) when
        # it cannot be in them (analysis.scales.normalize)
        number = float(reference)
        if reference_unit not in REFERENCE_UNITS:
            raise AnalysisError(f"reference unit {reference_unit!r}; valid: "
                                f"{', '.join(REFERENCE_UNITS)}")
        if reference_unit == RETURN_UNIT:
            if metric not in ("iqm", "final"):
                raise AnalysisError(f"--reference-unit return is a final return: it needs "
                                    f"--metric iqm (or final), not {metric}")
            number, sd = return_to_normalised(number, spread.sd, seeds.tasks, normalisers)
            spread = replace(spread, sd=sd)
        check_reference_number(number, spread.sd, suite, seeds.tasks, normalisers)
        res = regression(SEED_METRICS[seed_metric](seeds.values, seeds.tasks),
                         number, m.value, confidence, spread)
        raw = ([f"--reference {float(reference):g} is a raw {seeds.tasks[0]} return: "
                f"{number:.4g} in {unit_name(suite, normalisers)}"]
               if reference_unit == RETURN_UNIT else [])
        res = replace(res, new_seeds=seeds.describe(), margin=m.describe(),
                      games=list(seeds.tasks), metric=seed_metric, notes=[*res.notes, *raw])
    undecided = gate_undecided(res) if res.verdict == UNDECIDED else ""
    res = replace(res, notes=[*res.notes, *notes], unit=unit_name(suite, normalisers),
                  subject=(f"{system} on {suite} ({counted(len(selected), 'layout')}, "
                           f"{counted(len(res.games), 'game')})"), strict=strict, undecided=undecided)
    return GateOutcome(res, warnings)


RETURN_UNIT = "return"
REFERENCE_UNITS = ("normalised", RETURN_UNIT)


def _check_layouts(groups: Mapping[str, GroupScores], selected: Sequence[str], side: str,
                   system: str, games: Sequence[str], warnings: Sequence[str]) -> None:
    missing = [lay for lay in selected if lay not in groups]
    if missing:
        why = "; ".join(warnings)
        raise AnalysisError(f"{side}: no completed run of {system} on layout{'s' if len(missing) > 1 else ''} {missing} "
                            f"({', '.join(games)}){': ' + why if why else ''}")


def chosen_groups(groups: Mapping[str, GroupScores], selected: Sequence[str]
                  ) -> list[GroupScores]:
    """The groups ({layout: group}) of the selected layouts that have one, each once (a
    group can span layouts)."""
    out: list[GroupScores] = []
    for lay in selected:
        if lay in groups and all(groups[lay] is not g for g in out):
            out.append(groups[lay])
    return out


def suite_gates(new: Sequence[Run], reference: Sequence[Run], *,
                delta: float | None = None, metric: str = DEFAULT_GATE_METRIC,
                layouts: Sequence[str] | None = None,
                allow_protocol_mismatch: bool = False, strict: bool = False,
                assume_equal_spread: bool = False) -> Iterator[GateOutcome]:
    """The gate of one system's runs against its reference runs, suite by suite (Atari;
    each other env), largest suite first: both sides must cover the same games (an
    AnalysisError before any gate), then one `gate` per suite. A generator: the gates
    of the suites before one that raises are already given. `harness regress` calls
    this once per system. assume_equal_spread: a one-seed side borrows the other side's
    spread (ReferenceSpread.equal_spread)."""
    check_same_games(_games(new), _games(reference))
    for suite, suite_new in runs_by_suite(new).items():
        suite_ref = [r for r in reference if suite_name(str(r.manifest["env_id"])) == suite]
        yield gate(suite_new, suite_ref, delta=delta, metric=metric, layouts=layouts,
                   allow_protocol_mismatch=allow_protocol_mismatch, strict=strict,
                   spread=ReferenceSpread(equal_spread=assume_equal_spread))
