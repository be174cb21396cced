"""Actor-side throughput: the env backend's raw stepping rate and the actor loop's rate with
a no-op forward pass (`cleanba.tools.actor_hook`), for the same envs and threads, on either
backend (EnvPool, ALE: benchenv).

- `raw_env_rate`: K Python threads, each stepping its own vector env of E / K envs (the
  trainer's env blocks: same protocol, same env seeds, the backend's default worker
  threads) with uniform random actions and nothing else. This is the actor-side limit of
  the machine for a loop that steps its envs synchronously. On EnvPool
  (`backend="envpool"`) with twice the threads it is the env side of `--actor-mode double-buffer` (each
  half of a thread's envs its own env object, stepped by its own thread).
- `envpool_async_rate`: EnvPool's asynchronous use, one pool per thread with a batch of
  half its envs: `recv` returns whichever half of the envs finished first and `send`
  steps them on, so no env waits for the slowest of a whole synchronous step.
- `actor_loop_rate`: the trainer's real actor threads (`runtime.actor_threads`: jitted
  policy step, device transfers, step recording, episode tracking, rollout queues) with
  the network replaced by a no-op of the same output shapes; the main thread takes the
  rollouts as a learner would, and drops them. Timed after WARMUP_ROLLOUTS rollouts.

Their ratio is the share of EnvPool's rate that the actor loop keeps. On a GPU, inference
is cheap, so this ratio bounds the trainer's SPS there. Used by `benchmarks/gpu_suite.py`.
"""

from __future__ import annotations

import dataclasses
import resource
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import benchenv
from cleanba import ppo
from cleanba.core.control import Control, Stopped
from cleanba.core.runtime import actor_threads, make_context, prepare
from cleanba.tools import actor_hook
from runrecord.words import counted

WARMUP_STEPS = 16  # raw stepping: steps per thread before the clock starts (pool start-up)
# actor loop: rollouts per thread before the clock starts (1: compilation; 2: the second
# rollout buffer set, the first is reused from rollout 3 on when the main thread drops it)
WARMUP_ROLLOUTS = 2


@dataclass(frozen=True)
class Rate:
    """Env steps per second over a timed window (start-up and compilation excluded), by
    the wall clock and by the CPU time of the whole process (every thread: EnvPool's
    workers, the actors, XLA). On a machine shared with other jobs the wall-clock rate
    follows their load; the CPU-time rate measures the work per step and barely does."""

    env_steps: int
    seconds: float
    cpu_seconds: float

    @property
    def steps_per_s(self) -> float:
        return self.env_steps / self.seconds if self.seconds > 0 else float("nan")

    @property
    def steps_per_cpu_s(self) -> float:
        return self.env_steps / self.cpu_seconds if self.cpu_seconds > 0 else float("nan")


def process_cpu_s() -> float:
    """User + system CPU seconds of this process, all threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def check_split(num_envs: int, num_threads: int) -> int:
    """Envs per thread; the trainer's rule: threads must divide the envs."""
    if num_threads < 1 or num_envs < 1 or num_envs % num_threads:
        raise ValueError(f"{counted(num_threads, 'thread')} must divide {counted(num_envs, 'env')}")
    return num_envs // num_threads


def env_blocks(env_id: str, num_envs: int, num_threads: int, seed: int,
               backend: str | None, **make: Any) -> tuple[list[Any], int, int]:
    """The trainer's env blocks, one vector env per thread (`make`: more benchenv.make_env
    arguments): (envs, envs per thread, number of actions)."""
    per_thread = check_split(num_envs, num_threads)
    protocol = benchenv.env_protocol(env_id, backend=backend)
    envs = [benchenv.make_env(env_id, per_thread, seed, first_env_index=i * per_thread,
                              protocol=protocol, **make)
            for i in range(num_threads)]
    return envs, per_thread, int(envs[0].action_space.n)


def _timed_threads(envs: list[Any], body: Callable[[Any, int, Callable[[], Any]], None],
                   env_steps: int) -> Rate:
    """One thread per env object, each running body(env, i, start): warm-up first, then
    start() (a barrier: the clock starts once every thread is there), then the timed
    steps. The rate is `env_steps` over the time to the last thread's end; the envs are
    closed after, and a thread's error raised here."""
    barrier = threading.Barrier(len(envs) + 1)
    ends = [0.0] * len(envs)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            body(envs[i], i, barrier.wait)
            ends[i] = time.perf_counter()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(envs))]
    for t in threads:
        t.start()
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        pass
    start, cpu_start = time.perf_counter(), process_cpu_s()
    for t in threads:
        t.join()
    cpu = process_cpu_s() - cpu_start
    for env in envs:
        env.close()
    if errors:
        raise errors[0]
    return Rate(env_steps, max(ends) - start, cpu)


def raw_env_rate(env_id: str, num_envs: int, num_threads: int, steps_per_thread: int,
                 seed: int = 1, backend: str | None = None) -> Rate:
    """Raw rate of `num_threads` threads x (num_envs / num_threads) envs of `backend`
    (default: benchenv.default_backend), each thread `steps_per_thread` steps of its whole
    block, random actions."""
    envs, per_thread, num_actions = env_blocks(env_id, num_envs, num_threads, seed, backend)

    def body(env: Any, i: int, start: Callable[[], Any]) -> None:
        # actions drawn up front: the raw rate pays for nothing but env.step
        actions = np.random.default_rng(i).integers(
            0, num_actions, (WARMUP_STEPS + steps_per_thread, per_thread), dtype=np.int32)
        env.reset()
        for t in range(WARMUP_STEPS):
            env.step(actions[t])
        start()
        for t in range(WARMUP_STEPS, WARMUP_STEPS + steps_per_thread):
            env.step(actions[t])

    return _timed_threads(envs, body, num_envs * steps_per_thread)


