"""`harness run` resumes a killed Cleanba run from its last checkpoint.

Three --deterministic sweeps with `checkpoint-every` in their overrides run through the
harness CLI: CartPole PPO on EnvPool in one process and in two (--distributed, every
process killed and resumed), and a tiny Breakout IMPALA on the ALE backend. The
trainer is SIGKILLed while it holds after an update past a checkpoint (the hold and
meta.json are the events, no sleep). The next `harness run` starts it with --resume-from:
stdout.log and the console name the checkpoint, and updates.csv and episodes.csv equal an
uninterrupted run's in every column but the wall-clock ones, each update once. The kill
spends one attempt (a failure, counted once), the resumption none. Cost on the 2-core CI
box: 3 trainer runs each, ~40 s for CartPole, ~140 s with two processes, ~160 s for
Breakout.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
from pathlib import Path

import psutil
import pytest
from harness_cli import ROOT, harness_run, harness_run_argv
from test_cleanba_checkpoint import assert_same_records, rows_without_wall_clock
from trainer_output import trainer_said

from cleanba.core import checkpoint
from harness.store import can_resume, failed_attempts, peer_resume_args, resume_point, run_state
from harness.sweep import load_sweep
from runrecord import parse_layout, schema


@dataclasses.dataclass(frozen=True)
class Case:
    """A sweep of one run, checkpointed every `every` updates, killed once it holds after
    update `killed_at` (past the checkpoint of update `resumes_at`)."""
    system: str
    game: str
    backend_line: str
    num_envs: int
    num_steps: int
    updates: int
    every: int
    killed_at: int
    layout: str = "a0-l0-d1"

    @property
    def resumes_at(self) -> int:
        return (self.killed_at // self.every) * self.every

    def sweep(self) -> str:
        return f"""\
