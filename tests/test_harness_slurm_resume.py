"""A preempted Slurm job resumes from its run's checkpoint (issue 45, part 3), on the real
local cluster (scripts/slurm-local.sh): a --deterministic CartPole PPO run of 10 updates
with a checkpoint every 3, held once it has written checkpoints/6 (CLEANBA_HOLD_AT holds
after the checkpoint of that update, so the resumed attempt, which starts at update 7,
never holds), preempted with `scancel --signal=USR2`. The harness resubmits it without
spending an attempt; the new job resumes from checkpoints/6, and the record holds each
update once, with the rows of an uninterrupted run of the same command. ~1-2 minutes."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from cleanba_runs import trainer_env
from slurm_cluster import Harness, cluster, slurm, wait_until
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


def test_a_preempted_job_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    cluster(accounting=False)
    sweep = tmp_path / "s.toml"
    sweep.write_text(SWEEP)
    root = tmp_path / "res"
    monkeypatch.setenv("CLEANBA_HOLD_AT", "update-6")
    h = Harness(sweep, root)
    run_id, job = next(iter(h.job_ids(1).items()))
    run_dir = root / "slurmresume" / "runs" / run_id
    log = run_dir / "stdout.log"

    def holding() -> bool:
        return log.exists() and "holding at update-6" in log.read_text(errors="replace")
    wait_until(holding, 300, "the trainer holding after update 6 (checkpoints/6 written)",
               explain=lambda: h.text)
    assert (run_dir / "checkpoints" / "6" / "meta.json").exists()
    slurm("scancel", "--signal=USR2", job)
    rc = h.wait(timeout=300)
    assert rc == 0, h.text
    assert re.search(rf"^preempted: {run_id} .*resubmitted, no attempt spent$", h.text,
                     re.M), h.text
    assert "resumed from checkpoints/6 (after update 6)" in h.text, h.text
    text = log.read_text()
    assert "resumes from checkpoints/6 (after update 6)" in text, text
    assert "[cleanba] resuming from checkpoints/6 (after update 6;" in text, text
    manifest = json.loads((run_dir / schema.MANIFEST_FILE).read_text())
    assert manifest["status"] == schema.COMPLETED
    assert [r["update"] for r in manifest["resumptions"]] == [6]
    assert run_state(run_dir).failures == 0
    updates = [int(r["update"]) for r in rows_without_wall_clock(run_dir, schema.UPDATES_FILE)]
    assert updates == list(range(1, 11))  # each update once

    # The same command, uninterrupted, here: the same rows.
    command = list(manifest["provenance"]["command"])
    if "--resume-from" in command:  # the resumed attempt's own flag
        at = command.index("--resume-from")
        del command[at:at + 2]
    command[command.index("--run-dir") + 1] = str(tmp_path / "plain")

    p = subprocess.run(command, env=trainer_env(1), capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert_same_records(tmp_path / "plain", run_dir)
