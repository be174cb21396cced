"""Merge a lease's records into the committed store (benchmarks/campaign.py `merge`).

Every record goes to the (device kind, stack) folder its own manifest names
(campaign_state.record_place), so a record made under another stack than the lease's is
kept apart; figures without a record of their own (chunk c) go to the lease's folder. A
file already in the store is left alone when it has the same bytes (a lease merged twice
adds nothing) and never overwritten when it differs (a conflict: reported, exit 1). The
lease's line goes to leases.jsonl once; stack.json is written with the first lease of a
stack. Nothing is written before the whole archive has been checked.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from campaign_lease import read_archive
from campaign_state import EQUIVALENCE, RECORD_FILES, record_place

from runrecord.words import counted
from runrecord.writer import atomic_write, read_json_lines

TOP_FOLDERS = (EQUIVALENCE, "learning", "speed-bound", "deterministic")
LEASE_KEYS = ("lease", "kind", "tool_kind", "stack", "mode", "started_at", "finished_at",
              "budget_s", "wall_s", "chunks", "deferred")
MACHINE_KEYS = ("cpu_model", "cpu_cores", "nvidia_smi", "cuda_runtime", "cuda_driver",
                "cudnn", "cublas", "python", "jax", "jaxlib", "envpool", "devices")


@dataclass
class Merged:
    """What a merge did, per (kind, stack) folder."""

    added: dict[str, list[str]] = field(default_factory=dict)
    unchanged: int = 0
    conflicts: list[str] = field(default_factory=list)
    apart: list[str] = field(default_factory=list)  # files filed away from the lease's stack
    lease_line: str = ""

    def lines(self) -> list[str]:
        out = [f"merge: {folder}: {counted(len(files), 'file')} added" for folder, files in
               sorted(self.added.items())]
        if self.unchanged:
            out.append(f"merge: {counted(self.unchanged, 'file')} already in the store, unchanged")
        out += [f"merge: kept apart by its provenance: {a}" for a in self.apart]
        out += [f"merge: CONFLICT (not overwritten): {c}" for c in self.conflicts]
        out.append(self.lease_line)
        return out


def safe_name(name: str) -> PurePosixPath:
    """A member path of the archive, checked: relative, no '..', under a known folder."""
    path = PurePosixPath(name.removeprefix("./"))
    if path.is_absolute() or ".." in path.parts or not path.parts \
            or path.parts[0] not in TOP_FOLDERS:
        raise ValueError(f"archive member {name!r} is not a campaign record path")
    return path


def item_groups(lease: dict[str, Any]) -> Iterator[tuple[str, list[PurePosixPath]]]:
    """(record folder, its files) of every item done: a run record's folder, or a lone
    figures file (its own 'group')."""
    for item in lease.get("done", []):
        groups: dict[str, list[PurePosixPath]] = {}
        for name in item.get("files", []):
            path = safe_name(name)
            key = str(path.parent) if path.name in RECORD_FILES else str(path)
            groups.setdefault(key, []).append(path)
        yield from groups.items()


def plan_merge(lease: dict[str, Any], tar: tarfile.TarFile
               ) -> list[tuple[tuple[str, str], PurePosixPath, bytes]]:
    """((kind, stack), relative path, bytes) of every file to file, after every check."""
    home = (str(lease["kind"]), str(lease["stack"]))
    out = []
    by_item_folder: dict[str, tuple[str, str]] = {}
    for key, paths in item_groups(lease):
        blobs = {}
        for p in paths:
            member = tar.extractfile(f"./{p}")
            if member is None:
                raise ValueError(f"lease.json lists {p}, which is not in the archive")
            blobs[p] = member.read()
        manifest_path = next((p for p in paths if p.name == "manifest.json"), None)
        if manifest_path is not None:
            manifest = json.loads(blobs[manifest_path])
            if sorted(p.name for p in paths) != sorted(RECORD_FILES):
                raise ValueError(f"{key}: a run record needs {', '.join(RECORD_FILES)}")
            place = record_place(manifest)
            # a chunk's figures file beside its records follows them (learning/seed-s/)
            by_item_folder[str(PurePosixPath(key).parent)] = place
        else:
            place = by_item_folder.get(str(PurePosixPath(key).parent), home)
        out += [(place, p, blobs[p]) for p in paths]
    return out


def merge(archive: Path, store: Path) -> Merged:
    lease, tar = read_archive(archive)
    with tar:
        files = plan_merge(lease, tar)
    merged = Merged()
    home = (str(lease["kind"]), str(lease["stack"]))
    for place, rel, data in files:
        target = store / place[0] / place[1] / rel
        folder = f"{place[0]}/{place[1]}"
        if target.exists():
            if target.read_bytes() == data:
                merged.unchanged += 1
            else:
                merged.conflicts.append(f"{folder}/{rel} differs from the lease's copy")
            continue
        atomic_write(target, lambda f, data=data: f.write(data))
        merged.added.setdefault(folder, []).append(str(rel))
        if place != home:
            merged.apart.append(f"{rel} -> {folder} (the lease ran on {home[0]}/{home[1]})")
    base = store / home[0] / home[1]
    base.mkdir(parents=True, exist_ok=True)
    env = lease.get("environment") or {}
    if not (base / "stack.json").exists():
        stack = {"kind": home[0], "stack": home[1],
                 **{k: env.get(k) for k in MACHINE_KEYS if k in env}}
        (base / "stack.json").write_text(json.dumps(stack, indent=2) + "\n")
    merged.lease_line = append_lease(base / "leases.jsonl", lease_summary(lease))
    return merged


def lease_summary(lease: dict[str, Any]) -> dict[str, Any]:
    """The lease's line in leases.jsonl: who, when, what (figures, no file lists)."""
    env = lease.get("environment") or {}
    keep = ("item", "chunk", "seed", "wall_s", "figures", "runs", "finished_at")
    return {**{k: lease.get(k) for k in LEASE_KEYS},
            "machine": {k: env.get(k) for k in MACHINE_KEYS if k in env},
            "done": [{k: e.get(k) for k in keep if k in e} for e in lease.get("done", [])],
            "failed": [{k: e.get(k) for k in ("item", "chunk", "seed", "error", "wall_s",
                                               "stopped_at_cap", "exit_code")}
                       for e in lease.get("failed", [])]}


def append_lease(path: Path, summary: dict[str, Any]) -> str:
    """Add the lease's line unless it is there; what happened, in words."""
    if any(lease.get("lease") == summary["lease"] for lease in read_json_lines(path)):
        return f"merge: lease {summary['lease']} was merged before"
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(summary, sort_keys=True) + "\n")
    return f"merge: lease {summary['lease']} added to {path}"
