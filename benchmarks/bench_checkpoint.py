"""What checkpoints cost: seconds per checkpoint and their share of training
time, the size of one checkpoint and the disk a run keeps, and the cost of the env-state
path (every env re-seeded at each checkpoint boundary: EnvPool cannot restore an env).

    python benchmarks/bench_checkpoint.py                      # CartPole PPO and IMPALA
    python benchmarks/bench_checkpoint.py --games CartPole-v1 Breakout-v5 --updates 12

Each case runs the real trainer twice with the same flags, with and without
`--checkpoint-every C`, and reads the checkpoints' sizes and times from the trainer's own
lines (`[cleanba] checkpoint after update K: ... (B bytes, T s)`) and the training time
from updates.csv (wall_time_s of the last update). The share is the checkpoints' seconds
over the run's training seconds; the difference between the two runs' training times
also holds the re-seeding and the load's noise, and is printed beside it. The re-seed is
timed on its own: `benchenv.make_env` and `reset` of the thread's envs, as the actor does
at each boundary. Prints; asserts nothing (docs/performance.md).
"""

from __future__ import annotations

import csv
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import benchenv  # noqa: E402
from runrecord.cli_help import parse_config  # noqa: E402

CHECKPOINT_LINE = re.compile(r"\[cleanba\] checkpoint after update (\d+): \S+ \(([\d,]+) bytes, "
                             r"([\d.]+) s\)")
# Small but real settings per game: the networks are the trainer's own (an MLP for
# CartPole, the IMPALA ResNet for Atari), so a checkpoint's size is the real one.
PRESETS = {"CartPole-v1": ("cartpole", ["--num-envs", "8", "--num-steps", "16",
                                       "--num-minibatches", "2"]),
           "Breakout-v5": ("atari", ["--num-envs", "8", "--num-steps", "32",
                                     "--num-minibatches", "2"])}
ALGORITHM_FLAGS = {"ppo": ["--update-epochs", "1"], "impala": []}  # one pass: CPU minutes


@dataclass
class BenchConfig:
    """Checkpoint cost, size and the env re-seed, per game and algorithm."""

    games: tuple[str, ...] = ("CartPole-v1",)
    """Games (CartPole-v1, Breakout-v5)."""
    algorithms: tuple[str, ...] = ("ppo", "impala")
    """Trainers."""
    updates: int = 24
    """Updates per run."""
    every: int = 4
    """--checkpoint-every C of the run with checkpoints."""
    json: Path | None = None
    """Also write the figures here (JSON)."""


def run(algorithm: str, game: str, updates: int, every: int, workdir: Path
        ) -> dict[str, float]:
    preset, flags = PRESETS[game]
    envs, steps = int(flags[1]), int(flags[3])
    run_dir = workdir / f"{algorithm}-{game}-{every}"
    cmd = [sys.executable, "-m", f"cleanba.{algorithm}", preset, "--env-id", game,
           "--total-timesteps", str(envs * steps * updates), "--num-actor-threads", "1",
           "--actor-device-ids", "0", "--learner-device-ids", "0", "--deterministic",
           "--run-dir", str(run_dir), "--progress-interval-s", "0", *flags,
           *ALGORITHM_FLAGS[algorithm]]
    if every:
        cmd += ["--checkpoint-every", str(every)]
    env = {**os.environ, "WANDB_MODE": "offline", "PYTHONPATH": str(ROOT)}
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{p.stderr[-2000:]}")
    found = [(int(k), int(b.replace(",", "")), float(s))
             for k, b, s in CHECKPOINT_LINE.findall(p.stdout + p.stderr)]
    with open(run_dir / "updates.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    kept = sum(f.stat().st_size for f in (run_dir / "checkpoints").rglob("*") if f.is_file()) \
        if (run_dir / "checkpoints").is_dir() else 0
    return {"train_s": float(rows[-1]["wall_time_s"]), "checkpoints": len(found),
            "seconds": sum(s for _, _, s in found),
            "median_s": statistics.median(s for _, _, s in found) if found else 0.0,
            "bytes": found[-1][1] if found else 0, "kept_bytes": kept}


def reseed_seconds(game: str, repeats: int = 3) -> float:
    """Median seconds to make and reset a thread's envs of a fresh segment (the actor's
    work at a checkpoint boundary)."""
    preset, flags = PRESETS[game]
    envs = int(flags[1])
    times = []
    for segment in range(1, repeats + 1):
        t0 = time.perf_counter()
        env = benchenv.make_env(game, envs, 1, segment=segment)
        env.reset()
        times.append(time.perf_counter() - t0)
        env.close()
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    args = parse_config(BenchConfig, args=argv)
    unknown = [g for g in args.games if g not in PRESETS]
    if unknown or args.updates < 2 or not 1 <= args.every < args.updates:
        print(f"error: games must be among {', '.join(PRESETS)} (got {unknown}); --updates "
              ">= 2 and 1 <= --every < --updates", file=sys.stderr)
        return 2
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; {args.updates} updates, "
          f"--checkpoint-every {args.every}, --deterministic, one actor thread\n")
    print("| game | algorithm | checkpoints | s per checkpoint (median) | share of training "
          "| training s without / with | one checkpoint | kept on disk (--checkpoint-keep 2) "
          "| re-seed per thread and boundary |")
    print("|---|---|---|---|---|---|---|---|---|")
    figures = {}
    with tempfile.TemporaryDirectory(prefix="bench-checkpoint-") as tmp:
        for game in args.games:
            reseed = reseed_seconds(game)
            for algorithm in args.algorithms:
                plain = run(algorithm, game, args.updates, 0, Path(tmp))
                ckpt = run(algorithm, game, args.updates, args.every, Path(tmp))
                share = ckpt["seconds"] / ckpt["train_s"] if ckpt["train_s"] else float("nan")
                figures[f"{game}/{algorithm}"] = {"without": plain, "with": ckpt,
                                                  "share": share, "reseed_s": reseed}
                print(f"| {game} | {algorithm} | {ckpt['checkpoints']} | "
                      f"{ckpt['median_s']:.3f} | {share:.1%} | {plain['train_s']:.1f} / "
                      f"{ckpt['train_s']:.1f} | {ckpt['bytes'] / 1e6:.2f} MB | "
                      f"{ckpt['kept_bytes'] / 1e6:.2f} MB | {reseed * 1e3:.1f} ms |",
                      flush=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
