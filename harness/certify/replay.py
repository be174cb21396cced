"""Tier 2 of `harness verify`: re-run updates of K drawn runs with their recorded command
and --deterministic, and compare bit for bit every column of those updates.csv rows
(params checksum, losses, versions, ...; not the wall-clock times, NOT_REPRODUCED) and
every episode that ended in them; only where the device kind and the stack match (else
NOT CHECKABLE, naming what differs; never a tolerance). The updates re-run are the first
N (from update 0), or a segment between two of the run's checkpoints (resumed from the
first, harness.certify.segments).

The draw: K runs among the deterministic ones, ranked by SHA-256("<seed>:<run id>"), the
K lowest; the seed comes from the OS's entropy unless given, and is printed, so a third
party repeats the draw with `--draw-seed`.
"""

from __future__ import annotations

import csv
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cleanba.core import checkpoint
from harness.certify.facts import differences, here_facts, replay_base_flags
from harness.certify.tier1 import MISMATCH, NOT_CHECKABLE
from harness.execute import log_tail, signal_group, start_child, trainer_env
from runrecord import (
    PROJECT_ROOT,
    atomic_write_json,
    read_manifest,
    read_manifest_or_none,
    resolve_path,
    schema,
)
from runrecord.determinism import DETERMINISM_KEYS
from runrecord.provenance import available_cpus, free_port
from runrecord.words import counted

VERIFIED = "VERIFIED"
REPLAY_TIMEOUT_S = 1800.0


@dataclass
class Replay:
    """One drawn run's replay: its outcome and what it cost."""

    run_id: str
    outcome: str  # VERIFIED, MISMATCH, NOT CHECKABLE
    text: str
    seconds: float = 0.0  # wall time of the replay (start-up and compilation included)
    processes: int = 1
    original_seconds: float | None = None  # the certified run's training wall time


def draw(eligible: Sequence[str], k: int, seed: int) -> list[str]:
    """The K runs of `eligible` with the lowest SHA-256("<seed>:<run id>")."""
    ranked = sorted(eligible, key=lambda r: hashlib.sha256(f"{seed}:{r}".encode()).hexdigest())
    return ranked[:k]


def _set_flag(argv: list[str], flag: str, value: str | None) -> None:
    """Set `flag` to `value` (None: a bare switch) in place, or append it."""
    for i, word in enumerate(argv):
        if word == flag:
            if value is not None:
                argv[i + 1] = value
            return
        if word.startswith(flag + "="):
            argv[i] = flag if value is None else f"{flag}={value}"
            return
    argv += [flag] if value is None else [flag, value]


def replay_argv(recorded: Sequence[str], run_dir: Path, process_id: int, coordinator: str,
                updates: int, python: str = sys.executable, resume: bool = False) -> list[str]:
    """The recorded command of process 0, for process `process_id` of a replay into
    `run_dir` that stops after `updates` updates (resume: continuing the record copied
    there from its newest checkpoint); the interpreter is this one (its versions are the
    stack compared)."""
    argv = [python, *recorded[1:]]
    _set_flag(argv, "--run-dir", str(run_dir))
    if resume:
        _set_flag(argv, "--resume-from", str(run_dir))
    if "--coordinator-address" in argv or any(w.startswith("--coordinator-address=")
                                              for w in argv):
        _set_flag(argv, "--coordinator-address", coordinator)
        _set_flag(argv, "--process-id", str(process_id))
    _set_flag(argv, "--deterministic", None)
    _set_flag(argv, "--stop-after-updates", str(updates))
    _set_flag(argv, "--progress-interval-s", "0")
    return argv


