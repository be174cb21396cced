"""Run one run: take its lock, start its trainer process(es), wait, settle its record.

The same function serves the local pool (one thread per run) and Slurm (one call per
job, in the job). The trainer writes the run record; the harness writes one only when
the trainer could not (it died before writing, or was killed): then the run is recorded
as failed or interrupted with the reason and the tail of stdout.log.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.inputs.cache import refresh_run
from cleanba.core.xla_flags import with_device_count
from harness.store import (
    RunLock,
    RunState,
    Store,
    confirmed,
    failure_kind,
    lock_holder,
    mark_interrupted,
    peer_resume_args,
    resume_point,
    resumptions,
    run_state,
    will_retry,
)
from harness.sweep import RunSpec
from runrecord import (
    PROJECT_ROOT,
    RecordError,
    RunWriter,
    error_entry,
    read_manifest_or_none,
    schema,
    settle,
    utc_now,
)
from runrecord.exits import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_UNAVAILABLE
from runrecord.provenance import collect, free_port

# Outcome statuses beyond the manifest's: the run was not started by this call.
ALREADY_COMPLETED = "already-completed"
BUSY = "busy"  # another harness process holds the run's lock
EXHAUSTED = "exhausted"  # failed max_attempts times already
NOT_RETRIED = "not-retried"  # its last failure was deterministic (harness.store)

STOP_EXIT_CODES = (EXIT_INTERRUPTED, -signal.SIGINT, -signal.SIGTERM)
STOP_GRACE_S = 30.0  # after SIGINT, how long a trainer may take to record `interrupted`
PEER_GRACE_S = 20.0  # d>1: how long the other processes may run after one of them failed


class StopRequest(threading.Event):
    """A stop asked from outside the trainer, and why: in a Slurm job, Slurm's signal
    (preemption, the time limit near, scancel or requeue). The run is stopped as on
    Ctrl-C; `error_type` is what its record says (Interrupted, Preempted or Timeout)."""

    def __init__(self) -> None:
        super().__init__()
        self.reason = ""
        self.error_type = "Interrupted"

    def request(self, reason: str, error_type: str = "Interrupted") -> None:
        if not self.is_set():  # the first reason is what happened; later ones follow it
            self.reason, self.error_type = reason, error_type
        self.set()


class LinkedStop(StopRequest):
    """One run's stop: set by its own request (e.g. its gate was decided: harness.
    curve_monitor) or by the whole harness's stop (Ctrl-C), whose reason is the default."""

    def __init__(self, parent: threading.Event) -> None:
        super().__init__()
        self.parent = parent
        # Set: the run is paused (SIGSTOP) until cleared (SIGCONT); a run ahead of its
        # gate's other seeds waits for them at the look (harness.curve_monitor).
        self.hold = threading.Event()
        # Set on every change of hold or a request: the run's loop wakes at once (a CartPole
        # run makes 12 updates a second; a 0.2 s sleep let it run 2-3 past a look).
        self.changed = threading.Event()

    def set_hold(self, on: bool) -> None:
        if on != self.hold.is_set():
            (self.hold.set if on else self.hold.clear)()
            self.changed.set()

    def request(self, reason: str, error_type: str = "Interrupted") -> None:
        super().request(reason, error_type)
        self.changed.set()

    def is_set(self) -> bool:
        return threading.Event.is_set(self) or self.parent.is_set()


STOPPED = "stopped"
"""Outcome of a run stopped (or never started) because its gate was decided: its record,
if any, is `interrupted` with error type Stopped and the decision as message."""


@dataclass
class Outcome:
    run_id: str
    label: str
    status: str
    wall_time_s: float = 0.0
    returncode: int | None = None
    error: str = ""
    attempt: int = 0
    cpus: int = 1
    kind: str = ""
    """Failed runs: 'transient' (retried) or 'deterministic' (not), see harness.store.failure_kind."""
    resumed_from: str = ""
    """The checkpoint this attempt continued from, as its record confirms (harness.store.confirmed),
    e.g. 'checkpoints/6 (after update 6)'; '' when it started from update 0."""


def process_gpus(gpu_ids: Sequence[int] | None, per_process: int,
                 index: int) -> list[int] | None:
    """The GPUs of the run's index-th process on this machine: its own `per_process` of
    the run's (every process seeing all of them, each would take the first ones)."""
    if gpu_ids is None:
        return None
    return list(gpu_ids[index * per_process:(index + 1) * per_process])


