"""The results store as the harness sees it: run folders, their locks and their states,
which failed runs are retried, and which checkpoint a run resumes from.

<results root>/<sweep>/
  sweep.toml          the sweep file as last run (provenance)
  plan.json           the expanded runs (id, label, command)
  runs/<run_id>/      run records (runrecord), plus .lock and stdout.log
  report/             built by `harness report`
  harness-runs.jsonl  one line per `harness run` invocation (wall time, overhead)

A run's lock is an flock on <run_dir>/.lock held by the harness process that supervises
the run (local pool thread or Slurm task). The kernel releases it when that process dies,
so a manifest still saying `running` while nobody holds the lock is an interrupted run.

A run's attempt is spent only by a failure (never by an interruption). A failed run gets
another attempt while it has attempts left (`harness run --max-attempts`), but only when
its error can be transient; a deterministic error would come back identically, so the
run waits for the user (`harness run --retry-failed` after fixing the cause).

An interrupted or killed Cleanba run continues from its record's newest checkpoint: a run
whose trainer writes checkpoints (`checkpoint-every` in the sweep's overrides) and whose
record holds a usable one is started with `--resume-from <run_dir>`: the trainer
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

import errno
import fcntl
import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cleanba.core import checkpoint
from harness.sweep import RunSpec
from runrecord import error_entry, read_manifest_or_none, run_folder, schema, settle, utc_now
from runrecord.exits import EXIT_BAD_INPUT
from runrecord.schema import ATTEMPTS_DIR, LOCK_FILE

# States the harness reports. The first five are manifest statuses; the others are
# derived: `pending` (no record yet), `stale` (manifest says running, nobody holds the lock).
PENDING = "pending"
STALE = "stale"
# A manifest that exists but cannot be read (torn by a disk fault, edited by hand): the
# run is redone and the next attempt's writer archives the broken copy.
CORRUPT = "corrupt"


FailureKind = Literal["transient", "deterministic"]
TRANSIENT: FailureKind = "transient"
DETERMINISTIC: FailureKind = "deterministic"

# Exception types that say the code or its arguments are wrong, or the numbers blew up:
# the same run fails the same way again. Anything else (OSError and its kin such as a full
# disk or a refused connection, MemoryError, XLA runtime errors, a RuntimeError, a
# process killed by a signal, a timeout) may depend on the machine, so it is retried.
DETERMINISTIC_TYPES = frozenset({
    # bad arguments (the trainers' and baselines' own checks)
    "ConfigError", "EnvError", "LayoutError", "MappingError", "BadArguments",
    # numerical failure of a seeded run
    "NonFiniteLoss", "FloatingPointError", "ZeroDivisionError",
    # programming errors and a record the writer refuses
    "RecordError", "TypeError", "ValueError", "KeyError", "IndexError", "AttributeError",
    "AssertionError", "NameError", "NotImplementedError", "ImportError",
    "ModuleNotFoundError", "SyntaxError",
})


def failure_kind(error: Mapping[str, Any] | None) -> FailureKind:
    """Classify a failed run's recorded `error` ({type, message, exit_codes?}).

    deterministic: the trainer rejected its arguments (exit code 2, or a ConfigError-like
    type), the loss became non-finite, or a programming error was raised: re-running the
    same definition repeats it, so no attempt is spent on it blindly.
    transient: everything else that can depend on the machine (killed by a signal such
    as the OOM killer's SIGKILL, a full disk or other OSError, lost peers, a timeout,
    exit without a record): worth another attempt.
    """
    if not error:
        return TRANSIENT
    codes = error.get("exit_codes") or []
    if EXIT_BAD_INPUT in codes:
        return DETERMINISTIC
    if str(error.get("type", "")) in DETERMINISTIC_TYPES:
        return DETERMINISTIC
    return TRANSIENT


def will_retry(kind: FailureKind, failures: int, max_attempts: int,
               retry_failed: bool = False) -> bool:
    """Whether the next `harness run` starts another attempt of a failed run."""
    if failures >= max_attempts:
        return False
    return kind == TRANSIENT or retry_failed


def failed_state_text(kind: FailureKind, failures: int, max_attempts: int) -> str:
    """The state `harness status` shows for a failed run: what happens next, and why."""
    if failures >= max_attempts:
        return (f"failed ({kind}; {failures} of {max_attempts} attempts spent: not retried, "
                "--max-attempts raises the cap)")
    if kind == DETERMINISTIC:
        return ("failed (deterministic: not retried; fix the cause, then "
                "`harness run --retry-failed`)")
    return f"failed (transient: will be retried, attempt {failures + 1} of {max_attempts})"


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
    """Failed runs: 'transient' or 'deterministic' (failure_kind)."""


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


# --------------------------------------------------------------------------- resuming


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


def peer_resume_args(spec: RunSpec, run_dir: Path) -> list[str]:
    """A Slurm peer's flags (rank > 0): --resume-from whenever the run can resume. The
    trainer's process 0 alone decides whether it does (a peer's flag changes nothing:
    with checkpoints every process joins the agreement), and rank 0 may be changing the
    record while the peer starts, so the peer reads nothing from it."""
    return ["--resume-from", str(run_dir)] if can_resume(spec) else []
