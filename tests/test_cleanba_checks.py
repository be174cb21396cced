"""One start-up check (cleanba.core.checks.check_run) for the trainers and the harness: the same
bad run gets the same words from `python -m cleanba.ppo|impala` (exit 2, nothing written)
and from `harness plan|run` (harness.validate), because both call it. Checking a run
imports cleanba but leaves the harness's environment, and its children's, as the user set
it."""

from __future__ import annotations

import dataclasses
import json
import os
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



CHECK_IN_A_HARNESS_PROCESS = f"""
import json, os, sys
before = os.environ["XLA_FLAGS"]
import harness.validate
from harness.execute import child_env
from harness.sweep import parse_sweep
runs = parse_sweep({SWEEP!r}).runs
print(json.dumps({{
    "messages": [harness.validate.check_spec(r) for r in runs],
    "checked_with_cleanba": "cleanba.core.checks" in sys.modules and "cleanba.ppo" in sys.modules,
    "before": before, "after": os.environ["XLA_FLAGS"],
    "child": child_env(runs[0], None, None)["XLA_FLAGS"],
}}))
"""


def test_checking_runs_leaves_the_harness_and_its_childrens_xla_flags_as_the_user_set_them():
    from cleanba.core.xla_flags import CPU_CONV_FLAG

    users = "--xla_cpu_enable_fast_math=false"
    env = {**os.environ, "XLA_FLAGS": users}
    out = subprocess.run([sys.executable, "-c", CHECK_IN_A_HARNESS_PROCESS], env=env,
                         capture_output=True, text=True, timeout=600, check=True)
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen["checked_with_cleanba"] and seen["messages"] == [None, None]
    assert seen["after"] == seen["before"] == users
    # the child gets the user's flags and its device count; the trainer adds its own flag
    assert seen["child"] == f"{users} --xla_force_host_platform_device_count=2"
    assert CPU_CONV_FLAG not in seen["child"]


@pytest.mark.parametrize("argv, trainer, entry_point", [
    (["python", "-m", "cleanba.ppo", "cartpole"], True, True),
    (["python", "-u", "-mcleanba.impala"], True, True),
    (["python", "-m", "cleanba.bench"], False, True),
    (["python", "-m", "harness", "plan"], False, False),
    (["python", "-c", "import cleanba"], False, False),
])
def test_only_cleanba_entry_points_set_up_the_process_on_import(argv, trainer, entry_point):
    import cleanba

    assert cleanba._launched_as(argv, cleanba.TRAINER_MODULES) is trainer  # signal watcher
    assert cleanba._launched_as(argv, cleanba.ENTRY_MODULES) is entry_point  # XLA flag
