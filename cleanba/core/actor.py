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
from cleanba.core import checkpoint
from cleanba.core.actor_clock import ActorClock
from cleanba.core.context import Context
from cleanba.core.records import Episode, EpisodeTracker, record_step
from cleanba.core.rollout_buffers import RolloutBuffers
from cleanba.numerics.deterministic import microbatched_apply, sample_actions
from cleanba.numerics.losses import categorical_logprob


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


def actor_loop(ctx: Context, local_thread: int, device: jax.Device, thread_global: int) -> None:
    plan, cfg = ctx.plan, ctx.config
    n, T = plan.envs_per_thread, plan.num_steps
    first_env = plan.first_env_index(thread_global)
    spec = ctx.prep.checked.env
    inference_envs = plan.envs_per_group if plan.deterministic else 0
    policy = jax.jit(partial(packed_sample_step, policy_network(ctx), inference_envs))
    env_index = jax.device_put(np.arange(first_env, first_env + n, dtype=np.int32), device)
    key = jax.device_put(ctx.action_key, device)
    rewards_clipped = bool(spec.protocol.get("reward_clip", False))
    on_device = obs_on_device(ctx, device)
    env: Any = None
    segment = -1
    version, params = 0, None
    # the rollouts' host memory, reused once the learner lets go of it: writing fresh pages
    # step by step cost up to a tenth of an env step (cleanba/core/rollout_buffers.py)
    buffers = RolloutBuffers({
        **({} if on_device else {"obs": ((T + 1, n, *spec.obs_shape), spec.obs_dtype)}),
        "actions": ((T, n), np.int32),
        "logprobs": ((T, n), np.float32),
        "logits": ((T, n, spec.num_actions), np.float32),
        "values": ((T, n), np.float32),
        "rewards": ((T, n), np.float32),
        "dones": ((T, n), np.float32),
        "mask": ((T, n), np.float32),
    })
    clock = ActorClock()  # where this thread's time goes (cleanba.speed_bound reads it)
    for k in range(ctx.start_update + 1, plan.num_updates + 1):
        if checkpoint.env_segment(k, cfg.checkpoint_every) != segment:
            # a checkpoint boundary (or the start): new envs seeded for this segment, new
            # episodes; the running ones are cut (cleanba/core/checkpoint.py)
            if env is not None:
                env.close()
            segment = checkpoint.env_segment(k, cfg.checkpoint_every)
            env = benchenv.make_env(cfg.env_id, n, cfg.seed, first_env_index=first_env,
                                    protocol=spec.protocol, segment=segment)
            tracker = EpisodeTracker(first_env, n)
            obs, _ = env.reset()
            obs_now = jax.device_put(obs, device) if on_device else obs  # the policy step's
            prev_done = np.zeros(n, bool)
        if ctx.fault is not None and ctx.fault.kind == "actor" and ctx.fault.at == k \
                and thread_global == 0:
            raise RuntimeError(f"injected actor fault at rollout {k} ({ctx.fault})")
        clock.start()
        t_wait = time.monotonic()
        got = ctx.channel.for_rollout(local_thread, k, first=k == ctx.start_update + 1)
        if got is not None:
            version, params = got[0], jax.device_put(got[1], device)
        param_wait = time.monotonic() - t_wait
        clock.lap("param_wait")
        t_rollout = time.monotonic()
        arrays: dict[str, Any] = buffers.take()  # every element is written below
        ctx.host_rollout_sets[thread_global] = buffers.allocated
        obs_steps: list[jax.Array] = []  # on_device: each step's observations, on the device
        versions = np.empty(T, np.int64)
        episodes: list[Episode] = []
        for t in range(T):
            newer = ctx.channel.for_step(version)
            if newer is not None:
                t0 = time.monotonic()
                version, params = newer[0], jax.device_put(newer[1], device)
                param_wait += time.monotonic() - t0
            clock.lap("param_wait")
            step = (k - 1) * T + t  # this env block's step counter, same for every layout
            if on_device:
                obs_steps.append(obs_now)
            else:
                arrays["obs"][t] = obs
            clock.lap("bookkeeping")
            launched = policy(params, obs_now, env_index, np.int32(step), key)
            clock.lap("policy_dispatch")
            # the result waits for the policy step, hence for obs_now's transfer: EnvPool
            # may write its next observations only after that
            packed = np.asarray(launched)
            clock.lap("policy_result")
            actions, logprobs, logits, values = unpack_policy_step(packed)
            obs, reward, term, trunc, info = env.step(actions)
            clock.lap("env_step")
            obs_now = jax.device_put(obs, device) if on_device else obs
            clock.lap("obs_transfer")
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
            clock.lap("bookkeeping")
        if on_device:  # obs_now is also step 0's observations of the next rollout
            arrays["obs"] = jnp.stack([*obs_steps, obs_now])
            del obs_steps
        else:
            arrays["obs"][T] = obs
        ctx.timing["rollout"].append(time.monotonic() - t_rollout)
        rollout = Rollout(thread_global, k, arrays, versions, param_wait, episodes)
        clock.lap("bookkeeping")
        ctx.control.put(ctx.rollout_queues[local_thread], rollout)
        clock.lap("rollout_put")
        clock.flush(ctx.timing)
    if env is not None:
        env.close()
