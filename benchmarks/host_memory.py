"""Host memory of a training run, by where the actors keep their rollouts' observations:

    python benchmarks/host_memory.py [--before DIR] [--modes host device] -- TRAINER ARGS

Runs `python -m cleanba.ppo TRAINER ARGS` (default: Breakout-v5, 32 envs x 128 steps, 2
actor threads, 5 updates) once per mode of CLEANBA_ROLLOUT_OBS (host: reused host memory,
the CPU's default; device: on the actors' devices, the GPU's default), and with --before
(a checkout of an earlier commit, put first on PYTHONPATH) once more as it was, and prints
each run's peak RSS (ru_maxrss of the trainer process) beside the bytes of one actor
thread's observation set. On a CPU the "device" is host memory too, so the device mode
shows what a GPU run no longer holds on its host only through the copies it drops
(docs/performance.md, "Host memory").
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import tyro

from runrecord.cli_help import parse_config

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ARGS = ("atari", "--env-id", "Breakout-v5", "--num-envs", "32", "--num-steps", "128",
                "--num-actor-threads", "2", "--num-minibatches", "4", "--update-epochs", "1",
                "--total-timesteps", str(32 * 128 * 5), "--actor-device-ids", "0",
                "--learner-device-ids", "0", "--deterministic")
ATARI_OBS_BYTES = 84 * 84 * 4


@dataclass
class HostMemoryConfig:
    """Peak host memory per rollout-observation mode (module doc)."""

    trainer_args: tyro.conf.Positional[tuple[str, ...]] = DEFAULT_ARGS
    """`python -m cleanba.ppo` arguments (a preset first)."""
    modes: tuple[str, ...] = ("host", "device")
    """CLEANBA_ROLLOUT_OBS values to run."""
    before: Path | None = None
    """A checkout of an earlier commit to run too (as it was: no mode)."""


def peak_rss(env: dict[str, str], args: tuple[str, ...]) -> tuple[float, float, int]:
    """(peak RSS GiB, wall s, exit code) of one trainer process."""
    run_dir = Path(tempfile.mkdtemp(prefix="host-memory-")) / "run"
    cmd = [sys.executable, "-m", "cleanba.ppo", *args, "--run-dir", str(run_dir),
           "--progress-interval-s", "0"]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, cwd=tempfile.gettempdir(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0 and proc.stderr is not None:
        print(proc.stderr.read().decode()[-2000:], file=sys.stderr)
    return usage.ru_maxrss / 1024**2, time.monotonic() - start, code


def obs_set_mb(args: tuple[str, ...]) -> float:
    """MB of one actor thread's observation set for Atari args ((T + 1) x envs/thread)."""
    def flag(name: str, default: int) -> int:
        return int(args[args.index(name) + 1]) if name in args else default

    envs = flag("--num-envs", 128) // flag("--num-actor-threads", 2)
    return (flag("--num-steps", 128) + 1) * envs * ATARI_OBS_BYTES / 1e6


def main(cfg: HostMemoryConfig) -> None:
    base = {**os.environ, "PYTHONPATH": str(ROOT)}
    runs = [(f"mode {m}", {**base, "CLEANBA_ROLLOUT_OBS": m}) for m in cfg.modes]
    if cfg.before is not None:
        runs.insert(0, (f"before ({cfg.before})", {**base, "PYTHONPATH": str(cfg.before)}))
    print(f"one actor thread's observation set: {obs_set_mb(cfg.trainer_args):.1f} MB; "
          f"load {os.getloadavg()[0]:.1f}")
    for name, env in runs:
        rss, wall, code = peak_rss(env, cfg.trainer_args)
        print(f"{name}: peak RSS {rss:.3f} GiB, {wall:.0f} s, exit {code}", flush=True)


if __name__ == "__main__":
    main(parse_config(HostMemoryConfig, description=__doc__.split("\n\n")[0]))
