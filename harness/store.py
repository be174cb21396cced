"""The results store as the harness sees it: run folders, their locks and their states.

<results root>/<sweep>/
  sweep.toml          the sweep file as last run (provenance)
  plan.json           the expanded runs (id, label, command)
  runs/<run_id>/      run records (runrecord), plus .lock and stdout.log
  report/             built by `harness report`
  harness-runs.jsonl  one line per `harness run` invocation (wall time, overhead)

A run's lock is an flock on <run_dir>/.lock held by the harness process that supervises
the run (local pool thread or Slurm task). The kernel releases it when that process dies,
so a manifest still saying `running` while nobody holds the lock is an interrupted run.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.retry import failure_kind
from runrecord import error_entry, run_folder, schema, settle, utc_now

# Re-exported (`X as X`): tests and callers import the tolerant reader from here.
from runrecord.writer import read_manifest_or_none as read_manifest_or_none

LOCK_FILE = ".lock"
LOG_FILE = "stdout.log"
ATTEMPTS_DIR = schema.ATTEMPTS_DIR

# States the harness reports. The first five are manifest statuses; the others are
# derived: `pending` (no record yet), `stale` (manifest says running, nobody holds the lock).
PENDING = "pending"
STALE = "stale"
# A manifest that exists but cannot be read (torn by a disk fault, edited by hand): the
# run is redone and the next attempt's writer archives the broken copy.
CORRUPT = "corrupt"


class RunLock:
    """Exclusive, non-blocking lock on one run folder; released on close or process death."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return False
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {socket.gethostname()} {utc_now()}{slurm_job_tag()}\n"
                 .encode())
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def slurm_job_tag() -> str:
    """' slurm-job=ID' inside a Slurm job (ARRAYID_TASK for an array task, as squeue and
    scancel name it), so that whoever finds a run busy knows which job holds it."""
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    job = f"{array}_{task}" if array and task else os.environ.get("SLURM_JOB_ID")
    return f" slurm-job={job}" if job else ""


def lock_holder(run_dir: Path) -> str | None:
    """'pid host since' of the process holding the run's lock, or None when free."""
    path = Path(run_dir) / LOCK_FILE
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return path.read_text().strip() or "unknown"
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def previous_statuses(run_dir: Path) -> list[str]:
    """Statuses of the archived earlier attempts, oldest first."""
    root = Path(run_dir) / ATTEMPTS_DIR
    if not root.exists():
        return []
    out = []
    for d in sorted((p for p in root.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)):
        m = read_manifest_or_none(d)
        out.extend(attempt_statuses(m) if m else ["no-record"])
    return out


def attempt_statuses(manifest: dict) -> list[str]:
    """Statuses of the attempts one record holds, oldest first: those its resumptions
    continued from a checkpoint (each overwrote the manifest), then its own."""
    earlier = [str(r["previous_status"]) for r in manifest.get("resumptions") or []
               if r.get("previous_status")]
    return [*earlier, str(manifest.get("status"))]


@dataclass
class RunState:
    run_id: str
    state: str
    """pending, corrupt, running, stale, completed, failed, interrupted, skipped."""
    attempts: int
    failures: int
    env_steps: int = 0
    wall_time_s: float = 0.0
    error: str = ""
    holder: str | None = None
    kind: str = ""
    """Failed runs: 'transient' or 'deterministic' (harness.retry.failure_kind)."""


def failed_attempts(run_dir: Path, manifest: dict | None) -> tuple[int, int]:
    """(attempts so far, failed attempts so far) of a run folder."""
    statuses = previous_statuses(run_dir) + (attempt_statuses(manifest) if manifest else [])
    return len(statuses), sum(s == schema.FAILED for s in statuses)


def last_progress(run_dir: Path) -> tuple[int, float]:
    """(env_steps, wall_time_s) of the last complete line of updates.csv (0, 0 if none).

    Reads only the file's tail, so polling many runs stays cheap.
    """
    path = Path(run_dir) / schema.UPDATES_FILE
    try:
        with open(path, "rb") as f:
            header = f.readline().decode("utf-8", "replace").strip().split(",")
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 8192))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return 0, 0.0
    lines = tail.split("\n")
    complete = lines[:-1]  # the part after the last newline may be torn
    for line in reversed(complete):
        cells = line.split(",")
        if len(cells) != len(header) or cells == header:
            continue
        try:
            row = dict(zip(header, cells, strict=True))
            return int(float(row["env_steps"])), float(row["wall_time_s"])
        except (KeyError, ValueError):
            continue
    return 0, 0.0


def run_state(run_dir: Path) -> RunState:
    run_dir = Path(run_dir)
    manifest = read_manifest_or_none(run_dir)
    attempts, failures = failed_attempts(run_dir, manifest)
    holder = lock_holder(run_dir) if run_dir.exists() else None
    if manifest is None:
        corrupt = (run_dir / schema.MANIFEST_FILE).exists()
        state = "running" if holder else CORRUPT if corrupt else PENDING
    else:
        status = str(manifest.get("status"))
        if status == schema.RUNNING:
            state = "running" if holder else STALE
        else:
            state = status
    steps, wall = (0, 0.0)
    if state in ("running", STALE, schema.FAILED, schema.INTERRUPTED):
        steps, wall = last_progress(run_dir)
    summary = (manifest or {}).get("summary") or {}
    if state == schema.COMPLETED and summary:
        steps = int(summary.get("env_steps") or 0)
        wall = float(summary.get("wall_time_s") or 0.0)
    err = (manifest or {}).get("error") or {}
    error = f"{err.get('type', '')}: {err.get('message', '')}".strip(": ") if err else ""
    kind = failure_kind(err) if state == schema.FAILED else ""
    return RunState(run_dir.name, state, attempts, failures, steps, wall, error, holder, kind)


def mark_interrupted(run_dir: Path, reason: str) -> None:
    """Turn a stale `running` manifest into `interrupted` (caller holds the run's lock)."""
    manifest = read_manifest_or_none(run_dir)
    if not manifest or manifest.get("status") != schema.RUNNING:
        return
    settle(run_dir, manifest, schema.INTERRUPTED, error_entry("Interrupted", reason))


class Store:
    def __init__(self, root: Path | str, sweep: str):
        self.root = Path(root)
        self.sweep = sweep
        self.sweep_dir = self.root / sweep
        self.runs_dir = self.sweep_dir / schema.RUNS_DIR

    def run_dir(self, run_id: str) -> Path:
        return run_folder(self.root, self.sweep, run_id)

    def report_dir(self) -> Path:
        return self.sweep_dir / "report"

    def append_log(self, entry: dict[str, Any]) -> None:
        self.sweep_dir.mkdir(parents=True, exist_ok=True)
        with open(self.sweep_dir / "harness-runs.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(entry, sort_keys=True) + "\n")
