"""Which groups an equivalence verdict compares: one rule for `python -m analysis
equivalence`, `figures` and the report (harness report).

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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from analysis.errors import AnalysisError
from analysis.inputs.env_versions import version_hint
from analysis.scoring.grouping import (
    Analysis,
    choose_reference,
    labelled_groups,
    manifest_family,
    match_groups,
)
from analysis.scoring.scores import GroupScores
from runrecord.words import counted

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
