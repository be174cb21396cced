"""What `harness run` and `benchmark.sh` print when output is a log, not a terminal."""

from __future__ import annotations

import subprocess
import sys

import pytest
from harness_cli import ROOT

from harness.local import (
    ETA_UNKNOWN,
    FinishedRun,
    RunKind,
    RunLeft,
    eta_text,
    progress_interval_s,
    seconds_left,
    status_estimates,
)

FAKE = ROOT / "tests" / "harness_fake_trainer.py"

SWEEP = f"""\
name = "console"
systems = ["fake-ppo"]
layouts = ["a0-l0-d1", "a0-l1-d1"]
games = ["CartPole-v1"]
seeds = [1]
frames = 1000
[entry_points.fake-ppo]
entry = "{FAKE}"
[overrides]
sleep-s = 0.0
updates = 4
"""


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_log_shows_start_finish_and_no_overhead_line_when_nothing_ran(tmp_path):
    f = tmp_path / "console.toml"
    f.write_text(SWEEP)
    args = ("run", "--sweep", str(f), "--results-root", str(tmp_path / "res"))
    p = _run(*args)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "harness: 2 runs of sweep console, up to 2 at once on " \
        f"{lines[0].split(' on ')[1]}"
    assert sum(x.startswith("start: ") for x in lines) == 2
    finished = [x for x in lines if x.startswith(("[1/2]", "[2/2]"))]
    assert len(finished) == 2 and all("s incl. start-up, attempt 1)" in x for x in finished)
    assert "harness CPU" in p.stdout  # runs started: the overhead figure means something
    # Again: nothing to do. One line per run, no start lines, no "0.0 s = 100.00%".
    p = _run(*args)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "start: " not in p.stdout and p.stdout.count("already-completed") == 3
    assert "harness CPU" not in p.stdout and "100.00%" not in p.stdout


def test_progress_interval_is_short_at_first_and_long_later():
    assert progress_interval_s(0) == 10 and progress_interval_s(119) == 10
    assert progress_interval_s(300) == 30 and progress_interval_s(3600) == 60


def test_benchmark_help_is_whole():
    p = subprocess.run([str(ROOT / "benchmark.sh"), "--help"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0
    text = p.stdout
    assert text.startswith("Run one of the paper's experiments")
    assert ("Exit code: 0 all runs completed, 1 a run or a verdict over training time failed, "
            "4 all runs completed and a verdict over training time is UNDECIDED (these seeds "
            "cannot decide it), 2 bad input.") in " ".join(text.split())
    assert "set -euo" not in text and text.rstrip().splitlines()[-1].startswith("presets: ")


def test_sweep_eta_is_unknown_until_a_run_has_finished():
    cartpole = RunKind("cleanba-ppo", "a0-l0-d1", "CartPole-v1")
    left = [RunLeft(cartpole, 50_000, 1)] * 2
    assert seconds_left([], left, cores=2) is None
    assert eta_text(None) == ETA_UNKNOWN and "unknown" in ETA_UNKNOWN


def test_sweep_eta_prices_each_run_by_its_own_kind():
    """The smoke sweep's case: its two-process layout (both cores, ~60 s a run) finishes
    first; one rate for the sweep priced the 1-core runs that follow at 60 s too (27
    minutes said of an 11-minute sweep). Each kind is priced by its own finished runs, the
    rest by their env's until one of their kind has finished, and the line says so."""
    d2 = RunKind("cleanba-ppo", "a0-l0-d2", "CartPole-v1")
    d1 = RunKind("cleanba-ppo", "a0-l0-d1", "CartPole-v1")
    breakout = RunKind("cleanba-impala", "a0-l0-d1", "Breakout-v5")
    finished = [FinishedRun(d2, 50_000, 60.0), FinishedRun(d1, 50_000, 20.0)]

    def left(*runs):
        return seconds_left(finished, list(runs), cores=2)

    # d1 runs: 20 s each, two at a time on 2 cores; a d2 run holds both: 60 s alone
    four = left(*[RunLeft(d1, 50_000, 1)] * 4)
    assert four.seconds == pytest.approx(40.0) and four.priced_by_other_kinds == 0
    assert left(RunLeft(d2, 50_000, 2)).seconds == pytest.approx(60.0)
    # a running d1 run halfway: half its price
    assert left(RunLeft(d1, 25_000, 1)).seconds == pytest.approx(5.0)
    # another system on a layout that has finished runs: that layout's rate
    impala_d2 = RunKind("cleanba-impala", "a0-l0-d2", "CartPole-v1")
    assert left(RunLeft(impala_d2, 50_000, 2)).seconds == pytest.approx(60.0)
    # an unseen layout of CartPole: the median kind of its env (of 60 s, 20 s and 30 s: 30 s,
    # not the slow two-process kind's 60 s), said rough
    finished.append(FinishedRun(RunKind("cleanba-ppo", "a0-l1-d1", "CartPole-v1"), 50_000,
                                30.0))
    unseen = RunKind("cleanba-ppo", "a0-l0,1-d1", "CartPole-v1")
    rough = left(RunLeft(unseen, 50_000, 1), RunLeft(d1, 50_000, 1))
    assert rough.seconds == pytest.approx((30.0 + 20.0) / 2)
    assert (rough.runs_left, rough.priced_by_other_kinds) == (2, 1)
    assert eta_text(rough) == ("ETA 0m25s (rough: 1 of the 2 runs left have no finished run "
                               "of their system, layout and env yet)")
    # an env no run has finished: the sweep's median kind (30 s per 50,000 steps)
    assert left(RunLeft(breakout, 2_000, 1)).seconds == pytest.approx(30.0 * 2_000 / 50_000 / 2)
    assert eta_text(four) == "ETA 0m40s (from this sweep's finished runs of each kind)"


def test_status_prices_runs_left_as_the_live_display_does():
    """`harness status` and the live line share one pricing (seconds_left): a run's ETA is
    unknown until a run of the sweep has completed, then its steps left at its kind's rate;
    the total is the runs' sum before parallelism; runs with nothing to run have none."""
    from harness.store import PENDING, RunState
    from harness.sweep import parse_sweep

    specs = parse_sweep(SWEEP, "console.toml").runs  # two layouts of one game, 1000 steps
    d1, l1 = specs
    pending = [(d1, RunState(d1.run_id, PENDING, 0, 0)), (l1, RunState(l1.run_id, PENDING, 0, 0))]
    per_run, total = status_estimates(pending)
    assert per_run == {d1.run_id: None, l1.run_id: None} and total is None
    done = RunState(d1.run_id, "completed", 1, 0, env_steps=1000, wall_time_s=40.0)
    running = RunState(l1.run_id, "running", 1, 0, env_steps=250, wall_time_s=30.0)
    per_run, total = status_estimates([(d1, done), (l1, running)])
    assert list(per_run) == [l1.run_id]  # the completed run has nothing left
    # 750 steps left, priced by the other layout's run (40 s per 1000 steps): rough
    assert per_run[l1.run_id].seconds == pytest.approx(30.0)
    assert (total.seconds, total.priced_by_other_kinds) == (pytest.approx(30.0), 1)
    failed = RunState(l1.run_id, "failed", 1, 1, env_steps=250, wall_time_s=30.0)
    assert status_estimates([(d1, done), (l1, failed)]) == ({}, status_estimates([(d1, done)])[1])
