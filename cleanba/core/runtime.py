"""A Cleanba run's life, shared by PPO and IMPALA: checks and manifest, the threads, the
supervision, the final record and the exit code.

Threads (per process):
- actor threads (num_actor_threads per actor device; cleanba/core/actor.py): each owns a block
  of envs with consecutive global indices, runs a Python loop over env steps calling one
  jitted policy step (--actor-mode double-buffer: on two halves of its envs, one half's env
  step beside the other's policy step; cleanba/core/actor_pipelined.py), and puts one
  rollout per iteration into its own rollout queue (size 1);
- the learner thread (cleanba/core/learner.py): takes one rollout from every actor queue (in
  thread order), runs the algorithm's update on the learner devices, publishes the new
  parameters and writes one updates.csv row (and the batch's finished episodes);
- the main thread: supervises, prints progress, handles SIGINT/SIGTERM, finishes the record.

How actors get parameters is the architecture (sync, cleanba, async: cleanba/core/channel.py).
Failures stop every thread through one `Control` (cleanba/core/control.py); the record is always
finished.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax._src.distributed as jax_distributed  # the client, for the exit barrier (no public API)
import numpy as np

import benchenv
from cleanba.core import actor_state, checkpoint, stopping
from cleanba.core.actor import actor_loop
from cleanba.core.actor_pipelined import pipelined_actor_loop
from cleanba.core.algorithm import AlgorithmFactory
from cleanba.core.channel import ParamChannel
from cleanba.core.checks import PresetChoice, Topology, check_run
from cleanba.core.config import CommonConfig, ConfigError, fault_from_env, rollout_obs_from_env
from cleanba.core.context import Context, Prepared
from cleanba.core.control import Control, Stopped
from cleanba.core.layout import init_distributed
from cleanba.core.learner import learner_loop
from cleanba.core.records import (
    Progress,
    WandbLogger,
    build_manifest,
    console,
    determinism_facts,
    make_run_id,
)
from cleanba.core.xla_flags import apply_cpu_conv_flag, apply_gpu_determinism_flag
from cleanba.numerics.parallel import LearnerMesh, first_replica
from runrecord import LayoutError, RecordError, RunWriter, error_entry, run_folder, schema
from runrecord.exits import EXIT_BAD_INPUT, run_exit
from runrecord.writer import read_manifest_or_none


def _thread(ctx: Context, name: str, target: Callable, *args: Any) -> threading.Thread:
    def body() -> None:
        try:
            target(*args)
        except Stopped:
            pass
        except BaseException as exc:  # noqa: BLE001 - any failure ends the run
            ctx.control.fail(exc)

    return threading.Thread(target=body, name=name, daemon=True)


def start_processes(config: CommonConfig) -> Topology:
    """The trainer's topology for `check_run`: start jax.distributed when asked, then ask
    JAX where this process stands."""
    init_distributed(config)
    watcher = stopping.installed()
    if watcher is not None and config.distributed:
        watcher.reinstall_handlers()  # jax.distributed may register a native SIGTERM handler
    return Topology(jax.process_count(), jax.process_index(), jax.local_device_count())


def prepare(config: CommonConfig, factory: AlgorithmFactory, system: str,
            preset: PresetChoice | None = None, presets: Sequence[str] = ()) -> Prepared:
    """Every check that can fail on bad arguments (cleanba.core.checks.check_run; raises
    ConfigError & co.), then the run's id, directory and manifest. Writes nothing."""
    fault = fault_from_env()
    rollout_obs = rollout_obs_from_env()
    checked = check_run(config, factory, start_processes, preset, presets)
    plan, protocol = checked.plan, checked.env.protocol
    protocol = checkpoint.recorded_protocol(protocol, config.checkpoint_every)
    rid = config.run_id or make_run_id(system, config, protocol, plan.layout)
    folder = config.resume_from or config.run_dir
    run_dir = Path(folder) if folder else run_folder("results", None, rid)
    local = jax.local_devices()
    devices = [local[i].device_kind for i in sorted(set(plan.actor_device_ids + plan.learner_device_ids))]
    derived = {
        "batch_size": plan.batch_size,
        "num_updates": plan.num_updates,
        "envs_per_actor_thread": plan.envs_per_thread,
        "envs_per_learner_device": plan.envs_per_learner_device,
        "total_actor_threads": plan.total_actor_threads,
        "frames_per_step": benchenv.frames_per_step(config.env_id),
    }
    derived.update(checked.algorithm.derived)
    manifest = build_manifest(
        system=system, config=config, rid=rid, env_protocol=protocol, layout=plan.layout,
        derived=derived, devices=devices,
        determinism=determinism_facts(config.deterministic, config.deterministic_groups),
    )
    return Prepared(checked, rid, run_dir, manifest, fault, rollout_obs)


