"""The Cleanba architecture, shared by PPO and IMPALA: actor threads, the learner, the
queues between them, policy versions, records, failures and signals.

Threads (per process):
- actor threads (num_actor_threads per actor device): each owns a block of envs with
  consecutive global indices, runs a Python loop over env steps calling one jitted policy
  step, and puts one rollout per iteration into its own rollout queue (size 1);
- the learner thread: takes one rollout from every actor queue (in thread order), runs the
  algorithm's update on the learner devices, publishes the new parameters and writes one
  updates.csv row (and the batch's finished episodes);
- the main thread: supervises, prints progress, handles SIGINT/SIGTERM, finishes the record.

Versions: the initial parameters are version 1; update k produces version k + 1. Each
rollout carries the version used at each of its steps, so the records show exactly which
policies generated a batch. How actors get parameters is the architecture
(`ParamChannel`):
- sync: before rollout k the actor waits for version k (data always from the newest policy);
- cleanba: a queue of size 1 per actor; the actor skips the get at rollout 2, so rollout 1
  and 2 use version 1 and rollout k >= 3 uses version k - 1: the learner trains on the
  second-latest policy (staleness 1 from update 2 on) while the actor collects the next
  rollout;
- async: the actor reads the newest published version before every env step and never
  waits for it (versions change mid-rollout). Rollouts still pass through the size-1
  rollout queue, so an actor blocks only when the learner has not taken its previous
  rollout yet.

Failures: one stop event; every queue put/get and sleep waits in short slices and gives up
when it is set. The first exception of any thread is recorded (status `failed`), SIGINT/
SIGTERM set status `interrupted` with the signal and the phase it arrived in (the signal
policy of the whole process, from its first import, is cleanba/stopping.py), and the record
is always finished.
"""

from __future__ import annotations

import math
import os
import queue
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import jax
import numpy as np

import benchenv
from cleanba import actor_hook, stopping
from cleanba.config import CommonConfig, ConfigError, Fault, fault_from_env
from cleanba.deterministic import microbatched_apply, sample_actions
from cleanba.layout import Plan, init_distributed, make_plan
from cleanba.losses import categorical_logprob
from cleanba.parallel import LearnerMesh, checksum, first_replica
from cleanba.records import (
    Episode,
    EpisodeTracker,
    Progress,
    WandbLogger,
    build_manifest,
    console,
    default_run_dir,
    make_run_id,
    record_step,
)
from cleanba.xla_flags import apply_gpu_determinism_flag
from runrecord import LayoutError, RecordError, RunWriter, schema
from runrecord.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK

WAIT_SLICE_S = 0.05  # granularity of every blocking wait, so a stop is noticed quickly

# Everything an actor records per env step (time-major). obs has one extra entry: the
# observation after the last step, for bootstrapping.
ROLLOUT_FIELDS = ("obs", "actions", "logprobs", "logits", "values", "rewards", "dones", "mask")


# --------------------------------------------------------------------------------------
# what an algorithm contributes


UpdateFn = Callable[[Any, dict[str, Any], int], tuple[Any, dict[str, Any]]]


@dataclass(frozen=True)
class Algorithm:
    """An algorithm as the architecture sees it.

    network: Flax module, obs -> (logits, value), used by the actors.
    init_state: key -> train state (a pytree with `.params`), identical in every process.
    batch_fields: the rollout fields its update reads (from ROLLOUT_FIELDS).
    metric_columns: loss_*/stat_* keys its update returns (updates.csv columns).
    make_update: LearnerMesh -> update(state, batch, update_index) -> (state, metrics);
      batch holds this process's arrays with a leading learner-device axis, each
      (devices, T, envs per device, ...) (obs: T + 1); metrics are host floats averaged
      over the update's gradient steps.
    derived: sizes it works out (minibatch sizes), recorded in the manifest.
    """

    system: str
    network: Any
    init_state: Callable[[jax.Array], Any]
    batch_fields: tuple[str, ...]
    metric_columns: tuple[str, ...]
    make_update: Callable[[LearnerMesh], UpdateFn]
    derived: dict[str, Any] = field(default_factory=dict)


AlgorithmFactory = Callable[[Any, Plan, tuple[int, ...], int], Algorithm]


# --------------------------------------------------------------------------------------
# stopping


class Stopped(Exception):
    """Raised inside a thread when the run is stopping (another thread failed, a signal)."""


