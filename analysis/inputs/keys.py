"""Manifest keys named on the command line (--group-by, --where) checked against the
runs: a key that no run has is a typo, refused with the keys there are.

Unchecked, a typo passes silently: `--group-by layout.nam` groups every run under no
value and the groups are then dropped, and `--where layout.nam=x` keeps no run. A key that
some runs have and others lack is not refused: an imported run has no architecture, an
older record no env_protocol.backend. Those runs group without the key (--group-by) or
do not match (--where), and a warning says how many.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any

from analysis.errors import AnalysisError
from analysis.inputs.load import BACKEND_KEY, lookup_dotted
from runrecord import Run
from runrecord.words import counted


def has_key(manifest: dict[str, Any], dotted: str) -> bool:
    """Whether the manifest holds the dotted key (a null value counts as held)."""
    if dotted == BACKEND_KEY:  # read as EnvPool's when the protocol has no backend
        return isinstance(manifest.get("env_protocol"), dict)
    return lookup_dotted(manifest, dotted)[0]


def dotted_keys(manifest: dict[str, Any], prefix: str = "") -> set[str]:
    """Every dotted key of a manifest's values (not of the tables that hold them)."""
    out: set[str] = set()
    for k, v in manifest.items():
        key = f"{prefix}{k}"
        out |= dotted_keys(v, key + ".") if isinstance(v, dict) and v else {key}
    return out


def known_keys(runs: Iterable[Run]) -> set[str]:
    out: set[str] = set()
    for r in runs:
        out |= dotted_keys(r.manifest)
        if isinstance(r.manifest.get("env_protocol"), dict):
            out.add(BACKEND_KEY)
    return out


def check_keys(runs: Sequence[Run], keys: Iterable[str], flag: str) -> list[str]:
    """Warnings for keys some runs lack; AnalysisError naming the first key no run has,
    with close matches and the valid keys."""
    warnings: list[str] = []
    for key in keys:
        lacking = sum(not has_key(r.manifest, key) for r in runs)
        if not runs or lacking < len(runs):
            if lacking:
                what = "grouped without it" if flag == "--group-by" else "they do not match"
                warnings.append(f"{flag} {key}: {lacking} of {counted(len(runs), 'run')} lack this key "
                                f"({what})")
            continue
        valid = sorted(known_keys(runs))
        close = difflib.get_close_matches(key, valid, n=3, cutoff=0.6)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        raise AnalysisError(f"{flag} {key}: no run's manifest has this key{hint}; keys the "
                            f"{counted(len(runs), 'run')} {'has' if len(runs) == 1 else 'have'}: {key_summary(valid)}")
    return warnings


# The manifest's tables of many keys: named by their prefix, not key by key, in an error
BULKY_TABLES = ("hyperparameters", "provenance", "summary", "error")


def key_summary(valid: Sequence[str]) -> str:
    """The keys one by one, except those under a bulky table, which are counted under its
    name (`hyperparameters.* (61 keys)`): a message a reader can scan."""
    out = [k for k in valid if k.split(".", 1)[0] not in BULKY_TABLES]
    for table in BULKY_TABLES:
        under = [k for k in valid if k == table or k.startswith(table + ".")]
        out += under if len(under) == 1 else [f"{table}.* ({len(under)} keys)"] if under else []
    return ", ".join(out)