def train(config: CommonConfig, factory: AlgorithmFactory, system: str,
          preset: PresetChoice | None = None, presets: Sequence[str] = ()) -> int:
    """Run one training; returns the exit code (0 completed, 1 failed, 2 bad args, 130
    interrupted). `preset`: the preset the config came from (checked against the env)."""
    # gymnasium warns about EnvPool's float64 Box bounds on every env; it means nothing here.
    warnings.filterwarnings("ignore", message=".*precision lowered.*")
    apply_cpu_conv_flag()  # set already when started as `python -m cleanba.ppo|impala`
    if config.deterministic:
        apply_gpu_determinism_flag()
    watcher = stopping.installed()
    in_process = watcher is None  # called from Python (tests), not `python -m cleanba.ppo`
    if watcher is None:
        watcher = stopping.install()
    try:
        return _train(config, factory, system, Control(), watcher, preset, presets)
    finally:
        if in_process:
            stopping.uninstall()


def _train(config: CommonConfig, factory: AlgorithmFactory, system: str,
           control: Control, watcher: stopping.SignalWatcher, preset: PresetChoice | None,
           presets: Sequence[str]) -> int:
    watcher.set_phase("start-up (checks, jax.distributed, environment spec)")
    try:  # a test hook's typo fails at once, not at the point it names
        stopping.parse_holds(os.environ.get(stopping.HOLD_ENV_VAR, ""))
    except ValueError as exc:
        console(f"error: {exc}", sys.stderr)
        return EXIT_BAD_INPUT
    watcher.hold("start-up", config.seed)
    try:
        prep = prepare(config, factory, system, preset, presets)
        writer = None
        # Before the lock: in a multi-process run this waits on the other processes, and
        # a signal meanwhile must still stop this one (the record is not touched yet).
        resume = choose_resume_point(config, prep)
        # Under the watcher's lock: a signal finds either no record (exit, nothing written)
        # or a record and a run that stops through `control` (status interrupted).
        with watcher.lock:
            if resume is not None and jax.process_index() == 0:
                cut_record_back(prep, resume)
            if jax.process_index() == 0:
                writer = RunWriter(prep.run_dir, prep.manifest, prep.algorithm.metric_columns,
                                   resumed=None if resume is None else resume_entry(resume))
            control.phase = "start-up (compiling, creating environments)"
            watcher.running(control.interrupt)
    except (ConfigError, benchenv.EnvError, LayoutError, RecordError) as exc:
        console(f"error: {exc}", sys.stderr)
        return EXIT_BAD_INPUT
    if writer is not None:
        console(f"[cleanba] {system} {config.env_id} {config.architecture} "
                f"{prep.plan.layout.name} on {backend_text(prep.checked.env.protocol)}: "
                f"record in {prep.run_dir}")
    error: BaseException | None = None
    wandb_logger = None
    ctx = None
    watcher.hold("compiling", config.seed)
    try:
        if config.track and writer is not None:
            wandb_logger = WandbLogger(config, system, prep.run_id, prep.run_dir, prep.manifest)
        ctx, threads = _start(config, prep, control, writer, wandb_logger, resume)
        _supervise(ctx, threads)
        watcher.hold("finishing", config.seed)
        if control.error is None and not control.interrupted \
                and ctx.updates_done != prep.plan.num_updates:
            error = RuntimeError(f"threads ended after {ctx.updates_done} of "
                                 f"{prep.plan.num_updates} updates without an error")
    except BaseException as exc:  # noqa: BLE001 - recorded, then reported by the exit code
        # Stopped here is the stop of a signal or of a failed thread: final_status reads
        # which from the control, and so it does for any other error after a signal.
        error = exc
    finally:
        control.phase = "shutdown (writing the final record)"
        wall = time.monotonic() - ctx.start_time if ctx is not None else 0.0
        updates = ctx.updates_done if ctx is not None else 0
        with watcher.lock:  # the status is decided and written before a later signal counts
            status, recorded_error = final_status(control, error)
            code = run_exit(status)
            if writer is not None:
                steps = updates * prep.plan.batch_size
                writer.finish(status, error=recorded_error, summary=schema.summary(
                    steps, benchenv.frames_per_step(config.env_id), wall, updates,
                    ctx.episodes_written if ctx is not None else 0))
            watcher.finished(code)
        watcher.hold("finished", config.seed)
        if status == schema.FAILED:
            failure = control.error or error
            console(f"[cleanba] run failed: {type(failure).__name__}: {failure}", sys.stderr)
        elif status == schema.INTERRUPTED:
            console(f"[cleanba] run interrupted ({control.interrupt_reason}): "
                    f"{prep.run_dir if writer is not None else 'no record in this process'}",
                    sys.stderr)
        elif writer is not None:
            console(f"[cleanba] run {status}: {prep.run_dir}")
        if wandb_logger is not None:
            wandb_logger.close(code)
    return code


