"""The protocol guard: runs made under different environment protocols are not pooled or
compared unless the user explicitly allows it.

A run's protocol is its manifest's `env_protocol` (the env settings it trained under:
sticky actions, episode cap, action set, life-loss signal, reward clipping, frame skip...,
and the backend that ran them: `envpool` or `ale`). The backend is part of the protocol:
EnvPool and ALE runs are not pooled or compared unless allowed. A protocol that names no
backend is EnvPool's (records written before the key; benchenv.LEGACY_BACKEND); the
backend's version is information, never a difference (benchenv.INFORMATION_KEYS).
A run whose manifest has no `env_protocol` key (e.g. an imported run whose protocol was
not declared) has an *unknown* protocol, which never matches anything.

Pure functions over dicts; the CLI turns `ProtocolMismatch` into exit 2.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from analysis.errors import AnalysisError
from benchenv import ATARI_PROTOCOL, INFORMATION_KEYS, LEGACY_BACKEND
from runrecord import Run
from runrecord.words import counted

UNKNOWN = "unknown"
"""What a run without a recorded env protocol shows in a difference."""

Protocol = Mapping[str, Any] | None


class ProtocolMismatch(AnalysisError):
    """Runs to be pooled or compared were made under different env protocols."""

    def __init__(self, message: str, differing_keys: Sequence[str]):
        super().__init__(message)
        self.differing_keys = list(differing_keys)


def run_protocol(run: Run) -> Protocol:
    """The env protocol a run recorded, or None when it recorded none (unknown); without
    its information keys, and with the backend of a record older than the key (EnvPool)."""
    proto = run.manifest.get("env_protocol")
    if not isinstance(proto, Mapping):
        return None
    return {"backend": LEGACY_BACKEND,
            **{k: v for k, v in proto.items() if k not in INFORMATION_KEYS}}


def protocol_differences(a: Protocol, b: Protocol) -> dict[str, tuple[Any, Any]]:
    """{key: (value in a, value in b)} for every key whose values differ.

    A key present on one side only differs (the other side shows `UNKNOWN`). An unknown
    protocol (None) differs from everything, itself included, under the key
    `env_protocol`: nobody can vouch that two undeclared protocols are the same.
    """
    if a is None or b is None:
        return {"env_protocol": (UNKNOWN if a is None else "recorded",
                                 UNKNOWN if b is None else "recorded")}
    return {
        key: (a.get(key, UNKNOWN), b.get(key, UNKNOWN))
        for key in sorted(set(a) | set(b))
        if a.get(key, UNKNOWN) != b.get(key, UNKNOWN)
    }


def describe_differences(diffs: Mapping[str, tuple[Any, Any]], left: str, right: str) -> str:
    """`repeat_action_probability: 0.25 (A) vs 0.0 (B); ...` for an error or a warning."""
    return "; ".join(f"{k}: {va!r} ({left}) vs {vb!r} ({right})" for k, (va, vb) in diffs.items())


def check_same_protocol(
    labelled_runs: Mapping[str, Sequence[Run]], *, allow_mismatch: bool = False,
    flag: str = "--allow-protocol-mismatch", ignore: Sequence[str] = (),
) -> list[str]:
    """Check that every run of every labelled side shares one env protocol.

    Runs are compared with the first run of the first side (per env id: a suite of
    several games shares one protocol, each game with itself). Raises ProtocolMismatch
    naming the differing keys, unless `allow_mismatch`, in which case the same text is
    returned as warnings for the output and the report. Keys in `ignore` (e.g.
    TRAINING_ONLY_KEYS) are not compared.
    """
    first: dict[str, tuple[str, Run]] = {}
    warnings: list[str] = []
    keys: list[str] = []
    for label, runs in labelled_runs.items():
        for run in runs:
            env_id = str(run.manifest.get("env_id"))
            if env_id not in first:
                first[env_id] = (label, run)
                continue
            ref_label, ref = first[env_id]
            diffs = protocol_differences(run_protocol(ref), run_protocol(run))
            diffs = {k: v for k, v in diffs.items() if k not in ignore}
            if not diffs:
                continue
            keys += [k for k in diffs if k not in keys]
            warnings.append(
                f"env protocol differs on {env_id}: "
                + describe_differences(diffs, f"{ref_label}: {ref.run_id}",
                                       f"{label}: {run.run_id}")
            )
    return _refused_or_allowed(warnings, keys, allow_mismatch, "pool or compare runs made "
                               "under different env protocols", f"{flag} to compare them")


def _refused_or_allowed(warnings: list[str], keys: list[str], allow_mismatch: bool,
                        refusing: str, to_allow: str) -> list[str]:
    """The protocol differences as warnings when allowed; else ProtocolMismatch naming the
    differing keys, the first difference and the flag that allows them."""
    if warnings and not allow_mismatch:
        raise ProtocolMismatch(
            f"refusing to {refusing} (differing keys: {', '.join(keys)}). {warnings[0]}"
            + (f" (+{len(warnings) - 1} more)" if len(warnings) > 1 else "")
            + f". Pass {to_allow} anyway (the output will say so).", keys)
    return [f"WARNING (protocol mismatch allowed): {w}" for w in warnings]


# ---------------------------------------------------------------- the paper's protocol

PAPER_FRAMES = 200_000_000
"""The budget behind the paper's tables and published runs: 200M frames (50M agent steps)."""

