"""What a certificate binds besides the claims: the run folders (every file by SHA-256),
each planned run's status (failed and interrupted ones included, missing ones listed),
runs the plan does not hold (refused unless named), each run's facts, and the code.

Run folders are the immediate sub-folders of the records folder (the sweep's
`<root>/<sweep>/runs`, or one given with --records), named by run id. Every regular file
below a run folder is bound (manifest.json, episodes.csv, updates.csv, stdout.log,
native/ logs, previous_attempts/), except dot-files (the harness's `.lock`); dot-folders
beside the runs (an analysis cache) are not runs.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.certify.facts import is_deterministic, run_facts
from harness.certify.merkle import Leaf, leaf_of
from harness.store import PENDING, run_state
from harness.sweep import RunSpec
from runrecord import PROJECT_ROOT, read_manifest_or_none
from runrecord.digest import last_digest
from runrecord.ids import file_digest
from runrecord.provenance import is_own_checkout
from runrecord.words import counted

RECORDS = "records"
INPUTS = "inputs"
MISSING = "missing"


class BindError(ValueError):
    """Records that cannot be certified as they are (exit 2, nothing written)."""


def run_folders(records: Path) -> dict[str, Path]:
    """{run id: folder} of the records folder (sub-folders, dot-folders left out)."""
    if not records.is_dir():
        raise BindError(f"{records}: no such folder (the run records to certify)")
    return {p.name: p for p in sorted(records.iterdir())
            if p.is_dir() and not p.name.startswith(".")}


def _files_below(folder: Path) -> Iterable[tuple[str, Path]]:
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if p.is_symlink():
            raise BindError(f"{p}: a symbolic link; bind the file itself")
        if p.is_file():
            yield rel.as_posix(), p


def folder_leaves(folder: Path, prefix: str) -> list[Leaf]:
    """A leaf per file below `folder`, at `<prefix>/<relative path>`."""
    return [leaf_of(f"{prefix}/{rel}", p) for rel, p in _files_below(folder)]


def input_leaves(name: str, path: Path) -> list[Leaf]:
    """A bound input: a file (one leaf) or a folder (a leaf per file)."""
    if path.is_dir():
        return folder_leaves(path, f"{INPUTS}/{name}")
    return [leaf_of(f"{INPUTS}/{name}", path)]


@dataclass
class RunEntry:
    """One run of the certificate: planned or named, its status and its files."""

    run_id: str
    label: str
    planned: bool
    status: str
    manifest: dict[str, Any] | None = None
    leaves: list[Leaf] = field(default_factory=list)
    records_digest: str | None = None  # its updates.csv's last running digest


def label_of(manifest: Mapping[str, Any]) -> str:
    layout = (manifest.get("layout") or {}).get("name", "?")
    return (f"{manifest.get('system')} {manifest.get('architecture')} "
            f"{manifest.get('env_id')} s{manifest.get('seed')} {layout}")


def record_status(folder: Path | None) -> str:
    """A run folder's status as certify records it (MISSING: no folder or no record)."""
    if folder is None:
        return MISSING
    state = run_state(folder).state
    return MISSING if state == PENDING else state


