"""Slurm backend: the sbatch scripts it would submit, and real jobs through submitit's
LocalExecutor (the same code path as Slurm, minus the cluster)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest
from harness_cli import ROOT, harness

from harness.slurm import coordinator_address, job_shape, sbatch_script
from harness.sweep import parse_sweep
from runrecord import read_manifest

FAKE = ROOT / "tests" / "harness_fake_trainer.py"

GPU_SWEEP = """\
name = "gpu"
systems = ["cleanba-ppo"]
layouts = ["a0-l1-d1", "a0-l1,2,3-d2"]
games = ["Breakout-v5"]
seeds = [1, 2]
frames = 200_000_000

[resources]
accelerator = "gpu"
cpus_per_process = 10

[slurm]
partition = "gpu-a100"
account = "rl-lab"
timeout_min = 90
array_parallelism = 8
mem_gb = 64
setup = ["module load cuda/12", "source .venv/bin/activate"]
"""


def test_sbatch_script_has_partition_gpus_cpus_time_array():
    sw = parse_sweep(GPU_SWEEP, "gpu.toml")
    d1 = next(r for r in sw.runs if r.layout.name == "a0-l1-d1")
    text = sbatch_script(d1, sw.slurm, "/shared/res/gpu/slurm", array_size=20)
    lines = set(text.splitlines())
    for expected in ("#SBATCH --partition=gpu-a100", "#SBATCH --account=rl-lab",
                     "#SBATCH --gpus-per-node=2", "#SBATCH --cpus-per-task=10",
                     "#SBATCH --time=90", "#SBATCH --ntasks-per-node=1", "#SBATCH --nodes=1",
                     "#SBATCH --mem=64GB", "#SBATCH --array=0-19%8", "module load cuda/12"):
        assert expected in lines, (expected, text)
    assert re.search(r"^srun .*submitit", text, re.M)
    # A two-process layout: two tasks, four GPUs each (actor GPU 0, learners 1-3).
    d2 = next(r for r in sw.runs if r.layout.name == "a0-l1,2,3-d2")
    text2 = sbatch_script(d2, sw.slurm, "/shared/res/gpu/slurm")
    assert "#SBATCH --ntasks-per-node=2" in text2
    assert "#SBATCH --gpus-per-node=8" in text2
    assert "--array" not in text2
    shape = job_shape(d2, {**sw.slurm, "processes_per_node": 1})
    assert shape["nodes"] == 2 and shape["tasks_per_node"] == 1 and shape["gpus_per_node"] == 4


def test_coordinator_is_the_same_for_every_task():
    a = coordinator_address("123", ["node7", "node8"], 2)
    assert a == coordinator_address("123", ["node7", "node8"], 2)
    assert a.startswith("node7:") and 20000 <= int(a.split(":")[1]) < 40000
    assert coordinator_address("123", ["node7"], 1).startswith("127.0.0.1:")


@pytest.mark.slow
def test_local_executor_runs_jobs_and_resumes(tmp_path):
    sweep = tmp_path / "s.toml"
    sweep.write_text(f"""\