def envpool_async_rate(env_id: str, num_envs: int, num_threads: int, steps_per_thread: int,
                       seed: int = 1) -> Rate:
    """Raw rate of `num_threads` threads, each with one EnvPool of num_envs / num_threads
    envs used asynchronously (batch_size half of them: send/recv), random actions; steps
    counted as env steps, `steps_per_thread` x its envs per thread."""
    per_thread = check_split(num_envs, num_threads)
    if per_thread % 2:
        raise ValueError(f"the async pool's batch is half a thread's envs: "
                         f"{counted(per_thread, 'env')} per thread is odd")
    batch = per_thread // 2
    envs, _, num_actions = env_blocks(env_id, num_envs, num_threads, seed, "envpool",
                                      batch_size=batch)
    # recvs: each returns one batch (half the envs), so 2 per step of the thread's envs
    warmup, timed = 2 * WARMUP_STEPS, 2 * steps_per_thread

    def body(env: Any, i: int, start: Callable[[], Any]) -> None:
        actions = np.random.default_rng(i).integers(0, num_actions, (warmup + timed, batch),
                                                    dtype=np.int32)
        env.async_reset()
        for t in range(warmup + timed):
            if t == warmup:
                start()
            *_, info = env.recv()
            env.send(actions[t], info["env_id"])
        env.recv()  # the last batch sent

    return _timed_threads(envs, body, num_envs * steps_per_thread)


def actor_loop_rate(env_id: str, num_envs: int, num_threads: int, num_steps: int,
                    rollouts: int, seed: int = 1, warmup_rollouts: int = WARMUP_ROLLOUTS,
                    backend: str | None = None, actor_mode: str = "serial") -> Rate:
    """Rate of the trainer's actor threads with a no-op forward pass in the steady state:
    env steps of rollouts `warmup_rollouts` + 1 .. `rollouts` over the time between the main
    thread holding every thread's rollout `warmup_rollouts` and holding every thread's last.
    The warm-up covers the policy step's compilation (rollout 1) and the first allocation of
    the rollout buffers a training run reuses from then on (cleanba/core/rollout_buffers.py)."""

    check_split(num_envs, num_threads)
    if warmup_rollouts < 1 or rollouts <= warmup_rollouts:
        raise ValueError(f"need rollouts > warmup_rollouts >= 1 (the first one compiles), "
                         f"got {rollouts} and {warmup_rollouts}")
    preset = ppo.PRESETS["atari" if benchenv.is_atari(env_id) else "cartpole"][1]
    # async: actors never wait for a learner (there is none); one CPU/GPU device, like a0-l0
    config = dataclasses.replace(
        preset, env_id=env_id, num_envs=num_envs, num_steps=num_steps,
        num_actor_threads=num_threads, architecture="async", seed=seed,
        total_timesteps=num_envs * num_steps * rollouts, actor_device_ids=(0,),
        learner_device_ids=(0,), progress_interval_s=0.0,
        env_backend=backend or benchenv.default_backend(),  # type: ignore[arg-type]
        actor_mode=actor_mode,  # type: ignore[arg-type]
    )
    control = Control()
    prep = prepare(config, ppo.make_algorithm, ppo.SYSTEM)
    ctx, _, _ = make_context(config, prep, control,
                             actor_forward=actor_hook.noop_forward(prep.checked.env.num_actions))
    rate, _ = timed_rollouts(ctx, control, warmup_rollouts, rollouts - warmup_rollouts,
                             num_envs * num_steps)
    return rate


def timed_rollouts(ctx: Any, control: Control, warmup: int, timed: int,
                   steps_per_round: int) -> tuple[Rate, list[Any]]:
    """The actor loop's own harness (`actor_loop_rate`, cleanba.speed_bound's actor alone):
    start `ctx`'s actor threads, take `warmup` rounds of rollouts (every thread's, in thread
    order) as a learner would, then time `timed` more rounds by the wall clock and the
    process's CPU time; stop the threads and raise an actor's error. Returns the rate
    (`steps_per_round` env steps a round) and the last round's rollouts."""
    threads = actor_threads(ctx)
    for t in threads:
        t.start()
    last: list[Any] = []
    first = cpu_first = end = cpu_end = float("nan")
    try:
        for _ in range(warmup):
            last = [control.get(q) for q in ctx.rollout_queues]
        first, cpu_first = time.perf_counter(), process_cpu_s()
        for _ in range(timed):
            last = [control.get(q) for q in ctx.rollout_queues]
        end, cpu_end = time.perf_counter(), process_cpu_s()
    except Stopped:
        pass  # an actor failed: its error is raised below
    finally:
        stop_threads(control, threads)
    return Rate(steps_per_round * timed, end - first, cpu_end - cpu_first), last


def stop_threads(control: Control, threads: list[threading.Thread]) -> None:
    """Stop a measurement's threads, wait for them, and raise the error one of them hit."""
    control.stop.set()
    for t in threads:
        t.join(timeout=60)
    if control.error is not None:
        raise control.error
