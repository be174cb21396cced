"""Throughput and memory figures of the Cleanba trainers: `python -m cleanba.bench`.

Prints (does not assert):
(a) Breakout-v5, PPO with the IMPALA ResNet, 8 envs x 128 steps, layout a0-l0, for each
    architecture: steady-state SPS (median of the per-update SPS after the first two
    updates, which include compilation) and peak RSS of the training process;
(b) CartPole-v1 PPO (the `cartpole` preset): wall time until the mean return of the last
    20 episodes first reaches 475, and the total wall time;
(c) the overlap ratio of the cleanba architecture: SPS / (batch / max(t_actor, t_learner)),
    with t_actor (one rollout) and t_learner (one update) timed separately, each alone,
    through the trainer's own actor and learner loops (cleanba.speed_bound's actor alone
    and learner alone, without its together run);
(d) the cost of --deterministic: steady SPS with and without it (cleanba architecture) on
    Breakout (as (a)) and on CartPole-v1 PPO (cartpole preset, 64 updates), as a ratio.
The targets (a 2-core machine): Breakout SPS >= 3x the reference Cleanba's
~14 SPS, peak RSS <= 1/4 of its 19.7 GB, CartPole to 475 in under 60 s, overlap >= 0.9.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from runrecord.cli_help import parse_config
from runrecord.words import counted, signed

REFERENCE_SPS = 14.0  # reference Cleanba PPO, 8 envs x 128 steps, one CPU device (measured)
REFERENCE_PEAK_RSS_GB = 19.7


@dataclass
class BenchConfig:
    """What to measure."""

    atari_updates: int = 6
    """Learner updates per Breakout run (the first two are dropped as warm-up)."""
    architectures: tuple[str, ...] = ("sync", "cleanba", "async")
    """Architectures to time on Breakout."""
    cartpole: bool = True
    """Also time CartPole-v1 PPO to a return of 475."""
    overlap: bool = True
    """Also time the actor and the learner alone and print the overlap ratio."""
    timed_steps: int = 3
    """Rollouts / updates timed alone for the overlap ratio (after speed_bound's warm-up)."""
    deterministic: bool = True
    """Also time --deterministic against the default on Breakout and CartPole."""
    json_out: str | None = None
    """Also write the figures to this JSON file."""


BREAKOUT = ["atari", "--env-id", "Breakout-v5", "--num-envs", "8", "--num-steps", "128",
            "--num-actor-threads", "1", "--actor-device-ids", "0", "--learner-device-ids", "0",
            "--progress-interval-s", "0"]


def run_trainer(args: list[str]) -> tuple[Path, float, float]:
    """Run `python -m cleanba.<alg> ...` in a fresh process: (run dir, wall s, peak RSS GB)."""
    run_dir = Path(tempfile.mkdtemp(prefix="cleanba-bench-")) / "run"
    cmd = [sys.executable, "-m", *args, "--run-dir", str(run_dir)]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read() if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err[-2000:]}")
    return run_dir, wall, usage.ru_maxrss / 1024**2  # ru_maxrss is in KiB on Linux


def trainer_sps(args: list[str]) -> tuple[float, float, float]:
    """`run_trainer`'s run, then its steady SPS (the median of the per-update SPS after the
    first two updates, which include compilation); the run's folder is removed:
    (steady SPS, wall s, peak RSS GB)."""
    from runrecord import load_run

    run_dir, wall, rss = run_trainer(args)
    sps = load_run(run_dir).updates["sps"]
    shutil.rmtree(run_dir.parent, ignore_errors=True)
    return float(np.median(sps[2:] if len(sps) > 2 else sps)), wall, rss


def bench_breakout(cfg: BenchConfig) -> dict:
    out = {}
    for arch in cfg.architectures:
        sps, wall, rss = trainer_sps(["cleanba.ppo", *BREAKOUT, "--architecture", arch,
                                      "--total-timesteps", str(8 * 128 * cfg.atari_updates)])
        out[arch] = {"sps": sps, "peak_rss_gb": rss, "wall_s": wall}
        print(f"(a) Breakout-v5 PPO 8x128 a0-l0 {arch:8s}: SPS {sps:6.1f} "
              f"({sps / REFERENCE_SPS:.1f}x reference {REFERENCE_SPS:.0f}) | peak RSS {rss:5.2f} GB "
              f"({rss / REFERENCE_PEAK_RSS_GB:.2f} of reference {REFERENCE_PEAK_RSS_GB} GB) | "
              f"wall {wall:.0f}s", flush=True)
    return out


