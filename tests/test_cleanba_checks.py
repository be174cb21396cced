"""One start-up check (cleanba.checks.check_run) for the trainers and the harness: the same
bad run gets the same words from `python -m cleanba.ppo|impala` (exit 2, nothing written)
and from `harness plan|run` (harness.validate), because both call it."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from harness.execute import child_env
from harness.sweep import RunSpec, parse_sweep
from harness.validate import check_spec
from runrecord.exits import EXIT_BAD_INPUT

SWEEP = """\
name = "checks"
systems = ["cleanba-ppo", "cleanba-impala"]
layouts = ["a0-l0,1-d1"]
games = ["CartPole-v1"]
seeds = [1]
frames = 8192
"""

# (case, system, changes to the run, words its message must have)
BAD_RUNS = [
    ("unknown env", "cleanba-ppo", {"env_id": "CartPoel-v1"},
     ["unknown env id 'CartPoel-v1'", "Did you mean: CartPole-v1"]),
    ("preset does not fit", "cleanba-ppo", {"env_id": "Breakout-v5"},
     ["preset 'cartpole' is made for vector observations", "Breakout-v5 gives image"]),
    ("continuous actions", "cleanba-impala", {"env_id": "Pendulum-v1"},
     ["Pendulum-v1 has a Box action space", "support discrete actions"]),
    ("layout split", "cleanba-ppo", {"overrides": {"num-envs": 7}},
     ["cannot be split evenly"]),
    ("algorithm sizes", "cleanba-ppo", {"overrides": {"num-minibatches": 3}},
     ["--num-minibatches", "does not divide"]),
    ("algorithm sizes", "cleanba-impala", {"overrides": {"num-minibatches": 3}},
     ["--num-minibatches"]),
]


def _run(system: str, changes: dict) -> RunSpec:
    (base,) = [r for r in parse_sweep(SWEEP).runs if r.system == system]
    assert base.preset == "cartpole"
    return dataclasses.replace(base, **changes)


def test_trainer_and_harness_reject_a_bad_run_in_the_same_words(tmp_path):
    runs = [_run(system, changes) for _, system, changes, _ in BAD_RUNS]
    # The trainers, started as the harness would start them (its command, its environment),
    # all at once: most of each one's time is importing JAX.
    procs = [subprocess.Popen(run.command(tmp_path / f"run{i}", python=sys.executable),
                              env=child_env(run, None, None), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for i, run in enumerate(runs)]
    for i, ((case, system, _, words), run, proc) in enumerate(zip(BAD_RUNS, runs, procs, strict=True)):
        _, err = proc.communicate(timeout=600)
        harness_says = check_spec(run)
        assert harness_says is not None, (case, system)
        for w in words:
            assert w in harness_says, (case, system, w, harness_says)
        assert proc.returncode == EXIT_BAD_INPUT, (case, system, err)
        assert f"error: {harness_says}\n" in err, (case, system, harness_says, err)
        assert "Traceback" not in err
        assert not (tmp_path / f"run{i}").exists()


@pytest.mark.parametrize("system", ["cleanba-ppo", "cleanba-impala"])
def test_a_good_run_passes_the_harness_check(system):
    assert check_spec(_run(system, {})) is None