def child_env(
    spec: RunSpec, cpu_ids: Sequence[int] | None, gpu_ids: Sequence[int] | None,
    base: dict[str, str] | None = None,
) -> dict[str, str]:
    """Environment of a trainer process: trainer_env's, with the sweep's virtual device
    count on CPU."""
    cpu = spec.resources.accelerator == "cpu"
    env = trainer_env(os.environ if base is None else base,
                      len(cpu_ids) if cpu_ids else spec.resources.cpus_per_process, cpu,
                      None if gpu_ids is None else list(map(str, gpu_ids)), PROJECT_ROOT)
    if cpu:
        env["XLA_FLAGS"] = with_device_count(env.get("XLA_FLAGS", ""),
                                             spec.cpu_devices or spec.layout.devices_per_process)
    return env


def trainer_env(base: Mapping[str, str], threads: int | None, cpu: bool,
                gpus: Sequence[str] | None, root: Path) -> dict[str, str]:
    """What the environment of every trainer process the harness starts holds (a sweep's
    runs and the replays of `harness verify`): `threads` per BLAS thread pool (None: as
    `base`), JAX on the CPU (`cpu`) or on its own `gpus`, offline wandb, unbuffered
    output, `root` importable."""
    env = dict(base)
    if threads is not None:
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[var] = str(threads)
    if cpu:
        env["JAX_PLATFORMS"] = "cpu"
    elif gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
        # jax.distributed keeps them all (inside a Slurm allocation it would keep only
        # the GPU numbered SLURM_LOCALID; see cleanba.core.layout.local_device_ids)
        env["JAX_LOCAL_DEVICE_IDS"] = ",".join(map(str, range(len(gpus))))
    env.setdefault("WANDB_MODE", "offline")
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH", "")) if p)
    return env


