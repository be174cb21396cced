"""What bounds the trainer's speed: `python -m cleanba.speed_bound [--algorithm ppo] [--
atari --env-id Breakout-v5 ...]`.

Three measurements of one run configuration (the trainer's own preset and flags), each
through the trainer's own loops, in one process:

- **actor alone**: the real actor threads with the real forward pass, and no learner (the
  main thread takes every thread's rollout, in thread order, and drops it; architecture
  async, so no actor waits for parameters); env steps per second after WARMUP_ROLLOUTS
  rollouts per thread (compilation, the rollout memory's first allocation);
- **learner alone**: the real learner loop fed the same recorded rollouts (the actors'
  last) again and again; the batch over the median seconds of an update after the first
  (which compiles);
- **both together**: the real run (the configured architecture, cleanba by default) with
  its actor and learner threads; steady SPS from the end of update WARMUP_UPDATES to the
  last (as benchmarks/gpu_suite.py and the run records measure it).

Alone and together, where an actor step's time goes (cleanba.core.actor_clock: param
wait, policy dispatch, policy result, env step, obs transfer, bookkeeping, rollout put),
in ms per step and share, and the learner's seconds per update: the stage that slows down
together, and the phase in it, show what the overlap costs.

The bound is min(actor alone, learner alone): the pipeline cannot go faster than its
slower stage. The share is together / bound: 1.0 means the two stages overlap perfectly,
less means they wait for each other (or, on a CPU, compete for its cores). The goal:
share >= 0.9 on a GPU at the paper's settings.
"""

from __future__ import annotations

import dataclasses
import json
import resource
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import tyro

from cleanba import impala, ppo
from cleanba.core.actor_clock import breakdown_text, phase_breakdown
from cleanba.core.control import Control, Stopped
from cleanba.core.learner import learner_loop
from cleanba.core.runtime import actor_threads, make_context, prepare
from cleanba.core.xla_flags import apply_cpu_conv_flag
from cleanba.tools.throughput import WARMUP_ROLLOUTS, stop_threads, timed_rollouts
from runrecord.cli_help import parse_config
from runrecord.exits import EXIT_BAD_INPUT

WARMUP_UPDATES = 2  # updates before the together window (compilation, the queue-of-one start)
ALGORITHMS = {"ppo": ppo, "impala": impala}


@dataclass
class SpeedBoundConfig:
    """Actor alone, learner alone, both together (module doc)."""

    algorithm: Literal["ppo", "impala"] = "ppo"
    """Which trainer."""
    trainer_args: tyro.conf.Positional[tuple[str, ...]] = ("atari",)
    """The trainer's preset and flags, as `python -m cleanba.<algorithm>` takes them, after
    `--` (e.g. -- atari --env-id Breakout-v5 --num-envs 8 --num-actor-threads 1; add
    --actor-mode double-buffer to measure that actor mode)."""
    rollouts: int = 3
    """Rollouts per actor thread timed alone (after the warm-up ones)."""
    updates: int = 3
    """Updates timed alone (after the first)."""
    together_updates: int = 8
    """Updates of the together run (the first WARMUP_UPDATES left out); 0: not measured."""
    json_out: Path | None = None
    """Also write the figures to this JSON file."""


def trainer_config(cfg: SpeedBoundConfig) -> Any:
    module = ALGORITHMS[cfg.algorithm]
    return tyro.extras.overridable_config_cli(module.PRESETS, args=list(cfg.trainer_args),
                                              prog=f"python -m cleanba.{cfg.algorithm}")


def _context(cfg: SpeedBoundConfig, config: Any, updates: int, **changes: Any):
    module = ALGORITHMS[cfg.algorithm]
    batch = config.num_envs * config.num_steps
    config = dataclasses.replace(config, total_timesteps=batch * updates,
                                 progress_interval_s=0.0, **changes)
    prep = prepare(config, module.make_algorithm, module.SYSTEM)
    control = Control()
    ctx, mesh, state = make_context(config, prep, control)
    return ctx, mesh, state, control, prep.plan


def actor_alone(cfg: SpeedBoundConfig, config: Any) -> tuple[dict[str, Any], list[Any]]:
    """Env steps per second of the actor threads with nobody else working, and every
    thread's last rollout (the learner-alone batch)."""
    total = WARMUP_ROLLOUTS + cfg.rollouts
    ctx, _, _, control, plan = _context(cfg, config, total, architecture="async")
    rate, last = timed_rollouts(ctx, control, WARMUP_ROLLOUTS, cfg.rollouts,
                                plan.local_num_envs * plan.num_steps)
    phases = phase_breakdown(ctx.timing, WARMUP_ROLLOUTS * len(ctx.rollout_queues),
                             plan.num_steps)
    return {"sps": rate.steps_per_s, "seconds": rate.seconds, "env_steps": rate.env_steps,
            "actor_step": phases}, last


def learner_alone(cfg: SpeedBoundConfig, config: Any, rollouts: list[Any]) -> dict[str, float]:
    """Batch / median seconds per update of the learner loop on fixed rollouts."""
    # async: publishing parameters never waits for an actor (there is none)
    ctx, mesh, state, control, plan = _context(cfg, config, 1 + cfg.updates,
                                               architecture="async")

    def feed() -> None:
        try:
            for _ in range(1 + cfg.updates):
                for q, rollout in zip(ctx.rollout_queues, rollouts, strict=True):
                    control.put(q, rollout)
        except Stopped:
            pass

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        learner_loop(ctx, mesh, state)
    finally:
        stop_threads(control, [feeder])
    seconds = float(np.median(ctx.timing["update"][1:]))
    return {"sps": plan.batch_size / seconds, "seconds_per_update": seconds,
            "batch": plan.batch_size}