TRAINING_ONLY_KEYS = ("reward_clip",)
"""Keys that shape the training signal only, not the scores: every system records raw
game scores (Cleanba clips rewards in EnvPool, monobeast and moolib in their learners),
so they are left out when a run is compared with published scores."""


def paper_protocol() -> dict[str, Any]:
    """The env protocol of the paper's tables and runs (benchenv.ATARI_PROTOCOL, on
    EnvPool: an ALE run differs from it by its backend)."""
    return {**ATARI_PROTOCOL, "backend": LEGACY_BACKEND}


NAMED_PROTOCOLS = {"paper": paper_protocol}
"""Protocols a user can declare by name on import (--orb-protocol paper)."""


def check_paper_protocol(runs: Sequence[Run], *, allow_mismatch: bool = False) -> list[str]:
    """Every run must have been made under the paper's protocol (training-only keys
    aside). Raises ProtocolMismatch naming the differing keys, or with `allow_mismatch`
    returns the differences as warnings."""
    warnings: list[str] = []
    keys: list[str] = []
    for run in runs:
        diffs = protocol_differences(run_protocol(run), paper_protocol())
        diffs = {k: v for k, v in diffs.items() if k not in TRAINING_ONLY_KEYS}
        if diffs:
            keys += [k for k in diffs if k not in keys]
            warnings.append(f"run {run.run_id} ({run.manifest.get('env_id')}): "
                            + describe_differences(diffs, "yours", "paper"))
    return _refused_or_allowed(warnings, keys, allow_mismatch, "compare with the published "
                               "results: runs were not made under the paper's env protocol",
                               "--allow-protocol-mismatch to compare")


def run_frame_budget(run: Run) -> float | None:
    """Frames the run was set to train for: hyperparameters.total_frames, else
    hyperparameters.total_timesteps x frame skip (env_protocol.frame_skip, else 4 on
    Atari ids); None (unknown) when the record says neither (e.g. an import whose budget
    was not declared)."""
    hp = run.manifest.get("hyperparameters")
    if not isinstance(hp, Mapping):
        return None
    if hp.get("total_frames") is not None:
        return float(hp["total_frames"])
    if hp.get("total_timesteps") is None:
        return None
    proto = run_protocol(run) or {}
    skip = proto.get("frame_skip")
    if skip is None:
        skip = 4 if str(run.manifest.get("env_id", "")).endswith("-v5") else 1
    return float(hp["total_timesteps"]) * float(skip)


def _frames_text(x: float | None) -> str:
    return UNKNOWN if x is None else f"{x:,.0f}"


def check_frame_budget(runs: Sequence[Run], expected: float | None, *,
                       allow_mismatch: bool = False, expected_label: str = "the published results",
                       ) -> tuple[float | None, list[str]]:
    """Every run's frame budget must equal `expected` (and each other).

    Returns (the budget the runs share, or their smallest one when allowed to differ;
    warnings). Raises ProtocolMismatch (key `frame_budget`) unless `allow_mismatch`;
    an unknown budget never matches.
    """
    budgets = {run.run_id: run_frame_budget(run) for run in runs}
    odd = {rid: b for rid, b in budgets.items()
           if b is None or expected is None or abs(b - expected) > 1e-6 * expected}
    known = [b for b in budgets.values() if b is not None]
    if not odd:
        return expected, []
    rid, b = next(iter(odd.items()))
    text = (f"frame budget differs (key frame_budget: hyperparameters.total_frames, or "
            f"total_timesteps x frame_skip): {_frames_text(b)} frames (run {rid}) vs {_frames_text(expected)} "
            f"({expected_label})" + (f"; {counted(len(odd) - 1, 'more run')} differ{'s' if len(odd) == 2 else ''}" if len(odd) > 1
                                     else ""))
    if not allow_mismatch:
        raise ProtocolMismatch(
            f"refusing to compare: {text}. Pass --allow-budget-mismatch to compare anyway "
            "(every line will say at which budget).", ["frame_budget"])
    return (min(known) if known else None), [f"WARNING (budget mismatch allowed): {text}"]
