"""Local backend: a pool that runs as many runs at once as the CPUs and devices allow.

Each run asks for cpus_per_process x processes CPU cores (pinned) and, with
accelerator = 'gpu', one GPU per layout device per process. The scheduler starts the
largest runs first and back-fills free slots with smaller ones. Each run is supervised
by one thread (which holds the run's lock) and its trainer processes die with it.

The ETA is the sweep's own, from what its runs measured, run kind by run kind. A sweep
mixes runs of very different cost: a two-process layout takes both cores and is slower
per env step than a one-process one; an Atari run costs more per step than a CartPole
run. One rate for the whole sweep, taken from whichever runs finish first,
overstates or understates the rest many times over (the smoke sweep runs its two-process
layout first: one rate said 27 minutes left of an 11-minute sweep). So each run left is
priced by the finished runs of its own kind, else of the nearest kinds (seconds_per_step),
and the line says when it is rough. A run's cost is in core-seconds (its wall time x the
cores it holds), and the cores work in parallel: the time left is those over the cores.
"""

from __future__ import annotations

import os
import queue
import resource
import shutil
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.execute import ALREADY_COMPLETED, BUSY, STOPPED, Outcome, execute_run
from harness.store import (
    CORRUPT,
    PENDING,
    STALE,
    RunState,
    Store,
    last_progress,
    run_state,
)
from harness.sweep import RunSpec
from runrecord import schema
from runrecord.provenance import available_cpus
from runrecord.words import counted

NO_RATE = "no run of this sweep has finished yet"
ETA_UNKNOWN = f"ETA unknown ({NO_RATE})"
LEFT_STATES = ("running", PENDING, CORRUPT, STALE, schema.INTERRUPTED)
"""The states of runs with steps still to run (`harness status` prices them)."""


@dataclass(frozen=True)
class RunKind:
    system: str
    layout: str
    env_id: str


@dataclass(frozen=True)
class FinishedRun:
    """A run that ran here to its end: its env steps and its wall time, start-up and
    compilation included (they are part of what each run left will cost too)."""

    kind: RunKind
    steps: int
    wall_s: float


@dataclass(frozen=True)
class RunLeft:
    """A run not finished: the env steps it has left and the cores it holds."""

    kind: RunKind
    steps_left: float
    cores: int


@dataclass(frozen=True)
class Estimate:
    seconds: float
    runs_left: int
    priced_by_other_kinds: int  # runs left with no finished run of their own kind yet


def _rate(runs: Sequence[FinishedRun]) -> float | None:
    steps = sum(r.steps for r in runs)
    return sum(r.wall_s for r in runs) / steps if steps > 0 else None


def _median_kind_rate(runs: Sequence[FinishedRun]) -> float | None:
    """The median over kinds of each kind's rate: one slow kind (a two-process layout, the
    first to finish) does not set the price of every kind not yet seen."""
    by_kind: dict[RunKind, list[FinishedRun]] = {}
    for r in runs:
        by_kind.setdefault(r.kind, []).append(r)
    rates = [x for x in map(_rate, by_kind.values()) if x is not None]
    return statistics.median(rates) if rates else None


def seconds_per_step(finished: Sequence[FinishedRun], kind: RunKind
                     ) -> tuple[float, bool] | None:
    """(wall seconds per env step of `kind`, whether runs of its own kind measured it): from
    finished runs of that kind; else of its layout and env (another system); else the
    median kind of its env; else the median kind of the sweep; None with no finished run.
    Each fallback is computed only when the one before it has no runs."""
    own = _rate([r for r in finished if r.kind == kind])
    if own is not None:
        return own, True
    fallbacks = (
        lambda: _rate([r for r in finished
                       if (r.kind.layout, r.kind.env_id) == (kind.layout, kind.env_id)]),
        lambda: _median_kind_rate([r for r in finished if r.kind.env_id == kind.env_id]),
        lambda: _median_kind_rate(finished))
    for fallback in fallbacks:
        rate = fallback()
        if rate is not None:
            return rate, False
    return None


