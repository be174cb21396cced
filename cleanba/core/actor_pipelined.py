"""The double-buffered actor mode (`--actor-mode double-buffer`): one half of an actor
thread's envs steps while the policy runs on the other half.

The serial loop (cleanba/core/actor.py `actor_loop`) leaves the device idle while the envs
step and the envs idle while the policy runs. Here each actor thread splits its envs into
two halves, each its own env object (envs first .. first + n/2 - 1 and the rest; every
env keeps its seed and stream: benchenv.env_seeds depends on the global env index only)
stepped by its own helper thread (`EnvStepper`). The backends release the GIL inside their
C++ step, so at every step:

    this thread:    policy A(t) | policy B(t) | policy A(t+1) | policy B(t+1) | ...
    stepper of A:               | env A(t) ...........        | env A(t+1) ...
    stepper of B:                             | env B(t) ...........          | ...

A half's env step runs while the other half's policy step does, and the two halves' env
steps may run at once: as with EnvPool's async send/recv on two batches (Sample Factory's
double-buffered sampling), a half that finishes early does not wait for the other's
slowest env, so the envs can step faster than one synchronous step of them all.

Each half's data lands in the rollout's arrays at its env columns, and the episodes of a
step are tracked once both halves have stepped, over all the thread's envs in env order,
so the rollout, its versions per step and its episodes are the serial loop's. Under
--deterministic the network runs on chunks of `plan.envs_per_group` envs and the action
key of env i at step t is fold_in(fold_in(key, i), t) whatever the call's size, so with a
half that holds whole env groups (checked by cleanba.core.layout.make_plan) every record
is the serial loop's bits. Without --deterministic the network sees half-size batches,
whose floating-point results may differ in the last bits: the same run in distribution.

The pipeline drains at the end of each rollout (both halves' last env steps are awaited
before the rollout goes to the learner), so a rollout boundary, a checkpoint's env
re-seeding and a stop all meet it with no env step in flight.

The clock's phases (cleanba/core/actor_clock.py) keep their meaning for this thread:
env_step is the time it waits for a half's env step, the part the overlap did not hide.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from cleanba.core.actor import ActorThread, RolloutInProgress
from cleanba.core.context import Context
from cleanba.core.records import EpisodeTracker, StepRecord


class EnvStepper:
    """One daemon thread that runs `env.step(actions)` for what is handed to it, in the
    order handed over; each hand-over returns a Future of the step's result."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[tuple[Future, Any, np.ndarray] | None] = queue.SimpleQueue()
        # a daemon, named as its actor thread: a stuck env step never blocks the exit
        # (cleanba.core.runtime.exit_after)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, env: Any, actions: np.ndarray) -> Future:
        future: Future = Future()
        self._jobs.put((future, env, actions))
        return future

    def close(self) -> None:
        self._jobs.put(None)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, env, actions = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(env.step(actions))
            except BaseException as exc:  # noqa: BLE001 - raised again in the actor thread
                future.set_exception(exc)


@dataclass
class Half:
    """One half of an actor thread's envs: its columns of the rollout and its env object."""

    cols: slice
    first_env: int  # global index of its first env
    env_index: jax.Array
    stepper: EnvStepper  # the thread that steps its envs
    env: Any = None
    obs: np.ndarray | None = None  # the latest observations, on the host
    obs_now: Any = None  # the same where the policy step reads them
    prev_done: np.ndarray | None = None
    pending: Future | None = None  # its env step in flight
    obs_steps: list[jax.Array] = field(default_factory=list)  # on_device: each step's obs

    def restart(self, a: ActorThread, count: int) -> None:
        """New envs for the segment a has entered, reset."""
        if self.env is not None:
            self.env.close()
        self.env = a.make_env(self.first_env, count)
        self.obs, _ = self.env.reset()
        self.obs_now = a.to_policy(self.obs)
        self.prev_done = np.zeros(count, bool)

    def carry_on(self, a: ActorThread, env_state: bytes, obs: np.ndarray,
                 prev_done: np.ndarray) -> None:
        """Its envs where a checkpoint saved them (exact-state backends)."""
        self.env.set_state(env_state)
        self.obs, self.prev_done = obs, prev_done
        self.obs_now = a.to_policy(obs)


