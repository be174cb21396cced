"""Throughput of the baselines beside ours, like for like; prints SPS and the ratios.

    python -m baselines.bench --torchbeast-path ~/src/torchbeast --moolib-path ~/src/moolib

Runs cleanba-impala, monobeast-impala and moolib-impala one after the other in one
invocation, on one setting: Breakout-v5, the IMPALA ResNet (16-32-32, 256) for all three,
8 envs, unroll 20, one gradient step per 8 trajectories (160 steps per update), the same
step budget, CPU unless --use-cuda. A system whose checkout is not given is left out
(said so). Prints, per system: the network it ran (from its record), mean SPS over the
whole run (start-up included), steady SPS from the first to the last update in
updates.csv, and both as a ratio to cleanba-impala's. Records go to
--results-root/bench/runs/.

Settings that stay each system's own: cleanba-impala's actor threads and learner
(--architecture cleanba), monobeast's 2 learner threads and one process per env, moolib's
2 env batches stepped by --num-actor-cpus processes; moolib's network is its example's
Net, the same ResNet whose heads also see the last action and reward (+361 parameters).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runrecord import load_run
from runrecord.cli_help import parse_config

SYSTEMS = ("cleanba-impala", "monobeast-impala", "moolib-impala")
REFERENCE = "cleanba-impala"


@dataclass
class Args:
    """Measure cleanba-impala, monobeast-impala and moolib-impala SPS on one IMPALA setting."""

    torchbeast_path: Path | None = None
    """torchbeast checkout (default: $TORCHBEAST_PATH; monobeast left out when neither is set)"""
    moolib_path: Path | None = None
    """moolib checkout (default: $MOOLIB_PATH; moolib left out when neither is set)"""
    env_id: str = "Breakout-v5"
    """EnvPool Atari id"""
    seed: int = 1
    """run seed"""
    num_envs: int = 8
    """envs of every system (monobeast: actors; moolib: 2 batches of num_envs / 2), and
    trajectories per update"""
    num_steps: int = 20
    """unroll length"""
    total_timesteps: int = 8_000
    """agent steps of each run"""
    num_actor_cpus: int = 2
    """moolib env worker processes"""
    use_cuda: bool = False
    """let the baselines use a GPU when torch sees one"""
    results_root: Path | None = None
    """where the records go (default: a temporary folder)"""


def commands(args: Args) -> dict[str, list[str] | None]:
    """name -> command without --run-dir, or None when the system's checkout is not given."""
    torchbeast = args.torchbeast_path or os.environ.get("TORCHBEAST_PATH")
    moolib = args.moolib_path or os.environ.get("MOOLIB_PATH")
    shared = ["--env-id", args.env_id, "--seed", str(args.seed), "--num-envs", str(args.num_envs),
              "--num-steps", str(args.num_steps), "--total-timesteps", str(args.total_timesteps)]
    baseline = [*shared, "--batch-size", str(args.num_envs),
                "--use-cuda" if args.use_cuda else "--no-use-cuda"]
    py = sys.executable
    return {
        # One gradient step per batch of num_envs x num_steps, as the baselines take.
        "cleanba-impala": [py, "-m", "cleanba.impala", "atari", *shared, "--num-minibatches", "1"],
        "monobeast-impala": None if not torchbeast else [
            py, "-m", "baselines.monobeast", "--torchbeast-path", str(torchbeast), *baseline,
            "--network", "impala-resnet"],
        "moolib-impala": None if not moolib else [
            py, "-m", "baselines.moolib", "--moolib-path", str(moolib), *baseline,
            "--num-actor-batches", "2", "--num-actor-cpus", str(args.num_actor_cpus)],
    }


def network_of(manifest: dict[str, Any]) -> str:
    """The network a record ran, in words."""
    hp = manifest.get("hyperparameters", {})
    system = manifest.get("system")
    if system == "monobeast-impala":
        return str(hp.get("network", "atarinet"))  # records from before the flag: AtariNet
    if system == "moolib-impala":
        return "impala-resnet (moolib's Net)"
    if "channels" in hp:
        return f"impala-resnet {'-'.join(str(c) for c in hp['channels'])}/{hp.get('hidden')}"
    return "?"


def sps_of(run_dir: Path) -> tuple[float, float]:
    """(mean SPS of the whole run, SPS between the first and the last update)."""
    run = load_run(run_dir)
    up = run.updates
    mean = float(run.manifest["summary"]["mean_sps"])
    if len(up) < 2:
        return mean, float("nan")
    steps = float(up["env_steps"][-1] - up["env_steps"][0])
    secs = float(up["wall_time_s"][-1] - up["wall_time_s"][0])
    return mean, steps / secs


def ratios(sps: dict[str, tuple[float, float]], reference: str = REFERENCE) -> dict[str, tuple[float, float]]:
    """Each system's (mean, steady) SPS divided by the reference system's (nan without it)."""
    ref = sps.get(reference, (math.nan, math.nan))
    return {name: (m / ref[0] if ref[0] else math.nan, s / ref[1] if ref[1] else math.nan)
            for name, (m, s) in sps.items()}


def main(argv: list[str] | None = None) -> int:
    args = parse_config(Args, args=argv, prog="python -m baselines.bench")
    root = args.results_root or Path(tempfile.mkdtemp(prefix="baselines-bench-"))
    print(f"{args.env_id}, {args.num_envs} envs x unroll {args.num_steps}, one update per "
          f"{args.num_envs * args.num_steps} steps, {args.total_timesteps} steps per run, "
          f"{'CUDA when available' if args.use_cuda else 'CPU'}; records in {root}", flush=True)
    sps: dict[str, tuple[float, float]] = {}
    networks: dict[str, str] = {}
    for name, base_cmd in commands(args).items():
        if base_cmd is None:
            print(f"{name}: left out (no checkout given)", flush=True)
            continue
        run_dir = root / "bench" / "runs" / name
        r = subprocess.run([*base_cmd, "--run-dir", str(run_dir)], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"{name}: exit {r.returncode}: {r.stderr.strip().splitlines()[-1:]}", flush=True)
            continue
        sps[name] = sps_of(run_dir)
        networks[name] = network_of(load_run(run_dir).manifest)
        print(f"{name}: done, {sps[name][0]:.1f} SPS", flush=True)
    rel = ratios(sps)
    print(f"\n{'system':17} {'network':30} {'mean SPS':>9} {'steady SPS':>11} "
          f"{'mean/ours':>10} {'steady/ours':>12}")
    for name, (mean, steady) in sps.items():
        print(f"{name:17} {networks[name]:30} {mean:9.1f} {steady:11.1f} "
              f"{rel[name][0]:10.2f} {rel[name][1]:12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