class Control:
    """The stop event, the first error and the interrupt flag, shared by all threads.
    `phase` says where the run is (the reason of an interrupt names it)."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.interrupted = False
        self.interrupt_reason = ""
        self.phase = "start-up"
        self._lock = threading.Lock()

    def fail(self, exc: BaseException) -> None:
        with self._lock:
            if self.error is None and not self.interrupted:
                self.error = exc
        self.stop.set()

    def interrupt(self, signal_name: str) -> None:
        """A stop signal: `interrupted` unless a thread failed first (the first signal's
        phase is the reason)."""
        with self._lock:
            if self.error is None and not self.interrupted:
                self.interrupted = True
                self.interrupt_reason = f"{signal_name} during {self.phase}"
        console(f"[cleanba] {signal_name}: stopping (during {self.phase})", sys.stderr)
        self.stop.set()

    def check(self) -> None:
        if self.stop.is_set():
            raise Stopped

    def put(self, q: queue.Queue, item: Any) -> None:
        while True:
            self.check()
            try:
                q.put(item, timeout=WAIT_SLICE_S)
                return
            except queue.Full:
                pass

    def get(self, q: queue.Queue) -> Any:
        while True:
            self.check()
            try:
                return q.get(timeout=WAIT_SLICE_S)
            except queue.Empty:
                pass

    def sleep(self, seconds: float) -> None:
        if self.stop.wait(seconds):
            raise Stopped


# --------------------------------------------------------------------------------------
# parameters from learner to actors


class ParamChannel:
    """How actor threads get parameters; the architecture is all in here."""

    def __init__(
        self, architecture: str, num_threads: int, num_updates: int, control: Control
    ) -> None:
        self.architecture = architecture
        self.num_updates = num_updates
        self.control = control
        self._queues: list[queue.Queue] = [queue.Queue(maxsize=1) for _ in range(num_threads)]
        self._cond = threading.Condition()
        self._latest: tuple[int, Any] | None = None

    def publish(self, version: int, params: Any) -> None:
        """Learner side: version `version` (= update + 1) is ready."""
        if self.architecture == "cleanba":
            # Version v is taken by rollout v + 1 (rollout k >= 3 takes version k - 1), so
            # versions after num_updates - 1 have no taker; putting them would block.
            if version == 1 or version + 1 <= self.num_updates:
                for q in self._queues:
                    self.control.put(q, (version, params))
        else:
            with self._cond:
                self._latest = (version, params)
                self._cond.notify_all()

    def for_rollout(self, thread: int, iteration: int) -> tuple[int, Any] | None:
        """Actor side, before rollout `iteration` (1-based): the (version, params) to use
        from now on, or None to keep the current ones."""
        if self.architecture == "cleanba":
            if iteration == 2:
                return None  # the queue-of-one trick: overlap rollout 2 with update 1
            return self.control.get(self._queues[thread])
        want = iteration if self.architecture == "sync" else 1
        with self._cond:
            while self._latest is None or self._latest[0] < want:
                self.control.check()
                self._cond.wait(WAIT_SLICE_S)
            return self._latest

    def for_step(self, current_version: int) -> tuple[int, Any] | None:
        """Actor side, before every env step: newer params in async mode, else None."""
        if self.architecture != "async":
            return None
        latest = self._latest  # one atomic read; no waiting
        if latest is not None and latest[0] != current_version:
            return latest
        return None


# --------------------------------------------------------------------------------------
# actor


@dataclass
class Rollout:
    thread: int  # global actor thread index
    iteration: int  # 1-based
    arrays: dict[str, np.ndarray]  # ROLLOUT_FIELDS, time-major (T, envs, ...); obs (T + 1, ...)
    versions: np.ndarray  # (T,) policy version used at each step
    param_wait_s: float
    episodes: list[Episode]


def sample_step(network: Any, inference_envs: int, params: Any, obs: jax.Array,
                env_index: jax.Array, step: jax.Array, key: jax.Array):
    """One policy step for a block of envs. The sampling key of env i at step t is
    fold_in(fold_in(key, global env index), t): independent of how envs are split. With
    inference_envs > 0 (deterministic mode) the network runs on chunks of that many envs
    (`microbatched_apply`), so an env's logits do not depend on how many share the call."""
    if inference_envs:
        logits, value = microbatched_apply(network.apply, params, obs, inference_envs)
    else:
        logits, value = network.apply(params, obs)
    actions = sample_actions(key, logits, env_index, step)
    return actions, categorical_logprob(logits, actions), logits, value