def together(cfg: SpeedBoundConfig, config: Any) -> dict[str, Any]:
    """Steady SPS of the real run: env steps from the end of update WARMUP_UPDATES to the
    last, over the time between (update ends seen by polling, every 5 ms)."""
    ctx, mesh, state, control, plan = _context(cfg, config, cfg.together_updates)
    threads = [threading.Thread(target=_guarded, args=(control, learner_loop, ctx, mesh, state),
                                daemon=True),
               *actor_threads(ctx)]
    ends: list[float] = []
    for t in threads:
        t.start()
    try:
        while len(ends) < cfg.together_updates and control.error is None:
            if ctx.updates_done > len(ends):
                ends += [time.perf_counter()] * (ctx.updates_done - len(ends))
            time.sleep(0.005)
    finally:
        stop_threads(control, threads)
    window = ends[WARMUP_UPDATES - 1:]
    seconds = window[-1] - window[0]
    actors = len(ctx.rollout_queues)
    return {"sps": plan.batch_size * (len(window) - 1) / seconds, "seconds": seconds,
            "updates_in_window": len(window) - 1, "architecture": config.architecture,
            "host_rollout_sets": max(ctx.host_rollout_sets.values(), default=0),
            # the same phases and update time as alone: what the overlap costs each stage.
            # Rollout WARMUP_UPDATES + 1 still waits for version 1 under cleanba's lag of
            # one, i.e. for the learner's compilation: left out with the ones before it.
            "actor_step": phase_breakdown(ctx.timing, (WARMUP_UPDATES + 1) * actors,
                                          plan.num_steps),
            "seconds_per_update": float(np.median(ctx.timing["update"][WARMUP_UPDATES:]))}


def _guarded(control: Control, fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except Stopped:
        pass
    except BaseException as exc:  # noqa: BLE001 - any failure ends the measurement
        control.fail(exc)


def share(actor_sps: float, learner_sps: float, together_sps: float | None) -> dict[str, Any]:
    """The bound min(actor, learner), which stage sets it, and together / bound."""
    bound = min(actor_sps, learner_sps)
    return {"bound_sps": bound, "bound_by": "learner" if learner_sps <= actor_sps else "actor",
            "share": together_sps / bound if together_sps is not None else None}


def measure(cfg: SpeedBoundConfig) -> dict[str, Any]:
    if min(cfg.rollouts, cfg.updates) < 1 or cfg.together_updates not in range(0, 10**6) \
            or 0 < cfg.together_updates <= WARMUP_UPDATES + 1:
        raise ValueError(f"--rollouts and --updates must be >= 1 and --together-updates 0 or "
                         f">= {WARMUP_UPDATES + 2}")
    config = trainer_config(cfg)
    if config.architecture == "async":
        raise ValueError("--architecture async: the together run needs a learner that "
                         "actors wait for (sync or cleanba)")
    apply_cpu_conv_flag()  # as the trainers do (before the first computation)
    started = time.perf_counter()
    actor, rollouts = actor_alone(cfg, config)
    learner = learner_alone(cfg, config, rollouts)
    del rollouts
    both = together(cfg, config) if cfg.together_updates else None
    figures = {
        "algorithm": cfg.algorithm, "trainer_args": list(cfg.trainer_args),
        "num_envs": config.num_envs, "num_steps": config.num_steps,
        "num_actor_threads": config.num_actor_threads, "env_id": config.env_id,
        "actor_mode": config.actor_mode, "actor_alone": actor, "learner_alone": learner, "together": both,
        **share(actor["sps"], learner["sps"], both["sps"] if both else None),
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2,
        "wall_s": time.perf_counter() - started,
    }
    return figures


def summary(f: dict[str, Any]) -> str:
    both = f["together"]
    line = (f"actor ({f['actor_mode']}) alone {f['actor_alone']['sps']:,.0f} SPS | "
            f"learner alone "
            f"{f['learner_alone']['sps']:,.0f} SPS ({f['learner_alone']['seconds_per_update']:.2f}"
            f" s per update) | bound {f['bound_sps']:,.0f} SPS, set by the {f['bound_by']}")
    if both is not None:
        line += (f" | together ({both['architecture']}) {both['sps']:,.0f} SPS = "
                 f"{f['share']:.2f} of the bound")
    line += f"\nactor step alone: {breakdown_text(f['actor_alone']['actor_step'])}"
    if both is not None:
        line += (f"\nactor step together: {breakdown_text(both['actor_step'])}"
                 f"\nlearner update: alone {f['learner_alone']['seconds_per_update']:.3f} s, "
                 f"together {both['seconds_per_update']:.3f} s")
    return line


def cli() -> dict[str, Any]:
    cfg = parse_config(SpeedBoundConfig, description=__doc__.split("\n\n")[0])
    try:
        figures = measure(cfg)
    except ValueError as exc:  # bad settings (the trainer's own checks' ConfigError too)
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    print(summary(figures), flush=True)
    if cfg.json_out is not None:
        cfg.json_out.write_text(json.dumps(figures, indent=2))
    return figures

