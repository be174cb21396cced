"""Which groups an equivalence verdict compares, and their verdicts as `python -m
analysis equivalence` prints them: per pair a table of both metrics and the verdict line
(or, bitwise only, whether the records are identical), the JSON of every comparison, and
the exit code. One rule for `equivalence`, `figures` and the report (harness report).

Within one suite, groups of the same (system, architecture) are a family; every group of a
family is compared with the family's reference group (the one the user names, else the
smallest hardware: analysis.scoring.grouping.choose_reference). When no family has two
groups (e.g. two systems with one layout each), the whole suite is one family. With a
named group `a`, only that group is compared, with the reference of its family (or of the
suite when its family has no other group).

`choose_pairs`: which pairs of groups get a probability of improvement in `aggregate`:
by default the same pairs, else the pairs the user names, or every ordered pair with the
same tasks when asked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from analysis.errors import AnalysisError
from analysis.inputs.load import version_hint
from analysis.scoring.grouping import (
    Analysis,
    choose_reference,
    labelled_groups,
    manifest_family,
    match_groups,
)
from analysis.scoring.scores import GroupScores
from analysis.scoring.tables import TableData
from analysis.verdicts.equivalence import (
    DIFFERENT_LEVEL,
    EquivalenceResult,
    bitwise_identical,
    ci_text,
    determinism_line,
    different_ci,
    equivalence,
)
from analysis.verdicts.margins import Margin, margin
from analysis.verdicts.seed_pairing import SEED_METRICS
from analysis.verdicts.stacks import UNKNOWN, group_determinism_tier, group_stacks
from runrecord.exits import EXIT_FAILED, EXIT_OK, worst_exit
from runrecord.words import counted, signed

Pair = tuple[GroupScores, GroupScores]
"""(group, its reference)."""


@dataclass
class Pairing:
    """The pairs of one suite, and why some family has none (families whose groups do
    not include the named reference)."""

    pairs: list[Pair] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def match_one(groups: Mapping[str, GroupScores], name: str, what: str) -> str | None:
    """The label of the one group `name` names (label or layout name); None when none
    does; AnalysisError when several do."""
    found = match_groups(groups, name)
    if len(found) > 1:
        raise AnalysisError(f"{what} {name!r} is ambiguous: {found}")
    return found[0] if found else None


def by_family(suite: Mapping[str, GroupScores]) -> dict[tuple, dict[str, GroupScores]]:
    """{(system, architecture): its groups} of one suite."""
    out: dict[tuple, dict[str, GroupScores]] = {}
    for g, gs in suite.items():
        out.setdefault(manifest_family(gs), {})[g] = gs
    return out


def families(suite: Mapping[str, GroupScores]) -> list[dict[str, GroupScores]]:
    """The units compared within a suite: each (system, architecture) with 2+ groups, or
    the whole suite when there is none."""
    return [f for f in by_family(suite).values() if len(f) > 1] or [dict(suite)]


def pair_groups(suite: Mapping[str, GroupScores], a: str | None = None,
                reference: str | None = None) -> Pairing:
    """(group, reference) pairs of one suite (module docstring). Empty when a named group
    is not in this suite; AnalysisError when a name is ambiguous."""
    if a is not None:
        ga = match_one(suite, a, "group")
        if ga is None:
            return Pairing()
        if reference is not None:
            gr = match_one(suite, reference, "reference group")
            return Pairing() if gr is None else Pairing([(suite[ga], suite[gr])])
        family_a = manifest_family(suite[ga])
        others = {g: gs for g, gs in suite.items()
                  if g != ga and manifest_family(gs) == family_a}
        others = others or {g: gs for g, gs in suite.items() if g != ga}
        return Pairing([(suite[ga], suite[choose_reference(others)])] if others else [])
    out = Pairing()
    for fam in families(suite):
        if reference is not None and match_one(fam, reference, "reference group") is None:
            names = sorted({" / ".join(map(str, manifest_family(gs))) for gs in fam.values()})
            out.warnings.append(f"no equivalence verdicts for {', '.join(names)}: reference "
                                f"group {reference!r} not found; groups: {list(fam)} (name "
                                "a group label or a layout name, e.g. a0-l0-d1)")
            continue
        ref = choose_reference(fam, reference)
        out.pairs += [(gs, fam[ref]) for g, gs in fam.items() if g != ref]
    return out


@dataclass
class SuitePair:
    """A pair to compare and the suite it belongs to (its verdict line's prefix)."""

    suite: str
    prefix: str  # "<suite>: " when the analysis has several suites, else ""
    group: GroupScores
    reference: GroupScores


def analysis_pairs(a: Analysis, group: str | None = None, reference: str | None = None,
                   suites: Sequence[str] | None = None) -> tuple[list[SuitePair], list[str]]:
    """Every suite's pairs (only `suites` when given), and warnings. AnalysisError when
    there is nothing to compare, naming the groups."""
    multi = len(a.suites) > 1
    pairs: list[SuitePair] = []
    warnings: list[str] = []
    for name, suite in zip(a.suite_names, a.suites, strict=True):
        if suites is not None and name not in suites:
            continue
        p = pair_groups(suite, group, reference)
        warnings += p.warnings
        pairs += [SuitePair(name, f"{name}: " if multi else "", x, y) for x, y in p.pairs]
    if not pairs:
        labels = list(labelled_groups(a))
        if group is not None or reference is not None:
            named = " / ".join(repr(n) for n in (group, reference) if n is not None)
            raise AnalysisError(f"group {named} not found (or not together in one "
                                f"suite); groups: {labels}")
        raise AnalysisError(f"found {counted(len(labels), 'group')} {labels}: nothing to compare")
    return pairs, warnings


PAIR_SEPARATOR = " vs "


def _named_group(groups: Mapping[str, GroupScores], name: str, text: str) -> str:
    found = match_groups(groups, name)
    if len(found) != 1:
        raise AnalysisError(
            f"--pair {text!r}: group {name!r} {'is ambiguous' if found else 'not found'}"
            f"; groups: {list(groups)}")
    return found[0]


def choose_pairs(
    a: Analysis,
    groups: Mapping[str, GroupScores],
    *,
    reference: str | None = None,
    named: Sequence[str] = (),
    all_pairs: bool = False,
) -> tuple[list[tuple[str, str]], str]:
    """Ordered pairs (X, Y) with the same tasks, and a sentence saying which were chosen.

    named: "X vs Y" texts (group labels or layout names). Groups whose tasks differ from
    the other's are never paired.
    """
    same_tasks = [(x, y) for x in groups for y in groups
                  if x != y and groups[x].tasks == groups[y].tasks]
    if all_pairs:
        return same_tasks, f"all {len(same_tasks)} ordered pairs (--all-pairs)"
    if named:
        pairs = []
        for text in named:
            if PAIR_SEPARATOR not in text:
                raise AnalysisError(f"bad --pair {text!r}: expected 'X vs Y' (group labels or "
                                    "layout names)")
            x_name, y_name = text.split(PAIR_SEPARATOR, 1)
            pair = (_named_group(groups, x_name, text), _named_group(groups, y_name, text))
            if pair not in same_tasks:
                raise AnalysisError(f"--pair {text!r}: the two groups are the same or ran "
                                    "different tasks")
            pairs.append(pair)
        return pairs, f"the {counted(len(pairs), 'pair')} named with --pair"
    if len(groups) < 2:
        return [], "no pair (one group)"
    found, _ = analysis_pairs(a, reference=reference)
    pairs = [(p.prefix + p.group.group, p.prefix + p.reference.group) for p in found]
    apart = [f"{x} vs {y} (different tasks{version_hint(groups[x].tasks, groups[y].tasks)})"
             for x, y in pairs if (x, y) not in same_tasks]
    pairs = [p for p in pairs if p in same_tasks]
    refs = sorted({y for _, y in pairs})
    return pairs, (f"{counted(len(pairs), 'pair')}, each group against its reference "
                   f"({', '.join(refs) or 'none'}; --reference, --pair 'X vs Y' or "
                   "--all-pairs for others)"
                   + (f"; not compared: {'; '.join(apart)}" if apart else ""))


@dataclass
class Comparisons:
    lines: list[str] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    exit_code: int = EXIT_OK
    warnings: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """One comparison as it is; several under "comparisons"."""
        return self.results[0] if len(self.results) == 1 else {"comparisons": self.results}


def heading(p: SuitePair) -> str:
    """The heading of one comparison's block (a markdown heading: the block is the table,
    the verdict line and the lines under it)."""
    return f"### {p.prefix}{p.group.group} against reference {p.reference.group}"


CROSS_SYSTEM_MARGIN = (
    "the default margin is the one for layouts of one system, set from the spread of "
    "their seeds (docs/analysis.md, Margins); between two systems or architectures "
    "nothing makes it the difference that matters: fix one with --delta before looking")
"""Noted under a verdict between two families at the default margin."""


BITWISE_WITHOUT_BLOCK = (
    "the bitwise identity shows that these runs, with the software and devices the stack "
    "line names, gave the same records on every seed; without a determinism block it does "
    "not show that they would on other software, another device kind or another run "
    "(docs/deterministic.md: runs with --deterministic record what must match)")
"""Said under an identical pair whose records predate (or lack) the determinism block."""


@dataclass(frozen=True)
class PairVerdict:
    """One pair's equivalence verdict, or why it has none."""

    pair: SuitePair
    result: EquivalenceResult | None
    error: str = ""
    """Without a result: the AnalysisError that kept the pair from a verdict."""

    @property
    def subject(self) -> str:
        return f"{self.pair.group.group} vs {self.pair.reference.group}"


def pair_verdicts(pairs: Iterable[SuitePair], margin_of: Callable[[str], Margin],
                  metric: str = "iqm", unpaired: bool = False) -> Iterator[PairVerdict]:
    """Welch TOST of each pair at the margin of its suite (`margin_of(suite name)`) on the
    per-seed `metric` (a SEED_METRICS key), in the pairs' order. The one loop over pairs:
    the CLI (equivalence_verdicts, where a pair without a verdict is an error) and the report
    (analysis.output.report, where it is a warning) both read it."""
    for p in pairs:
        m = margin_of(p.suite)
        try:
            res = equivalence(p.group, p.reference, m.value, margin=m.describe(),
                              metric=SEED_METRICS[metric], metric_name=metric,
                              unpaired=unpaired)
        except AnalysisError as e:
            yield PairVerdict(p, None, str(e))
            continue
        yield PairVerdict(p, res)


def equivalence_verdicts(a: Analysis, *, group: str | None = None,
                         reference: str | None = None, delta: float | None = None,
                         normalisers: Mapping[str, tuple[float, float]] | None = None,
                         metric: str = "iqm", bitwise_only: bool = False,
                         unpaired: bool = False, tables: bool = True) -> Comparisons:
    """Every equivalence verdict of an analysis: the pairs of analysis_pairs (only the
    Atari suite for metric atari5-median, a warning naming the others), each a TOST at
    its suite's margin (or `delta`) on the per-seed `metric` (a SEED_METRICS key), paired
    by seed where the pairing holds (`unpaired`: Welch); bitwise_only: only whether the
    records are identical. `tables`: each verdict's lines open with its per-metric table
    (means, 90% and 97.5% CIs) and follow with its design line (paired or Welch, df; the
    CLI's --verbose); the verdict line carries the outcome, estimate, CI, margin and
    seeds. AnalysisError when there is nothing to compare."""
    suites = ["Atari"] if metric == "atari5-median" else None
    skipped = [f"{name}: no verdict (--metric atari5-median is for Atari)"
               for name in a.suite_names if suites and name not in suites]
    pairs, warnings = analysis_pairs(a, group, reference, suites)
    out = Comparisons(warnings=skipped + warnings)
    if bitwise_only:
        for p in pairs:
            ga, gb = p.group, p.reference
            bw = bitwise_identical(ga, gb)
            out.lines.append(heading(p))
            out.lines.append(f"{p.prefix}bitwise {ga.group} vs reference {gb.group}: "
                             f"{'IDENTICAL' if bw.identical else 'NOT IDENTICAL'} "
                             f"({bw.detail})")
            tier = group_determinism_tier(ga, gb)
            stacks = group_stacks(ga, gb)
            if bw.identical and tier.startswith(UNKNOWN):  # above the tier and stack lines
                out.lines.append(f"note: {BITWISE_WITHOUT_BLOCK}")
            out.lines += [p.prefix + determinism_line(ga.group, gb.group, tier,
                                                      bw.identical),
                          p.prefix + stacks.line(ga.group, gb.group)]
            out.results.append({"group_a": ga.group, "reference": gb.group, **asdict(bw),
                                "determinism": tier, "stacks": stacks.as_dict(),
                                "stack_line": stacks.line(ga.group, gb.group)})
            out.exit_code = worst_exit(out.exit_code, EXIT_OK if bw.identical else EXIT_FAILED)
        return out
    for v in pair_verdicts(pairs, lambda suite: margin(suite, delta, normalisers), metric,
                           unpaired):
        if v.result is None:  # the command cannot answer what it was asked: exit 2
            raise AnalysisError(v.error)
        p, res = v.pair, v.result
        extra = [*([CROSS_SYSTEM_MARGIN] if delta is None and manifest_family(p.group)
                   != manifest_family(p.reference) else []),
                 *([BITWISE_WITHOUT_BLOCK] if res.bitwise.identical
                   and res.determinism.startswith(UNKNOWN) else [])]
        if extra:
            res = replace(res, notes=[*res.notes, *extra])
        # both metrics: means, difference and its 90% CI (what PASS reads) and its CI at
        # the level DIFFERENT reads, paired or Welch as the verdict is
        fewest = min(len(res.seeds_a), len(res.seeds_b))
        rows = [[name, f"{w.mean_a:.3f}", f"{w.mean_b:.3f}", f"{signed(w.diff)}",
                 ci_text(w.ci90, fewest), ci_text(different_ci(w), fewest)]
                for name, w in res.metrics()]
        table = [TableData("eq", "eq", ["metric (per seed)", "A", "reference", "A - ref",
                                        "90% CI", f"{DIFFERENT_LEVEL:.1%} CI"],
                           rows).markdown()] if tables else []
        design = [p.prefix + res.design_line()] if tables else []
        out.lines += [*([""] if out.lines else []), heading(p), *table,
                      p.prefix + res.line(), *design,
                      p.prefix + res.determinism_line(), p.prefix + res.stack_line()]
        out.lines += [f"note: {n}" for n in res.notes]
        out.results.append({**res.as_dict(), "suite": p.prefix[:-2] or None})
        out.exit_code = worst_exit(out.exit_code, res.exit_code)
    return out