def pipelined_actor_loop(ctx: Context, local_thread: int, device: jax.Device,
                         thread_global: int) -> None:
    a = ActorThread(ctx, local_thread, device, thread_global)
    h = a.n // 2  # even, and whole env groups under --deterministic (layout.make_plan)
    name = threading.current_thread().name
    halves = [Half(slice(0, h), a.first_env, a.env_index(a.first_env, h),
                   EnvStepper(f"{name}-envs-A")),
              Half(slice(h, a.n), a.first_env + h, a.env_index(a.first_env + h, h),
                   EnvStepper(f"{name}-envs-B"))]
    tracker = EpisodeTracker(a.first_env, a.n)
    try:
        for k in range(ctx.start_update + 1, ctx.plan.num_updates + 1):
            if a.enters_segment(k):
                for half in halves:
                    half.restart(a, h)
                tracker = EpisodeTracker(a.first_env, a.n)
                if (carried := a.resumed(k)) is not None:
                    for j, half in enumerate(halves):
                        half.carry_on(a, carried.envs[j], carried.obs[j], carried.prev_done[j])
                    tracker.restore(carried.returns, carried.lengths)
            r = a.begin_rollout(k)
            for t in range(a.T):
                step = a.begin_step(r, t)
                recs = []
                for half in halves:
                    if t:  # its env step t - 1 ran while the other half's policy step did
                        recs.append(_collect(a, r, t - 1, half))
                    _act(a, r, t, step, half)
                    if half is halves[0]:  # with A's env step in flight
                        a.hold_mid_rollout(r, t)
                if recs:
                    _track(a, r, tracker, step - 1, recs)
            recs = [_collect(a, r, a.T - 1, half) for half in halves]
            _track(a, r, tracker, step, recs)
            device_obs = None
            if a.on_device:  # obs_now is also step 0's observations of the next rollout
                device_obs = jnp.concatenate(
                    [jnp.stack([*half.obs_steps, half.obs_now]) for half in halves], axis=1)
            else:
                for half in halves:
                    r.arrays["obs"][a.T, half.cols] = half.obs
            for half in halves:
                half.obs_steps = []
            a.snapshot(k, [x.env for x in halves], [x.obs for x in halves],
                       [x.prev_done for x in halves], tracker)
            a.finish_rollout(r, device_obs)
    finally:
        for half in halves:  # an error mid-rollout: no env closed under a running step
            if half.pending is not None:
                half.pending.exception()
            if half.env is not None:
                half.env.close()
            half.stepper.close()


def _act(a: ActorThread, r: RolloutInProgress, t: int, step: int, half: Half) -> None:
    """Half's policy step t, its outputs written, and its env step handed to its stepper."""
    if a.on_device:
        half.obs_steps.append(half.obs_now)
    else:
        r.arrays["obs"][t, half.cols] = half.obs
    a.clock.lap("bookkeeping")
    out = a.policy_step(half.obs_now, half.env_index, step)
    a.write_policy(r, t, half.cols, out)
    half.pending = half.stepper.submit(half.env, out[0])
    a.clock.lap("bookkeeping")


def _collect(a: ActorThread, r: RolloutInProgress, t: int, half: Half) -> StepRecord:
    """Wait for half's env step t and write its results into the rollout."""
    assert half.pending is not None and half.prev_done is not None
    result = half.pending.result()
    half.pending = None
    a.clock.lap("env_step")
    half.obs = result[0]
    half.obs_now = a.to_policy(half.obs)
    a.clock.lap("obs_transfer")
    rec = a.record_env_step(r, t, half.cols, half.prev_done, result)
    half.prev_done = rec.done
    a.clock.lap("bookkeeping")
    return rec


def _track(a: ActorThread, r: RolloutInProgress, tracker: EpisodeTracker, step: int,
           recs: list[StepRecord]) -> None:
    """The episodes that ended at `step`, over both halves in env order."""
    a.track_episodes(r, tracker, step, *(np.concatenate([getattr(x, f) for x in recs])
                                         for f in ("raw_reward", "done", "mask")))
    a.clock.lap("bookkeeping")