def seconds_left(finished: Sequence[FinishedRun], left: Sequence[RunLeft],
                 cores: int) -> Estimate | None:
    """The sweep's wall seconds left: each run left priced at its kind's measured seconds
    per step, in core-seconds, shared by `cores` cores; None before any run has finished.
    Each kind is priced once (a 57-game sweep has hundreds of runs left, few kinds, and the
    live display asks twice a second)."""
    if not finished or cores < 1:
        return None
    prices: dict[RunKind, tuple[float, bool] | None] = {}
    core_seconds, borrowed = 0.0, 0
    for run in left:
        if run.kind not in prices:
            prices[run.kind] = seconds_per_step(finished, run.kind)
        priced = prices[run.kind]
        if priced is None:
            return None
        rate, own = priced
        borrowed += not own
        core_seconds += max(0.0, run.steps_left) * rate * max(1, min(run.cores, cores))
    return Estimate(core_seconds / cores, len(left), borrowed)


def eta_text(estimate: Estimate | None, label: str = "ETA") -> str:
    """The ETA line; it says how rough it is while runs left are priced by other kinds'."""
    if estimate is None:
        return f"{label} unknown ({NO_RATE})"
    how = "from this sweep's finished runs of each kind"
    if estimate.priced_by_other_kinds:
        how = (f"rough: {estimate.priced_by_other_kinds} of the {estimate.runs_left} runs "
               "left have no finished run of their system, layout and env yet")
    return f"{label} {fmt_duration(estimate.seconds)} ({how})"


def status_estimates(rows: Sequence[tuple[RunSpec, RunState]]
                     ) -> tuple[dict[str, Estimate | None], Estimate | None]:
    """`harness status`'s time left, priced as the live display prices it (seconds_left)
    from the sweep's completed runs: each run with steps left alone (by run id), and all of
    them summed on one core (before parallelism, which status does not know)."""
    finished = [FinishedRun(run_kind(spec), spec.total_timesteps, st.wall_time_s)
                for spec, st in rows if st.state == schema.COMPLETED and st.wall_time_s]
    left = {spec.run_id: RunLeft(run_kind(spec), max(0, spec.total_timesteps - st.env_steps), 1)
            for spec, st in rows if st.state in LEFT_STATES}
    per_run = {run_id: seconds_left(finished, [run], 1) for run_id, run in left.items()}
    return per_run, seconds_left(finished, list(left.values()), 1)


def fmt_duration(s: float, none: str = "0m00s") -> str:
    """`1h05m` or `4m09s`; `none` for no time at all (0 or less)."""
    if s <= 0:
        return none
    s = int(s)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{sec:02d}s"


BUSY_RECHECK_S = 5.0  # a run locked by another harness: look again after this long


