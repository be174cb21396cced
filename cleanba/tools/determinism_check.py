"""What bit-identity can this hardware promise? `python -m cleanba.determinism_check`.

Runs one short `--deterministic` configuration twice on the first layout and once on each
other layout the devices allow (on CPU also `a0-l0-d2`, two processes), compares the params checksums update by update and prints
one tier (docs/deterministic.md, "Checking your hardware"):

- "bitwise across layouts": every run gives the same checksums;
- "bitwise run to run only (layouts differ from update N)";
- "not bitwise (run to run differs from update N)".

with the facts the tier depends on, those every run's manifest records in its
`determinism` block (cleanba.core.records.determinism_facts): device kind, jax/jaxlib
versions, XLA_FLAGS, the instruction-set cap and the default matmul precision. Also
`python -m harness determinism-check`. Exit 0 when the check ran (whatever the tier), 1 when a run
failed, 2 on bad arguments.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cleanba.core.xla_flags import (
    CPU_CONV_FLAG,
    GPU_DETERMINISM_FLAG,
    with_device_count,
    with_flag,
)
from runrecord.cli_help import parse_config
from runrecord.exits import EXIT_FAILED, EXIT_OK
from runrecord.provenance import free_port

# (name, actor device ids, learner device ids, processes); the first is run twice. The
# two processes of d2 (jax.distributed on localhost) run on CPU only: on one GPU they
# would share it.
LAYOUTS = (("a0-l0-d1", "0", "0", 1), ("a0-l1-d1", "0", "1", 1), ("a0-l0,1-d1", "0", "0 1", 1),
           ("a0,1-l2,3-d1", "0 1", "2 3", 1), ("a0-l0-d2", "0", "0", 2))
Layout = tuple[str, str, str, int]
# Short configurations (the acceptance test's): 4 env groups / 2 for the 4-env Breakout.
CONFIGS = {
    "cartpole": ("cartpole", ["--num-envs", "8", "--num-steps", "16", "--num-minibatches", "2",
                              "--total-timesteps", str(8 * 16 * 4)]),
    "breakout": ("atari", ["--env-id", "Breakout-v5", "--num-envs", "4", "--num-steps", "8",
                           "--num-minibatches", "2", "--total-timesteps", str(4 * 8 * 3),
                           "--deterministic-groups", "2"]),
}
BITWISE = "bitwise across layouts"


@dataclass
class CheckConfig:
    """Determinism check: which tier of bit-identity this machine gives."""

    algorithm: Literal["ppo", "impala"] = "ppo"
    """Trainer to check."""
    config: Literal["cartpole", "breakout"] = "cartpole"
    """cartpole: the MLP (seconds per run on CPU); breakout: the IMPALA ResNet."""
    seed: int = 3
    """Seed of every run."""
    cpu_devices: int = 4
    """On CPU, the virtual host devices of every run (XLA's split of work over threads
    depends on it, so all runs get the same count)."""
    out_dir: str = ""
    """Where the runs' records go (default: a new temporary folder)."""


def first_difference(a: list[str], b: list[str]) -> int | None:
    """1-based update number of the first differing checksum (or length), None if equal."""
    for i, (x, y) in enumerate(zip(a, b, strict=False), start=1):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b)) + 1


def tier(reference: list[str], repeat: list[str], layouts: dict[str, list[str]]) -> str:
    """The tier line from the checksums of the reference run, its repeat (same layout) and
    one run per other layout."""
    n = first_difference(reference, repeat)
    if n is not None:
        return f"not bitwise (run to run differs from update {n})"
    diffs = [d for d in (first_difference(reference, c) for c in layouts.values()) if d]
    if diffs:
        return f"bitwise run to run only (layouts differ from update {min(diffs)})"
    return BITWISE


def config_groups(args: list[str]) -> int:
    """--deterministic-groups of a configuration's flags (the trainers' default if absent)."""
    from cleanba.core.config import CommonConfig

    flag = "--deterministic-groups"
    return int(args[args.index(flag) + 1]) if flag in args else CommonConfig.deterministic_groups