def replay_env(device: Mapping[str, Any], checkout: Path, process: int = 0,
               environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Process `process`'s environment in a replay: this one's, with the recorded virtual
    device count on CPU and thread counts of the recorded cores; on GPUs its own
    `device_count` GPUs of those visible (as the harness gives its runs)."""
    count, cores = device.get("device_count"), device.get("usable_cpus")
    gpus = None
    if device.get("platform") == "gpu" and isinstance(count, int):
        visible = [g for g in environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g] or \
            [str(i) for i in range(64)]
        gpus = visible[process * count:(process + 1) * count]
    env = trainer_env(environ, cores if isinstance(cores, int) else None,
                      device.get("platform") == "cpu", gpus, checkout)
    env.pop("CLEANBA_FAULT", None)  # a test hook, not part of any recorded command
    env["XLA_FLAGS"] = replay_base_flags(env.get("XLA_FLAGS", ""), device)
    return env


# updates.csv columns a replay cannot reproduce, left out of its comparison: each is the
# machine's timing of the update, not a result of the code (every other column the run
# wrote is compared as its text)
NOT_REPRODUCED = {
    "wall_time_s": "seconds since the run started: wall clock",
    "sps": "env steps per second over the update: wall clock",
    "rollout_queue_get_s": "the learner's wait for data: wall clock",
    "param_queue_get_s": "the actors' wait for parameters: wall clock",
}


def read_updates(updates_csv: Path, limit: int) -> list[dict[str, str]]:
    """The first `limit` rows of an updates.csv, each {column: its text as written} (a
    torn last line left out; no file: none)."""
    rows: list[dict[str, str]] = []
    try:
        with open(updates_csv, newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                if len(rows) >= limit:
                    break
                if None in row or None in row.values() or not row.get("update", "").isdigit():
                    break  # a torn last line: fields missing or spilling over
                rows.append(row)
    except OSError:
        return []
    return rows


def row_difference(recorded: Mapping[str, str], replayed: Mapping[str, str]) -> str | None:
    """The columns of a certified updates.csv row (but NOT_REPRODUCED) whose text differs
    in the replay's row; the params checksum named first (None: identical)."""
    columns = sorted(recorded, key=lambda c: c != "params_checksum")
    differ = [f"{c} {replayed.get(c, '(no such column)')} (replay) vs {recorded[c]} "
              "(certified)" for c in columns
              if c not in NOT_REPRODUCED and replayed.get(c) != recorded[c]]
    return ", ".join(differ) or None


# An episode's facts that the code decides (its wall time is the machine's)
EPISODE_FACTS = ("env_steps", "frames", "env_index", "episode_return", "episode_length")


def episodes_through(episodes_csv: Path, env_steps: int, after: int = 0
                     ) -> list[tuple[str, ...]]:
    """The facts of every episode that ended after `after` and by `env_steps` env steps,
    as written (the text, so the comparison is of the bits the record holds)."""
    rows: list[tuple[str, ...]] = []
    try:
        with open(episodes_csv, newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                try:
                    if after < int(row["env_steps"]) <= env_steps:
                        rows.append(tuple(row[k] for k in EPISODE_FACTS))
                except (KeyError, TypeError, ValueError):
                    break  # a torn last line
    except OSError:
        return []
    return rows


def episode_difference(recorded: list[tuple[str, ...]], replayed: list[tuple[str, ...]]
                       ) -> str | None:
    """Where the replay's episodes part from the certified ones (None: identical)."""
    for i, (a, b) in enumerate(zip(recorded, replayed, strict=False)):
        if a != b:
            fields = [f"{k} {y} (replay) vs {x} (certified)"
                      for k, x, y in zip(EPISODE_FACTS, a, b, strict=True) if x != y]
            return f"episode {i + 1} (env_steps {a[0]}, env {a[2]}): " + ", ".join(fields)
    if len(recorded) != len(replayed):
        return (f"{counted(len(replayed), 'episode')} ended in the replayed updates, the certified "
                f"record has {len(recorded)}")
    return None


class CorePool:
    """This process's cores, handed out to concurrent replays: each CPU replay takes the
    cores its record ran on (usable cores x processes), pinned as the harness pins runs; a
    GPU replay takes them all (one at a time on the GPUs)."""

    def __init__(self, cores: Sequence[int]) -> None:
        self.free = list(cores)
        self.total = len(self.free)
        self.cond = threading.Condition()

    def need(self, device: Mapping[str, Any], processes: int) -> int:
        cores = device.get("usable_cpus")
        if device.get("platform") != "cpu" or not isinstance(cores, int):
            return self.total
        return max(1, min(self.total, cores * processes))

    def take(self, n: int) -> list[int]:
        with self.cond:
            self.cond.wait_for(lambda: len(self.free) >= n)
            mine, self.free = self.free[:n], self.free[n:]
            return mine

    def give(self, cores: Sequence[int]) -> None:
        with self.cond:
            self.free += cores
            self.cond.notify_all()


def cpu_sets(device: Mapping[str, Any], processes: int, cores: Sequence[int],
             ) -> list[list[int] | None]:
    """Each process's cores (its recorded usable count) among `cores`; None: not pinned
    (GPUs, or a record without the count)."""
    per = device.get("usable_cpus")
    if device.get("platform") != "cpu" or not isinstance(per, int) or not cores:
        return [None] * processes
    return [[cores[(i * per + j) % len(cores)] for j in range(per)] for i in range(processes)]


def _launch(argvs: Sequence[tuple[list[str], list[int] | None]], device: Mapping[str, Any],
            checkout: Path, log: Any) -> list[subprocess.Popen]:
    """Start each process (pinned, dying with this one) through the harness's exec shim."""
    return [start_child(argv, cpus, replay_env(device, checkout, process), checkout, log)
            for process, (argv, cpus) in enumerate(argvs)]


def _wait(procs: Sequence[subprocess.Popen], deadline: float,
          stop: threading.Event | None) -> str | None:
    """Wait for every process; why it stopped waiting early (None: all ended)."""
    while any(p.poll() is None for p in procs):
        if stop is not None and stop.is_set():
            return "stopped (interrupted)"
        if time.monotonic() > deadline:
            return "did not finish in time"
        time.sleep(0.2)
    return None


def run_replay(run_id: str, run: Mapping[str, Any], cert: Mapping[str, Any], records: Path,
               updates: int, checkout: Path = PROJECT_ROOT, cores: Sequence[int] = (),
               timeout_s: float = REPLAY_TIMEOUT_S,
               stop: threading.Event | None = None, first: int = 0) -> Replay:
    """Replay one run's updates first + 1 to `updates` on `cores` (default: this
    process's) and compare, or say why it cannot: from update 0 when `first` is 0, else
    resumed from the record's checkpoint of update `first`. `stop` set: the replay's
    processes are killed."""
    device = cert["devices"].get(run.get("device"), {})
    stack = cert["stacks"].get(run.get("stack"), {})
    processes = int(run.get("processes") or 1)
    base = Replay(run_id, NOT_CHECKABLE, "", processes=processes,
                  original_seconds=run.get("wall_time_s"))
    recorded = read_updates(records / run_id / schema.UPDATES_FILE, updates)[first:]
    if not recorded:
        return replace(base, text="it recorded no update"
                       + (f" after update {first}" if first else ""))
    if not all(row.get("params_checksum") for row in recorded):
        return replace(base, text="its updates.csv holds no params checksums (made with "
                                  "--no-params-checksum)")
    differ = differences({**device, **stack}, here_facts(device, True), cores_at_least=True)
    if differ:
        return replace(base, text="NOT CHECKABLE HERE: " + "; ".join(differ))
    command = run.get("command")
    if not command:
        return replace(base, text="no recorded command")
    recorded_cmd = [str(resolve_path(w, project_root=checkout)) if w.endswith(".py") else w
                    for w in command]
    tmp = Path(tempfile.mkdtemp(prefix="cleanba-replay-"))
    if first:  # the certified record up to the segment's checkpoint, to resume from
        copy_for_resume(records / run_id, tmp / "run", first)
    coordinator = f"127.0.0.1:{free_port()}"
    argvs = [(replay_argv(recorded_cmd, tmp / "run", pid, coordinator, updates,
                          resume=bool(first)), cpus)
             for pid, cpus in enumerate(cpu_sets(device, processes,
                                                 list(cores) or available_cpus()))]
    t0 = time.perf_counter()
    procs: list[subprocess.Popen] = []
    try:
        with open(tmp / "replay.log", "wb") as log:
            procs = _launch(argvs, device, checkout, log)
            why = _wait(procs, time.monotonic() + timeout_s, stop)
        base.seconds = time.perf_counter() - t0
        if why is not None:
            return replace(base, text=f"the replay {why} after {base.seconds:.0f} s")
        return compare(base, tmp / "run", recorded, records / run_id, tmp / "replay.log",
                       first)
    finally:
        for p in procs:
            if p.poll() is None:
                signal_group(p, signal.SIGKILL)
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def copy_for_resume(record_dir: Path, run_dir: Path, first: int) -> None:
    """A scratch copy of a certified record that a trainer resumes from its checkpoint of
    update `first`: the newer checkpoints left out (the trainer takes the newest usable
    one), the earlier attempts too, and its status `interrupted` (a completed record is
    not resumed)."""
    shutil.copytree(record_dir, run_dir,
                    ignore=shutil.ignore_patterns(schema.ATTEMPTS_DIR))
    for update in checkpoint.updates_on_disk(run_dir):
        if update > first:
            shutil.rmtree(run_dir / checkpoint.CHECKPOINTS_DIR / str(update))
    atomic_write_json(run_dir / schema.MANIFEST_FILE,
                      {**read_manifest(run_dir), "status": schema.INTERRUPTED})


def compare(base: Replay, run_dir: Path, recorded: list[dict[str, str]], record_dir: Path,
            log: Path, first: int = 0) -> Replay:
    """The replay's record against the certified one: the determinism block first (a
    difference: NOT CHECKABLE), then every column of every replayed update (but
    NOT_REPRODUCED's), then the episodes that ended in those updates (after update
    `first`, where a segment's replay starts)."""
    manifest = read_manifest_or_none(run_dir)
    if manifest is None:
        return replace(base, outcome=MISMATCH, text="the recorded command did not start a "
                       "run here: " + " | ".join(log_tail(log, 3).splitlines()))
    certified = read_manifest_or_none(record_dir) or {}
    differ = differences(certified.get("determinism") or {}, manifest.get("determinism") or {},
                         keys=DETERMINISM_KEYS, where="replay")
    if differ:
        return replace(base, text="NOT CHECKABLE HERE (the replay's own record): "
                                  + "; ".join(differ))
    replayed = {row["update"]: row for row in read_updates(run_dir / schema.UPDATES_FILE,
                                                           first + len(recorded))}
    for row in recorded:
        update = row["update"]
        got = replayed.get(update)
        if got is None:
            err = manifest.get("error") or {}
            return replace(base, outcome=MISMATCH,
                           text=f"update {update}: the replay stopped before it "
                                f"({manifest.get('status')}: {err.get('message', '')})")
        differ_at = row_difference(row, got)
        if differ_at is not None:
            return replace(base, outcome=MISMATCH, text=f"update {update}: {differ_at}")
    # The scores come from episodes.csv, which no checksum covers: the episodes that ended
    # in the replayed updates must be the certified ones, field for field.
    last, steps = recorded[-1]["update"], recorded[-1].get("env_steps", "")
    if not steps.isdigit():
        return replace(base, outcome=MISMATCH,
                       text=f"update {last}: the certified updates.csv has no env_steps")
    before = steps_before(record_dir, first)
    certified_eps = episodes_through(record_dir / schema.EPISODES_FILE, int(steps), before)
    replayed_eps = episodes_through(run_dir / schema.EPISODES_FILE, int(steps), before)
    span = f"updates {first + 1}-{last}"
    differ_at = episode_difference(certified_eps, replayed_eps)
    if differ_at is not None:
        return replace(base, outcome=MISMATCH, text=f"{span}: {differ_at}")
    compared = [c for c in recorded[0] if c not in NOT_REPRODUCED]
    return replace(base, outcome=VERIFIED,
                   text=f"params checksum and the other {len(compared) - 1} columns of "
                        f"updates.csv (all but wall-clock times) identical at {span}, and the "
                        f"{counted(len(certified_eps), 'episode')} that ended in them"
                        + (resumed_text(manifest, first) if first else ""))


def steps_before(record_dir: Path, first: int) -> int:
    """The env steps of the certified run at the end of update `first` (0: none)."""
    if not first:
        return 0
    row = read_updates(record_dir / schema.UPDATES_FILE, first)[-1]
    return int(row["env_steps"])


def resumed_text(manifest: Mapping[str, Any], first: int) -> str:
    """Whether the replay really started at the segment's checkpoint (a checkpoint of
    other code is refused by the trainer, which then replays from update 0: the same
    comparison, at a higher cost)."""
    resumed = [r.get("update") for r in manifest.get("resumptions") or []]
    if resumed and resumed[-1] == first:
        return f" (resumed from the certified checkpoints/{first})"
    return (f" (the trainer did not resume from checkpoints/{first}, it re-ran from update "
            "0: its stdout names why)")
