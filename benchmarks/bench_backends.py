"""Speed of the two Atari backends, side by side: the raw env rate and the actor loop
(the trainer's actor threads with a no-op forward pass), with the same envs, the same
Python threads and the same worker threads (cleanba.tools.throughput).

    python benchmarks/bench_backends.py                        # Breakout, 8x1 and 8x2
    python benchmarks/bench_backends.py --grid 8x1 32x2 --repeats 3 --json out.json

Each setting alternates the backends `--repeats` times (so load from other jobs falls on
both alike) and prints the median of each figure: steps per wall-clock second, and per
CPU-second of the whole process (what the work costs, which the load barely moves), with
the load average beside them. Prints; asserts nothing (docs/performance.md).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import benchenv  # noqa: E402
from cleanba.core.xla_flags import apply_cpu_conv_flag  # noqa: E402
from runrecord.cli_help import parse_config  # noqa: E402

BACKENDS = ("envpool", "ale")


def measure(env_id: str, envs: int, threads: int, steps: int, num_steps: int,
            repeats: int) -> dict[str, dict[str, float]]:
    from cleanba.tools.throughput import actor_loop_rate, raw_env_rate

    figures: dict[str, dict[str, list[float]]] = {
        b: {"raw": [], "raw_cpu": [], "actor": [], "actor_cpu": []} for b in BACKENDS}
    rollouts = 2 + max(1, steps // (envs * num_steps))
    for _ in range(repeats):
        for b in BACKENDS:
            raw = raw_env_rate(env_id, envs, threads, steps // envs, backend=b)
            loop = actor_loop_rate(env_id, envs, threads, num_steps, rollouts, backend=b)
            for key, value in (("raw", raw.steps_per_s), ("raw_cpu", raw.steps_per_cpu_s),
                               ("actor", loop.steps_per_s), ("actor_cpu", loop.steps_per_cpu_s)):
                figures[b][key].append(value)
    return {b: {k: statistics.median(v) for k, v in f.items()} for b, f in figures.items()}


@dataclass
class BenchConfig:
    """The raw env rate and the actor loop on EnvPool and ALE, same envs and threads."""

    env_id: str = "Breakout-v5"
    """Atari game (EnvPool id)."""
    grid: tuple[str, ...] = ("8x1", "8x2")
    """Settings as ENVSxTHREADS."""
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
    for b in BACKENDS:
        benchenv.check_backend(b)
    apply_cpu_conv_flag()
    rows = {}
    print(f"{args.env_id}: envpool {benchenv.backend_version('envpool')}, ale-py "
          f"{benchenv.backend_version('ale')}; {os.cpu_count()} CPUs; median of "
          f"{args.repeats} alternated repeats of {args.steps} steps\n")
    print("| envs x threads | backend | raw steps/s | raw steps/CPU-s | actor loop steps/s "
          "| actor loop steps/CPU-s | actor / raw | load (1 min) |")
    print("|---|---|---|---|---|---|---|---|")
    for g in args.grid:
        envs, threads = (int(x) for x in g.split("x"))
        result = measure(args.env_id, envs, threads, args.steps, args.num_steps, args.repeats)
        load = os.getloadavg()[0]
        rows[g] = {**result, "load_1min": load}
        for b, f in result.items():
            print(f"| {g} | {b} | {f['raw']:,.0f} | {f['raw_cpu']:,.0f} | {f['actor']:,.0f} | "
                  f"{f['actor_cpu']:,.0f} | {f['actor'] / f['raw']:.2f} | {load:.1f} |",
                  flush=True)
        ratio = {k: result["ale"][k] / result["envpool"][k] for k in ("raw", "actor")}
        print(f"| {g} | ALE / EnvPool | {ratio['raw']:.2f} | | {ratio['actor']:.2f} | | | |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
