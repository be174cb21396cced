"""The actor modes against EnvPool's raw rate, synchronous and asynchronous, per setting
(cleanba.tools.throughput):

- raw sync: one EnvPool per actor thread, stepped whole (what the serial actor can reach);
- raw halves: each thread's envs as two pools, each stepped by its own thread (the env
  side of `--actor-mode double-buffer`);
- raw async: one EnvPool per thread used with send/recv on batches of half its envs;
- the trainer's actor loop with a no-op forward pass, in each `--actor-mode`.

    python benchmarks/bench_actor_modes.py                     # Breakout, 8x1 32x1 128x1
    python benchmarks/bench_actor_modes.py --grid 128x2 --repeats 3 --json out.json

Each setting alternates the measurements `--repeats` times (so load from other jobs falls
on all alike) and prints the median of each: steps per wall-clock second, and per
CPU-second of the whole process (what the work costs, which the load barely moves), with
the load average. Prints; asserts nothing (docs/performance.md, "The actor modes on this
CPU").
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import benchenv  # noqa: E402
from cleanba.core.config import ACTOR_MODES  # noqa: E402
from cleanba.core.xla_flags import apply_cpu_conv_flag  # noqa: E402
from runrecord.cli_help import parse_config  # noqa: E402

RAW = ("raw sync", "raw halves", "raw async")


def measure(env_id: str, envs: int, threads: int, steps: int, num_steps: int,
            repeats: int) -> dict[str, tuple[float, float]]:
    """(median steps/s, median steps/CPU-s) of each raw use and each actor mode."""
    from cleanba.tools import throughput as tp

    per_thread = max(1, steps // envs)
    rollouts = tp.WARMUP_ROLLOUTS + max(1, -(-steps // (envs * num_steps)))
    runs: dict[str, Callable[[], tp.Rate]] = {
        "raw sync": lambda: tp.raw_env_rate(env_id, envs, threads, per_thread,
                                            backend="envpool"),
        "raw halves": lambda: tp.raw_env_rate(env_id, envs, 2 * threads, per_thread,
                                              backend="envpool"),
        "raw async": lambda: tp.envpool_async_rate(env_id, envs, threads, per_thread),
    }
    for mode in ACTOR_MODES:
        runs[f"actor {mode}"] = functools.partial(
            tp.actor_loop_rate, env_id, envs, threads, num_steps, rollouts, backend="envpool",
            actor_mode=mode)
    seen: dict[str, list[tuple[float, float]]] = {k: [] for k in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            rate = run()
            seen[name].append((rate.steps_per_s, rate.steps_per_cpu_s))
    return {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
            for k, v in seen.items()}


@dataclass
class BenchConfig:
    """The actor modes against EnvPool's raw rate, sync and async, same envs and threads."""

    env_id: str = "Breakout-v5"
    """Atari game (EnvPool id)."""
    grid: tuple[str, ...] = ("8x1", "32x1", "128x1")
    """Settings as ENVSxTHREADS (envs per thread even: the modes split them in halves)."""
    steps: int = 8192
    """Timed env steps per measurement."""
    num_steps: int = 64
    """Rollout length of the actor loop."""
    repeats: int = 2
    """Alternated repeats per setting (the median is printed)."""
    json: Path | None = None
    """Also write the figures here (JSON)."""


def main(argv: list[str] | None = None) -> int:
    args = parse_config(BenchConfig, args=argv)
    benchenv.check_backend("envpool")
    apply_cpu_conv_flag()
    rows = {}
    print(f"{args.env_id}: envpool {benchenv.backend_version('envpool')}; {os.cpu_count()} "
          f"CPUs; median of {args.repeats} alternated repeats of {args.steps} steps; the "
          "actor loops with a no-op forward pass\n")
    print("| envs x threads | what | steps/s | steps/CPU-s | / raw sync (wall) "
          "| / raw sync (CPU) | load (1 min) |")
    print("|---|---|---|---|---|---|---|")
    for g in args.grid:
        envs, threads = (int(x) for x in g.split("x"))
        result = measure(args.env_id, envs, threads, args.steps, args.num_steps, args.repeats)
        load = os.getloadavg()[0]
        rows[g] = {"figures": result, "load_1min": load}
        base_wall, base_cpu = result["raw sync"]
        for name, (wall, cpu) in result.items():
            print(f"| {g} | {name} | {wall:,.0f} | {cpu:,.0f} | {wall / base_wall:.2f} | "
                  f"{cpu / base_cpu:.2f} | {load:.1f} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