def detect_gpus() -> list[int]:
    """GPU ids this process may use: CUDA_VISIBLE_DEVICES, else nvidia-smi, else none."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [int(x) for x in visible.split(",") if x.strip().isdigit()]
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True,
                                 timeout=20).stdout
            return list(range(sum(1 for line in out.splitlines() if line.startswith("GPU"))))
        except (OSError, subprocess.SubprocessError):
            return []
    return []


@dataclass
class PoolStats:
    """Figures of one `harness run`: how busy the slots were and what the harness cost."""

    wall_time_s: float = 0.0
    run_wall_time_sum_s: float = 0.0
    cpu_slot_seconds_used: float = 0.0
    cpus: int = 0
    harness_cpu_s: float = 0.0
    children_cpu_s: float = 0.0
    runs_started: int = 0

    @property
    def utilisation(self) -> float:
        total = self.cpus * self.wall_time_s
        return self.cpu_slot_seconds_used / total if total > 0 else 0.0

    @property
    def harness_overhead(self) -> float:
        """Harness CPU time as a share of all CPU time spent (harness + trainers)."""
        total = self.harness_cpu_s + self.children_cpu_s
        return self.harness_cpu_s / total if total > 0 else 0.0

    def as_dict(self) -> dict:
        return {
            "wall_time_s": round(self.wall_time_s, 2),
            "run_wall_time_sum_s": round(self.run_wall_time_sum_s, 2),
            "cpu_slot_seconds_used": round(self.cpu_slot_seconds_used, 2),
            "cpus": self.cpus,
            "slot_utilisation": round(self.utilisation, 4),
            "harness_cpu_s": round(self.harness_cpu_s, 2),
            "children_cpu_s": round(self.children_cpu_s, 2),
            "harness_cpu_share": round(self.harness_overhead, 4),
            "runs_started": self.runs_started,
        }


@dataclass
class _Active:
    spec: RunSpec
    cpu_ids: list[int]
    gpu_ids: list[int]
    started: float
    thread: threading.Thread
    task: Any = None  # rich TaskID of its progress bar
    shared: bool = False  # its cores were not taken from the free ones (share_cores)


@dataclass
class _Pending:
    spec: RunSpec
    not_before: float = 0.0


@dataclass
class Pool:
    specs: Sequence[RunSpec]
    store: Store
    max_parallel: int | None = None
    max_attempts: int = 2
    retry_skipped: bool = False
    retry_failed: bool = False
    cpus: list[int] = field(default_factory=available_cpus)
    gpus: list[int] | None = None
    progress: bool = True
    stop: threading.Event = field(default_factory=threading.Event)
    # Looks over training time (harness.curve_monitor): each run's own stop, and why a run
    # must not start (its gate is decided); share_cores: start CPU runs that do not fit
    # the free cores too, unpinned (every seed of a gate in flight at once).
    stop_for: Callable[[RunSpec], threading.Event] | None = None
    cancelled: Callable[[RunSpec], str] | None = None
    share_cores: bool = False

    def run(self) -> tuple[list[Outcome], PoolStats]:
        gpus = detect_gpus() if self.gpus is None else list(self.gpus)
        stats = PoolStats(cpus=len(self.cpus))
        t0 = time.monotonic()
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        for spec in self.specs:
            if spec.gpus_needed > len(gpus):
                raise RuntimeError(
                    f"{spec.label()} needs {counted(spec.gpus_needed, 'GPU')}, this machine offers "
                    f"{len(gpus)}; use accelerator = 'cpu' or run on Slurm"
                )
        # Largest first (they are the hardest to fit), then sweep order.
        order = sorted(range(len(self.specs)),
                       key=lambda i: (-self.specs[i].cpus_needed, -self.specs[i].gpus_needed, i))
        pending = [_Pending(self.specs[i]) for i in order]
        free_cpus = list(self.cpus)
        free_gpus = list(gpus)
        active: dict[str, _Active] = {}
        done: queue.Queue[Outcome] = queue.Queue()
        outcomes: list[Outcome] = []
        display = _Display(self.specs, self.store, enabled=self.progress,
                           cores=min(len(self.cpus), self.max_parallel or len(self.cpus)))
        display.announce(
            f"harness: {counted(len(self.specs), 'run')} of sweep {self.store.sweep}, up to "
            f"{self.max_parallel or len(self.cpus)} at once on {counted(len(self.cpus), 'CPU core')}"
            + (f" and {counted(len(gpus), 'GPU')}" if gpus else ""))

        def worker(spec: RunSpec, cpu_ids: list[int], gpu_ids: list[int]) -> None:
            try:
                o = execute_run(spec, self.store, max_attempts=self.max_attempts,
                                retry_skipped=self.retry_skipped,
                                retry_failed=self.retry_failed, cpu_ids=cpu_ids,
                                gpu_ids=gpu_ids,
                                stop=self.stop_for(spec) if self.stop_for else self.stop)
            except Exception as e:  # a harness bug must not hang the pool
                o = Outcome(spec.run_id, spec.label(), schema.FAILED,
                            error=f"harness error: {type(e).__name__}: {e}")
            done.put(o)

        with display:
            while pending or active:
                now = time.monotonic()
                if not self.stop.is_set():
                    for item in list(pending):
                        why = self.cancelled(item.spec) if self.cancelled else ""
                        if why:  # its gate was decided: never started, nothing to lose
                            pending.remove(item)
                            outcomes.append(Outcome(item.spec.run_id, item.spec.label(),
                                                    STOPPED, error=why))
                            continue
                        if self.max_parallel and len(active) >= self.max_parallel:
                            break
                        if item.not_before > now:
                            continue
                        spec = item.spec
                        need_c = min(spec.cpus_needed, len(self.cpus))
                        shared = self.share_cores and not spec.gpus_needed
                        if not shared and (need_c > len(free_cpus)
                                           or spec.gpus_needed > len(free_gpus)):
                            continue
                        # Shared: not pinned, none taken from the free cores; the OS
                        # shares the cores evenly, so a gate's seeds advance together.
                        cpu_ids = [] if shared else free_cpus[:need_c]
                        if not shared:
                            del free_cpus[:need_c]
                        # A run wider than the machine gets all cores, shared by its processes.
                        while cpu_ids and len(cpu_ids) < spec.cpus_needed:
                            cpu_ids.append(cpu_ids[len(cpu_ids) % need_c])
                        gpu_ids = free_gpus[:spec.gpus_needed]
                        del free_gpus[:spec.gpus_needed]
                        pending.remove(item)
                        th = threading.Thread(target=worker, args=(spec, cpu_ids, gpu_ids),
                                              name=f"run-{spec.run_id}", daemon=True)
                        active[spec.run_id] = _Active(spec, cpu_ids, gpu_ids, now, th,
                                                      shared=shared)
                        th.start()
                        active[spec.run_id].task = display.start(spec, cpu_ids, gpu_ids)
                else:
                    pending.clear()
                try:
                    o = done.get(timeout=0.5)
                except queue.Empty:
                    display.refresh(active.values())
                    continue
                a = active.pop(o.run_id)
                a.thread.join()
                if not a.shared:
                    free_cpus = sorted(set(free_cpus) | set(a.cpu_ids))
                free_gpus = sorted(set(free_gpus) | set(a.gpu_ids))
                display.finish(a, o)
                if o.status == BUSY and not self.stop.is_set():
                    # Another harness runs it; look again later (then it is done, or free).
                    pending.append(_Pending(a.spec, time.monotonic() + BUSY_RECHECK_S))
                    continue
                if o.status != ALREADY_COMPLETED and o.returncode is not None:
                    stats.runs_started += 1
                    stats.run_wall_time_sum_s += o.wall_time_s
                    stats.cpu_slot_seconds_used += o.wall_time_s * len(set(a.cpu_ids))
                outcomes.append(o)
        stats.wall_time_s = time.monotonic() - t0
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        stats.harness_cpu_s = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
        stats.children_cpu_s = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
        return outcomes, stats


def progress_interval_s(elapsed_s: float) -> float:
    """Seconds between progress lines when output is not a terminal: often at first (a log
    shows life within seconds), rarely in an hours-long sweep."""
    if elapsed_s < 120:
        return 10.0
    return 30.0 if elapsed_s < 600 else 60.0


def run_kind(spec: RunSpec) -> RunKind:
    return RunKind(spec.system, spec.layout.name, spec.env_id)


class _Display:
    """Progress of the runs in flight: a live rich display on a terminal; otherwise (CI,
    logs) a line per started run and a periodic progress line (runs finished, running,
    ETA). One line per finished run either way."""

    def __init__(self, specs: Sequence[RunSpec], store: Store, enabled: bool, cores: int = 1):
        from rich.console import Console

        self.console = Console()
        self.store = store
        self.enabled = enabled
        self.total = len(specs)
        self.finished = 0
        self.progress = None
        self.t0 = time.monotonic()
        self.last_line = self.t0
        self.cores = max(1, cores)  # the runs at once share these (seconds_left)
        self.not_finished = {s.run_id: s for s in specs}
        self.measured: list[FinishedRun] = []  # runs that completed here (not before)
        if enabled and self.console.is_terminal:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )
            from rich.table import Column

            # The description takes what the fixed columns leave and is cut with an
            # ellipsis, so an 80-column terminal still shows counts, elapsed and ETA. The
            # ETA is the sweep's own (seconds_left), on its overall line: rich's would come
            # from a run's last 30 s, compilation included.
            self.progress = Progress(
                TextColumn("{task.description}", table_column=Column(
                    ratio=1, no_wrap=True, overflow="ellipsis")),
                BarColumn(bar_width=16), MofNCompleteColumn(), TimeElapsedColumn(),
                TextColumn("{task.fields[eta]}"), console=self.console, transient=False,
                expand=True,
            )
            self.overall = self.progress.add_task("runs finished", total=self.total,
                                                  eta=ETA_UNKNOWN.split(" (")[0])

    def __enter__(self) -> _Display:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def announce(self, text: str) -> None:
        if self.enabled:
            self.console.print(text, highlight=False, soft_wrap=True)

    def start(self, spec: RunSpec, cpu_ids: Sequence[int] = (),
              gpu_ids: Sequence[int] = ()) -> Any:
        if self.progress is None:
            # A run completed before this `run` gets its one "already-completed" line.
            if self.enabled and run_state(self.store.run_dir(spec.run_id)).state \
                    != schema.COMPLETED:
                cores = ",".join(map(str, sorted(set(cpu_ids)))) or "shared"
                where = f"CPU {cores}" + (
                    f", GPU {','.join(map(str, gpu_ids))}" if gpu_ids else "")
                self.console.print(f"start: {spec.run_id} {spec.label()} ({where})",
                                   highlight=False, soft_wrap=True)
            return None
        return self.progress.add_task(f"{spec.run_id} {spec.label()}",
                                      total=spec.total_timesteps, eta="")

    def refresh(self, active) -> None:
        if self.progress is None:
            self._progress_line(list(active))
            return
        running = {}
        for a in active:
            steps, _ = last_progress(self.store.run_dir(a.spec.run_id))
            running[a.spec.run_id] = min(steps, a.spec.total_timesteps)
            if a.task is not None:
                self.progress.update(a.task, completed=steps)
        self.progress.update(self.overall, eta=self._eta(running).split(" (")[0])

    def _progress_line(self, active: list, force: bool = False) -> None:
        now = time.monotonic()
        elapsed = now - self.t0
        if not self.enabled or (not force and now - self.last_line
                                < progress_interval_s(elapsed)):
            return
        self.last_line = now
        parts, running = [], {}
        for a in active:
            steps, _ = last_progress(self.store.run_dir(a.spec.run_id))
            steps = min(steps, a.spec.total_timesteps)
            running[a.spec.run_id] = steps
            share = steps / a.spec.total_timesteps if a.spec.total_timesteps else 0.0
            parts.append(f"{a.spec.run_id} {share:.0%}")
        eta = self._eta(running)
        in_flight = f" ({', '.join(parts)})" if parts else ""
        self.console.print(
            f"progress: {self.finished}/{self.total} runs finished, {len(active)} running"
            f"{in_flight}; elapsed {fmt_duration(elapsed)}; {eta}",
            highlight=False, soft_wrap=True)

    def _eta(self, running: dict[str, int]) -> str:
        """The ETA of the runs not finished (running ones: their steps left), priced by
        the runs that completed here (runs complete before this `run` measure nothing)."""
        left = [RunLeft(run_kind(s), s.total_timesteps - running.get(rid, 0), s.cpus_needed)
                for rid, s in self.not_finished.items()]
        return eta_text(seconds_left(self.measured, left, self.cores))

    def finish(self, a: _Active, o: Outcome) -> None:
        if self.progress is not None and a.task is not None:
            self.progress.remove_task(a.task)
        if o.status == BUSY:
            return
        self.finished += 1
        self.not_finished.pop(a.spec.run_id, None)
        if o.status == schema.COMPLETED and o.returncode is not None:
            self.measured.append(FinishedRun(run_kind(a.spec), a.spec.total_timesteps,
                                             o.wall_time_s))
        if self.progress is not None:
            self.progress.update(self.overall, completed=self.finished)
        if not self.enabled:
            return
        colour = {"completed": "green", "already-completed": "dim", "failed": "red",
                  "exhausted": "red", "skipped": "yellow", "interrupted": "yellow"}
        c = colour.get(o.status, "white")
        msg = f"[{self.finished}/{self.total}] [{c}]{o.status}[/{c}] {o.run_id} {o.label}"
        if o.returncode is not None:
            # The harness's clock: the whole attempt, start-up and compilation included
            # (the report's run times are the trainer's own training clock).
            msg += f" ({o.wall_time_s:.1f} s incl. start-up, attempt {o.attempt})"
        if o.resumed_from:
            msg += f"; resumed from {o.resumed_from}"
        if o.error and o.status != "completed":
            msg += f": {o.error.splitlines()[0][:160]}"
        self.console.print(msg, highlight=False, soft_wrap=True)
