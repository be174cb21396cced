"""Slurm backend through submitit: one job per run (or job arrays), same records.

A job runs `slurm_job`, which calls the same `execute_run` as the local pool: the job's
rank-0 task takes the run's lock, starts process 0 of the trainer and settles the record.
A layout with d processes gets d Slurm tasks (all on one node unless [slurm]
processes_per_node is smaller); every task starts its own trainer process with
--distributed, the coordinator being the job's first node at a port derived from the job
id. The [slurm] table of the sweep file sets partition, GPUs, CPUs, time, account, ...

`cluster="local"` runs the same jobs through submitit's LocalExecutor (tests, laptops):
the only difference from Slurm is who starts the job.
"""

from __future__ import annotations

import hashlib
import math
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from harness.execute import (
    BUSY,
    Outcome,
    StopRequest,
    busy_text,
    execute_run,
    left_alone,
    run_peer_process,
)
from harness.slurm_wait import Watcher, signals_held
from harness.store import Store, run_state
from harness.sweep import RunSpec, Sweep
from runrecord.words import counted

DEFAULT_TIMEOUT_MIN = 60
# submitit submits every job with --signal=USR2@SIGNAL_LEAD_S: Slurm sends USR2 that long
# before the time limit (and, its timer being coarse, up to 60 s earlier still).
SIGNAL_LEAD_S = 90
# A run's Slurm limit is its `resources.timeout_min` plus this grace, so that the deadlines
# come in order: the harness's own timeout stops the trainer (which gets STOP_GRACE_S to
# record it), well before Slurm's USR2 (90 s before its limit) and Slurm's kill.
SLURM_GRACE_MIN = 3


def _processes_per_node(spec: RunSpec, cfg: dict[str, Any]) -> int:
    return min(spec.num_processes, int(cfg.get("processes_per_node") or spec.num_processes))


def job_shape(spec: RunSpec, cfg: dict[str, Any]) -> dict[str, Any]:
    """Generic job parameters of a run (submitit's names, cluster-independent)."""
    per_node = _processes_per_node(spec, cfg)
    nodes = math.ceil(spec.num_processes / per_node)
    gpus = cfg.get("gpus_per_node")
    if gpus is None:
        gpus = spec.layout.devices_per_process * per_node if spec.gpus_needed else 0
    if cfg.get("timeout_min"):  # the sweep's [slurm] limit, as given
        timeout = float(cfg["timeout_min"])
    elif spec.resources.timeout_min:
        timeout = float(spec.resources.timeout_min) + SLURM_GRACE_MIN
    else:
        timeout = DEFAULT_TIMEOUT_MIN
    return {
        "nodes": nodes,
        "tasks_per_node": per_node,
        "cpus_per_task": int(cfg.get("cpus_per_task") or spec.resources.cpus_per_process),
        "gpus_per_node": int(gpus),
        "timeout_min": int(math.ceil(float(timeout))),
    }


def slurm_parameters(spec: RunSpec, cfg: dict[str, Any]) -> dict[str, Any]:
    """SlurmExecutor parameters (sbatch names) of a run."""
    shape = job_shape(spec, cfg)
    params: dict[str, Any] = {
        "job_name": f"{spec.sweep}-{spec.run_id}",
        "nodes": shape["nodes"],
        "ntasks_per_node": shape["tasks_per_node"],
        "cpus_per_task": shape["cpus_per_task"],
        "time": shape["timeout_min"],
        "signal_delay_s": SIGNAL_LEAD_S,
    }
    if shape["gpus_per_node"]:
        params["gpus_per_node"] = shape["gpus_per_node"]
    for key in ("partition", "account", "qos", "constraint"):
        if cfg.get(key):
            params[key] = cfg[key]
    if cfg.get("mem_gb"):
        params["mem"] = f"{int(cfg['mem_gb'])}GB"
    if cfg.get("array_parallelism"):
        params["array_parallelism"] = int(cfg["array_parallelism"])
    if cfg.get("setup"):
        params["setup"] = list(cfg["setup"])
    if cfg.get("additional_parameters"):
        params["additional_parameters"] = dict(cfg["additional_parameters"])
    return params


def job_groups(specs: Sequence[RunSpec], cfg: dict[str, Any]) -> list[list[RunSpec]]:
    """The runs by job shape (their Slurm parameters but the job name), in sweep order:
    one executor, and one array or sbatch script, per group."""
    groups: dict[str, list[RunSpec]] = defaultdict(list)
    for spec in specs:
        params = slurm_parameters(spec, cfg)
        params.pop("job_name")
        groups[repr(sorted(params.items()))].append(spec)
    return list(groups.values())