name = "sl"
systems = ["fake-ppo"]
layouts = ["a0-l0-d1", "a0-l0-d2"]
games = ["CartPole-v1"]
seeds = [1, 2]
frames = 1000
[slurm]
timeout_min = 5
[entry_points.fake-ppo]
entry = "{FAKE}"
[overrides]
sleep-s = 0.1
fail-seeds = [2]
ledger = "{tmp_path / 'ledger.txt'}"
""")
    root = tmp_path / "res"
    args = [sys.executable, "-m", "harness", "run", "--sweep", str(sweep), "--results-root",
            str(root), "--backend", "slurm", "--slurm-cluster", "local"]
    p = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert p.returncode == 1, p.stdout + p.stderr  # seed 2 fails
    sw = parse_sweep(sweep.read_text(), sweep)
    for r in sw.runs:
        m = read_manifest(root / "sl" / "runs" / r.run_id)
        assert m["status"] == ("failed" if r.seed == 2 else "completed"), m
    d2 = next(r for r in sw.runs if r.layout.name == "a0-l0-d2" and r.seed == 1)
    log = (root / "sl" / "runs" / d2.run_id / "stdout.log").read_text()
    assert "--process-id 0" in log and "--process-id 1" in log
    addrs = set(re.findall(r"--coordinator-address (\S+)", log))
    assert len(addrs) == 1  # both tasks found the same coordinator
    completed = (tmp_path / "ledger.txt").read_text().split()
    # Again: completed runs are not resubmitted; the failed ones get one more attempt.
    p = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert p.returncode == 1
    assert (tmp_path / "ledger.txt").read_text().split() == completed
    assert p.stdout.count("submitted") == 2
    log_lines = [json.loads(x) for x in (root / "sl" / "harness-runs.jsonl").read_text().splitlines()]
    assert [e["backend"] for e in log_lines] == ["slurm", "slurm"]


def test_job_in_unknown_state_is_settled_after_the_bounded_wait(tmp_path, monkeypatch):
    """A job neither squeue nor sacct lists (no accounting, gone from squeue)
    was waited for for ever; now it is settled from its record after UNKNOWN_WAIT_S."""
    import submitit

    from harness import slurm_wait
    from harness.store import Store, run_state
    from runrecord import RunWriter

    sw = parse_sweep(GPU_SWEEP, "gpu.toml")
    store = Store(tmp_path, sw.name)
    never, died = sw.runs[0], sw.runs[1]
    # `died`: its trainer wrote `running`, then the job vanished with it.
    RunWriter(store.run_dir(died.run_id), {"run_id": died.run_id, "system": "x",
                                           "architecture": "x", "env_id": "x", "seed": 1,
                                           "layout": {}, "hyperparameters": {},
                                           "env_protocol": {}, "provenance": {}})
    watcher = slurm_wait.Watcher(store, "slurm", 2, None, None, poll_s=0)
    watched = [slurm_wait.Watched(spec, submitit.SlurmJob(tmp_path / "slurm", job_id=jid),
                                  submitted_at=0.0)
               for spec, jid in ((never, "999991"), (died, "999992"))]
    monkeypatch.setattr(slurm_wait, "UNKNOWN_WAIT_S", 0.5)
    assert all(watcher._check(w, {}, False, False) is None for w in watched)  # starts waiting
    time.sleep(0.6)
    o_never, o_died = (watcher._check(w, {}, False, False) for w in watched)
    assert o_never.status == "interrupted" and "stayed unknown for 0 s" in o_never.error
    assert "before it started" in o_never.error
    assert run_state(store.run_dir(never.run_id)).state == "pending"
    assert o_died.status == "interrupted" and "job 999992" in o_died.error
    st = run_state(store.run_dir(died.run_id))
    assert st.state == "interrupted" and st.failures == 0, st


def test_a_requeued_jobs_stale_result_is_not_its_outcome(tmp_path, monkeypatch):
    """`scontrol requeue` stops the attempt, whose job writes its
    result (`interrupted`) while Slurm shows it COMPLETING on its way back to PENDING. The
    harness took that result as the run's outcome; it now waits for a final state and
    takes the result the job writes when it ends again."""
    import pickle

    import submitit

    from harness import slurm_wait
    from harness.store import Store

    sw = parse_sweep(GPU_SWEEP, "gpu.toml")
    store = Store(tmp_path, sw.name)
    spec = sw.runs[0]
    job = submitit.SlurmJob(tmp_path / "slurm", job_id="999993")
    job.paths.folder.mkdir(parents=True)

    def result(status: str) -> None:
        with job.paths.result_pickle.open("wb") as f:
            pickle.dump(("success", {"run_id": spec.run_id, "label": spec.label(),
                                     "status": status}), f)

    monkeypatch.setattr(slurm_wait, "PENDING_NOTE_S", 1e9)  # no squeue for the reason
    watcher = slurm_wait.Watcher(store, "slurm", 1, None, None, poll_s=0)
    w = slurm_wait.Watched(spec, job, submitted_at=0.0)
    result("interrupted")  # the stopped attempt's
    for state in ("COMPLETING", "REQUEUED", "PENDING", "RUNNING", "COMPLETING"):
        assert watcher._check(w, {"999993": state}, False, False) is None, state
    result("completed")
    assert watcher._check(w, {"999993": "COMPLETED"}, False, False).status == "completed"
    # A job stuck COMPLETING (an epilog that hangs) is not waited for for ever.
    monkeypatch.setattr(slurm_wait, "COMPLETING_WAIT_S", 0.2)
    w = slurm_wait.Watched(spec, job, submitted_at=0.0)
    assert watcher._check(w, {"999993": "COMPLETING"}, False, False) is None
    time.sleep(0.3)
    assert watcher._check(w, {"999993": "COMPLETING"}, False, False).status == "completed"


def test_retry_failed_is_one_rule_for_both_backends(tmp_path):
    """A run whose last failure was deterministic: neither backend starts it again, both
    start it under --retry-failed (the decision is `left_alone`'s for both; Slurm
    once ignored the flag)."""
    from harness.store import Store
    from runrecord import RunWriter

    sweep = tmp_path / "s.toml"
    sweep.write_text(f"""\
name = "rf"
systems = ["fake-ppo"]
layouts = ["a0-l0-d1"]
games = ["CartPole-v1"]
seeds = [1]
frames = 1000
[slurm]
timeout_min = 5
[entry_points.fake-ppo]
entry = "{FAKE}"
[overrides]
sleep-s = 0.01
ledger = "{tmp_path / 'ledger.txt'}"
""")
    (spec,) = parse_sweep(sweep.read_text(), sweep).runs
    for backend in ("slurm", "local"):
        root = tmp_path / backend
        run_dir = Store(root, "rf").run_dir(spec.run_id)
        RunWriter(run_dir, {"run_id": spec.run_id, "provenance": {}, "hyperparameters": {}}
                  ).finish("failed", error={"type": "NonFiniteLoss", "message": "nan loss",
                                            "traceback": ""})
        # with the progress lines on, so that a submitted job would say so
        args = ["run", "--sweep", str(sweep), "--results-root", str(root), "--backend",
                backend, "--slurm-cluster", "local"]
        p = harness(*args, timeout=180)
        assert p.returncode == 1, p.stdout + p.stderr
        assert "failed earlier with a deterministic error, not retried" in p.stdout, p.stdout
        assert "submitted" not in p.stdout and not (tmp_path / "ledger.txt").exists()
        p = harness(*args, "--retry-failed", timeout=180)
        assert p.returncode == 0, p.stdout + p.stderr
        assert read_manifest(run_dir)["status"] == "completed"
        assert [line.split()[0] for line in (tmp_path / "ledger.txt").read_text().splitlines()
                ] == [spec.run_id]
        (tmp_path / "ledger.txt").unlink()
