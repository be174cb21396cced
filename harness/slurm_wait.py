"""Waiting for the Slurm jobs of one `harness run`, until every run has an outcome.

A job is finished when the controller says it ended (squeue/sacct) and
its result file is there (a COMPLETING job first shows whether it was requeued: its result
file is then the stopped attempt's); a job that ended without one (cancelled while pending,
killed, its node lost), or whose state stays unknown, is settled from its run record after
a bounded wait: a record left `running` becomes `interrupted` with the reason. A requeued
job is waited for until it ends again. A preempted run is resubmitted (no attempt spent).
Ctrl-C or SIGTERM to the harness (`stop`) cancels the jobs and waits for their records.

The controller is asked without accounting: submitit asks `sacct` only, and on a cluster
without slurmdbd it warns on every poll and sees every job as UNKNOWN, which it counts as
not done, so a job cancelled while pending is waited for for ever. The harness asks
`squeue -t all` first (the controller keeps a finished job there for MinJobAge, 300 s by
default) and `sacct` only for the jobs squeue no longer lists, and stops asking sacct once
it said accounting is off.
"""

from __future__ import annotations

import getpass
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from harness.execute import BUSY, Outcome, busy_text
from harness.store import (
    RunLock,
    Store,
    failure_kind,
    lock_holder,
    mark_interrupted,
)
from harness.sweep import RunSpec
from runrecord import read_manifest_or_none, schema
from runrecord.words import counted

RESULT_WAIT_S = 10.0  # a job that ended: how long its result file may take to appear
UNKNOWN_WAIT_S = 120.0  # a job neither squeue nor sacct lists (no accounting, long gone)
CANCEL_WAIT_S = 90.0  # after Ctrl-C: Slurm's KillWait (30 s) + the trainer's stop grace
# A COMPLETING job may be on its way to PENDING (requeued: its result file is the stopped
# attempt's, to be overwritten): its result counts once the state is final, or after this.
COMPLETING_WAIT_S = 90.0
PENDING_NOTE_S = 10.0  # how often to look at why a pending job waits
NOT_STARTED = "not-started"  # a cancelled job never ran its run: no outcome, no record
MAX_PREEMPTIONS = 3  # resubmissions of one run in one `harness run`
# Why a pending job waits that will not pass by itself (a drained or down node, a limit).
STUCK_REASONS = ("ReqNodeNotAvail", "Nodes required", "PartitionDown", "PartitionInactive",
                 "NodeDown", "launch failed", "JobHeldAdmin", "JobHeldUser")


# Slurm job states after which nothing of the job runs any more (squeue/sacct names;
# sacct writes "CANCELLED by 0", hence the first word only).
TERMINAL = frozenset({
    "BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL",
    "OUT_OF_MEMORY", "PREEMPTED", "REVOKED", "SPECIAL_EXIT", "TIMEOUT",
})
COMMAND_TIMEOUT_S = 30.0