def choose_resume_point(config: CommonConfig, prep: Prepared,
                        ) -> checkpoint.Checkpoint | None:
    """The checkpoint this process resumes from (None: update 0). One process: the
    record's newest usable one under --resume-from. Several: the one every process agrees
    on (`agree_on_resume`), whenever the run writes checkpoints, so that every process
    takes part in the same collectives whatever flags a peer was started with."""
    if jax.process_count() == 1:
        return newest_checkpoint(prep) if config.resume_from else None
    if config.checkpoint_every <= 0:
        return None
    offer = None
    if jax.process_index() == 0 and config.resume_from:
        offer = newest_checkpoint(prep)
    return agree_on_resume(prep, offer)


def newest_checkpoint(prep: Prepared) -> checkpoint.Checkpoint | None:
    """--resume-from: the newest usable checkpoint of the record (each newer one skipped,
    and why, printed); None (said) when there is none: the run starts from update 0 and
    the old record is archived. The record is not changed (`cut_record_back` does that)."""
    run_dir = prep.run_dir
    old = read_manifest_or_none(run_dir)
    if old is not None and old.get("status") == schema.COMPLETED:
        raise RecordError(f"--resume-from {run_dir}: that run is already completed; nothing "
                          "to resume (its record is left as it is)")
    rows = {name: checkpoint.complete_rows(run_dir / name)
            for name in (schema.UPDATES_FILE, schema.EPISODES_FILE)}
    found, skipped = checkpoint.newest_usable(run_dir, checkpoint.fingerprint(prep.manifest),
                                              rows)
    for line in skipped:
        console(f"[cleanba] {line}")
    if found is None:
        console(f"[cleanba] --resume-from {run_dir}: no usable checkpoint, starting from "
                "update 0")
    return found


def agree_on_resume(prep: Prepared, offer: checkpoint.Checkpoint | None,
                    ) -> checkpoint.Checkpoint | None:
    """The checkpoint every process of a multi-process run resumes from: process 0's
    `offer` (the others pass None), sent whole to every process (they need not see process
    0's disk); each checks it against its own code, configuration and stack. If any
    process refuses it, all start from update 0 together, each refusing one saying why."""
    from jax.experimental import multihost_utils

    data = checkpoint.pack(offer) if offer is not None else b""
    size = int(multihost_utils.broadcast_one_to_all(np.array([len(data)], np.int64))[0])
    if size == 0:
        return None
    buf = np.frombuffer(data, np.uint8) if data else np.zeros(size, np.uint8)
    found = checkpoint.unpack(np.asarray(multihost_utils.broadcast_one_to_all(buf)).tobytes())
    why = checkpoint.fingerprint_difference(found.fingerprint,
                                            checkpoint.fingerprint(prep.manifest))
    name = f"{checkpoint.CHECKPOINTS_DIR}/{found.update}"
    if why:
        console(f"[cleanba] process {jax.process_index()} cannot use {name}: {why}")
    refused = np.asarray(multihost_utils.process_allgather(np.array([int(bool(why))])))
    refusing = [i for i, r in enumerate(refused.reshape(-1)) if r]
    if refusing:
        console(f"[cleanba] {'processes' if len(refusing) > 1 else 'process'} {refusing} cannot use {name} (each says why): every "
                "process starts from update 0")
        return None
    return found


