"""Training where EnvPool does not install (macOS, Windows): the `train` extra asks for
EnvPool on Linux only and for ale-py everywhere; without EnvPool the trainers use the ALE
backend and say so at start-up.

- test_train_extra_markers: the extra's environment markers, evaluated for each OS.
- test_trains_breakout_in_a_venv_without_envpool (slow): a venv with the `train` extra's
  packages but EnvPool (what a Mac gets) trains a tiny IMPALA Breakout run end to end on
  ALE with no backend flag, writes a record that names the backend, and refuses the
  CartPole preset (EnvPool's) with a clear error and exit 2. The venv is cached between
  sessions under ~/.cache/cleanba-bench/venvs/, keyed by the Python version and the
  extra's requirements (CLEANBA_BENCH_VENV_CACHE to move it); the checkout runs from
  PYTHONPATH, so a cached venv always trains the code under test.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from harness_cli import ROOT
from packaging.requirements import Requirement
from venv_install import pip_install


def _extra(name: str) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["optional-dependencies"][name]]


def _wanted(requirement: Requirement, platform: str) -> bool:
    marker = requirement.marker
    return marker is None or marker.evaluate({"sys_platform": platform, "extra": "train"})


def test_train_extra_markers():
    for platform, envpool in (("linux", True), ("darwin", False), ("win32", False)):
        names = {r.name for r in _extra("train") if _wanted(r, platform)}
        assert ("envpool" in names) is envpool, (platform, names)
        assert {"ale-py", "jax", "flax", "optax"} <= names, (platform, names)


def _venv_without_envpool() -> tuple[Path, float]:
    """A venv with the core and `train` requirements but EnvPool (cached); seconds spent."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [*project["dependencies"],
            *[str(r) for r in _extra("train") if r.name != "envpool"]]
    key = hashlib.sha256(json.dumps([sys.version, reqs]).encode()).hexdigest()[:16]
    cache = Path(os.environ.get("CLEANBA_BENCH_VENV_CACHE")
                 or Path.home() / ".cache" / "cleanba-bench" / "venvs")
    venv = cache / f"train-without-envpool-{key}"
    python = venv / "bin" / "python"
    if (venv / ".complete").exists():
        return python, 0.0
    start = time.monotonic()
    building = cache / f"{venv.name}.{os.getpid()}.tmp"
    shutil.rmtree(building, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(building)], check=True, timeout=300)
    r = pip_install(building / "bin" / "python", *reqs)
    assert r.returncode == 0, r.stderr[-3000:]
    (building / ".complete").touch()
    # A venv's scripts name its folder, so it is built where it stays: renamed once whole
    # (a rename within one folder keeps bin/python working; pip is only run as a module).
    try:
        building.rename(venv)
    except OSError:  # another session made it meanwhile
        shutil.rmtree(building, ignore_errors=True)
    return python, time.monotonic() - start


@pytest.mark.slow
def test_trains_breakout_in_a_venv_without_envpool(tmp_path):
    python, built_s = _venv_without_envpool()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "offline",
           "WANDB_SILENT": "true", "XLA_FLAGS": "--xla_force_host_platform_device_count=1"}
    probe = subprocess.run([str(python), "-c", "import importlib.util as u, json; print(json.dumps("
                            "[u.find_spec(m) is not None for m in ('envpool', 'ale_py', 'jax')]))"],
                           capture_output=True, text=True, env=env, timeout=120)
    assert json.loads(probe.stdout) == [False, True, True], probe.stderr

    start = time.monotonic()
    run_dir = tmp_path / "run"
    steps = 4 * 32 * 8  # 256 steps per env: random Breakout games end after ~170-250
    p = subprocess.run([str(python), "-m", "cleanba.impala", "atari", "--env-id", "Breakout-v5",
                        "--num-envs", "4", "--num-steps", "32", "--num-actor-threads", "1",
                        "--num-minibatches", "1", "--total-timesteps", str(steps),
                        "--progress-interval-s", "0", "--run-dir", str(run_dir)],
                       cwd=tmp_path, capture_output=True, text=True, env=env, timeout=900)
    train_s = time.monotonic() - start
    assert p.returncode == 0, p.stderr[-3000:]
    assert "on ale " in p.stdout and "EnvPool is not installed here" in p.stdout, p.stdout
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    assert manifest["env_protocol"]["backend"] == "ale"
    assert manifest["env_protocol"]["backend_version"]
    assert manifest["hyperparameters"]["env_backend"] == "ale"
    assert manifest["summary"]["env_steps"] == steps
    episodes = (run_dir / "episodes.csv").read_text().splitlines()
    assert len(episodes) >= 2, episodes  # a header and at least one whole game

    # CartPole is EnvPool's: a clear refusal, exit 2, nothing written
    p = subprocess.run([str(python), "-m", "cleanba.ppo", "cartpole", "--run-dir",
                        str(tmp_path / "cartpole")], cwd=tmp_path, capture_output=True,
                       text=True, env=env, timeout=300)
    assert p.returncode == 2, p.stderr[-2000:]
    assert "needs the EnvPool backend" in p.stderr, p.stderr[-2000:]
    assert not (tmp_path / "cartpole").exists()
    print(f"venv without EnvPool: built in {built_s:.0f} s (0: cached); "
          f"IMPALA Breakout on ALE {train_s:.0f} s")