def base_manifest(spec: RunSpec, command: list[str]) -> dict[str, Any]:
    """Identity of a run for a record the harness must write itself (trainer never did)."""
    from benchenv import env_protocol

    layout = spec.layout.to_dict()
    layout.update(devices=None, num_cpus=spec.cpus_needed)
    return {
        "run_id": spec.run_id, "sweep": spec.sweep, "system": spec.system,
        "architecture": spec.architecture, "env_id": spec.env_id, "seed": spec.seed,
        "layout": layout,
        "hyperparameters": {"preset": spec.preset, "total_timesteps": spec.total_timesteps,
                            **spec.overrides},
        "env_protocol": env_protocol(spec.env_id, backend=spec.env_backend),
        "provenance": collect(command=command, recorded_by="harness"),
    }


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 6000))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    """Send `sig` to the process group of a child start_child started (gone: nothing)."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def start_child(argv: Sequence[str], cpus: Sequence[int] | None, env: dict[str, str],
                cwd: Path, log: Any, python: str = sys.executable) -> subprocess.Popen:
    """Start one trainer process through the exec shim harness._child (pinned to `cpus`,
    dying with this process), in a session of its own, its output into `log`."""
    shim = [python, "-m", "harness._child"]
    if cpus:
        shim += ["--cpus", ",".join(map(str, cpus))]
    return subprocess.Popen([*shim, "--", *argv], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL,
                            env={**env, "HARNESS_PARENT_PID": str(os.getpid())},
                            cwd=cwd, start_new_session=True)


def launch_and_wait(
    spec: RunSpec,
    run_dir: Path,
    process_ids: Sequence[int],
    coordinator: str,
    cpu_ids: Sequence[int] | None,
    gpu_ids: Sequence[int] | None,
    stop: threading.Event | None,
    header: str,
    python: str = sys.executable,
    extra_args: Sequence[str] = (),
) -> tuple[list[int], str]:
    """Start the given processes of a run, wait for all; returns (exit codes, why stopped).
    `extra_args` follow each process's command (e.g. --resume-from)."""
    log_path = run_dir / schema.LOG_FILE
    procs: list[subprocess.Popen] = []
    why = ""
    with open(log_path, "ab") as log:
        log.write(f"=== harness: {header} ===\n".encode())
        log.flush()
        cpp = spec.resources.cpus_per_process
        for i, pid in enumerate(process_ids):
            argv = [*spec.command(run_dir, process_id=pid, coordinator=coordinator,
                                  python=python), *extra_args]
            my_cpus = list(cpu_ids[i * cpp:(i + 1) * cpp]) if cpu_ids else None
            my_gpus = process_gpus(gpu_ids, spec.layout.devices_per_process, i)
            log.write(f"=== process {pid}: {' '.join(argv)}\n".encode())
            log.flush()
            procs.append(start_child(argv, my_cpus, child_env(spec, my_cpus, my_gpus),
                                     PROJECT_ROOT, log, python))
    deadline = (time.monotonic() + spec.resources.timeout_min * 60
                if spec.resources.timeout_min else None)
    signalled_at: float | None = None
    first_failure_at: float | None = None
    held = False
    while True:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            break
        now = time.monotonic()
        hold = getattr(stop, "hold", None)
        want = bool(hold is not None and hold.is_set() and signalled_at is None
                    and stop is not None and not stop.is_set())
        if want != held:  # pause or resume every process of the run (a stop resumes it)
            for p in procs:
                if p.poll() is None:
                    signal_group(p, signal.SIGSTOP if want else signal.SIGCONT)
            held = want
            with open(log_path, "ab") as log:
                log.write(f"=== harness: {'paused' if want else 'resumed'} at {utc_now()} "
                          "(its gate's other seeds, or its look) ===\n".encode())
        if signalled_at is None:
            if stop is not None and stop.is_set():
                why = getattr(stop, "reason", "") or "stopped by the harness (interrupt)"
            elif deadline is not None and now > deadline:
                why = f"timeout after {spec.resources.timeout_min} min"
            if why:
                for p in procs:
                    signal_group(p, signal.SIGINT)
                signalled_at = now
        elif now - signalled_at > STOP_GRACE_S:
            for p in procs:
                signal_group(p, signal.SIGKILL)
        if any(c not in (None, 0) for c in codes):
            first_failure_at = first_failure_at or now
            if now - first_failure_at > PEER_GRACE_S:
                for p in procs:
                    if p.poll() is None:
                        signal_group(p, signal.SIGKILL)
        changed = getattr(stop, "changed", None)
        if changed is not None:  # wake at a hold or stop (the loop reads them at its top)
            changed.wait(0.2)
            changed.clear()
        else:
            time.sleep(0.2)
    codes_now = [int(p.returncode) for p in procs]
    if stop is not None and not why and any(c in (*STOP_EXIT_CODES, -signal.SIGUSR2)
                                            for c in codes_now):
        # A signal to a whole Slurm job step (scancel, requeue; USR2 before the trainer
        # ignores it) reaches the trainer and this process at once: give ours a moment to land, so that the record says who stopped it.
        if stop.wait(1.0):
            why = getattr(stop, "reason", "") or "stopped by the harness (interrupt)"
    with open(log_path, "ab") as log:  # the exit codes, for whoever reads the log later
        log.write(f"=== harness: exit codes {codes_now}"
                  f"{' (' + why + ')' if why else ''} ===\n".encode())
    return codes_now, why


_EXIT_MEANING = {
    0: "exited 0 without completing its record", 1: "the trainer failed", EXIT_BAD_INPUT: "bad arguments (the command line was rejected)",
    EXIT_UNAVAILABLE: "unavailable", EXIT_INTERRUPTED: "interrupted",
    -9: "killed by SIGKILL (out of memory?)", -11: "segmentation fault",
    -signal.SIGTERM: "stopped by SIGTERM", -signal.SIGINT: "stopped by SIGINT",
}


def exit_meaning(code: int) -> str:
    if code in _EXIT_MEANING:
        return _EXIT_MEANING[code]
    if code < 0:
        return f"killed by signal {-code}"
    return f"exit code {code}"