@dataclass
class Context:
    """What the threads of one run share."""

    config: CommonConfig
    prep: Prepared  # the checked run: plan, algorithm, env protocol, observation spec
    control: Control
    channel: ParamChannel
    rollout_queues: list[queue.Queue]
    action_key: jax.Array
    fault: Fault | None
    progress: Progress
    writer: RunWriter | None  # process 0 only
    wandb: WandbLogger | None
    start_time: float
    updates_done: int = 0
    episodes_written: int = 0
    timing: dict[str, list[float]] = field(default_factory=lambda: {"rollout": [], "update": []})

    @property
    def plan(self) -> Plan:
        return self.prep.plan

    @property
    def algorithm(self) -> Algorithm:
        return self.prep.algorithm


def actor_loop(ctx: Context, local_thread: int, device: jax.Device, thread_global: int) -> None:
    plan, cfg = ctx.plan, ctx.config
    n, T = plan.envs_per_thread, plan.num_steps
    first_env = plan.first_env_index(thread_global)
    env = benchenv.make_env(cfg.env_id, n, cfg.seed, first_env_index=first_env, protocol=ctx.prep.protocol)
    inference_envs = plan.envs_per_group if plan.deterministic else 0
    network = actor_hook.network_for_actor(ctx.algorithm.network, ctx.prep.num_actions)
    policy = jax.jit(partial(sample_step, network, inference_envs))
    env_index = jax.device_put(np.arange(first_env, first_env + n, dtype=np.int32), device)
    key = jax.device_put(ctx.action_key, device)
    tracker = EpisodeTracker(first_env, n)
    rewards_clipped = bool(ctx.prep.protocol.get("reward_clip", False))
    obs, _ = env.reset()
    prev_done = np.zeros(n, bool)
    version, params = 0, None
    for k in range(1, plan.num_updates + 1):
        if ctx.fault is not None and ctx.fault.kind == "actor" and ctx.fault.at == k \
                and thread_global == 0:
            raise RuntimeError(f"injected actor fault at rollout {k} ({ctx.fault})")
        t_wait = time.monotonic()
        got = ctx.channel.for_rollout(local_thread, k)
        if got is not None:
            version, params = got[0], jax.device_put(got[1], device)
        param_wait = time.monotonic() - t_wait
        t_rollout = time.monotonic()
        arrays = {
            "obs": np.empty((T + 1, n, *ctx.prep.obs_shape), ctx.prep.obs_dtype),
            "actions": np.empty((T, n), np.int32),
            "logprobs": np.empty((T, n), np.float32),
            "logits": np.empty((T, n, ctx.prep.num_actions), np.float32),
            "values": np.empty((T, n), np.float32),
            "rewards": np.empty((T, n), np.float32),
            "dones": np.empty((T, n), np.float32),
            "mask": np.empty((T, n), np.float32),
        }
        versions = np.empty(T, np.int64)
        episodes: list[Episode] = []
        for t in range(T):
            newer = ctx.channel.for_step(version)
            if newer is not None:
                t0 = time.monotonic()
                version, params = newer[0], jax.device_put(newer[1], device)
                param_wait += time.monotonic() - t0
            step = (k - 1) * T + t  # this env block's step counter, same for every layout
            arrays["obs"][t] = obs
            out = policy(params, obs, env_index, np.int32(step), key)
            actions, logprobs, logits, values = jax.device_get(out)
            obs, reward, term, trunc, info = env.step(actions)
            rec = record_step(prev_done, reward, term, trunc, info, rewards_clipped)
            arrays["actions"][t] = actions
            arrays["logprobs"][t] = logprobs
            arrays["logits"][t] = logits
            arrays["values"][t] = values
            arrays["rewards"][t] = rec.reward
            arrays["dones"][t] = rec.done
            arrays["mask"][t] = rec.mask
            versions[t] = version
            episodes += tracker.step(rec.raw_reward, rec.done, rec.mask,
                                     (step + 1) * plan.num_envs, time.monotonic() - ctx.start_time)
            prev_done = rec.done
        arrays["obs"][T] = obs
        ctx.timing["rollout"].append(time.monotonic() - t_rollout)
        rollout = Rollout(thread_global, k, arrays, versions, param_wait, episodes)
        ctx.control.put(ctx.rollout_queues[local_thread], rollout)
    env.close()


