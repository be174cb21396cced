"""Local backend mechanics with a test-only trainer (tests/harness_fake_trainer.py):
crashes, retries and their cap, kill -9 of the harness, two harnesses on one sweep,
locks, the per-run environment."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from harness_cli import ROOT, harness, run_args
from trainer_output import trainer_output

from harness.execute import child_env, process_gpus
from harness.store import RunLock, lock_holder, run_state
from harness.sweep import load_sweep
from runrecord import find_run_dirs, load_run, read_manifest

FAKE = ROOT / "tests" / "harness_fake_trainer.py"


def write_sweep(tmp_path: Path, *, seeds=(1, 2, 3), layouts=("a0-l0-d1",), sleep_s=0.05,
                updates=5, extra: str = "", name: str = "fake") -> Path:
    text = f"""\
name = "{name}"
systems = ["fake-ppo"]
layouts = {json.dumps(list(layouts))}
games = ["CartPole-v1"]
seeds = {json.dumps(list(seeds))}
frames = 1000

[entry_points.fake-ppo]
entry = "{FAKE}"

[overrides]
sleep-s = {sleep_s}
updates = {updates}
ledger = "{tmp_path / 'ledger.txt'}"
{extra}
"""
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    return path


def ledger(tmp_path: Path) -> list[str]:
    p = tmp_path / "ledger.txt"
    return [line.split()[0] for line in p.read_text().splitlines()] if p.exists() else []


def test_crash_is_recorded_others_go_on_then_retry_cap(tmp_path):
    sweep = write_sweep(tmp_path, extra="fail-seeds = [2]\nhard-crash-seeds = [3]")
    root = tmp_path / "res"
    p = harness(*run_args(sweep, root))
    assert p.returncode == 1, p.stdout + p.stderr
    sw = load_sweep(sweep)
    by_seed = {r.seed: r for r in sw.runs}
    runs = {s: root / "fake" / "runs" / r.run_id for s, r in by_seed.items()}
    assert read_manifest(runs[1])["status"] == "completed"
    m2 = read_manifest(runs[2])
    assert m2["status"] == "failed" and "told to fail on seed 2" in m2["error"]["message"]
    # Seed 3 died without settling its record: the harness recorded why.
    m3 = read_manifest(runs[3])
    assert m3["status"] == "failed" and "137" in m3["error"]["message"]
    assert "failed:" in p.stdout and by_seed[2].run_id in p.stdout and by_seed[3].run_id in p.stdout
    # Second run: the completed one is not redone; failed ones get their 2nd attempt.
    p = harness(*run_args(sweep, root))
    assert p.returncode == 1
    assert ledger(tmp_path).count(by_seed[1].run_id) == 1
    assert len(list((runs[2] / "previous_attempts").iterdir())) == 1
    assert run_state(runs[2]).failures == 2
    # Third run: attempts exhausted; nothing starts, the report says so.
    p = harness(*run_args(sweep, root))
    assert p.returncode == 1
    assert "failed too often" in p.stdout
    assert len(list((runs[2] / "previous_attempts").iterdir())) == 1
    # A larger cap lets them run again.
    p = harness(*run_args(sweep, root, "--max-attempts", "3"))
    assert len(list((runs[2] / "previous_attempts").iterdir())) == 2


def _pids_alive(run_dirs) -> list[int]:
    alive = []
    for d in run_dirs:
        for f in list(Path(d).glob("pid-*")) + list(Path(d).glob("previous_attempts/*/pid-*")):
            pid = int(f.name.split("-")[1])
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                continue
            # A zombie or a recycled pid of another program is not our trainer.
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"harness_fake_trainer" in cmd:
                alive.append(pid)
    return alive


def test_kill_9_of_harness_loses_nothing_and_next_run_carries_on(tmp_path):
    sweep = write_sweep(tmp_path, seeds=(1, 2, 3, 4, 5, 6), sleep_s=0.4, updates=6)
    root = tmp_path / "res"
    runs_dir = root / "fake" / "runs"
    # Seed 1 runs through; the others wait after update 2 (tests/harness_fake_trainer.py)
    # until the kill, so "one completed, others mid-way" is a state, not a moment to catch.
    holds = ",".join(f"2@{seed}" for seed in (2, 3, 4, 5, 6))
    proc = subprocess.Popen([sys.executable, "-m", "harness", *run_args(sweep, root)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "FAKE_TRAINER_HOLD_AFTER": holds})
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if ledger(tmp_path) and any(
                "holding after update 2" in trainer_output(d) for d in runs_dir.glob("*")):
            break
        time.sleep(0.1)  # a poll of the runs' folders
    else:
        proc.kill()
        pytest.fail("harness never got a run going")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # The trainers die with their supervisor (PR_SET_PDEATHSIG) and their locks with them;
    # under load the kernel may take a moment to deliver and reap, so poll, with a bound.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        states = [run_state(d).state for d in runs_dir.glob("*")]
        if not _pids_alive(runs_dir.glob("*")) and "stale" in states:
            break
        time.sleep(0.2)
    # Nothing keeps writing.
    assert _pids_alive(runs_dir.glob("*")) == []
    states = [run_state(d).state for d in runs_dir.glob("*")]
    assert "stale" in states  # a `running` record whose lock died with the harness
    done_before = set(ledger(tmp_path))
    p = harness(*run_args(sweep, root))
    assert p.returncode == 0, p.stdout + p.stderr
    sw = load_sweep(sweep)
    completions = ledger(tmp_path)
    assert sorted(completions) == sorted(r.run_id for r in sw.runs)  # each exactly once
    assert done_before <= set(completions)
    for d in find_run_dirs(runs_dir):
        run = load_run(d)  # no torn record read as data
        assert run.status == "completed"
        assert len(run.updates) == 6
    interrupted = [json.loads(m.read_text())["status"]
                   for m in runs_dir.glob("*/previous_attempts/*/manifest.json")]
    assert interrupted and set(interrupted) == {"interrupted"}
    # The lock and the console log stay in the run folder across attempts (one log, one
    # header per attempt); only the record files of an attempt are archived.
    redone = next(m.parent.parent.parent for m in runs_dir.glob("*/previous_attempts/1/manifest.json"))
    log = (redone / "stdout.log").read_text()
    assert "attempt 1 of run" in log and "attempt 2 of run" in log
    assert not list(redone.glob("previous_attempts/*/stdout.log"))
    assert not list(redone.glob("previous_attempts/*/.lock"))


def test_two_harnesses_never_run_one_run_twice(tmp_path):
    sweep = write_sweep(tmp_path, seeds=(1, 2, 3, 4), sleep_s=0.2, updates=4)
    root = tmp_path / "res"
    procs = [subprocess.Popen([sys.executable, "-m", "harness", *run_args(sweep, root)],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    sw = load_sweep(sweep)
    assert sorted(ledger(tmp_path)) == sorted(r.run_id for r in sw.runs)
    for r in sw.runs:
        assert not (root / "fake" / "runs" / r.run_id / "previous_attempts").exists()


def test_lock_is_exclusive_across_processes_and_dies_with_holder(tmp_path):
    run_dir = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys,time; sys.path.insert(0, sys.argv[2]);"
         "from harness.store import RunLock; l = RunLock(sys.argv[1]); assert l.acquire();"
         "print('held', flush=True); time.sleep(60)", str(run_dir), str(ROOT)],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    assert not RunLock(run_dir).acquire()
    assert str(holder.pid) in (lock_holder(run_dir) or "")
    holder.kill()
    holder.wait()
    lock = RunLock(run_dir)
    assert lock.acquire()
    lock.release()
    assert lock_holder(run_dir) is None


def test_child_env_gives_every_cpu_run_the_sweeps_largest_device_count(tmp_path):
    # One XLA CPU configuration for all layouts (their bits depend on it), large enough
    # for the layout with the most devices per process.
    sw = load_sweep(write_sweep(tmp_path, layouts=("a0-l0-d1", "a0-l1,2-d1", "a0-l0-d2")))
    base = {"XLA_FLAGS": "--xla_force_host_platform_device_count=4 --xla_foo=1"}
    flags = {r.layout.name: child_env(r, [0], None, base=base)["XLA_FLAGS"] for r in sw.runs}
    assert flags["a0-l0-d1"] == "--xla_foo=1 --xla_force_host_platform_device_count=3"
    assert flags["a0-l1,2-d1"].endswith("device_count=3")
    assert flags["a0-l0-d2"].endswith("device_count=3")
    one = load_sweep(write_sweep(tmp_path, layouts=("a0-l0-d1",)))
    assert child_env(one.runs[0], [0], None, base=base)["XLA_FLAGS"].endswith("device_count=1")
    env = child_env(sw.runs[0], [0, 1], None, base={})
    assert env["OMP_NUM_THREADS"] == "2" and env["JAX_PLATFORMS"] == "cpu"


def test_each_process_of_a_gpu_run_gets_its_own_gpus(tmp_path):
    """A d2 run on 4 local GPUs: process i sees its own two (both saw all four, and each
    took the first two), and jax.distributed keeps both (not the SLURM_LOCALID one)."""
    sw = load_sweep(write_sweep(tmp_path, layouts=("a0-l0,1-d2",)))
    spec = replace(sw.runs[0], resources=replace(sw.runs[0].resources, accelerator="gpu"))
    assert spec.gpus_needed == 4
    mine = [process_gpus([4, 5, 6, 7], spec.layout.devices_per_process, i) for i in (0, 1)]
    assert mine == [[4, 5], [6, 7]]
    env = child_env(spec, None, mine[1], base={"SLURM_LOCALID": "0"})
    assert env["CUDA_VISIBLE_DEVICES"] == "6,7" and env["JAX_LOCAL_DEVICE_IDS"] == "0,1"
    assert process_gpus(None, 2, 1) is None
    assert "CUDA_VISIBLE_DEVICES" not in child_env(spec, None, None, base={})


def test_status_and_plan_report_states(tmp_path):
    sweep = write_sweep(tmp_path, seeds=(1, 2), extra="fail-seeds = [2]")
    root = tmp_path / "res"
    p = harness("status", "--sweep", str(sweep), "--results-root", str(root))
    # Nothing has failed in a fresh sweep, so status exits 0 (it exited 1).
    assert p.returncode == 0 and '"pending": 2' in p.stdout
    harness(*run_args(sweep, root))
    p = harness("status", "--sweep", str(sweep), "--results-root", str(root))
    assert p.returncode == 1, "a failed run: status exits 1"
    assert '"completed": 1' in p.stdout and '"failed": 1' in p.stdout
    assert "told to fail" in p.stdout
    p = harness("plan", "--sweep", str(sweep), "--results-root", str(root))
    assert p.returncode == 0 and "completed" in p.stdout and "harness_fake_trainer.py" in p.stdout


def test_ctrl_c_interrupts_runs_and_next_run_carries_on(tmp_path):
    sweep = write_sweep(tmp_path, seeds=(1, 2), sleep_s=0.5, updates=20)
    root = tmp_path / "res"
    runs_dir = root / "fake" / "runs"
    # Both runs wait after update 2 until the Ctrl-C: it surely comes mid-run.
    proc = subprocess.Popen([sys.executable, "-m", "harness", *run_args(sweep, root)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "FAKE_TRAINER_HOLD_AFTER": "2"})
    deadline = time.monotonic() + 60
    while sum("holding after update 2" in trainer_output(d) for d in runs_dir.glob("*")) < 2:
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the two runs never reached update 2")
        time.sleep(0.1)  # a poll of the runs' folders
    proc.send_signal(signal.SIGINT)
    out = proc.communicate(timeout=60)[0]
    assert proc.returncode == 130, out
    assert {read_manifest(d)["status"] for d in runs_dir.glob("*")} == {"interrupted"}
    p = harness(*run_args(sweep, root, "--max-attempts", "1"))  # interruptions are not failures
    assert p.returncode == 0, p.stdout + p.stderr
    assert {read_manifest(d)["status"] for d in runs_dir.glob("*")} == {"completed"}


def test_unavailable_baseline_is_skipped_not_failed_nor_retried(tmp_path):
    sweep = write_sweep(tmp_path, seeds=(1, 2), extra="unavailable-seeds = [2]")
    root = tmp_path / "res"
    p = harness(*run_args(sweep, root))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "skipped: baseline unavailable" in p.stdout and "fake baseline not installed" in p.stdout
    sw = load_sweep(sweep)
    skipped = next(r for r in sw.runs if r.seed == 2)
    run_dir = root / "fake" / "runs" / skipped.run_id
    assert read_manifest(run_dir)["status"] == "skipped"
    p = harness(*run_args(sweep, root))
    assert p.returncode == 0 and "1 skipped" in p.stdout
    assert not (run_dir / "previous_attempts").exists()  # not retried