def bench_cartpole() -> dict:
    from runrecord import load_run

    run_dir, wall, rss = run_trainer(["cleanba.ppo", "cartpole", "--progress-interval-s", "0"])
    e = load_run(run_dir).episodes
    shutil.rmtree(run_dir.parent, ignore_errors=True)
    ret, t = e["episode_return"], e["wall_time_s"]
    reached = next((float(t[i]) for i in range(20, len(ret) + 1) if ret[i - 20:i].mean() >= 475),
                   None)
    final = float(ret[-20:].mean())
    text = f"{reached:.1f}s" if reached is not None else "not reached"
    print(f"(b) CartPole-v1 PPO (cartpole preset): return 475 after {text} of training | "
          f"final mean return (20 eps) {final:.1f} | process wall {wall:.1f}s | peak RSS "
          f"{rss:.2f} GB", flush=True)
    return {"seconds_to_475": reached, "final_return": final, "wall_s": wall, "peak_rss_gb": rss}


def bench_overlap(cfg: BenchConfig, cleanba_sps: float | None) -> dict:
    from cleanba.tools.speed_bound import SpeedBoundConfig, measure

    alone = measure(SpeedBoundConfig(trainer_args=tuple(BREAKOUT), rollouts=cfg.timed_steps,
                                     updates=cfg.timed_steps, together_updates=0))
    batch = 8 * 128
    t_actor = batch / alone["actor_alone"]["sps"]
    t_learner = alone["learner_alone"]["seconds_per_update"]
    ideal = alone["bound_sps"]  # batch / max(t_actor, t_learner)
    line = (f"(c) alone: actor {t_actor:.2f}s/rollout ({batch / t_actor:.0f} SPS), learner "
            f"{t_learner:.2f}s/update ({batch / t_learner:.0f} SPS); ideal overlapped SPS "
            f"{ideal:.1f}")
    out = {"t_actor_s": t_actor, "t_learner_s": t_learner, "ideal_sps": ideal}
    if cleanba_sps is not None:
        out["overlap"] = cleanba_sps / ideal
        line += f" | cleanba SPS {cleanba_sps:.1f} -> overlap ratio {cleanba_sps / ideal:.2f}"
    print(line, flush=True)
    return out


def bench_deterministic(cfg: BenchConfig, plain_breakout_sps: float | None) -> dict:
    breakout = ["cleanba.ppo", *BREAKOUT, "--total-timesteps", str(8 * 128 * cfg.atari_updates)]
    cartpole = ["cleanba.ppo", "cartpole", "--progress-interval-s", "0",
                "--total-timesteps", str(8 * 128 * 64)]
    out = {}
    for name, args, plain in (("breakout", breakout, plain_breakout_sps),
                              ("cartpole", cartpole, None)):
        if plain is None:
            plain, _, _ = trainer_sps(args)
        det, _, rss = trainer_sps([*args, "--deterministic"])
        out[name] = {"sps": plain, "deterministic_sps": det, "ratio": det / plain,
                     "deterministic_peak_rss_gb": rss}
        print(f"(d) {name:8s} PPO cleanba a0-l0: SPS {plain:7.1f} default, {det:7.1f} "
              f"--deterministic ({det / plain:.2f}x; overhead {signed(100 * (plain / det - 1), 0)}% "
              f"time per step)", flush=True)
    return out


def main(cfg: BenchConfig) -> dict:
    import jax

    print(f"cleanba.bench on {counted(os.cpu_count() or 1, 'CPU core')}, jax {jax.__version__}, "
          f"devices {[d.device_kind for d in jax.devices()]}", flush=True)
    figures: dict = {}
    if cfg.architectures:
        figures["breakout"] = bench_breakout(cfg)
    if cfg.cartpole:
        figures["cartpole"] = bench_cartpole()
    if cfg.overlap:
        cleanba_sps = figures.get("breakout", {}).get("cleanba", {}).get("sps")
        figures["overlap"] = bench_overlap(cfg, cleanba_sps)
    if cfg.deterministic:
        plain = figures.get("breakout", {}).get("cleanba", {}).get("sps")
        figures["deterministic"] = bench_deterministic(cfg, plain)
    if cfg.json_out:
        Path(cfg.json_out).write_text(json.dumps(figures, indent=2))
    return figures


def cli() -> dict:
    """`python -m cleanba.bench` (cleanba/bench.py): the flags, then `main`."""
    return main(parse_config(BenchConfig, description=__doc__.split("\n\n")[0]))