# --------------------------------------------------------------------------------------
# learner


def assemble_batch(rollouts: Sequence[Rollout], fields: Sequence[str], num_devices: int):
    """Concatenate this process's rollouts along the env axis (global env order) and split
    the envs evenly over the learner devices: each field becomes (devices, T, envs/dev, ...)."""
    batch = {}
    for name in fields:
        parts = [r.arrays[name] for r in rollouts]
        full = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
        if num_devices == 1:
            batch[name] = full[None]
        else:
            batch[name] = np.stack(np.split(full, num_devices, axis=1))
    return batch


def rollout_stats(rollouts: Sequence[Rollout]) -> np.ndarray:
    """[min version, max version, rollouts, rollouts with a mid-rollout change, param wait]."""
    return np.array(
        [
            min(int(r.versions.min()) for r in rollouts),
            max(int(r.versions.max()) for r in rollouts),
            len(rollouts),
            sum(int(r.versions.min() != r.versions.max()) for r in rollouts),
            sum(r.param_wait_s for r in rollouts),
        ],
        np.float64,
    )


def gather_from_processes(
    stats: np.ndarray, episodes: list[Episode], capacity: int
) -> tuple[np.ndarray, list[Episode]]:
    """All processes' rollout stats (combined) and episodes, in process order.

    Episodes travel in a fixed-size buffer (one row per possible episode of a batch) so
    every process contributes arrays of the same shape to the all-gather.
    """
    if jax.process_count() == 1:
        return stats, episodes
    from jax.experimental import multihost_utils

    buf = np.full((1 + capacity, 5), np.nan, np.float64)
    buf[0] = stats
    for i, e in enumerate(episodes):
        buf[1 + i] = (e.env_steps, e.env_index, e.episode_return, e.episode_length,
                      e.wall_time_s)
    everything = np.asarray(multihost_utils.process_allgather(buf))  # (processes, 1 + cap, 5)
    all_stats = everything[:, 0]
    combined = np.array(
        [all_stats[:, 0].min(), all_stats[:, 1].max(), all_stats[:, 2].sum(),
         all_stats[:, 3].sum(), all_stats[:, 4].sum()]
    )
    out = []
    for rows in everything[:, 1:]:
        for row in rows[~np.isnan(rows[:, 0])]:
            out.append(Episode(int(row[0]), int(row[1]), float(row[2]), int(row[3]),
                               float(row[4])))
    return combined, out


class NonFiniteLoss(FloatingPointError):
    pass


