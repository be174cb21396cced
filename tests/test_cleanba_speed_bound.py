"""cleanba.speed_bound (the GPU campaign's chunk (c)): actor alone, learner alone and both
together through the trainer's own loops, on a tiny CartPole run; and its pure part."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cleanba_runs import trainer_env

from cleanba.core.actor_clock import PHASES
from cleanba.tools.speed_bound import SpeedBoundConfig, measure, share


def test_share_names_the_slower_stage():
    assert share(900.0, 600.0, 570.0) == {"bound_sps": 600.0, "bound_by": "learner",
                                           "share": pytest.approx(0.95)}
    assert share(300.0, 600.0, None) == {"bound_sps": 300.0, "bound_by": "actor", "share": None}


@pytest.mark.slow  # ~15 s: three phases, each compiling
def test_three_measurements_of_one_tiny_run(tmp_path: Path) -> None:
    out = tmp_path / "bound.json"
    trainer = ["cartpole", "--num-envs", "4", "--num-steps", "16", "--num-actor-threads", "2",
               "--num-minibatches", "2", "--update-epochs", "1", "--actor-device-ids", "0",
               "--learner-device-ids", "0"]
    p = subprocess.run([sys.executable, "-m", "cleanba.speed_bound", "--rollouts", "2",
                        "--updates", "2", "--together-updates", "5", "--json-out", str(out),
                        "--", *trainer], capture_output=True, text=True, timeout=300,
                       env=trainer_env(1))
    assert p.returncode == 0, p.stderr[-3000:]
    f = json.loads(out.read_text())
    assert f["num_envs"] == 4 and f["num_actor_threads"] == 2 and f["actor_mode"] == "serial"
    assert f["actor_alone"]["env_steps"] == 4 * 16 * 2  # both threads' timed rollouts
    assert f["learner_alone"]["batch"] == 64
    for phase in ("actor_alone", "learner_alone", "together"):
        assert f[phase]["sps"] > 0, phase
    assert f["together"]["updates_in_window"] == 5 - 2 and f["together"]["architecture"] == "cleanba"
    assert f["bound_sps"] == min(f["actor_alone"]["sps"], f["learner_alone"]["sps"])
    assert f["share"] == pytest.approx(f["together"]["sps"] / f["bound_sps"])
    # the learner lets go of a batch's host arrays before its update: with two threads the
    # concatenation is the learner's copy, so an actor thread needs 2 rollout sets
    assert f["together"]["host_rollout_sets"] == 2
    assert "of the bound" in p.stdout
    # where an actor step's time goes, alone and together, and the learner's update time
    for phases in (f["actor_alone"]["actor_step"], f["together"]["actor_step"]):
        assert set(phases) == set(PHASES)
        assert sum(x["share"] for x in phases.values()) == pytest.approx(1.0)
        assert phases["env_step"]["ms_per_step"] > 0 and phases["policy_result"]["ms_per_step"] > 0
    assert f["together"]["seconds_per_update"] > 0
    assert "actor step alone: " in p.stdout and "actor step together: " in p.stdout
    assert "learner update: alone " in p.stdout


def test_bad_settings_are_refused_before_anything_runs():
    for bad in ({"updates": 0}, {"rollouts": 0}, {"together_updates": 3}):
        with pytest.raises(ValueError, match="--rollouts and --updates must be"):
            measure(SpeedBoundConfig(**bad))
    with pytest.raises(ValueError, match="async"):
        measure(SpeedBoundConfig(trainer_args=("cartpole", "--architecture", "async")))
