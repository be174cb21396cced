"""Throughput of the baselines beside ours on the IMPALA benchmark setting; prints SPS.

    python -m baselines.bench --torchbeast-path ~/src/torchbeast --moolib-path ~/src/moolib

Runs our cleanba-impala and each available adapter once on Breakout-v5 with 8 envs and
unroll 20 (8 trajectories per update, so 160 steps per update for all three), one after
the other in one invocation, CPU only unless --use-cuda, and prints:
mean SPS over the whole run (start-up included) and steady SPS from the first to the last
update in updates.csv. Records go to --results-root/bench/runs/.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import tyro

from runrecord import load_run


@dataclass
class Args:
    """Measure cleanba-impala, monobeast-impala and moolib-impala SPS on one IMPALA setting."""

    torchbeast_path: Path | None = None
    """torchbeast checkout (default: $TORCHBEAST_PATH; skipped when neither is set)"""
    moolib_path: Path | None = None
    """moolib checkout (default: $MOOLIB_PATH; skipped when neither is set)"""
    env_id: str = "Breakout-v5"
    """EnvPool Atari id"""
    seed: int = 1
    """run seed"""
    num_envs: int = 8
    """envs (monobeast: actors; moolib: 2 batches of num_envs / 2)"""
    num_steps: int = 20
    """unroll length"""
    monobeast_timesteps: int = 20_000
    """agent steps of the monobeast run"""
    moolib_timesteps: int = 10_000
    """agent steps of the moolib run"""
    cleanba_timesteps: int = 8_000
    """agent steps of our cleanba-impala run (0: leave it out)"""
    num_actor_cpus: int = 2
    """moolib env worker processes"""
    use_cuda: bool = False
    """let the baselines use a GPU when torch sees one"""
    results_root: Path | None = None
    """where the records go (default: a temporary folder)"""


def steady_sps(run_dir: Path) -> tuple[float, float]:
    """(mean SPS of the whole run, SPS between the first and the last update)."""
    run = load_run(run_dir)
    up = run.updates
    mean = float(run.manifest["summary"]["mean_sps"])
    if len(up) < 2:
        return mean, float("nan")
    steps = float(up["env_steps"][-1] - up["env_steps"][0])
    secs = float(up["wall_time_s"][-1] - up["wall_time_s"][0])
    return mean, steps / secs


def main(argv: list[str] | None = None) -> int:
    args = tyro.cli(Args, args=argv, prog="python -m baselines.bench")
    root = args.results_root or Path(tempfile.mkdtemp(prefix="baselines-bench-"))
    common = ["--env-id", args.env_id, "--seed", str(args.seed), "--num-steps", str(args.num_steps),
              "--batch-size", str(args.num_envs), "--num-envs", str(args.num_envs),
              "--use-cuda" if args.use_cuda else "--no-use-cuda"]
    def baseline(module: str, flag: str, path: str | Path | None, extra: list[str]):
        return None if not path else [sys.executable, "-m", module, flag, str(path), *common, *extra]

    # name -> command without --run-dir, or None when not available here
    systems: dict[str, list[str] | None] = {
        "cleanba-impala": None if not args.cleanba_timesteps else [
            sys.executable, "-m", "cleanba.impala", "atari", "--env-id", args.env_id,
            "--seed", str(args.seed), "--num-envs", str(args.num_envs),
            "--num-steps", str(args.num_steps), "--total-timesteps", str(args.cleanba_timesteps)],
        "monobeast-impala": baseline(
            "baselines.monobeast", "--torchbeast-path",
            args.torchbeast_path or os.environ.get("TORCHBEAST_PATH"),
            ["--total-timesteps", str(args.monobeast_timesteps)]),
        "moolib-impala": baseline(
            "baselines.moolib", "--moolib-path", args.moolib_path or os.environ.get("MOOLIB_PATH"),
            ["--total-timesteps", str(args.moolib_timesteps), "--num-actor-batches", "2",
             "--num-actor-cpus", str(args.num_actor_cpus)]),
    }
    print(f"{'system':18} {'mean SPS':>9} {'steady SPS':>11}  record")
    for name, base_cmd in systems.items():
        if base_cmd is None:
            print(f"{name:18} skipped: no checkout given")
            continue
        run_dir = root / "bench" / "runs" / name
        cmd = [*base_cmd, "--run-dir", str(run_dir)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"{name:18} exit {r.returncode}: {r.stderr.strip().splitlines()[-1:]}")
            continue
        mean, steady = steady_sps(run_dir)
        print(f"{name:18} {mean:9.1f} {steady:11.1f}  {run_dir}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
