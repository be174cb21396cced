"""Which pairs of groups get a probability of improvement: by default each group against
its reference group (the equivalence pairing rule, analysis.verdicts.pairing: within a
(system, architecture) family, the named or smallest-hardware group), else the pairs the
user names, or every ordered pair with the same tasks when asked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from analysis.errors import AnalysisError
from analysis.inputs.env_versions import version_hint
from analysis.scoring.grouping import Analysis, match_groups
from analysis.scoring.scores import GroupScores
from analysis.verdicts.pairing import analysis_pairs

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
        return pairs, f"the {len(pairs)} pair(s) named with --pair"
    if len(groups) < 2:
        return [], "no pair (one group)"
    found, _ = analysis_pairs(a, reference=reference)
    pairs = [(p.prefix + p.group.group, p.prefix + p.reference.group) for p in found]
    apart = [f"{x} vs {y} (different tasks{version_hint(groups[x].tasks, groups[y].tasks)})"
             for x, y in pairs if (x, y) not in same_tasks]
    pairs = [p for p in pairs if p in same_tasks]
    refs = sorted({y for _, y in pairs})
    return pairs, (f"{len(pairs)} pair(s), each group against its reference "
                   f"({', '.join(refs) or 'none'}; --reference, --pair 'X vs Y' or "
                   "--all-pairs for others)"
                   + (f"; not compared: {'; '.join(apart)}" if apart else ""))