def cut_record_back(prep: Prepared, found: checkpoint.Checkpoint) -> None:
    """The record's CSVs cut back to the rows `found` names (process 0, which owns it)."""
    run_dir = prep.run_dir
    for name, kept in ((schema.UPDATES_FILE, found.updates_rows),
                       (schema.EPISODES_FILE, found.episodes_rows)):
        checkpoint.truncate_rows(run_dir / name, kept)
    console(f"[cleanba] resuming from {found.folder.relative_to(run_dir)} (after update "
            f"{found.update}; {found.updates_rows} updates.csv and {found.episodes_rows} "
            "episodes.csv rows kept)")
    if not prep.plan.deterministic:
        console("[cleanba] not --deterministic: the updates from here on are not the bits an "
                "uninterrupted run would give (the same in distribution)")


def resume_entry(found: checkpoint.Checkpoint) -> dict[str, Any]:
    """The manifest's record of one resumption."""
    return {"checkpoint": f"{checkpoint.CHECKPOINTS_DIR}/{found.update}", "update": found.update,
            "updates_rows": found.updates_rows, "episodes_rows": found.episodes_rows}


def backend_text(protocol: dict[str, Any]) -> str:
    """`envpool 1.2.5`, or `ale 0.12.1 (EnvPool is not installed: the ALE backend)`."""
    backend = benchenv.protocol_backend(protocol)
    text = f"{backend} {protocol.get('backend_version')}"
    if backend == "ale" and not benchenv.backend_installed("envpool"):
        text += " (EnvPool is not installed here: the ALE backend, docs/cleanba.md)"
    return text


def final_status(control: Control, error: BaseException | None,
                 ) -> tuple[str, BaseException | dict | None]:
    """(status, error for the record): a thread's failure before any signal -> failed; a
    signal first -> interrupted, the reason naming the signal and the phase; else the
    main thread's own error -> failed; else completed."""
    if control.error is not None:
        return schema.FAILED, control.error
    if control.interrupted:
        return schema.INTERRUPTED, error_entry("Interrupted", control.interrupt_reason)
    if error is not None:
        return schema.FAILED, error
    return schema.COMPLETED, None


def make_context(config: CommonConfig, prep: Prepared, control: Control,
                 writer: RunWriter | None = None, wandb_logger: WandbLogger | None = None,
                 actor_forward: Callable[[Any, jax.Array], tuple[jax.Array, jax.Array]]
                 | None = None, resume: checkpoint.Checkpoint | None = None,
                 ) -> tuple[Context, LearnerMesh, Any]:
    """Shared state, the learner mesh and the replicated initial train state (version 1,
    already published to the actors; resumed: the checkpoint's state, and the params its
    actors act with published). actor_forward: the seam of the actors' forward pass
    (Context.actor_forward), for benchmarks; runs leave it None."""
    plan = prep.plan
    root = jax.random.PRNGKey(config.seed)
    init_key, action_key = jax.random.fold_in(root, 0), jax.random.fold_in(root, 1)
    mesh = LearnerMesh(plan.learner_device_ids)
    host_state = jax.device_get(prep.algorithm.init_state(init_key))
    actor_version, actor_params = 1, host_state.params
    if resume is not None:
        host_state, actor_params = checkpoint.restored_state(resume, host_state)
        actor_version = resume.actor_version
        action_key = jax.numpy.asarray(np.asarray(resume.action_key, np.uint32))
    state = mesh.replicate(host_state)
    channel = ParamChannel(config.architecture, plan.threads_per_process, plan.num_updates,
                           control)
    ctx = Context(
        config=config, prep=prep, control=control, channel=channel,
        rollout_queues=[queue.Queue(maxsize=1) for _ in range(plan.threads_per_process)],
        action_key=action_key, fault=prep.fault, progress=Progress(plan.num_updates),
        writer=writer, wandb=wandb_logger, start_time=time.monotonic(),
        actor_forward=actor_forward, rollout_obs_on_device=prep.rollout_obs_on_device,
    )
    if resume is None:
        channel.publish(1, first_replica(state.params))
    else:
        ctx.start_update = ctx.updates_done = ctx.progress.update = resume.update
        ctx.episodes_written = resume.episodes_rows
        ctx.records_digest = resume.records_digest
        if resume.actor_state:
            ctx.resume_actors = actor_state.unpack(resume.actor_state)
        ctx.start_time = time.monotonic() - resume.wall_time_s
        channel.publish(actor_version, actor_params)
    return ctx, mesh, state