name = "resume"
systems = ["{self.system}"]
architectures = ["cleanba"]
layouts = ["{self.layout}"]
games = ["{self.game}"]
{self.backend_line}
seeds = [1]
frames = {self.updates * self.num_envs * self.num_steps * self.frame_skip}
[overrides]
num-envs = {self.num_envs}
num-steps = {self.num_steps}
num-actor-threads = 1
{self.algorithm_lines}
progress-interval-s = 0
deterministic = true
checkpoint-every = {self.every}
[resources]
timeout_min = 10
"""

    @property
    def algorithm_lines(self) -> str:
        if self.system == "cleanba-ppo":
            return "num-minibatches = 2\nupdate-epochs = 1"
        return "num-minibatches = 1"

    @property
    def frame_skip(self) -> int:
        return 1 if self.game == "CartPole-v1" else 4


# 4 envs x 16 steps: checkpoints after updates 3, 6 and 9.
CARTPOLE = Case("cleanba-ppo", "CartPole-v1", "", 4, 16, updates=10, every=3, killed_at=7)
# Segments of 256 steps per env, so that random Breakout games (~120-250 steps) end inside
# the segments on both sides of the kill: episodes.csv has rows to compare after it.
BREAKOUT_ALE = Case("cleanba-impala", "Breakout-v5", 'env_backends = ["ale"]', 4, 64,
                    updates=10, every=4, killed_at=6)
# Two processes (--distributed over loopback): both killed, both resumed.
TWO_PROCESSES = Case("cleanba-ppo", "CartPole-v1", "", 4, 16, updates=10, every=3,
                     killed_at=7, layout="a0-l0-d2")
SWEEP = CARTPOLE.sweep()


def harness_to_the_end(sweep: Path, root: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CLEANBA_HOLD_AT"}
    return harness_run(sweep, root, timeout=600, env=env)


def trainers_of(harness_proc: subprocess.Popen, run_id: str) -> list[psutil.Process]:
    """The run's trainer processes (the harness's shim execs each: children of the
    harness), process 0 first."""
    kids = [kid for kid in psutil.Process(harness_proc.pid).children(recursive=True)
            if any(run_id in arg for arg in kid.cmdline()) and "--run-dir" in kid.cmdline()]
    assert kids, f"no trainer of {run_id} under the harness"
    return kids


def wait_until(cond, proc: subprocess.Popen, what: str) -> None:
    """Poll `cond` until it holds; fails if the harness exits first (the event never came)."""
    while not cond():
        if proc.poll() is not None:
            pytest.fail(f"the harness exited ({proc.returncode}) before {what}")
        try:
            proc.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            pass


@pytest.mark.parametrize("case", [
    pytest.param(CARTPOLE, id="cartpole-ppo"),
    pytest.param(TWO_PROCESSES, marks=pytest.mark.slow, id="cartpole-ppo-2-processes"),
    pytest.param(BREAKOUT_ALE, marks=pytest.mark.slow, id="breakout-impala-ale")])
def test_a_killed_run_resumes_from_its_checkpoint_through_the_harness(tmp_path, case):
    sweep = tmp_path / "resume.toml"
    sweep.write_text(case.sweep())
    spec = load_sweep(sweep).runs[0]
    assert can_resume(spec)

    clean_root = tmp_path / "uninterrupted"
    p = harness_to_the_end(sweep, clean_root)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "resumed" not in p.stdout
    clean = clean_root / "resume" / "runs" / spec.run_id

    root = tmp_path / "killed"
    run_dir = root / "resume" / "runs" / spec.run_id
    proc = subprocess.Popen(harness_run_argv(sweep, root), cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "CLEANBA_HOLD_AT": f"update-{case.killed_at}"})
    try:
        wait_until(lambda: trainer_said(run_dir, f"holding at update-{case.killed_at}"), proc,
                   f"the trainer held at update {case.killed_at}")
        assert (run_dir / "checkpoints" / str(case.resumes_at) / checkpoint.META_FILE).is_file()
        trainers = trainers_of(proc, spec.run_id)
        assert len(trainers) == spec.num_processes, [t.cmdline() for t in trainers]
        for trainer in trainers:
            trainer.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=120) == 1  # a failed run
    finally:
        if proc.poll() is None:
            proc.kill()
    killed = json.loads((run_dir / schema.MANIFEST_FILE).read_text())
    assert killed["status"] == schema.FAILED
    assert killed["error"]["exit_codes"] == [-9] * spec.num_processes  # every process
    state = run_state(run_dir)
    assert (state.attempts, state.failures, state.kind) == (1, 1, "transient")

    p = harness_to_the_end(sweep, root)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (f"resumed: {spec.run_id} {spec.label()} from checkpoints/{case.resumes_at} "
            f"(after update {case.resumes_at}) (completed)") in p.stdout
    log = (run_dir / "stdout.log").read_text()
    assert (f"=== harness: attempt 2 of run {spec.run_id} ({spec.label()}) started ") in log
    at = f"checkpoints/{case.resumes_at} (after update {case.resumes_at}"
    assert f", resumes from {at}) ===" in log
    assert f"--resume-from {run_dir}" in log
    assert f"[cleanba] resuming from {at};" in log

    assert_same_records(clean, run_dir)
    # the comparison covers games played after the resumption, not only updates
    resumed_from_step = case.resumes_at * case.num_envs * case.num_steps
    ended_after = [r for r in rows_without_wall_clock(run_dir, schema.EPISODES_FILE)
                   if int(r["env_steps"]) > resumed_from_step]
    assert ended_after, "no episode ended after the checkpoint: nothing resumed to compare"
    updates = [int(r["update"]) for r in rows_without_wall_clock(run_dir, schema.UPDATES_FILE)]
    assert updates == list(range(1, case.updates + 1))
    record = json.loads((run_dir / schema.MANIFEST_FILE).read_text())
    assert record["status"] == schema.COMPLETED
    assert record["env_protocol"]["backend"] == ("ale" if "ale" in case.backend_line
                                                 else "envpool")
    [resumption] = record["resumptions"]
    assert resumption["checkpoint"] == f"checkpoints/{case.resumes_at}"
    assert resumption["previous_status"] == schema.FAILED
    assert resumption["previous_error"]["exit_codes"] == [-9] * spec.num_processes
    assert not (run_dir / schema.ATTEMPTS_DIR).exists()  # continued, not archived
    # the kill spent one attempt and is counted once; the resumption spent none
    state = run_state(run_dir)
    assert (state.state, state.attempts, state.failures) == (schema.COMPLETED, 2, 1)


def test_only_a_cleanba_run_with_a_checkpoint_interval_resumes(tmp_path):
    sweep = tmp_path / "resume.toml"
    sweep.write_text(SWEEP)
    spec = load_sweep(sweep).runs[0]
    assert can_resume(spec)
    # a multi-process run too, every process (a Slurm peer included) given --resume-from
    two = dataclasses.replace(spec, layout=parse_layout("a0-l0-d2"))
    assert can_resume(two)
    assert peer_resume_args(two, tmp_path) == ["--resume-from", str(tmp_path)]
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
