"""End to end with the real trainers: a tiny CartPole sweep on one device and on two
processes (jax.distributed over localhost), run by the harness, resumed, reported."""

from __future__ import annotations

import subprocess
import sys

import pytest
from harness_cli import ROOT

from harness.sweep import load_sweep
from runrecord import load_run

SWEEP = """\
name = "e2e"
systems = ["cleanba-ppo"]
architectures = ["cleanba"]
layouts = ["a0-l0-d1", "a0-l0-d2"]
games = ["CartPole-v1"]
seeds = [1]
frames = 4096
[resources]
timeout_min = 8
"""


@pytest.mark.slow
def test_real_trainer_sweep_one_and_two_processes(tmp_path):
    sweep = tmp_path / "e2e.toml"
    sweep.write_text(SWEEP)
    root = tmp_path / "res"
    args = [sys.executable, "-m", "harness", "run", "--sweep", str(sweep), "--results-root",
            str(root), "--no-progress"]
    p = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    sw = load_sweep(sweep)
    for spec in sw.runs:
        run = load_run(root / "e2e" / "runs" / spec.run_id)
        assert run.status == "completed"
        m = run.manifest
        assert m["run_id"] == spec.run_id and m["sweep"] == "e2e"
        assert m["layout"]["name"] == spec.layout.name
        assert m["layout"]["num_processes"] == spec.layout.num_processes
        assert int(run.updates["env_steps"][-1]) <= spec.total_timesteps
        assert len(run.updates) > 0 and len(run.episodes) > 0
    # Resume: nothing left to run, nothing started again.
    p = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "2 already-completed" in p.stdout, p.stdout
