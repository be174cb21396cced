"""The protocol guard: runs made under different environment protocols are not pooled or
compared unless the user explicitly allows it.

A run's protocol is its manifest's `env_protocol` (the EnvPool settings it trained under:
sticky actions, episode cap, action set, life-loss signal, reward clipping, frame skip...).
A run whose manifest has no `env_protocol` key (e.g. an imported run whose protocol was
not declared) has an *unknown* protocol, which never matches anything.

Pure functions over dicts; the CLI turns `ProtocolMismatch` into exit 2.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from analysis.errors import AnalysisError
from runrecord import Run

UNKNOWN = "unknown"
"""What a run without a recorded env protocol shows in a difference."""

Protocol = Mapping[str, Any] | None


class ProtocolMismatch(AnalysisError):
    """Runs to be pooled or compared were made under different env protocols."""

    def __init__(self, message: str, differing_keys: Sequence[str]):
        super().__init__(message)
        self.differing_keys = list(differing_keys)


def run_protocol(run: Run) -> Protocol:
    """The env protocol a run recorded, or None when it recorded none (unknown)."""
    proto = run.manifest.get("env_protocol")
    return proto if isinstance(proto, Mapping) else None


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
    flag: str = "--allow-protocol-mismatch",
) -> list[str]:
    """Check that every run of every labelled side shares one env protocol.

    Runs are compared with the first run of the first side (per env id: a suite of
    several games shares one protocol, each game with itself). Raises ProtocolMismatch
    naming the differing keys, unless `allow_mismatch`, in which case the same text is
    returned as warnings for the output and the report.
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
            if not diffs:
                continue
            keys += [k for k in diffs if k not in keys]
            warnings.append(
                f"env protocol differs on {env_id}: "
                + describe_differences(diffs, f"{ref_label}: {ref.run_id}",
                                       f"{label}: {run.run_id}")
            )
    if warnings and not allow_mismatch:
        raise ProtocolMismatch(
            f"refusing to pool or compare runs made under different env protocols "
            f"(differing keys: {', '.join(keys)}). {warnings[0]}"
            + (f" (+{len(warnings) - 1} more)" if len(warnings) > 1 else "")
            + f". Pass {flag} to compare them anyway (the output will say so).",
            keys,
        )
    return [f"WARNING (protocol mismatch allowed): {w}" for w in warnings]
