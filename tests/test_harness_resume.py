"""`harness run` resumes a killed Cleanba run from its last checkpoint (issue 45).

A --deterministic CartPole PPO sweep with `checkpoint-every = 3` in its overrides runs
through the harness CLI; its trainer is SIGKILLed while it holds after update 7 (the
checkpoint of update 6 on disk: the hold and meta.json are the events, no sleep). The
next `harness run` starts it with --resume-from: stdout.log and the console name the
checkpoint, and updates.csv and episodes.csv equal an uninterrupted run's in every column
but the wall-clock ones, each update once. The kill spends one attempt (a failure, counted
once), the resumption none. Cost: 3 tiny trainer runs, ~40 s on the 2-core CI box.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from harness_cli import ROOT
from test_cleanba_checkpoint import assert_same_records, rows_without_wall_clock
from trainer_output import trainer_said

from cleanba.core import checkpoint
from harness.resume import can_resume, resume_point
from harness.store import failed_attempts, run_state
from harness.sweep import load_sweep
from runrecord import schema

UPDATES = 10  # of 4 envs x 16 steps; checkpoints after updates 3, 6 and 9
KILLED_AT = 7  # past the checkpoint of update 6

SWEEP = f"""\
name = "resume"
systems = ["cleanba-ppo"]
architectures = ["cleanba"]
layouts = ["a0-l0-d1"]
games = ["CartPole-v1"]
seeds = [1]
frames = {UPDATES * 4 * 16}
[overrides]
num-envs = 4
num-steps = 16
num-actor-threads = 1
num-minibatches = 2
update-epochs = 1
progress-interval-s = 0
deterministic = true
checkpoint-every = 3
[resources]
timeout_min = 10
"""


def harness_argv(sweep: Path, root: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "harness", "run", "--sweep", str(sweep), "--results-root",
            str(root), *extra]


def harness(sweep: Path, root: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CLEANBA_HOLD_AT"}
    return subprocess.run(harness_argv(sweep, root), cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env=env)


def trainer_of(harness_proc: subprocess.Popen, run_id: str) -> psutil.Process:
    """The run's trainer (the harness's shim execs it: a child of the harness)."""
    for kid in psutil.Process(harness_proc.pid).children(recursive=True):
        if run_id in kid.cmdline():
            return kid
    raise AssertionError(f"no trainer of {run_id} under the harness")


def wait_until(cond, proc: subprocess.Popen, what: str) -> None:
    """Poll `cond` until it holds; fails if the harness exits first (the event never came)."""
    while not cond():
        if proc.poll() is not None:
            pytest.fail(f"the harness exited ({proc.returncode}) before {what}")
        try:
            proc.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            pass


def test_a_killed_run_resumes_from_its_checkpoint_through_the_harness(tmp_path):
    sweep = tmp_path / "resume.toml"
    sweep.write_text(SWEEP)
    spec = load_sweep(sweep).runs[0]
    assert can_resume(spec)

    clean_root = tmp_path / "uninterrupted"
    p = harness(sweep, clean_root)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "resumed" not in p.stdout
    clean = clean_root / "resume" / "runs" / spec.run_id

    root = tmp_path / "killed"
    run_dir = root / "resume" / "runs" / spec.run_id
    proc = subprocess.Popen(harness_argv(sweep, root, "--no-progress"), cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "CLEANBA_HOLD_AT": f"update-{KILLED_AT}"})
    try:
        wait_until(lambda: trainer_said(run_dir, f"holding at update-{KILLED_AT}"), proc,
                   f"the trainer held at update {KILLED_AT}")
        assert (run_dir / "checkpoints" / "6" / checkpoint.META_FILE).is_file()
        trainer_of(proc, spec.run_id).send_signal(signal.SIGKILL)
        assert proc.wait(timeout=120) == 1  # a failed run
    finally:
        if proc.poll() is None:
            proc.kill()
    killed = json.loads((run_dir / schema.MANIFEST_FILE).read_text())
    assert killed["status"] == schema.FAILED and killed["error"]["exit_codes"] == [-9]
    state = run_state(run_dir)
    assert (state.attempts, state.failures, state.kind) == (1, 1, "transient")

    p = harness(sweep, root)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (f"resumed: {spec.run_id} {spec.label()} from checkpoints/6 (after update 6) "
            "(completed)") in p.stdout
    log = (run_dir / "stdout.log").read_text()
    assert (f"=== harness: attempt 2 of run {spec.run_id} ({spec.label()}) started ") in log
    assert ", resumes from checkpoints/6 (after update 6) ===" in log
    assert f"--resume-from {run_dir}" in log
    assert "[cleanba] resuming from checkpoints/6 (after update 6;" in log

    assert_same_records(clean, run_dir)
    updates = [int(r["update"]) for r in rows_without_wall_clock(run_dir, schema.UPDATES_FILE)]
    assert updates == list(range(1, UPDATES + 1))
    record = json.loads((run_dir / schema.MANIFEST_FILE).read_text())
    assert record["status"] == schema.COMPLETED
    [resumption] = record["resumptions"]
    assert resumption["checkpoint"] == "checkpoints/6"
    assert resumption["previous_status"] == schema.FAILED
    assert resumption["previous_error"]["exit_codes"] == [-9]
    assert not (run_dir / schema.ATTEMPTS_DIR).exists()  # continued, not archived
    # the kill spent one attempt and is counted once; the resumption spent none
    state = run_state(run_dir)
    assert (state.state, state.attempts, state.failures) == (schema.COMPLETED, 2, 1)


def test_only_a_one_process_cleanba_run_with_a_checkpoint_interval_resumes(tmp_path):
    sweep = tmp_path / "resume.toml"
    sweep.write_text(SWEEP)
    spec = load_sweep(sweep).runs[0]
    assert can_resume(spec)
    assert not can_resume(dataclasses.replace(spec, baseline=True))
    no_interval = {k: v for k, v in spec.overrides.items() if k != "checkpoint-every"}
    assert not can_resume(dataclasses.replace(spec, overrides=no_interval))
    assert not can_resume(dataclasses.replace(
        spec, overrides={**spec.overrides, "checkpoint-every": 0}))
    # no record, or a record without checkpoints: from update 0
    assert resume_point(spec, tmp_path / "none") is None
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / schema.MANIFEST_FILE).write_text(json.dumps(
        {"status": schema.INTERRUPTED, "hyperparameters": {}, "provenance": {}}))
    assert resume_point(spec, tmp_path / "run") is None


def test_attempts_continued_by_a_resumption_still_count(tmp_path):
    resumed = {"status": schema.FAILED, "resumptions": [
        {"checkpoint": "checkpoints/3", "previous_status": schema.FAILED},
        {"checkpoint": "checkpoints/6", "previous_status": schema.INTERRUPTED},
    ]}
    # killed (failed), preempted (interrupted), failed again: 3 attempts, 2 failures
    assert failed_attempts(tmp_path, resumed) == (3, 2)
    archived = tmp_path / schema.ATTEMPTS_DIR / "1"
    archived.mkdir(parents=True)
    (archived / schema.MANIFEST_FILE).write_text(json.dumps(resumed))
    assert failed_attempts(tmp_path, {"status": schema.RUNNING}) == (4, 2)