def learner_loop(ctx: Context, mesh: LearnerMesh, state: Any) -> None:
    plan, cfg, alg = ctx.plan, ctx.config, ctx.algorithm
    update = alg.make_update(mesh)
    frames_per_step = benchenv.frames_per_step(cfg.env_id)
    capacity = plan.local_num_envs * plan.num_steps
    last_time, last_steps = time.monotonic(), 0
    for k in range(1, plan.num_updates + 1):
        t0 = time.monotonic()
        rollouts = [ctx.control.get(q) for q in ctx.rollout_queues]
        queue_wait = time.monotonic() - t0
        t_update = time.monotonic()
        batch = assemble_batch(rollouts, alg.batch_fields, len(plan.learner_device_ids))
        if ctx.fault is not None and ctx.fault.kind == "nan" and ctx.fault.at == k:
            batch["rewards"] = np.full_like(batch["rewards"], np.nan)
        if ctx.fault is not None and ctx.fault.kind == "learner" and ctx.fault.at == k:
            raise RuntimeError(f"injected learner fault at update {k} ({ctx.fault})")
        state, metrics = update(state, mesh.shard(batch), k)
        metrics = {name: float(v) for name, v in metrics.items()}
        if not math.isfinite(metrics["loss_total"]):
            raise NonFiniteLoss(
                f"loss_total is {metrics['loss_total']} at update {k} (learner version {k + 1}); "
                "stopping the run"
            )
        params = first_replica(state.params)
        ctx.channel.publish(k + 1, params)
        digest = checksum(params) if cfg.params_checksum else ""
        ctx.timing["update"].append(time.monotonic() - t_update)

        stats, episodes = gather_from_processes(
            rollout_stats(rollouts), [e for r in rollouts for e in r.episodes], capacity
        )
        # One order whatever the layout: by env step, then global env index.
        episodes.sort(key=lambda e: (e.env_steps, e.env_index))
        now = time.monotonic()
        env_steps = k * plan.batch_size
        sps = (env_steps - last_steps) / max(now - last_time, 1e-9)
        last_time, last_steps = now, env_steps
        if ctx.writer is not None:
            wall = now - ctx.start_time
            for e in episodes:
                ctx.writer.log_episode({
                    "env_steps": e.env_steps, "frames": e.env_steps * frames_per_step,
                    "wall_time_s": e.wall_time_s, "env_index": e.env_index,
                    "episode_return": e.episode_return, "episode_length": e.episode_length,
                })
            row = {
                "update": k, "env_steps": env_steps, "frames": env_steps * frames_per_step,
                "wall_time_s": wall, "learner_version": k + 1,
                "rollout_policy_version_min": int(stats[0]),
                "rollout_policy_version_max": int(stats[1]),
                "num_rollouts": int(stats[2]), "policy_changes_mid_rollout": int(stats[3]),
                "sps": sps, "rollout_queue_get_s": queue_wait, "param_queue_get_s": stats[4],
                "params_checksum": digest,
            }
            row.update({c: metrics.get(c) for c in alg.metric_columns})
            ctx.writer.log_update(row)
            ctx.episodes_written += len(episodes)
        if ctx.wandb is not None:
            log = {"charts/SPS": sps, "stats/rollout_queue_get_s": queue_wait,
                   "stats/param_queue_get_s": stats[4],
                   "stats/staleness_max": k - stats[0]}
            log.update({f"losses/{c}": v for c, v in metrics.items()})
            ctx.wandb.log(log, step=env_steps, episodes=episodes)
        p = ctx.progress
        p.update, p.env_steps, p.sps = k, env_steps, sps
        p.recent_returns.extend(e.episode_return for e in episodes)
        ctx.updates_done = k
        ctx.control.phase = (f"training (after update {k} of {plan.num_updates})"
                             if k < plan.num_updates else
                             f"finishing (all {k} updates done, before the final write)")
        if cfg.learner_delay_s > 0 and k < plan.num_updates:
            ctx.control.sleep(cfg.learner_delay_s)


# --------------------------------------------------------------------------------------
# the run


def _thread(ctx: Context, name: str, target: Callable, *args: Any) -> threading.Thread:
    def body() -> None:
        try:
            target(*args)
        except Stopped:
            pass
        except BaseException as exc:  # noqa: BLE001 - any failure ends the run
            ctx.control.fail(exc)

    return threading.Thread(target=body, name=name, daemon=True)


@dataclass
class Prepared:
    """A run that passed every check and may start."""

    plan: Plan
    algorithm: Algorithm
    protocol: dict[str, Any]
    obs_shape: tuple[int, ...]
    obs_dtype: Any
    num_actions: int
    run_id: str
    run_dir: Path
    manifest: dict[str, Any]
    fault: Fault | None


@dataclass(frozen=True)
class PresetChoice:
    """The preset a run was started from: its name and the env it was made for."""

    name: str
    env_id: str


def check_preset_fits(preset: PresetChoice, env_id: str, obs_shape: tuple[int, ...],
                      preset_obs_shape: tuple[int, ...], presets: Sequence[str]) -> None:
    """A preset's network and sizes are made for one kind of observation (images: the
    IMPALA ResNet and Atari settings; vectors: an MLP and CPU settings). Refuse an env whose
    observations are of the other kind rather than train it with settings made for another."""
    if len(obs_shape) == len(preset_obs_shape):
        return
    kind = {3: "image", 1: "vector"}
    raise ConfigError(
        f"preset {preset.name!r} is made for {kind.get(len(preset_obs_shape), 'other')} "
        f"observations ({preset.env_id}: {preset_obs_shape}), but {env_id} gives "
        f"{kind.get(len(obs_shape), 'other')} observations {obs_shape}; pick the preset "
        f"made for them (presets: {', '.join(presets)}; 'atari' for Atari games, "
        "'cartpole' for vector observations)"
    )