def sbatch_script(spec: RunSpec, cfg: dict[str, Any], folder: Path | str,
                  array_size: int | None = None) -> str:
    """The sbatch script submitit would submit for this run (nothing is submitted; works
    without Slurm installed). Same text as SlurmExecutor._make_submission_file_text."""
    import shlex
    import sys

    from submitit.slurm.slurm import _make_sbatch_string

    params = slurm_parameters(spec, cfg)
    if array_size:
        params["map_count"] = array_size
        params["job_name"] = f"{spec.sweep}-array"
    command = " ".join([shlex.quote(sys.executable), "-u -m submitit.core._submit",
                        shlex.quote(str(folder))])
    return _make_sbatch_string(command=command, folder=str(folder), **params)


def make_executor(folder: Path, cluster: str, spec: RunSpec, cfg: dict[str, Any]):
    """A submitit executor for the jobs shaped like `spec`."""
    import submitit

    executor: Any
    if cluster == "slurm":
        executor = submitit.SlurmExecutor(folder=folder)
        executor.update_parameters(**slurm_parameters(spec, cfg))
        return executor
    if cluster == "local":
        executor = submitit.LocalExecutor(folder=folder)
    elif cluster == "debug":
        executor = submitit.DebugExecutor(folder=folder)
    else:
        raise ValueError(f"unknown cluster {cluster!r}; valid: slurm, local, debug")
    shape = job_shape(spec, cfg)
    if shape["nodes"] > 1:
        raise ValueError(f"{spec.label()} needs {shape['nodes']} nodes; the {cluster} "
                         "executor has one (set [slurm] processes_per_node)")
    executor.update_parameters(timeout_min=shape["timeout_min"],
                               tasks_per_node=shape["tasks_per_node"])
    return executor


def coordinator_address(job_id: str, hostnames: list[str], num_nodes: int) -> str:
    """host:port of jax.distributed's coordinator, the same in every task of the job."""
    port = 20000 + int(hashlib.sha256(str(job_id).encode()).hexdigest(), 16) % 20000
    host = "127.0.0.1" if num_nodes <= 1 else hostnames[0]
    return f"{host}:{port}"


def stop_on_slurm_signals(stop: StopRequest, limit_min: float | None) -> None:
    """Turn Slurm's signals to the job into a stop of the run, with what happened.

    submitit's own handlers would raise UncompletedJobError at USR2 (the run not being
    checkpointable): the job then dies, its trainer with it, and the record is left
    `running`. Here USR2 near the time limit is a Timeout, USR2 before it a preemption
    (`scancel --signal=USR2`, as submitit signals it), SIGTERM a cancel or requeue (or the
    limit itself); the harness stops the trainer and settles the record as such.
    """
    started = time.monotonic()

    def near_limit() -> bool:
        # Slurm's timer is coarse: USR2 may come up to 60 s before the lead it was given.
        return limit_min is not None and (time.monotonic() - started
                                          >= limit_min * 60 - SIGNAL_LEAD_S - 60)

    def on_usr2(signum: int, frame: object) -> None:
        after = f"after {time.monotonic() - started:.0f} s"
        if near_limit():
            stop.request(f"timeout: the Slurm time limit ({limit_min:g} min) is near "
                         f"(Slurm sent USR2 {after})", "Timeout")
        else:
            stop.request(f"preempted: Slurm sent USR2 {after} (preemption; the run is "
                         "re-run without spending an attempt)", "Preempted")

    def on_term(signum: int, frame: object) -> None:
        after = f"after {time.monotonic() - started:.0f} s"
        if near_limit():
            stop.request(f"timeout: the Slurm time limit ({limit_min:g} min) was reached "
                         f"(SIGTERM {after})", "Timeout")
        else:
            stop.request(f"Slurm sent SIGTERM {after}: the job was cancelled (scancel) "
                         "or requeued", "Interrupted")

    signal.signal(signal.SIGUSR2, on_usr2)
    signal.signal(signal.SIGTERM, on_term)


