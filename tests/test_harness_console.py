"""What `harness run` and `benchmark.sh` print when output is a log, not a terminal."""

from __future__ import annotations

import subprocess
import sys

from harness_cli import ROOT

from harness.cli import run_eta
from harness.local import ETA_UNKNOWN, progress_interval_s, sweep_eta

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


def test_sweep_eta_is_unknown_until_a_run_has_finished_then_follows_the_measured_rate():
    # 60 s in, two runs compiling have reported 1% of 24 runs' steps: no finished run,
    # so no rate (the start-up-dominated rate said hours for a 10-minute sweep).
    assert sweep_eta(60, 0, 2_400, 240_000) == ETA_UNKNOWN
    assert "unknown" in ETA_UNKNOWN
    # one run finished after 120 s with a tenth of the steps done: 9x as long again
    assert sweep_eta(120, 1, 24_000, 240_000).startswith("ETA 18m00s")
    assert sweep_eta(600, 24, 240_000, 240_000).startswith("ETA 0m00s")


def test_status_eta_of_a_run_is_unknown_without_a_measured_rate():
    assert run_eta("pending", 1000, 0, 0, []) is None
    assert run_eta("running", 1000, 0, 30.0, []) is None  # compiling: no step yet
    assert run_eta("running", 1000, 250, 30.0, []) == 90.0
    assert run_eta("pending", 1000, 0, 0, [100.0, 200.0]) == 150.0
    assert run_eta("completed", 1000, 1000, 40.0, []) == 0.0