def execute_run(
    spec: RunSpec,
    store: Store,
    *,
    max_attempts: int = 2,
    retry_skipped: bool = False,
    retry_failed: bool = False,
    cpu_ids: Sequence[int] | None = None,
    gpu_ids: Sequence[int] | None = None,
    stop: threading.Event | None = None,
    process_ids: Sequence[int] | None = None,
    coordinator: str | None = None,
) -> Outcome:
    """Run `spec` unless it is completed, locked by someone else, or out of attempts.

    `process_ids` and `coordinator` are for Slurm, where each task starts its own process
    (rank 0 calls this; others call `run_peer_process`). Locally all processes start here.
    """
    run_dir = store.run_dir(spec.run_id)
    out = Outcome(spec.run_id, spec.label(), BUSY, cpus=spec.cpus_needed)
    lock = RunLock(run_dir)
    if not lock.acquire():
        out.error = busy_text(lock_holder(run_dir))
        return out
    try:
        state = run_state(run_dir)
        out.attempt = state.attempts
        left = left_alone(state, max_attempts, retry_skipped, retry_failed)
        if left is not None:
            out.status, out.error, out.kind = left
            return out
        mark_interrupted(run_dir, "its supervising harness died before it finished "
                         "(the run's lock was free); re-run")
        out.attempt = state.attempts + 1
        point = resume_point(spec, run_dir)
        resumptions_before = len(resumptions(read_manifest_or_none(run_dir)))
        if process_ids is None:
            process_ids = list(range(spec.num_processes))
        if coordinator is None:
            coordinator = f"127.0.0.1:{free_port()}"
        t0 = time.monotonic()
        header = (f"attempt {out.attempt} of run {spec.run_id} ({spec.label()}) started "
                  f"{utc_now()} on {socket.gethostname()}"
                  + (f", resumes from {point.text()}" if point else ""))
        codes, why = launch_and_wait(spec, run_dir, process_ids, coordinator, cpu_ids,
                                     gpu_ids, stop, header, extra_args=[] if point is None
                                     else ["--resume-from", str(run_dir)])
        out.wall_time_s = time.monotonic() - t0
        out.returncode = codes[0]
        if point is not None:  # the trainer checks the checkpoint again and may refuse it
            done = confirmed(run_dir, resumptions_before)
            out.resumed_from = "" if done is None else done.text()
        try:
            settled = _settle(spec, run_dir, out, codes, why, stop)
            add_to_analysis_cache(run_dir)  # the first report after a sweep parses nothing
            return settled
        except OSError as e:  # e.g. a full disk: the record cannot say it, the console must
            out.status = schema.FAILED
            out.kind = "transient"
            out.error = (f"{exit_meaning(codes[0])} (exit codes {codes}); its record could "
                         f"not be settled ({type(e).__name__}: {e}), so it stays `running` "
                         "and the next `harness run` redoes it")
            return out
    finally:
        lock.release()


def left_alone(state: RunState, max_attempts: int, retry_skipped: bool = False,
               retry_failed: bool = False) -> tuple[str, str, str] | None:
    """Why `harness run` does not start a run, as (outcome status, error, failure kind), or
    None when it starts it: one rule for the local pool (under the run's lock) and for
    Slurm (before it submits a job)."""
    if state.state == schema.COMPLETED:
        return ALREADY_COMPLETED, "", ""
    if state.state == schema.SKIPPED and not retry_skipped:
        return schema.SKIPPED, state.error, ""
    if state.failures >= max_attempts:
        return EXHAUSTED, state.error or "failed", state.kind
    if state.state == schema.FAILED and not will_retry(state.kind,  # type: ignore[arg-type]
                                                       state.failures, max_attempts,
                                                       retry_failed):
        return NOT_RETRIED, state.error or "failed", state.kind
    return None


def busy_text(holder: str | None) -> str:
    """Why a run is busy and what to do, from its lock's 'pid host since [slurm-job=ID]'."""
    if not holder:
        return "its lock was held a moment ago and is free now: run again"
    parts = holder.split()
    job = next((p.split("=", 1)[1] for p in parts if p.startswith("slurm-job=")), None)
    who = f"process {parts[0]} on {parts[1]} since {parts[2]}" if len(parts) >= 3 else holder
    if job:
        return (f"held by Slurm job {job} ({who}): a requeued or earlier job is running it; "
                f"wait for it (`squeue -j {job}`, `harness status`), or `scancel {job}` "
                "and run again")
    return (f"held by {who}: another `harness run` is running it; wait for it, or stop "
            "that one (Ctrl-C), and run again")


def add_to_analysis_cache(run_dir: Path) -> None:
    """Store the settled record in the results root's analysis cache. Only a speed-up:
    a record it cannot read or store is parsed by the next analysis command instead."""
    try:
        refresh_run(run_dir)
    except (RecordError, OSError):
        pass