def facts(groups: int) -> dict[str, str]:
    """What the tier depends on, as every run's manifest records it (the `determinism`
    block of cleanba.core.records.determinism_facts), read in this process: JAX starts here on
    the default backend the trainers use, with the runs' XLA_FLAGS."""
    from cleanba.core.records import determinism_facts

    block = determinism_facts(True, groups)
    if block["default_matmul_precision"] is None:
        block["default_matmul_precision"] = "backend default (TF32 on A100/H100 GPUs)"
    return {key: "none" if value is None else str(value) for key, value in block.items()}


def checksums(run_dir: Path) -> list[str]:
    with open(run_dir / "updates.csv", newline="") as f:
        return [row["params_checksum"] for row in csv.DictReader(f)]


def available(layouts: tuple[Layout, ...], devices: int, platform: str) -> list[Layout]:
    """The layouts whose device ids exist (`devices` per process); d2 on CPU only."""
    return [lay for lay in layouts
            if max(int(i) for i in f"{lay[1]} {lay[2]}".split()) < devices
            and (lay[3] == 1 or platform == "cpu")]


def run_layout(cfg: CheckConfig, layout: Layout, run_dir: Path,
               env: dict[str, str]) -> list[str] | None:
    _, actors, learners, processes = layout
    preset, args = CONFIGS[cfg.config]
    flags = [*args, "--deterministic", "--seed", str(cfg.seed), "--num-actor-threads", "1",
             "--progress-interval-s", "0", "--actor-device-ids", *actors.split(),
             "--learner-device-ids", *learners.split(), "--run-dir", str(run_dir)]
    if cfg.algorithm == "ppo":
        flags += ["--update-epochs", "2"]
    command = [sys.executable, "-m", f"cleanba.{cfg.algorithm}", preset, *flags]
    if processes > 1:
        command += ["--distributed", "--coordinator-address", f"127.0.0.1:{free_port()}",
                    "--num-processes", str(processes)]
    procs = [subprocess.Popen([*command, *(["--process-id", str(i)] if processes > 1 else [])],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True) for i in range(processes)]
    errors = [p.communicate()[1] for p in procs]
    for p, err in zip(procs, errors, strict=True):
        if p.returncode != 0:
            print(f"run {run_dir.name} failed (exit {p.returncode}):\n{err[-2000:]}",
                  file=sys.stderr)
            return None
    return checksums(run_dir)


def check(cfg: CheckConfig) -> int:
    env = dict(os.environ)
    # The trainers add their CPU convolution flag and (--deterministic) the GPU one
    # themselves; added here too, the facts printed below are what the runs' manifests hold.
    env["XLA_FLAGS"] = with_device_count(env.get("XLA_FLAGS", ""), cfg.cpu_devices)
    for flag in (CPU_CONV_FLAG, GPU_DETERMINISM_FLAG):
        env["XLA_FLAGS"] = with_flag(env["XLA_FLAGS"], flag)
    os.environ["XLA_FLAGS"] = env["XLA_FLAGS"]  # this process reports the runs' flags
    info = facts(config_groups(CONFIGS[cfg.config][1]))
    devices = int(info["device_count"])
    layouts = available(LAYOUTS, devices, info["platform"])
    out = Path(cfg.out_dir or tempfile.mkdtemp(prefix="determinism-check-"))
    runs: dict[str, list[str]] = {}
    for name, layout in [("reference", layouts[0]), ("repeat", layouts[0]),
                         *[(lay[0], lay) for lay in layouts[1:]]]:
        got = run_layout(cfg, layout, out / name, env)
        if got is None:
            return EXIT_FAILED
        runs[name] = got
        print(f"  {name:14s} {layout[0]:14s} {' '.join(c[:8] for c in got)}", flush=True)
        if name == "repeat" and first_difference(runs["reference"], got) is not None:
            break  # run to run differs: the tier is decided, the other layouts cannot change it
    reference, repeat = runs.pop("reference"), runs.pop("repeat")
    print(f"tier: {tier(reference, repeat, runs)}")
    for key, value in info.items():
        print(f"  {key}: {value}")
    skipped = [lay[0] for lay in layouts[1:] if lay[0] not in runs]
    print(f"  layouts: {', '.join(lay[0] for lay in layouts)}"
          + (f" ({', '.join(skipped)} not run: run to run already differs)" if skipped else "")
          + f"; records in {out}")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    return check(parse_config(CheckConfig, args=argv,
                          description=__doc__.split("\n\n")[0], decides=True))