def prepare(config: CommonConfig, factory: AlgorithmFactory, system: str,
            preset: PresetChoice | None = None, presets: Sequence[str] = ()) -> Prepared:
    """Every check that can fail on bad arguments; raises ConfigError & co. Writes nothing."""
    import envpool

    fault = fault_from_env()
    benchenv.check_env_id(config.env_id)
    init_distributed(config)
    watcher = stopping.installed()
    if watcher is not None and config.distributed:
        watcher.reinstall_handlers()  # jax.distributed may register a native SIGTERM handler
    plan = make_plan(config, jax.process_count(), jax.process_index(), jax.local_device_count())
    protocol = benchenv.env_protocol(config.env_id)
    spec = envpool.make_spec(config.env_id, **protocol)
    obs_space, act_space = spec.observation_space, spec.action_space
    if not hasattr(act_space, "n"):
        raise ConfigError(
            f"{config.env_id} has a {type(act_space).__name__} action space; the Cleanba "
            "trainers support discrete actions (Atari, CartPole-v1, ...)"
        )
    obs_shape = tuple(obs_space.shape)
    if preset is not None:
        preset_spec = envpool.make_spec(preset.env_id, **benchenv.env_protocol(preset.env_id))
        check_preset_fits(preset, config.env_id, obs_shape,
                          tuple(preset_spec.observation_space.shape), presets)
    obs_dtype = np.uint8 if obs_space.dtype == np.uint8 else np.float32
    algorithm = factory(config, plan, obs_shape, int(act_space.n))
    rid = config.run_id or make_run_id(system, config, protocol, plan.layout)
    run_dir = Path(config.run_dir) if config.run_dir else default_run_dir(rid)
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
    derived.update(algorithm.derived)
    manifest = build_manifest(
        system=system, config=config, rid=rid, env_protocol=protocol, layout=plan.layout,
        derived=derived, devices=devices,
    )
    return Prepared(plan, algorithm, protocol, obs_shape, obs_dtype, int(act_space.n), rid,
                    run_dir, manifest, fault)


def train(config: CommonConfig, factory: AlgorithmFactory, system: str,
          preset: PresetChoice | None = None, presets: Sequence[str] = ()) -> int:
    """Run one training; returns the exit code (0 completed, 1 failed, 2 bad args, 130
    interrupted). `preset`: the preset the config came from (checked against the env)."""
    # gymnasium warns about EnvPool's float64 Box bounds on every env; it means nothing here.
    warnings.filterwarnings("ignore", message=".*precision lowered.*")
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
    watcher.hold("start-up")
    try:
        prep = prepare(config, factory, system, preset, presets)
        writer = None
        # Under the watcher's lock: a signal finds either no record (exit, nothing written)
        # or a record and a run that stops through `control` (status interrupted).
        with watcher.lock:
            if jax.process_index() == 0:
                writer = RunWriter(prep.run_dir, prep.manifest, prep.algorithm.metric_columns)
            control.phase = "start-up (compiling, creating environments)"
            watcher.running(control.interrupt)
    except (ConfigError, benchenv.EnvError, LayoutError, RecordError) as exc:
        console(f"error: {exc}", sys.stderr)
        return EXIT_BAD_INPUT
    if writer is not None:
        console(f"[cleanba] {system} {config.env_id} {config.architecture} "
                f"{prep.plan.layout.name}: record in {prep.run_dir}")
    error: BaseException | None = None
    wandb_logger = None
    ctx = None
    watcher.hold("compiling")
    try:
        if config.track and writer is not None:
            wandb_logger = WandbLogger(config, system, prep.run_id, prep.run_dir, prep.manifest)
        ctx, threads = _start(config, prep, control, writer, wandb_logger)
        _supervise(ctx, threads)
        watcher.hold("finishing")
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
            code = {schema.COMPLETED: EXIT_OK,
                    schema.INTERRUPTED: EXIT_INTERRUPTED}.get(status, EXIT_FAILED)
            if writer is not None:
                steps = updates * prep.plan.batch_size
                writer.finish(status, error=recorded_error, summary={
                    "env_steps": steps, "frames": steps * benchenv.frames_per_step(config.env_id),
                    "wall_time_s": wall, "mean_sps": steps / wall if wall > 0 else 0.0,
                    "updates": updates,
                    "episodes": ctx.episodes_written if ctx is not None else 0,
                })
            watcher.finished(code)
        watcher.hold("finished")
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


