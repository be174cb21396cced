"""The actor thread: a Python loop over env steps calling one jitted policy step, one
rollout per iteration into its own rollout queue (size 1).

Where a rollout's observations live (`obs_on_device`): on a GPU they stay on the actor's
device, where each step's observations go anyway for the policy step, and are stacked
there at the end of the rollout; the learner takes them from device to device. Host
memory then holds only the small per-step fields. Before, every rollout's observations
(233 MB per actor thread at the paper's 64 envs x 128 steps) were also copied into host
memory, kept in up to three sets per thread, concatenated on the host by the learner and
staged again for the transfer: ~2.4 GB of host memory on an H100 that the reference
Cleanba never holds (docs/performance.md, "Host memory"). On a CPU the device is host
memory, so the reused host sets (cleanba/core/rollout_buffers.py) stay: they are the
cheaper way to write there. The values are the same bits either way."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import benchenv
from cleanba.core import checkpoint, stopping
from cleanba.core.actor_clock import ActorClock
from cleanba.core.actor_state import ThreadSnapshot
from cleanba.core.context import Context
from cleanba.core.records import Episode, EpisodeTracker, StepRecord, record_step
from cleanba.core.rollout_buffers import RolloutBuffers
from cleanba.numerics.deterministic import microbatched_apply, sample_actions
from cleanba.numerics.losses import categorical_logprob
from runrecord.words import counted


@dataclass
class Rollout:
    thread: int  # global actor thread index
    iteration: int  # 1-based
    arrays: dict[str, Any]  # ROLLOUT_FIELDS, time-major (T, envs, ...); obs (T + 1, ...):
    # numpy arrays, and obs a jax.Array on the actor's device when `obs_on_device`
    versions: np.ndarray  # (T,) policy version used at each step
    param_wait_s: float
    episodes: list[Episode]


@dataclass(frozen=True)
class Forward:
    """A forward function where a network goes: what the policy step calls is `.apply`."""

    apply: Callable[[Any, jax.Array], tuple[jax.Array, jax.Array]]


def policy_network(ctx: Context) -> Any:
    """The network the actor's policy step applies: the algorithm's, or the forward
    function injected into the context (`Context.actor_forward`: benchmarks only). Read
    once per actor thread, before its loop."""
    return ctx.algorithm.network if ctx.actor_forward is None else Forward(ctx.actor_forward)


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


def packed_sample_step(network: Any, inference_envs: int, params: Any, obs: jax.Array,
                       env_index: jax.Array, step: jax.Array, key: jax.Array) -> jax.Array:
    """`sample_step`'s four outputs as one int32 array (E, 3 + A), so that the host fetches
    them in one transfer instead of four (15-40 us less CPU per call on the development VM):
    column 0 the actions, then logprob, value and the A logits, bit-cast (exact).
    `unpack_policy_step` takes them apart."""
    actions, logprobs, logits, value = sample_step(network, inference_envs, params, obs,
                                                   env_index, step, key)
    floats = jnp.concatenate([logprobs[:, None], value[:, None], logits], axis=1)
    return jnp.concatenate([actions[:, None], jax.lax.bitcast_convert_type(floats, jnp.int32)],
                           axis=1)


def unpack_policy_step(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(actions (E,) int32, logprobs (E,), logits (E, A), values (E,)) from
    `packed_sample_step`'s array on the host; the actions contiguous (EnvPool's input)."""
    floats = packed[:, 1:].view(np.float32)
    return np.ascontiguousarray(packed[:, 0]), floats[:, 0], floats[:, 2:], floats[:, 1]


def obs_on_device(ctx: Context, device: jax.Device) -> bool:
    """Whether this actor keeps its rollouts' observations on its device (module doc):
    `Context.rollout_obs_on_device` when set, else on every device but a CPU."""
    choice = ctx.rollout_obs_on_device
    return device.platform != "cpu" if choice is None else choice


