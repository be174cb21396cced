"""A preempted or requeued Slurm job resumes from its run's checkpoint,
on the real local cluster (scripts/slurm-local.sh): a --deterministic CartPole PPO run of
10 updates with a checkpoint every 3, held once it has written checkpoints/6
(CLEANBA_HOLD_AT holds after the checkpoint of that update, so the resumed attempt, which
starts at update 7, never holds), then
- preempted with `scancel --signal=USR2`: the harness resubmits it without spending an
  attempt, and the new job resumes;
- or requeued with `scontrol requeue`: Slurm runs the same job again, which resumes.
Either way the record holds each update once, with the rows of an uninterrupted run of
the same command, and no attempt is spent. Both tests run the same command: its
uninterrupted run is made once, by the first (they run on one xdist worker), and compared
with each resumed record. ~40-60 s each."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import psutil
import pytest
from cleanba_runs import trainer_env
from slurm_cluster import Harness, cluster, job_state, requeue, slurm, wait_until
from test_cleanba_checkpoint import assert_same_records, rows_without_wall_clock

from harness.store import run_state
from runrecord import schema

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

SWEEP = """\
name = "slurmresume"
systems = ["cleanba-ppo"]
architectures = ["cleanba"]
layouts = ["a0-l0-d1"]
games = ["CartPole-v1"]
seeds = [1]
frames = 640
[resources]
cpus_per_process = 1
timeout_min = 8
[overrides]
deterministic = true
num-envs = 4
num-steps = 16
num-minibatches = 2
update-epochs = 1
checkpoint-every = 3
"""


def held_job(tmp_path: Path, monkeypatch) -> tuple[Harness, str, str, Path]:
    """The sweep's one job, submitted and held after update 6 (checkpoints/6 written)."""
    sweep = tmp_path / "s.toml"
    sweep.write_text(SWEEP)
    monkeypatch.setenv("CLEANBA_HOLD_AT", "update-6")
    h = Harness(sweep, tmp_path / "res")
    run_id, job = next(iter(h.job_ids(1).items()))
    run_dir = tmp_path / "res" / "slurmresume" / "runs" / run_id
    log = run_dir / "stdout.log"

    def holding() -> bool:
        return log.exists() and "holding at update-6" in log.read_text(errors="replace")
    wait_until(holding, 300, "the trainer holding after update 6 (checkpoints/6 written)",
               explain=lambda: h.text)
    assert (run_dir / "checkpoints" / "6" / "meta.json").exists()
    return h, run_id, job, run_dir


@pytest.fixture(scope="module")
def uninterrupted() -> dict[tuple[str, ...], Path]:
    """{trainer command, its --run-dir left out: the record of that command run
    uninterrupted on this machine}, filled by the first test that needs one."""
    return {}


def plain_run(command: list[str], runs: dict[tuple[str, ...], Path], folder: Path) -> Path:
    """The record of `command` run uninterrupted into a run dir of its own (made once per
    command: both tests' resumed runs have the same command but for their --run-dir)."""
    at = command.index("--run-dir") + 1
    key = tuple(command[:at] + command[at + 1:])
    if key not in runs:
        command = [*command[:at], str(folder), *command[at + 1:]]
        p = subprocess.run(command, env=trainer_env(1), capture_output=True, text=True,
                           timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        runs[key] = folder
    return runs[key]


def assert_resumed_once(h: Harness, run_dir: Path, tmp_path: Path,
                        uninterrupted: dict[tuple[str, ...], Path]) -> None:
    """The run completed from checkpoints/6: each update once, no attempt spent, the rows
    of the same command run uninterrupted here."""
    assert "resumed from checkpoints/6 (after update 6)" in h.text, h.text
    text = (run_dir / "stdout.log").read_text()
    assert "resumes from checkpoints/6 (after update 6)" in text, text
    assert "[cleanba] resuming from checkpoints/6 (after update 6;" in text, text
    manifest = json.loads((run_dir / schema.MANIFEST_FILE).read_text())
    assert manifest["status"] == schema.COMPLETED
    assert [r["update"] for r in manifest["resumptions"]] == [6]
    assert run_state(run_dir).failures == 0
    updates = [int(r["update"]) for r in rows_without_wall_clock(run_dir, schema.UPDATES_FILE)]
    assert updates == list(range(1, 11))  # each update once

    command = list(manifest["provenance"]["command"])
    if "--resume-from" in command:  # the resumed attempt's own flag
        at = command.index("--resume-from")
        del command[at:at + 2]
    assert_same_records(plain_run(command, uninterrupted, tmp_path / "plain"), run_dir)


def test_a_preempted_job_resumes_from_its_checkpoint(tmp_path, monkeypatch, uninterrupted):
    cluster(accounting=False)
    h, run_id, job, run_dir = held_job(tmp_path, monkeypatch)
    slurm("scancel", "--signal=USR2", job)
    rc = h.wait(timeout=300)
    assert rc == 0, h.text
    assert re.search(rf"^preempted: {run_id} .*resubmitted, no attempt spent$", h.text,
                     re.M), h.text
    assert_resumed_once(h, run_dir, tmp_path, uninterrupted)


def test_a_requeued_job_resumes_from_its_checkpoint(tmp_path, monkeypatch, uninterrupted):
    cluster(accounting=True)
    h, run_id, job, run_dir = held_job(tmp_path, monkeypatch)
    [first_pid] = [q.pid for q in psutil.process_iter(["cmdline"])  # the held trainer
                   if "--run-dir" in (q.info["cmdline"] or [])
                   and str(run_dir) in q.info["cmdline"]]
    requeue(job, first_pid,
            lambda: job_state(job) in ("RUNNING", "COMPLETING", "COMPLETED", ""),
            "the requeued job running again", gone_within=120)
    rc = h.wait(timeout=300)
    assert rc == 0, h.text
    assert "resubmitted" not in h.text, h.text  # Slurm ran it again, not the harness
    assert_resumed_once(h, run_dir, tmp_path, uninterrupted)