def gather_runs(records: Path, plan: Sequence[RunSpec], include_unplanned: Sequence[str],
                ) -> list[RunEntry]:
    """Every planned run (its status; `missing` without a folder) and every named
    unplanned run, with the leaves of their files. BindError for a run still running, an
    unplanned run not named, or a named one that is not there."""
    folders = run_folders(records)
    planned = {s.run_id: s for s in plan}
    unplanned = sorted(set(folders) - set(planned))
    not_named = [r for r in unplanned if r not in include_unplanned]
    if not_named:
        raise BindError(
            f"{counted(len(not_named), 'run folder')} in {records} that the plan does not hold: "
            f"{', '.join(not_named[:5])}{', ...' if len(not_named) > 5 else ''}; name each "
            "with --include-unplanned RUN_ID to certify it as unplanned, or move it away")
    absent = [r for r in include_unplanned if r not in folders]
    if absent:
        raise BindError(f"--include-unplanned {absent[0]}: no such run folder in {records}")
    extra = [r for r in include_unplanned if r in planned]
    if extra:
        raise BindError(f"--include-unplanned {extra[0]}: that run is in the plan")
    entries = []
    for rid in [*planned, *unplanned]:
        folder = folders.get(rid)
        if folder is None:
            entries.append(RunEntry(rid, planned[rid].label(), True, MISSING))
            continue
        status = record_status(folder)
        if status == "running":
            raise BindError(f"run {rid} is running ({run_state(folder).holder}); certify "
                            "once the sweep has stopped")
        manifest = read_manifest_or_none(folder)
        label = planned[rid].label() if rid in planned else (
            label_of(manifest) if manifest else "?")
        entries.append(RunEntry(rid, label, rid in planned, status, manifest,
                                folder_leaves(folder, f"{RECORDS}/{rid}"),
                                last_digest(folder)))
    return entries


def _wall(manifest: Mapping[str, Any]) -> float | None:
    summary = manifest.get("summary") or {}
    value = summary.get("wall_time_s")
    return float(value) if isinstance(value, (int, float)) else None


def run_section(entry: RunEntry, intern: Any) -> dict[str, Any]:
    """The certificate's entry of one run. `intern(kind, facts) -> id` shares identical
    device and stack tables between runs."""
    out: dict[str, Any] = {"label": entry.label, "planned": entry.planned,
                           "status": entry.status,
                           "files": [leaf.path for leaf in entry.leaves]}
    m = entry.manifest
    if m is None:
        return out
    device, stack = run_facts(m)
    err = m.get("error") or {}
    summary = m.get("summary") or {}
    imported = m.get("imported")
    out.update({
        "deterministic": is_deterministic(m),
        "device": intern("device", device), "stack": intern("stack", stack),
        "command": (m.get("provenance") or {}).get("command"),
        "processes": (m.get("layout") or {}).get("num_processes"),
        "updates": summary.get("updates"),
        "records_digest": entry.records_digest,
        "wall_time_s": _wall(m),
        "error": f"{err.get('type', '')}: {err.get('message', '')}" if err else None,
        "imported": None if not imported else {
            "format": imported.get("format"),
            "source_files": len(imported.get("files") or []),
            "note": "each source file's SHA-256 is in the bound manifest (imported.files)"},
    })
    return out


def code_state(root: Path = PROJECT_ROOT) -> dict[str, Any]:
    """The checkout's commit, whether it differs from it (tracked changes, or untracked
    files git does not ignore), and the SHA-256 of `git diff HEAD --binary` followed by
    each such untracked file's path and SHA-256 (null when clean or not a checkout)."""
    def git(*args: str) -> bytes | None:
        try:
            return subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                                  timeout=60, check=True).stdout
        except (OSError, subprocess.SubprocessError):
            return None

    # a copy without its own .git inside another repository is not that repository's code
    sha = git("rev-parse", "HEAD") if is_own_checkout(root) else None
    if sha is None:
        return {"git_sha": None, "dirty": None, "diff_sha256": None}
    diff = git("diff", "HEAD", "--binary") or b""
    untracked = (git("ls-files", "--others", "--exclude-standard", "-z") or b"").split(b"\0")
    for name in sorted(n for n in untracked if n):
        file = root / name.decode()
        digest = file_digest(file)[0] if file.is_file() else "-"
        diff += b"\nuntracked " + name + b" " + digest.encode()
    return {"git_sha": sha.decode().strip(), "dirty": bool(diff),
            "diff_sha256": hashlib.sha256(diff).hexdigest() if diff else None}


def status_counts(entries: Sequence[RunEntry]) -> dict[str, int]:
    return dict(sorted(Counter(e.status for e in entries).items()))