def _run(argv: list[str]) -> str | None:
    """stdout of a Slurm command, or None when it failed (controller down, no accounting)."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout if p.returncode == 0 else None


def parse_states(text: str) -> dict[str, str]:
    """'JOBID|STATE' lines (squeue -o '%i|%T' -r, sacct -P -o JobID,State) -> {id: state}.
    Array tasks are 'ARRAYID_INDEX', as submitit names them; steps (ID.batch) are skipped."""
    states: dict[str, str] = {}
    for line in text.splitlines():
        job_id, _, state = line.strip().partition("|")
        if job_id and state and "." not in job_id:
            states[job_id] = state.split()[0].upper()
    return states


class Queue:
    """Job states by asking the controller; remembers whether accounting answers."""

    def __init__(self) -> None:
        self.accounting: bool | None = None  # unknown until sacct is first needed

    def states(self, job_ids: list[str]) -> dict[str, str] | None:
        """{job id: state} of those of `job_ids` the cluster still knows; None when squeue
        itself failed (the controller is unreachable: nothing can be concluded)."""
        out = _run(["squeue", "-h", "-t", "all", "-r", "-u", getpass.getuser(),
                    "-o", "%i|%T"])
        if out is None:
            return None
        listed = parse_states(out)
        states = {j: listed[j] for j in job_ids if j in listed}
        missing = [j for j in job_ids if j not in states]
        if missing and self.accounting is not False:
            argv = ["sacct", "-n", "-X", "-P", "-o", "JobID,State"]
            for j in sorted({m.split("_")[0] for m in missing}):
                argv += ["-j", j]
            acct = _run(argv)
            self.accounting = acct is not None
            if acct is not None:
                found = parse_states(acct)
                states.update({j: found[j] for j in missing if j in found})
        return states

    def pending_reason(self, job_id: str) -> str:
        """Why a pending job waits, as squeue says it (e.g. ReqNodeNotAvail...)."""
        out = _run(["squeue", "-h", "-r", "-j", job_id.split("_")[0], "-o", "%i|%r"])
        for line in (out or "").splitlines():
            listed, _, reason = line.strip().partition("|")
            if listed == job_id:
                return reason
        return ""


def cancel(job_ids: list[str]) -> bool:
    """scancel the jobs (running ones get SIGTERM, then SIGKILL after KillWait)."""
    if not job_ids:
        return True
    return _run(["scancel", *job_ids]) is not None


@dataclass
class Watched:
    spec: RunSpec
    job: Any
    submitted_at: float = field(default_factory=time.time)
    ended_since: float | None = None
    unknown_since: float | None = None
    completing_since: float | None = None
    noted_at: float = 0.0
    reason_shown: str = ""
    preemptions: int = 0


@contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block is left (the harness's handlers then run),
    in the main thread and in the sbatch or scancel it starts (they inherit the mask): a
    Ctrl-C never lands between Slurm's taking a job and the harness's noting it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def job_error_text(e: BaseException) -> str:
    """The exception a failed job raised, from submitit's error (which ends in log paths):
    the last line of the traceback it quotes, else its first line."""
    lines = [x.rstrip() for x in str(e).splitlines()]
    rules = [i for i, x in enumerate(lines) if len(x.strip()) > 5 and set(x.strip()) == {"-"}]
    if len(rules) >= 2:
        quoted = [x for x in lines[rules[0] + 1:rules[1]] if x.strip()]
        if quoted:
            return quoted[-1].strip()
    first = next((x.strip() for x in lines if x.strip()), "")
    return f"{type(e).__name__}: {first}".rstrip(": ")


def results_written(job: Any) -> bool:
    """Whether every task of the job wrote its result (without asking the cluster)."""
    return all(j.paths.result_pickle.exists() for j in (getattr(job, "_sub_jobs", None) or [job]))


def settle_from_record(spec: RunSpec, store: Store, why: str, since: float,
                       stopped: bool) -> Outcome:
    """The outcome of a run whose job ended without a result, from its record; a record
    still `running` with nobody holding its lock becomes `interrupted` because of `why`.
    NOT_STARTED: the job never started it and the harness was stopped (the summary counts
    it as not started)."""
    run_dir = store.run_dir(spec.run_id)
    out = Outcome(spec.run_id, spec.label(), schema.INTERRUPTED, cpus=spec.cpus_needed)
    lock = RunLock(run_dir)
    if not lock.acquire():
        if stopped:  # its job is still stopping the trainer: it records `interrupted` itself
            out.error = f"{why}; its job is still stopping it and records `interrupted`"
            return out
        out.status, out.error = BUSY, busy_text(lock_holder(run_dir))
        return out
    try:
        manifest = read_manifest_or_none(run_dir)
        touched = max((p.stat().st_mtime for p in (run_dir / schema.MANIFEST_FILE,
                                                    run_dir / schema.LOG_FILE) if p.exists()),
                      default=0.0)
        if manifest is None or touched < since:  # this job never ran it
            if stopped:
                out.status = NOT_STARTED
                return out
            out.error = f"{why} before it started; the next `harness run` runs it"
            return out
        status = manifest.get("status")
        if status == schema.RUNNING:
            mark_interrupted(run_dir, f"{why}; its record still said `running`")
            out.error = f"Interrupted: {why}"
            return out
        error = manifest.get("error") or {}
        out.status = status if status in (schema.COMPLETED, schema.FAILED,
                                          schema.SKIPPED) else schema.INTERRUPTED
        out.error = f"{error.get('type', '')}: {error.get('message', '')}".strip(": ")
        if out.status == schema.FAILED:
            out.kind = failure_kind(error)
        return out
    finally:
        lock.release()


class Watcher:
    def __init__(self, store: Store, cluster: str, total: int, console: Any,
                 stop: threading.Event | None, poll_s: float):
        self.store, self.cluster, self.total = store, cluster, total
        self.console, self.stop, self.poll_s = console, stop, poll_s
        self.queue = Queue() if cluster == "slurm" else None
        self.outcomes: list[Outcome] = []

    def say(self, text: str) -> None:
        if self.console is not None:
            self.console.print(text, highlight=False, soft_wrap=True)

    def watch(self, jobs: list[tuple[RunSpec, Any]],
              resubmit: Callable[[list[RunSpec]], list[tuple[RunSpec, Any]]],
              hurry: bool = False) -> None:
        """Until every job's run has an outcome. `hurry` (the user pressed Ctrl-C twice
        already): cancel the jobs and settle from the records without waiting."""
        pending = [Watched(spec, job) for spec, job in jobs]
        cancelled_at: float | None = None
        while pending:
            try:
                stopped = self.stop is not None and self.stop.is_set()
                if stopped and cancelled_at is None:
                    ids = [w.job.job_id for w in pending]
                    self.say(f"harness: cancelling {counted(len(ids), 'job')} ({' '.join(ids)}); "
                             f"waiting up to {CANCEL_WAIT_S:.0f} s for their runs to record "
                             "`interrupted`")
                    self._cancel(pending)
                    cancelled_at = time.monotonic()
                give_up = cancelled_at is not None and (
                    hurry or time.monotonic() - cancelled_at > CANCEL_WAIT_S)
                states = (self.queue.states([w.job.job_id for w in pending])
                          if self.queue is not None else None)
                with signals_held():  # a Ctrl-C here would record an outcome twice
                    pending = self._step(pending, states, stopped, give_up, resubmit)
                if pending:
                    time.sleep(self.poll_s)
            except KeyboardInterrupt:  # a second Ctrl-C: cancel (again) and settle now
                if self.stop is None or not self.stop.is_set():
                    raise
                self.say("harness: second interrupt: not waiting any longer; the records "
                         "say what happened")
                hurry = True

    def _step(self, pending: list[Watched], states: dict[str, str] | None, stopped: bool,
              give_up: bool, resubmit: Callable[[list[RunSpec]], list[tuple[RunSpec, Any]]]
              ) -> list[Watched]:
        """Record the outcomes of the jobs that are over; those still to wait for."""
        still, again = [], []
        for w in pending:
            o = self._check(w, states, stopped, give_up)
            if o is None:
                still.append(w)
            elif (o.status == schema.INTERRUPTED and o.error.startswith("Preempted")
                  and not stopped and w.preemptions < MAX_PREEMPTIONS):
                self.say(f"preempted: {o.run_id} {o.label} (job {w.job.job_id}): "
                         "resubmitted, no attempt spent")
                again.append(w)
            elif o.status != NOT_STARTED:
                self._record(w, o)
        for w, (spec, job) in zip(again, resubmit([w.spec for w in again]), strict=False):
            still.append(Watched(spec, job, preemptions=w.preemptions + 1))
        return still

    def _cancel(self, pending: list[Watched]) -> None:
        if self.cluster == "slurm":
            if not cancel([w.job.job_id for w in pending]):
                self.say("harness: scancel failed; the jobs may still be running "
                         "(`squeue --me`)")
            return
        for w in pending:
            try:
                w.job.cancel(check=False)
            except Exception:  # noqa: BLE001  (a local job that ended in the meantime)
                pass

    def _record(self, w: Watched, o: Outcome) -> None:
        self.outcomes.append(o)
        line = f"[{len(self.outcomes)}/{self.total}] {o.status} {o.run_id} {o.label} " \
               f"(job {w.job.job_id})"
        if o.resumed_from:  # as the local console says it
            line += f"; resumed from {o.resumed_from}"
        if o.status not in (schema.COMPLETED,) and o.error:
            line += f": {o.error.splitlines()[0]}"
        self.say(line)

    def _check(self, w: Watched, states: dict[str, str] | None, stopped: bool,
               give_up: bool) -> Outcome | None:
        """The run's outcome once its job is over, else None (keep waiting)."""
        job_id = w.job.job_id
        now = time.monotonic()
        if self.queue is None:  # submitit's local executors: it knows their processes
            if w.job.done():
                return self._result(w)
            return self._give_up(w, "stopped", stopped) if give_up else None
        state = None if states is None else states.get(job_id)
        if state == "COMPLETING":
            w.completing_since = w.completing_since or now
            if now - w.completing_since < COMPLETING_WAIT_S and not give_up:
                return None
        else:
            w.completing_since = None
        if state is not None and state not in TERMINAL and state != "COMPLETING":
            w.unknown_since = w.ended_since = None
            if state == "PENDING" and now - w.noted_at > PENDING_NOTE_S:
                self._note_pending(w)
            if give_up:
                return self._give_up(w, f"Slurm job {job_id} was still {state} when the "
                                     "harness stopped waiting", stopped)
            return None
        if results_written(w.job):
            return self._result(w)
        if give_up:
            return self._give_up(w, f"Slurm job {job_id} was cancelled by the harness "
                                 f"(Ctrl-C or SIGTERM){f', {state}' if state else ''}",
                                 stopped)
        if states is None:  # the controller does not answer: nothing can be concluded
            return None
        if state is None:
            w.unknown_since = w.unknown_since or now
            if now - w.unknown_since < UNKNOWN_WAIT_S:
                return None
            why = (f"Slurm job {job_id}: its state stayed unknown for {UNKNOWN_WAIT_S:.0f} s "
                   "(neither squeue nor sacct lists it) and it left no result")
        else:
            w.ended_since = w.ended_since or now
            if now - w.ended_since < RESULT_WAIT_S:
                return None
            why = f"Slurm job {job_id} ended {state}"
        return settle_from_record(w.spec, self.store, why, w.submitted_at, stopped)

    def _give_up(self, w: Watched, why: str, stopped: bool) -> Outcome:
        return settle_from_record(w.spec, self.store, why, w.submitted_at, stopped)

    def _note_pending(self, w: Watched) -> None:
        w.noted_at = time.monotonic()
        if self.queue is None:
            return
        reason = self.queue.pending_reason(w.job.job_id)
        if reason and reason != w.reason_shown and any(r in reason for r in STUCK_REASONS):
            w.reason_shown = reason
            self.say(f"waiting: job {w.job.job_id} ({w.spec.run_id}) is pending: {reason}; "
                     "it starts when Slurm can run it (`scontrol update nodename=... "
                     "state=resume`), or stop the harness (Ctrl-C cancels its jobs)")

    def _result(self, w: Watched) -> Outcome:
        try:
            return Outcome(**w.job.results()[0])
        except Exception as e:  # noqa: BLE001  (the job died: its exception, not a log path)
            text = job_error_text(e)
            o = Outcome(w.spec.run_id, w.spec.label(), schema.FAILED,
                        error=f"job {w.job.job_id}: {text} (log: {w.job.paths.stderr})")
            try:  # a record the dead job left `running` says so
                settled = settle_from_record(w.spec, self.store, f"Slurm job {w.job.job_id} "
                                             f"failed: {text}", w.submitted_at, stopped=False)
            except OSError:  # the run folder itself is what failed
                return o
            if settled.status == BUSY:
                o.error += f"; {settled.error}"
            return o
