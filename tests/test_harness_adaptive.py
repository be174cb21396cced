"""Adaptive seeds, the harness side: the [adaptive] table's checks, the seeds
of an adaptive sweep, the looks store, and batches run by the harness with the test-only
trainer (tests/harness_fake_trainer.py): decided early, run to the cap, a failed run,
and kills (SIGTERM and kill -9 of the harness, between batches and during one) followed
by a resume that redoes no run and records no look twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harness_cli import ROOT, harness, run_args
from trainer_output import trainer_output

from harness.adaptive.looks import (
    LOOKS_FILE,
    adaptive_dir,
    append_look,
    plan_key,
    read_lines,
    recorded_looks,
)
from harness.store import Store
from harness.sweep import SweepError, load_sweep, parse_sweep
from harness.sweep.model import AdaptiveConfig, adaptive_seeds
from runrecord.exits import EXIT_UNDECIDED

FAKE = ROOT / "tests" / "harness_fake_trainer.py"

BASE = """\
name = "t"
systems = ["cleanba-ppo"]
layouts = ["a0-l0-d1", "a0-l1-d1"]
games = ["CartPole-v1"]
seeds = [1, 2, 3]
frames = 4096
"""


def error_of(text: str) -> str:
    with pytest.raises(SweepError) as e:
        parse_sweep(text, "sweep.toml", check_games=False)
    return str(e.value)


# --------------------------------------------------------------------------- the table

@pytest.mark.parametrize("table, line, words", [  # [adaptive] is line 8 of each file
    ("[adaptive]\nfirst_seed = 3\n", 9, "unknown key 'first_seed'"),
    ("[adaptive]\nfirst_seeds = 1\n", 9, "first_seeds must be >= 2"),
    ("[adaptive]\nfirst_seeds = 4\nmax_seeds = 3\n", 10, "max_seeds (3) must be >= first_seeds"),
    ("[adaptive]\nbatch_seeds = 0\n", 9, "batch_seeds must be an integer >= 1"),
    ("[adaptive]\nalpha = 0.7\n", 9, "alpha must be in (0, 0.5)"),
    ("[adaptive]\nverdicts = ['equivalence', 'gates']\n", 9, "unknown verdict 'gates'"),
    ("[adaptive]\nverdicts = ['gate']\n", 9, "the gate needs a fixed reference"),
    ("[adaptive]\nverdicts = ['gate']\nreference = 'no/such/folder'\n", 10,
     "reference 'no/such/folder': no such folder"),
    ("[adaptive]\nreference = 'results'\n", 9, "add 'gate' to verdicts"),
    ("[adaptive]\nspending = 'pocock-ish'\n", 9, "unknown spending 'pocock-ish'"),
    ("[adaptive]\nalpha = 'small'\n", 9, "alpha must be a number"),
])
def test_bad_adaptive_values_name_their_line(table, line, words):
    msg = error_of(BASE + "\n" + table)
    assert f"sweep.toml: line {line}:" in msg and words in msg, msg


def test_adaptive_seeds_take_the_list_then_count_on():
    assert adaptive_seeds([1, 2, 3], 5) == (1, 2, 3, 4, 5)
    assert adaptive_seeds([7, 3, 9, 1], 3) == (7, 3, 9)
    assert adaptive_seeds([10], 3) == (10, 11, 12)


def test_adaptive_sweep_has_max_seeds_per_side_ranked_in_look_order():
    sw = parse_sweep(BASE + "\n[adaptive]\nfirst_seeds = 2\nbatch_seeds = 1\nmax_seeds = 4\n",
                     "sweep.toml", check_games=False)
    assert sw.adaptive == AdaptiveConfig(first_seeds=2, batch_seeds=1, max_seeds=4)
    assert len(sw.runs) == 2 * 4
    assert {(r.seed, r.seed_rank) for r in sw.runs} == {(1, 0), (2, 1), (3, 2), (4, 3)}
    # The run ids do not depend on the rank (the same run as in a fixed sweep).
    fixed = parse_sweep(BASE.replace("[1, 2, 3]", "[1, 2, 3, 4]"), "sweep.toml",
                        check_games=False)
    assert {r.run_id for r in fixed.runs} == {r.run_id for r in sw.runs}


def test_until_decided_gives_a_sweep_without_table_the_default_design():
    sw = parse_sweep(BASE, "sweep.toml", check_games=False, until_decided=True)
    assert sw.adaptive == AdaptiveConfig()
    assert sorted({r.seed for r in sw.runs}) == list(range(1, 10))
    assert parse_sweep(BASE, "sweep.toml", check_games=False).adaptive is None


def test_cli_rejects_a_bad_table_with_exit_2_and_writes_nothing(tmp_path):
    sweep = tmp_path / "s.toml"
    sweep.write_text(BASE + "\n[adaptive]\nalpha = 1.5\n")
    root = tmp_path / "res"
    p = subprocess.run([sys.executable, "-m", "harness", "run", "--sweep", str(sweep),
                        "--results-root", str(root)], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "line 9" in p.stderr and "alpha" in p.stderr
    assert not root.exists()


# --------------------------------------------------------------------------- the store

def test_the_plan_key_of_stored_looks_stays_the_same():
    # looks already on disk are found by this key: a new one would lose their spent alpha
    design = {"first_seeds": 3, "batch_seeds": 2, "max_seeds": 9,
              "verdicts": ["equivalence", "gate"]}
    key = plan_key(design, {"delta": 0.2, "layouts": ["a0-l0-d1"]}, ["b2", "a1"])
    assert key == "c8937c475e6ee32d"


def test_looks_store_replaces_whole_and_never_reads_a_torn_line(tmp_path):
    store = Store(tmp_path, "s")
    append_look(store, "p1", 1, [{"subject": "a"}, {"subject": "b"}], ["r1", "r2"])
    append_look(store, "p2", 1, [{"subject": "a"}], ["r9"])
    append_look(store, "p1", 2, [{"subject": "a"}], ["r1", "r2", "r3"])
    assert {i: [d["subject"] for d in ds] for i, ds in recorded_looks(store, "p1").items()} \
        == {1: ["a", "b"], 2: ["a"]}
    # Recording a look again replaces it, never adds a second copy.
    append_look(store, "p1", 2, [{"subject": "c"}], ["r1"])
    assert [d["subject"] for d in recorded_looks(store, "p1")[2]] == ["c"]
    # A torn last line (no newline) or a garbled one is not a look.
    path = adaptive_dir(store) / LOOKS_FILE
    with open(path, "a") as f:
        f.write('{"plan": "p1", "index": 3, "look": {"subject": "x"}}garbage\n')
        f.write('{"plan": "p1", "index": 3, "look": {"subject": "torn"')
    assert sorted(recorded_looks(store, "p1")) == [1, 2]
    assert len(read_lines(store)) == 4
    assert not list(path.parent.glob(".*.tmp"))


# --------------------------------------------------------------------------- runs

DESIGN = "first_seeds = 2\nbatch_seeds = 1\nmax_seeds = 4"


def fake_sweep(tmp_path: Path, *, delta: float, offset: float = 0.0, design: str = DESIGN,
               sleep_s: float = 0.05, updates: int = 4, extra: str = "") -> Path:
    """Two layouts of the fake trainer; the second one's returns are `offset` higher and
    jittered per seed (so the per-seed differences have a spread)."""
    text = f"""\