@dataclass
class RolloutInProgress:
    """One rollout being written: its arrays, the policy version of each step, the
    episodes that ended in it, and the seconds its actor waited for parameters."""

    iteration: int
    arrays: dict[str, Any]
    versions: np.ndarray
    episodes: list[Episode]
    param_wait_s: float
    started: float  # time.monotonic() at its first step


class ActorThread:
    """What one actor thread holds for the whole run, and the parts of a rollout every
    actor mode shares (the serial `actor_loop` below; the double-buffered one in
    cleanba/core/actor_pipelined.py): the jitted policy step, the env-making, the
    parameters and their version, the rollout's host memory and the phase clock."""

    def __init__(self, ctx: Context, local_thread: int, device: jax.Device,
                 thread_global: int) -> None:
        plan = ctx.plan
        self.ctx, self.local_thread, self.device = ctx, local_thread, device
        self.thread_global = thread_global
        self.n, self.T = plan.envs_per_thread, plan.num_steps
        self.first_env = plan.first_env_index(thread_global)
        self.spec = ctx.prep.checked.env
        inference_envs = plan.envs_per_group if plan.deterministic else 0
        self.policy = jax.jit(partial(packed_sample_step, policy_network(ctx), inference_envs))
        self.key = jax.device_put(ctx.action_key, device)
        self.rewards_clipped = bool(self.spec.protocol.get("reward_clip", False))
        self.on_device = obs_on_device(ctx, device)
        self.version, self.params = 0, None
        self.segment = -1
        # exact-state backends: checkpoints hold the envs, never re-seeded (0)
        self.reseed_every = checkpoint.reseed_every(self.spec.protocol,
                                                    ctx.config.checkpoint_every)
        n, T, spec = self.n, self.T, self.spec
        # the rollouts' host memory, reused once the learner lets go of it: writing fresh
        # pages step by step cost up to a tenth of an env step (cleanba/core/rollout_buffers.py)
        self.buffers = RolloutBuffers({
            **({} if self.on_device else {"obs": ((T + 1, n, *spec.obs_shape), spec.obs_dtype)}),
            "actions": ((T, n), np.int32),
            "logprobs": ((T, n), np.float32),
            "logits": ((T, n, spec.num_actions), np.float32),
            "values": ((T, n), np.float32),
            "rewards": ((T, n), np.float32),
            "dones": ((T, n), np.float32),
            "mask": ((T, n), np.float32),
        })
        self.clock = ActorClock()  # where this thread's time goes (cleanba.speed_bound reads it)

    def env_index(self, first: int, count: int) -> jax.Array:
        """The global indices of envs first .. first + count - 1, on the device (their
        action keys: `sample_step`)."""
        return jax.device_put(np.arange(first, first + count, dtype=np.int32), self.device)

    def enters_segment(self, k: int) -> bool:
        """Whether rollout k starts a new env segment: a checkpoint boundary (or the start),
        where new envs seeded for that segment start new episodes and the running ones are
        cut (cleanba/core/checkpoint.py)."""
        segment = checkpoint.env_segment(k, self.reseed_every)
        if segment == self.segment:
            return False
        self.segment = segment
        return True

    def make_env(self, first: int, count: int) -> Any:
        """Envs first .. first + count - 1 of the run, seeded for the current segment: each
        env's stream is its own (benchenv.env_seeds), whichever env object holds it."""
        cfg = self.ctx.config
        return benchenv.make_env(cfg.env_id, count, cfg.seed, first_env_index=first,
                                 protocol=self.spec.protocol, segment=self.segment)

    def resumed(self, k: int) -> ThreadSnapshot | None:
        """What this thread carried at the checkpoint the run resumed from, when rollout k
        is the first after it and the envs restore exactly (else None)."""
        if k != self.ctx.start_update + 1:
            return None
        carried = self.ctx.resume_actors.get(self.thread_global)
        objects = 2 if self.ctx.config.actor_mode == "double-buffer" else 1
        if carried is not None and len(carried.envs) != objects:
            # the saved states are per env object (a half's, or the thread's)
            raise RuntimeError(f"the checkpoint holds {counted(len(carried.envs), 'env object')} per "
                               f"actor thread; resume with the --actor-mode that wrote it")
        return carried

    def snapshot(self, k: int, envs: list[Any], obs: list[Any],
                 prev_done: list[Any], tracker: EpisodeTracker) -> None:
        """At the end of rollout k, a checkpoint boundary, with envs that restore exactly:
        what this thread carries into rollout k + 1, left for the learner's checkpoint
        (before the rollout reaches it, so it is there when the learner checkpoints)."""
        cfg = self.ctx.config
        if self.reseed_every or not checkpoint.is_boundary(k, cfg.checkpoint_every,
                                                           self.ctx.plan.num_updates):
            return
        self.ctx.snapshots.put(k, self.thread_global, ThreadSnapshot(
            [env.get_state() for env in envs], [np.array(o) for o in obs],
            [np.array(d) for d in prev_done], tracker.returns.copy(), tracker.lengths.copy()))

    def to_policy(self, obs: np.ndarray) -> Any:
        """Observations where the policy step reads them: on the device, or as they are."""
        return jax.device_put(obs, self.device) if self.on_device else obs

    def begin_rollout(self, k: int) -> RolloutInProgress:
        """The injected actor fault, the parameters for rollout k (the architecture's
        wait), and the rollout's arrays (every element is written by the loop)."""
        ctx = self.ctx
        if ctx.fault is not None and ctx.fault.kind == "actor" and ctx.fault.at == k \
                and self.thread_global == 0:
            raise RuntimeError(f"injected actor fault at rollout {k} ({ctx.fault})")
        self.clock.start()
        t_wait = time.monotonic()
        got = ctx.channel.for_rollout(self.local_thread, k, first=k == ctx.start_update + 1)
        if got is not None:
            self.version, self.params = got[0], jax.device_put(got[1], self.device)
        param_wait = time.monotonic() - t_wait
        self.clock.lap("param_wait")
        arrays: dict[str, Any] = self.buffers.take()
        ctx.host_rollout_sets[self.thread_global] = self.buffers.allocated
        return RolloutInProgress(k, arrays, np.empty(self.T, np.int64), [], param_wait,
                                 time.monotonic())

    def begin_step(self, r: RolloutInProgress, t: int) -> int:
        """Newer parameters where the architecture gives them mid-rollout (async); records
        step t's policy version. Returns the env block's step counter, the same for every
        layout and actor mode (the action keys fold it in)."""
        newer = self.ctx.channel.for_step(self.version)
        if newer is not None:
            t0 = time.monotonic()
            self.version, self.params = newer[0], jax.device_put(newer[1], self.device)
            r.param_wait_s += time.monotonic() - t0
        r.versions[t] = self.version
        self.clock.lap("param_wait")
        return (r.iteration - 1) * self.T + t

    def policy_step(self, obs_now: Any, env_index: jax.Array, step: int,
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The policy step of a block of envs: dispatched, then awaited (the clock's
        policy_dispatch and policy_result); (actions, logprobs, logits, values)."""
        launched = self.policy(self.params, obs_now, env_index, np.int32(step), self.key)
        self.clock.lap("policy_dispatch")
        # the result waits for the policy step, hence for obs_now's transfer: EnvPool
        # may write its next observations only after that
        packed = np.asarray(launched)
        self.clock.lap("policy_result")
        return unpack_policy_step(packed)

    def hold_mid_rollout(self, r: RolloutInProgress, t: int) -> None:
        """The CLEANBA_HOLD_AT=rollout-K test hook: actor thread 0 waits halfway through
        rollout K for a stop signal (cleanba/core/stopping.py)."""
        if t == self.T // 2 and self.thread_global == 0:
            stopping.hold(f"rollout-{r.iteration}", self.ctx.config.seed)
            self.clock.lap("bookkeeping")

    @staticmethod
    def write_policy(r: RolloutInProgress, t: int, cols: slice,
                     out: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]) -> None:
        actions, logprobs, logits, values = out
        r.arrays["actions"][t, cols] = actions
        r.arrays["logprobs"][t, cols] = logprobs
        r.arrays["logits"][t, cols] = logits
        r.arrays["values"][t, cols] = values

    def record_env_step(self, r: RolloutInProgress, t: int, cols: slice, prev_done: np.ndarray,
                        result: tuple) -> StepRecord:
        """Step t's env results for the envs at `cols` written into the rollout."""
        _, reward, term, trunc, info = result
        rec = record_step(prev_done, reward, term, trunc, info, self.rewards_clipped)
        r.arrays["rewards"][t, cols] = rec.reward
        r.arrays["dones"][t, cols] = rec.done
        r.arrays["mask"][t, cols] = rec.mask
        return rec

    def track_episodes(self, r: RolloutInProgress, tracker: EpisodeTracker, step: int,
                       raw_reward: np.ndarray, done: np.ndarray, mask: np.ndarray) -> None:
        """The episodes of all the thread's envs that ended at `step`, in env order."""
        r.episodes += tracker.step(raw_reward, done, mask, (step + 1) * self.ctx.plan.num_envs,
                                   time.monotonic() - self.ctx.start_time)

    def finish_rollout(self, r: RolloutInProgress, device_obs: jax.Array | None) -> None:
        """Hand the rollout to the learner (queue of one). device_obs: the (T + 1, n, ...)
        observations on the device when `on_device` (else they are in r.arrays)."""
        if device_obs is not None:
            r.arrays["obs"] = device_obs
        self.ctx.timing["rollout"].append(time.monotonic() - r.started)
        rollout = Rollout(self.thread_global, r.iteration, r.arrays, r.versions,
                          r.param_wait_s, r.episodes)
        self.clock.lap("bookkeeping")
        self.ctx.control.put(self.ctx.rollout_queues[self.local_thread], rollout)
        self.clock.lap("rollout_put")
        self.clock.flush(self.ctx.timing)


def actor_loop(ctx: Context, local_thread: int, device: jax.Device, thread_global: int) -> None:
    """The serial actor mode: at each step the policy on all the thread's envs, then one
    env step of all of them."""
    a = ActorThread(ctx, local_thread, device, thread_global)
    n, T, every = a.n, a.T, slice(None)
    env_index = a.env_index(a.first_env, n)
    env: Any = None
    for k in range(ctx.start_update + 1, ctx.plan.num_updates + 1):
        if a.enters_segment(k):
            if env is not None:
                env.close()
            env = a.make_env(a.first_env, n)
            tracker = EpisodeTracker(a.first_env, n)
            obs, _ = env.reset()
            prev_done = np.zeros(n, bool)
            if (carried := a.resumed(k)) is not None:
                env.set_state(carried.envs[0])
                obs, prev_done = carried.obs[0], carried.prev_done[0]
                tracker.restore(carried.returns, carried.lengths)
            obs_now = a.to_policy(obs)  # the policy step's
        r = a.begin_rollout(k)
        obs_steps: list[jax.Array] = []  # on_device: each step's observations, on the device
        for t in range(T):
            step = a.begin_step(r, t)
            if a.on_device:
                obs_steps.append(obs_now)
            else:
                r.arrays["obs"][t] = obs
            a.clock.lap("bookkeeping")
            out = a.policy_step(obs_now, env_index, step)
            a.hold_mid_rollout(r, t)
            result = env.step(out[0])
            a.clock.lap("env_step")
            obs = result[0]
            obs_now = a.to_policy(obs)
            a.clock.lap("obs_transfer")
            a.write_policy(r, t, every, out)
            rec = a.record_env_step(r, t, every, prev_done, result)
            a.track_episodes(r, tracker, step, rec.raw_reward, rec.done, rec.mask)
            prev_done = rec.done
            a.clock.lap("bookkeeping")
        if not a.on_device:
            r.arrays["obs"][T] = obs
        a.snapshot(k, [env], [obs], [prev_done], tracker)
        # on_device: obs_now is also step 0's observations of the next rollout
        a.finish_rollout(r, jnp.stack([*obs_steps, obs_now]) if a.on_device else None)
        del obs_steps
    if env is not None:
        env.close()
