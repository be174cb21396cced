"""The CI demonstration of looks over training time, with the real trainer: a sabotaged
CartPole candidate (learning rate 0, tests/data/sabotaged-cartpole.toml) is stopped along
training time at 30% of its budget or earlier, exit 1, and the stop is in its records and on the console
(a rerun, status and regress read the decision back: tests/test_harness_curve_looks.py,
with the test-only trainer). (The unchanged candidate that runs to the end and passes is CI's
smoke step: `./benchmark.sh smoke --games CartPole-v1` with the preset's looks_at, then
`harness regress`.) It is the command of docs/harness.md's "looks over training time"
section, run here."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest
from harness_cli import ROOT

SWEEP = ROOT / "tests" / "data" / "sabotaged-cartpole.toml"
BUDGET = 50_000


@pytest.mark.slow
def test_a_sabotaged_cartpole_candidate_is_stopped_early_with_exit_1(tmp_path):
    root = tmp_path / "res"
    select = ["--sweep", str(SWEEP), "--results-root", str(root)]
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "harness", "run", *select, "--share-cores",
                        "--no-progress"], cwd=ROOT, capture_output=True, text=True,
                       timeout=900)
    seconds = time.monotonic() - t0
    print(p.stdout, f"\n(harness run took {seconds:.0f} s)")
    assert p.returncode == 1, p.stdout + p.stderr
    decided = re.search(r"REGRESSION for cleanba-ppo CartPole-v1 at look (\d) of 6 "
                        r"\((\d+)% of the budget\)", p.stdout)
    assert decided and int(decided.group(2)) <= 30, p.stdout
    assert p.stdout.count("  stopped: ") == 3
    runs = sorted((root / "sabotaged-cartpole" / "runs").iterdir())
    spent = 0
    for d in runs:  # each record settled, with the decision as its reason
        m = json.loads((d / "manifest.json").read_text())
        assert m["status"] == "interrupted" and m["error"]["type"] == "Stopped", m["error"]
        assert m["error"]["message"].startswith(
            f"stopped: regression decided at {decided.group(2)}% of the budget"), m["error"]
        spent += m["summary"]["frames"]
    # The decision is at 20% (above). What the runs spend beyond it is the pause's latency:
    # 21-25% in most runs; under CI's load one run in six went on to 40% of its budget
    # before the monitor paused it (31% in all; docs/harness.md, known limits). Half the
    # budget unspent is what this asserts.
    print(f"spent {spent / (3 * BUDGET):.0%} of the frame budget")
    assert spent <= 0.50 * 3 * BUDGET, f"{spent / (3 * BUDGET):.0%} of the frame budget"