def final_status(control: Control, error: BaseException | None,
                 ) -> tuple[str, BaseException | dict | None]:
    """(status, error for the record): a thread's failure before any signal -> failed; a
    signal first -> interrupted, the reason naming the signal and the phase; else the
    main thread's own error -> failed; else completed."""
    if control.error is not None:
        return schema.FAILED, control.error
    if control.interrupted:
        return schema.INTERRUPTED, {"type": "Interrupted", "message": control.interrupt_reason,
                                    "traceback": ""}
    if error is not None:
        return schema.FAILED, error
    return schema.COMPLETED, None


def make_context(config: CommonConfig, prep: Prepared, control: Control,
                 writer: RunWriter | None = None, wandb_logger: WandbLogger | None = None,
                 ) -> tuple[Context, LearnerMesh, Any]:
    """Shared state, the learner mesh and the replicated initial train state (version 1,
    already published to the actors)."""
    plan = prep.plan
    root = jax.random.PRNGKey(config.seed)
    init_key, action_key = jax.random.fold_in(root, 0), jax.random.fold_in(root, 1)
    mesh = LearnerMesh(plan.learner_device_ids)
    state = mesh.replicate(jax.device_get(prep.algorithm.init_state(init_key)))
    channel = ParamChannel(config.architecture, plan.threads_per_process, plan.num_updates,
                           control)
    ctx = Context(
        config=config, prep=prep, control=control, channel=channel,
        rollout_queues=[queue.Queue(maxsize=1) for _ in range(plan.threads_per_process)],
        action_key=action_key, fault=prep.fault, progress=Progress(plan.num_updates),
        writer=writer, wandb=wandb_logger, start_time=time.monotonic(),
    )
    channel.publish(1, first_replica(state.params))
    return ctx, mesh, state


def actor_threads(ctx: Context) -> list[threading.Thread]:
    local = jax.local_devices()
    threads = []
    local_thread = 0
    for d_pos, d_id in enumerate(ctx.plan.actor_device_ids):
        for j in range(ctx.plan.num_actor_threads):
            threads.append(_thread(ctx, f"actor-{d_id}-{j}", actor_loop, ctx, local_thread,
                                   local[d_id], ctx.plan.thread_global_index(d_pos, j)))
            local_thread += 1
    return threads


def _start(config: CommonConfig, prep: Prepared, control: Control, writer: RunWriter | None,
           wandb_logger: WandbLogger | None) -> tuple[Context, list[threading.Thread]]:
    ctx, mesh, state = make_context(config, prep, control, writer, wandb_logger)
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


def exit_after(code: int) -> None:
    """Exit with `code`; skip interpreter clean-up if a thread is stuck in native code."""
    sys.stdout.flush()
    sys.stderr.flush()
    if any(t.is_alive() for t in threading.enumerate() if t is not threading.main_thread()
           and t.daemon and t.name.startswith(("actor", "learner"))):
        os._exit(code)
    sys.exit(code)


def main(presets: dict[str, tuple[str, Any]], factory: AlgorithmFactory, system: str,
         description: str | None, argv: list[str] | None = None) -> int:
    """Parse `PRESET [flags]` with tyro and train. The preset is required: its settings
    differ by orders of magnitude (a 50M-step Atari run vs a one-minute CartPole run)."""
    import tyro

    watcher = stopping.installed()
    if watcher is not None:
        watcher.set_phase("start-up (parsing arguments)")
    prog = f"python -m cleanba.{system.split('-')[-1]}"
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or (args[0] not in presets and args[0] not in ("-h", "--help")):
        console(f"error: {prog} needs a preset first, then flags: {prog} PRESET [flags]; "
                f"{'got ' + repr(args[0]) if args else 'got none'}. Presets:\n"
                + "\n".join(f"  {name}: {text}" for name, (text, _) in presets.items())
                + f"\nexample: {prog} cartpole --seed 2", sys.stderr)
        return EXIT_BAD_INPUT
    try:
        config = tyro.extras.overridable_config_cli(
            presets, prog=prog, args=args, description=description,
        )
    except ConfigError as exc:
        console(f"error: {exc}", sys.stderr)
        return EXIT_BAD_INPUT
    preset = PresetChoice(args[0], presets[args[0]][1].env_id)
    code = train(config, factory, system, preset, tuple(presets))
    exit_after(code)
    return code