def _settle(spec: RunSpec, run_dir: Path, out: Outcome, codes: list[int], why: str,
            stop: threading.Event | None) -> Outcome:
    """Read what the trainer recorded and make the record say what happened.

    Exit code 130 or a stop asked by the harness (Ctrl-C, SIGTERM as on Slurm preemption)
    is an interruption, never a failure, whatever the trainer managed to record; a
    timeout is a failure (its own type); every failure records the exit codes, which
    `harness.store.failure_kind` reads.
    """
    manifest = read_manifest_or_none(run_dir)
    status = (manifest or {}).get("status")
    rc = codes[0]
    tail = log_tail(run_dir / schema.LOG_FILE)
    if status == schema.COMPLETED:
        out.status = schema.COMPLETED
        if any(c != 0 for c in codes):
            out.error = f"record completed, but process exit codes were {codes}"
        return out
    if status == schema.SKIPPED or rc == EXIT_UNAVAILABLE:
        out.status = schema.SKIPPED
        if manifest is None:
            reason = f"unavailable (exit code 3); log tail:\n{tail}"
            from runrecord import write_skipped

            write_skipped(run_dir, base_manifest(spec, spec.command(run_dir)), reason)
            out.error = reason
        else:
            out.error = (manifest.get("error") or {}).get("message", "")
        return out
    # A stop with its own reason (a Slurm signal: preemption, time limit) names it in the
    # record, whatever the trainer wrote when it stopped.
    stop_type = getattr(stop, "error_type", "") if stop is not None and stop.is_set() else ""
    stop_reason = getattr(stop, "reason", "") if stop_type else ""
    timed_out = why.startswith("timeout") or stop_type == "Timeout"
    # Exit 130, or killed by SIGINT/SIGTERM before its handlers were in place (a stop
    # during the imports), is a stop from outside (Ctrl-C, preemption), never a failure.
    interrupted = not timed_out and (
        any(c in STOP_EXIT_CODES for c in codes) or status == schema.INTERRUPTED
        or (stop is not None and stop.is_set()))
    final = schema.INTERRUPTED if interrupted else schema.FAILED
    codes_text = ", ".join(f"process {i}: {exit_meaning(c)}" for i, c in enumerate(codes))
    recorded = (manifest or {}).get("error") or {}
    if status == final and manifest is not None and not stop_reason:
        # The trainer settled its record as what happened: keep its words, add the codes.
        error = {**recorded, "exit_codes": codes}
    else:
        # The trainer did not settle its record (it died, was killed, rejected its
        # arguments), or settled it as something else than what happened (a timeout it
        # saw as an interrupt; a stop during start-up it saw as a failure).
        reason = why or exit_meaning(rc)
        message = f"{reason} ({codes_text})"
        if recorded.get("message") or recorded.get("type"):
            message += (f"; the trainer recorded {status}: "
                        f"{recorded.get('type', '')}: {recorded.get('message', '')}")
        error = error_entry(
            "Timeout" if timed_out else (stop_type or "Interrupted") if interrupted
            else "TrainerExit",
            message, recorded.get("traceback") or tail, exit_codes=codes)
    if manifest is None:
        writer = RunWriter(run_dir, base_manifest(spec, spec.command(run_dir)))
        writer.finish(final, error=error)
    else:
        settle(run_dir, manifest, final, error)
    out.status = STOPPED if stop_type == "Stopped" else final
    out.error = f"{error.get('type', '')}: {error.get('message', '')}".strip(": ")
    if final == schema.FAILED:
        out.kind = failure_kind(error)
    return out


def run_peer_process(spec: RunSpec, store: Store, process_id: int, coordinator: str,
                     stop: threading.Event | None = None) -> int:
    """Slurm tasks of rank > 0: start this task's process of a d>1 run and wait.

    Rank 0 owns the lock and the record; a peer only checks the run is not done already.
    """
    run_dir = store.run_dir(spec.run_id)
    manifest = read_manifest_or_none(run_dir)
    if manifest and manifest.get("status") in (schema.COMPLETED, schema.SKIPPED):
        return 0
    run_dir.mkdir(parents=True, exist_ok=True)
    codes, _ = launch_and_wait(spec, run_dir, [process_id], coordinator, None, None, stop,
                               f"process {process_id} of run {spec.run_id} on "
                               f"{socket.gethostname()} at {utc_now()}",
                               extra_args=peer_resume_args(spec, run_dir))
    return codes[0]