def slurm_job(spec: RunSpec, results_root: str, max_attempts: int, retry_skipped: bool,
              retry_failed: bool = False, limit_min: float | None = None) -> dict[str, Any]:
    """What each Slurm task of a run's job executes (module level: submitit pickles it)."""
    import submitit

    stop = StopRequest()
    stop_on_slurm_signals(stop, limit_min)
    store = Store(results_root, spec.sweep)
    env = submitit.JobEnvironment()
    rank = env.global_rank
    coordinator = coordinator_address(env.job_id, list(env.hostnames), env.num_nodes)
    if rank == 0:
        out = execute_run(spec, store, max_attempts=max_attempts, retry_skipped=retry_skipped,
                          retry_failed=retry_failed, process_ids=[0],
                          coordinator=coordinator, stop=stop)
        return asdict(out)
    code = run_peer_process(spec, store, rank, coordinator, stop=stop)
    return {"run_id": spec.run_id, "rank": rank, "returncode": code}


def run_slurm(sweep: Sweep, store: Store, *, cluster: str = "slurm", max_attempts: int = 2,
              retry_skipped: bool = False, retry_failed: bool = False,
              progress: bool = True, poll_s: float = 2.0,
              stop: threading.Event | None = None) -> list[Outcome]:
    """Submit every run that still needs running, wait for the jobs, return outcomes.

    `stop` (set by Ctrl-C or SIGTERM to the harness) cancels the jobs, waits for their
    records to settle as `interrupted` and returns what happened to each run."""
    from rich.console import Console

    console = Console()
    folder = store.sweep_dir / "slurm"
    folder.mkdir(parents=True, exist_ok=True)
    outcomes: list[Outcome] = []
    todo: list[RunSpec] = []
    for spec in sweep.runs:
        st = run_state(store.run_dir(spec.run_id))
        left = left_alone(st, max_attempts, retry_skipped, retry_failed)
        if left is not None:
            status, error, kind = left
            outcomes.append(Outcome(spec.run_id, spec.label(), status, error=error, kind=kind))
        elif st.holder:  # a job of an earlier `harness run` (requeued, say) is running it
            outcomes.append(Outcome(spec.run_id, spec.label(), BUSY,
                                    error=busy_text(st.holder)))
        else:
            todo.append(spec)

    def submit(specs: list[RunSpec],
               into: list[tuple[RunSpec, Any]] | None = None) -> list[tuple[RunSpec, Any]]:
        """Submit `specs`: one executor (and, with use_array, one array) per job shape;
        each job goes into `into` as soon as it is submitted. A stop ends the submitting."""
        jobs: list[tuple[RunSpec, Any]] = [] if into is None else into
        use_array = bool(sweep.slurm.get("use_array", True))
        for group in job_groups(specs, sweep.slurm):
            executor = make_executor(folder, cluster, group[0], sweep.slurm)
            limit = float(job_shape(group[0], sweep.slurm)["timeout_min"])
            batches = [group] if use_array and len(group) > 1 else [[spec] for spec in group]
            for batch in batches:
                if stop is not None and stop.is_set():
                    return jobs
                with signals_held():  # a job sbatch made is in `jobs` before Ctrl-C acts
                    if len(batch) > 1:
                        if cluster == "slurm":
                            executor.update_parameters(job_name=f"{sweep.name}-array")
                        k = len(batch)
                        submitted = executor.map_array(
                            slurm_job, batch, [str(store.root)] * k, [max_attempts] * k,
                            [retry_skipped] * k, [retry_failed] * k, [limit] * k)
                    else:
                        if cluster == "slurm":
                            executor.update_parameters(
                                job_name=f"{batch[0].sweep}-{batch[0].run_id}")
                        submitted = [executor.submit(slurm_job, batch[0], str(store.root),
                                                     max_attempts, retry_skipped,
                                                     retry_failed, limit)]
                    for spec, job in zip(batch, submitted, strict=True):
                        jobs.append((spec, job))
                        if progress:
                            console.print(f"submitted {spec.run_id} {spec.label()} as job "
                                          f"{job.job_id}", highlight=False, soft_wrap=True)
        return jobs

    watcher = Watcher(store, cluster, len(sweep.runs), console if progress else None,
                      stop, poll_s)
    watcher.outcomes = outcomes
    jobs: list[tuple[RunSpec, Any]] = []
    hurry = False
    try:
        submit(todo, into=jobs)
    except KeyboardInterrupt:  # a second Ctrl-C while submitting: cancel what was submitted
        if stop is None:
            raise
        stop.set()
        if progress:
            console.print("harness: second interrupt while submitting: cancelling the "
                          f"{counted(len(jobs), 'job')} submitted; the records say what happened",
                          highlight=False, soft_wrap=True)
        hurry = True
    watcher.watch(jobs, submit, hurry=hurry)
    return watcher.outcomes