name = "ad"
systems = ["fake-ppo"]
games = ["CartPole-v1"]
seeds = [1, 2, 3]
frames = 1000
overrides = {{ sleep-s = {sleep_s}, updates = {updates}, ledger = "{tmp_path / 'ledger.txt'}" }}
{extra}
[entry_points.fake-ppo]
entry = "{FAKE}"

[report]
delta = {delta}

[adaptive]
{design}

[[matrix]]
layouts = ["a0-l0-d1"]

[[matrix]]
layouts = ["a0-l1-d1"]
overrides = {{ sleep-s = {sleep_s}, updates = {updates}, ledger = "{tmp_path / 'ledger.txt'}", return-offset = {offset}, return-jitter = 1.0 }}
"""
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    return path


def ledger(tmp_path: Path) -> list[str]:
    p = tmp_path / "ledger.txt"
    return [line.split()[0] for line in p.read_text().splitlines()] if p.exists() else []


def look_indexes(root: Path) -> list[int]:
    return [e["index"] for e in read_lines(Store(root, "ad"))]


def test_easy_comparison_stops_at_the_first_look_and_resume_reuses_it(tmp_path):
    sweep = fake_sweep(tmp_path, delta=0.2)
    root = tmp_path / "res"
    p = harness(*run_args(sweep, root))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "stopped at look 1 of 3: every verdict decided before the cap" in p.stdout, p.stdout
    sw = load_sweep(sweep)
    first = [r.run_id for r in sw.runs if r.seed_rank < 2]
    assert sorted(ledger(tmp_path)) == sorted(first)  # seeds 3 and 4 never ran
    assert look_indexes(root) == [1]
    before = (adaptive_dir(Store(root, "ad")) / LOOKS_FILE).read_bytes()
    p = harness(*run_args(sweep, root))
    assert p.returncode == 0 and "reused" in p.stdout, p.stdout + p.stderr
    assert (adaptive_dir(Store(root, "ad")) / LOOKS_FILE).read_bytes() == before
    assert sorted(ledger(tmp_path)) == sorted(first)
    st = harness("status", "--sweep", str(sweep), "--results-root", str(root))
    assert st.returncode == 0, st.stdout + st.stderr
    assert "stopped at look 1 of 3" in st.stdout and "the 4 runs of the looks" in st.stdout, st.stdout
    plan = harness("plan", "--sweep", str(sweep), "--results-root", str(root), "--no-commands")
    assert plan.returncode == 0 and "adaptive: looks at 2, 3, 4 seeds per side" in plan.stdout
    # The report covers the runs of look 1, not the 4 never needed.
    p = harness("report", "--sweep", str(sweep), "--results-root", str(root))
    assert p.returncode == 0, p.stdout + p.stderr
    page = (root / "ad" / "report" / "index.html").read_text()
    assert "This report covers 4 runs" in page and ">pending<" not in page
    assert "Stopped at look 1 of 3: every verdict decided before the cap" in page


def test_hard_comparison_runs_to_the_cap_and_the_report_shows_every_look(tmp_path):
    sweep = fake_sweep(tmp_path, delta=0.0005, offset=0.1)
    root = tmp_path / "res"
    p = harness(*run_args(sweep, root))
    # UNDECIDED AT CAP is neither a pass nor a failure: the verdicts' own exit code
    assert p.returncode == EXIT_UNDECIDED, p.stdout + p.stderr
    assert "reached the cap at look 3 without a decision" in p.stdout, p.stdout
    assert look_indexes(root) == [1, 2, 3]
    assert len(ledger(tmp_path)) == 8
    p = harness(*run_args(sweep, root), "--strict")  # the looks reused, nothing run
    assert p.returncode == 1 and "reached the cap at look 3" in p.stdout, p.stdout + p.stderr
    assert look_indexes(root) == [1, 2, 3] and len(ledger(tmp_path)) == 8
    p = harness("report", "--sweep", str(sweep), "--results-root", str(root))
    assert p.returncode == 0, p.stdout + p.stderr
    page = (root / "ad" / "report" / "index.html").read_text()
    assert "<h2 id='adaptive-seeds'>Adaptive seeds</h2>" in page
    assert "Reached the cap at look 3" in page
    # right under the verdicts: for an adaptive sweep its looks hold the decisions
    assert page.index("id='verdicts'") < page.index("id='adaptive-seeds'") \
        < page.index("id='figures'")
    for n in (2, 3, 4):  # seeds per side at each look
        assert f"a0-l0-d1 {n}" in page and f"a0-l1-d1 {n}" in page


def test_strict_on_a_fixed_sweep_is_refused_and_writes_nothing(tmp_path):
    sweep = fake_sweep(tmp_path, delta=0.2)
    sweep.write_text(sweep.read_text().replace(f"[adaptive]\n{DESIGN}", ""))
    root = tmp_path / "res"
    p = harness(*run_args(sweep, root), "--strict")
    assert p.returncode == 2 and "--strict is for adaptive runs" in p.stderr, p.stderr
    assert not root.exists() and not (tmp_path / "ledger.txt").exists()


def test_failed_run_stops_the_look_and_the_next_run_retries_it(tmp_path):
    sweep = fake_sweep(tmp_path, delta=0.2)
    sweep.write_text(sweep.read_text().replace("return-offset = 0.0",
                                               "return-offset = 0.0, fail-seeds = [2]"))
    root = tmp_path / "res"
    p = harness(*run_args(sweep, root))
    assert p.returncode == 1, p.stdout + p.stderr
    assert "this look cannot be decided" in p.stdout and "will be retried" in p.stdout, p.stdout
    assert look_indexes(root) == []
    assert len(ledger(tmp_path)) == 3
    # The next run retries it (a transient error, one attempt left), then gives up.
    p = harness(*run_args(sweep, root))
    assert p.returncode == 1 and "2 of 2 attempts spent" in p.stdout, p.stdout + p.stderr
    assert look_indexes(root) == [] and len(ledger(tmp_path)) == 3


def _wait_for(cond, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    pytest.fail("timed out waiting for the harness")


@pytest.mark.parametrize("sig, when", [
    (signal.SIGTERM, "between batches"), (signal.SIGKILL, "between batches"),
    (signal.SIGTERM, "during a batch"), (signal.SIGKILL, "during a batch")])
def test_killed_adaptive_sweep_resumes_at_the_right_look(tmp_path, sig, when):
    sweep = fake_sweep(tmp_path, delta=0.0005, offset=0.1, sleep_s=0.3, updates=6)
    root = tmp_path / "res"
    sw = load_sweep(sweep)
    look2 = [root / "ad" / "runs" / r.run_id for r in sw.runs if r.seed_rank == 2]
    # The runs of look 2 wait after update 3 (tests/harness_fake_trainer.py) until the
    # signal: look 2 cannot be recorded first, however fast or loaded the machine.
    holds = ",".join(sorted({f"3@{r.seed}" for r in sw.runs if r.seed_rank == 2}))
    proc = subprocess.Popen([sys.executable, "-m", "harness", *run_args(sweep, root)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, "FAKE_TRAINER_HOLD_AFTER": holds})
    if when == "between batches":  # the moment look 1 is recorded
        _wait_for(lambda: look_indexes(root) == [1])
    else:  # a run of look 2 half-way
        _wait_for(lambda: any("holding after update 3" in trainer_output(d) for d in look2))
    proc.send_signal(sig)
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == (130 if sig == signal.SIGTERM else -9), out
    recorded_before = look_indexes(root)
    assert recorded_before == [1], out
    p = harness(*run_args(sweep, root))
    assert p.returncode == EXIT_UNDECIDED, p.stdout + p.stderr  # the cap, undecided
    assert "look 1 of 3 (2 seeds per side) was recorded by an earlier run; reused" in p.stdout
    assert look_indexes(root) == [1, 2, 3]  # each look once
    completions = ledger(tmp_path)
    assert sorted(completions) == sorted(r.run_id for r in sw.runs)  # each run once
    for entry in read_lines(Store(root, "ad")):  # a look counts each of its runs once
        assert len(entry["runs"]) == len(set(entry["runs"])) == 2 * (entry["index"] + 1)


def test_until_decided_runs_a_fixed_sweep_adaptively_and_status_knows_it(tmp_path):
    sweep = fake_sweep(tmp_path, delta=0.2)
    sweep.write_text(sweep.read_text().replace("[adaptive]\n" + DESIGN + "\n", ""))
    root = tmp_path / "res"
    p = harness(*run_args(sweep, root, "--until-decided"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "looks at 3, 5, 7, 9 seeds per side" in p.stdout, p.stdout
    assert "stopped at look 1 of 4" in p.stdout, p.stdout
    assert len(ledger(tmp_path)) == 2 * 3
    st = harness("status", "--sweep", str(sweep), "--results-root", str(root))
    assert st.returncode == 0 and "stopped at look 1 of 4" in st.stdout, st.stdout + st.stderr
    # Without the flag the same file is a fixed sweep of its 3 listed seeds: all done.
    p = harness(*run_args(sweep, root))
    assert p.returncode == 0 and "6 already-completed" in p.stdout, p.stdout


def test_batches_go_through_the_slurm_backend_one_submission_per_look(tmp_path):
    sweep = fake_sweep(tmp_path, delta=0.0005, offset=0.1, extra="[slurm]\ntimeout_min = 5")
    root = tmp_path / "res"
    p = harness(*run_args(sweep, root, "--backend", "slurm", "--slurm-cluster", "local"))
    assert p.returncode == EXIT_UNDECIDED, p.stdout + p.stderr
    assert "reached the cap at look 3" in p.stdout, p.stdout
    assert look_indexes(root) == [1, 2, 3] and len(ledger(tmp_path)) == 8
    batches = [json.loads(x) for x in (root / "ad" / "harness-runs.jsonl").read_text().splitlines()]
    assert [(e["backend"], e["runs"]) for e in batches] == [("slurm", 4), ("slurm", 2),
                                                           ("slurm", 2)]


def test_the_exit_code_of_the_last_looks_decisions():
    """0 only when every verdict passed; a decided failure 1; UNDECIDED AT CAP 4 (1 under
    --strict), as `analysis equivalence` and `harness regress` give them."""
    from analysis.sequential import UNDECIDED, Look
    from harness.adaptive.looks import decisions_exit

    def look(decision: str) -> Look:
        return Look("equivalence", "g", 3, {"a": 4, "b": 4}, 0.0, 1.0, decision, "")

    assert decisions_exit([look("PASS"), look("PASS")]) == 0
    assert decisions_exit([look("PASS"), look(UNDECIDED)]) == EXIT_UNDECIDED
    assert decisions_exit([look("PASS"), look(UNDECIDED)], strict=True) == 1
    assert decisions_exit([look("DIFFERENT"), look(UNDECIDED)]) == 1
    assert decisions_exit([look("REGRESSION")]) == 1
