"""Groups of a suite: runs split into suites and grouped by manifest keys (systems and
architectures always apart), and the reference group (smallest hardware).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from analysis.errors import AnalysisError
from analysis.inputs.load import (
    BACKEND_KEY,
    DEFAULT_LAST_N,
    RunSet,
    check_keys,
    load_runs,
    manifest_get,
)
from analysis.inputs.protocol import ProtocolMismatch, check_same_protocol
from analysis.scales.normalize import get_normaliser
from analysis.scoring.scores import (
    DEFAULT_POINTS,
    GroupScores,
    common_frame_grid,
    group_cells,
    group_runs,
    runs_by_suite,
    scores_by_group,
)
from runrecord.layout import LayoutError, parse_layout

FAMILY_KEYS = ("system", "architecture")


def group_keys(group_by: str) -> list[str]:
    """Report groups always separate systems and architectures:
    ["system", "architecture", *group_by keys]."""
    return [*FAMILY_KEYS, *user_group_keys(group_by)]


def user_group_keys(group_by: str | Sequence[str]) -> list[str]:
    """The --group-by keys the user named, without the family keys always added."""
    keys = [k.strip() for k in group_by.split(",")] if isinstance(group_by, str) else group_by
    return [k for k in keys if k and k not in FAMILY_KEYS]


def group_values(gs: GroupScores, keys: Sequence[str]) -> tuple:
    run = next(iter(gs.runs.values()))
    return tuple(manifest_get(run.manifest, k) for k in keys)


def manifest_family(gs: GroupScores) -> tuple:
    """(system, architecture) of a group: equivalence compares groups of one family."""
    return group_values(gs, FAMILY_KEYS)


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
    allow_protocol_mismatch: bool = False,
    on_protocol_mismatch: Literal["raise", "skip"] = "raise",
) -> Analysis:
    """Load runs, split them into suites (runs_by_suite), then group and score each
    suite's runs on the suite's own frame grid. Groups that cannot be scored (e.g. no seed
    covers every env) are reported in warnings and skipped.

    Protocol guard: the runs of a suite are pooled and compared only when they recorded
    the same env protocol (analysis.inputs.protocol). A mismatch raises ProtocolMismatch (exit 2
    in the CLI) naming the differing keys, or with on_protocol_mismatch="skip" leaves the
    suite out with a warning; allow_protocol_mismatch keeps it, with a warning. Grouped by
    the backend (env_protocol.backend), the groups compare backends: the backend may then
    differ, nothing else."""
    runset = inputs if isinstance(inputs, RunSet) else load_runs(inputs)
    keys = group_keys(group_by) if isinstance(group_by, str) else list(group_by)
    warnings = list(runset.warnings)
    warnings += check_keys(runset.included, user_group_keys(group_by), "--group-by")
    out: list[dict[str, GroupScores]] = []
    names: list[str] = []
    by_suite = runs_by_suite(runset.included)
    for suite_name, runs in by_suite.items():
        pre = f"{suite_name}: " if len(by_suite) > 1 else ""
        try:
            warnings += [pre + w for w in check_same_protocol(
                group_runs(runs, keys), allow_mismatch=allow_protocol_mismatch,
                ignore=("backend",) if BACKEND_KEY in keys else ())]
        except ProtocolMismatch as e:
            if on_protocol_mismatch == "raise":
                raise
            warnings.append(f"{pre}suite left out: {e}")
            continue
        kept_ids: set[int] = set()
        for g, rs in group_runs(runs, keys).items():
            try:  # the errors scoring the group alone would raise, computing no score
                common_frame_grid(rs, 2)
                by_cell, seeds, tasks, _ = group_cells(g, rs)
                for t in tasks:
                    get_normaliser(t, normalisers)
            except AnalysisError as e:
                warnings.append(f"{pre}group {g!r} left out of the analysis: {e}")
                continue
            kept_ids.update(id(r) for (s, _), r in by_cell.items() if s in seeds)
        if kept_ids:
            # Score on the suite's common grid so AUCs and curves compare across groups.
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


def labelled_groups(a: Analysis) -> dict[str, GroupScores]:
    """Every scored group of an analysis; labels get a "<suite>: " prefix when there are
    several suites (the same group can appear in, e.g., the CartPole and the Atari
    suite). AnalysisError when no group could be scored, with the analysis's reasons."""
    out: dict[str, GroupScores] = {}
    multi = len(a.suites) > 1
    for name, suite in zip(a.suite_names, a.suites, strict=True):
        out.update({(f"{name}: {g}" if multi else g): gs for g, gs in suite.items()})
    if not out:
        reasons = [w for w in a.warnings if "left out of the analysis" in w] or a.warnings
        raise AnalysisError("no group could be scored: " + "; ".join(reasons))
    return out