ACTOR_LOOPS = {"serial": actor_loop, "double-buffer": pipelined_actor_loop}
"""Each --actor-mode's actor thread loop."""


def actor_threads(ctx: Context) -> list[threading.Thread]:
    local = jax.local_devices()
    loop = ACTOR_LOOPS[ctx.config.actor_mode]
    threads = []
    local_thread = 0
    for d_pos, d_id in enumerate(ctx.plan.actor_device_ids):
        for j in range(ctx.plan.num_actor_threads):
            threads.append(_thread(ctx, f"actor-{d_id}-{j}", loop, ctx, local_thread,
                                   local[d_id], ctx.plan.thread_global_index(d_pos, j)))
            local_thread += 1
    return threads


def _start(config: CommonConfig, prep: Prepared, control: Control, writer: RunWriter | None,
           wandb_logger: WandbLogger | None, resume: checkpoint.Checkpoint | None,
           ) -> tuple[Context, list[threading.Thread]]:
    ctx, mesh, state = make_context(config, prep, control, writer, wandb_logger, resume=resume)
    threads = [_thread(ctx, "learner", learner_loop, ctx, mesh, state), *actor_threads(ctx)]
    for t in threads:
        t.start()
    return ctx, threads


def _supervise(ctx: Context, threads: list[threading.Thread]) -> None:
    interval = ctx.config.progress_interval_s
    last = time.monotonic()
    show = ctx.writer is not None and interval > 0
    while any(t.is_alive() for t in threads) and not ctx.control.stop.is_set():
        ctx.control.stop.wait(0.1)
        if show and time.monotonic() - last >= interval:
            ctx.progress.print()
            last = time.monotonic()
    ctx.control.stop.set()  # threads still waiting (e.g. actors after the last update) end
    deadline = time.monotonic() + 30.0
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.monotonic()))
    if show:
        ctx.progress.print()


EXIT_BARRIER_TIMEOUT_MS = 10_000
COORDINATOR_GRACE_S = 3.0
# (1 s was too short on a loaded 2-core CI machine: process 1 was not yet scheduled to exit
# when process 0's service went, and aborted: exit -6 instead of 130.)


def _leave_distributed(code: int) -> None:
    """A multi-process run leaves together, process 0 last. Process 0 hosts the
    jax.distributed service; when it goes while another process is still in interpreter
    clean-up (JAX's own shutdown barrier at exit, say after a SIGTERM to both), that
    process's client aborts (SIGABRT, exit -6, not 130). So every process meets at a
    barrier once its record is final, then exits at once without that clean-up; process 0
    waits a moment longer. A peer that died already only costs the barrier's timeout."""
    client = jax_distributed.global_state.client
    if client is None:
        return
    try:
        client.wait_at_barrier("cleanba-exit", EXIT_BARRIER_TIMEOUT_MS)
    except Exception:  # noqa: BLE001 - a peer gone or timed out: leave anyway
        pass
    if jax.process_index() == 0:
        time.sleep(COORDINATOR_GRACE_S)
    os._exit(code)


def exit_after(code: int) -> None:
    """Exit with `code`; skip interpreter clean-up if a thread is stuck in native code."""
    sys.stdout.flush()
    sys.stderr.flush()
    _leave_distributed(code)
    if any(t.is_alive() for t in threading.enumerate() if t is not threading.main_thread()
           and t.daemon and t.name.startswith(("actor", "learner"))):
        os._exit(code)
    sys.exit(code)
