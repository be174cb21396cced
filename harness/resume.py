"""Continuing an interrupted or killed Cleanba run from its record's newest checkpoint.

A run whose trainer writes checkpoints (`checkpoint-every` in the sweep's overrides) and
whose record holds a usable one is started with `--resume-from <run_dir>`: the trainer
cuts the CSVs back to the checkpoint's rows and continues from there instead of from
update 0. The harness picks the checkpoint the record's own manifest accepts (not torn,
its rows present, the record's configuration); the trainer checks it again against the
code and stack it runs with, and starts from update 0 (saying why in stdout.log) if they
differ, so a resume the harness announces is confirmed by the record's `resumptions`.
A multi-process run resumes the same way: every process gets `--resume-from`; process 0
picks the checkpoint and sends it to the others, and if any of them cannot use it (its own
code or stack differs) all start from update 0 together (cleanba/core/checkpoint.py). A
Slurm peer (`run_peer_process`, rank > 0) cannot know rank 0's choice and need not: it
gets the flag whenever the run can resume, and follows process 0. Baselines start over.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cleanba.core import checkpoint
from harness.sweep import RunSpec
from runrecord import read_manifest_or_none, schema


@dataclass(frozen=True)
class ResumePoint:
    """The checkpoint an attempt is started from."""

    update: int

    @property
    def folder(self) -> str:
        return f"{checkpoint.CHECKPOINTS_DIR}/{self.update}"

    def text(self) -> str:
        return f"{self.folder} (after update {self.update})"


def can_resume(spec: RunSpec) -> bool:
    """Whether the run's trainer writes and reads checkpoints: a Cleanba trainer (in one
    process or several) with a checkpoint interval in its overrides."""
    every = next((v for k, v in spec.overrides.items()
                  if k.replace("_", "-") == "checkpoint-every"), 0)
    return (not spec.baseline
            and isinstance(every, int) and not isinstance(every, bool) and every > 0)


def resume_point(spec: RunSpec, run_dir: Path) -> ResumePoint | None:
    """The checkpoint the next attempt of `spec` continues from; None: it starts from
    update 0 (no checkpoint, none usable, no unfinished record, or a trainer without
    checkpoints)."""
    if not can_resume(spec):
        return None
    manifest = read_manifest_or_none(run_dir)
    if manifest is None or manifest.get("status") not in (schema.INTERRUPTED, schema.FAILED):
        return None
    try:
        current = checkpoint.fingerprint(manifest)
    except (KeyError, TypeError, AttributeError):  # a record the harness wrote itself
        return None
    rows = {name: checkpoint.complete_rows(run_dir / name)
            for name in (schema.UPDATES_FILE, schema.EPISODES_FILE)}
    found, _ = checkpoint.newest_usable(run_dir, current, rows)
    return None if found is None else ResumePoint(found.update)


def resumptions(manifest: dict[str, Any] | None) -> list[dict[str, Any]]:
    return list((manifest or {}).get("resumptions") or [])


def confirmed(run_dir: Path, before: int) -> ResumePoint | None:
    """The checkpoint the attempt just run resumed from, read from its record (one more
    entry in `resumptions` than the `before` it held); None: it started from update 0."""
    after = resumptions(read_manifest_or_none(run_dir))
    if len(after) <= before:
        return None
    return ResumePoint(int(after[-1]["update"]))


def resume_args(point: ResumePoint | None, run_dir: Path) -> list[str]:
    """The trainer flags of an attempt that continues from `point`."""
    return [] if point is None else ["--resume-from", str(run_dir)]


def peer_resume_args(spec: RunSpec, run_dir: Path) -> list[str]:
    """A Slurm peer's flags (rank > 0): --resume-from whenever the run can resume. The
    trainer's process 0 alone decides whether it does (a peer's flag changes nothing:
    with checkpoints every process joins the agreement), and rank 0 may be changing the
    record while the peer starts, so the peer reads nothing from it."""
    return ["--resume-from", str(run_dir)] if can_resume(spec) else []
