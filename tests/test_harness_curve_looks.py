"""Looks over training time, the harness side, with the test-only trainer
(tests/harness_fake_trainer.py, a learning curve per seed): a candidate that does not
learn is stopped at an early look (its records settle with the reason, the console says
it, exit 1) and a rerun trains nothing; an unchanged one killed after its first look
resumes at the next and passes at the end; status and regress read the recorded looks;
with adaptive seeds a failure over time ends the sweep; a bad looks_at names its line."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harness_cli import ROOT, harness

from harness.adaptive.curves import curve_design, curve_gates, gate_key, gate_options
from harness.sweep import SweepError, parse_sweep
from runrecord.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, EXIT_UNDECIDED

FAKE = ROOT / "tests" / "harness_fake_trainer.py"
UPDATES = 20


def sweep_file(tmp_path: Path, name: str, scale: float, reference: Path | None,
               sleep_s: float = 0.05, seeds: str = "1, 2, 3") -> Path:
    """`seeds` of the fake trainer on one layout; returns rise by `scale` per update."""
    regression = "" if reference is None else f"""
[regression]
reference = "{reference}"
delta = 0.3
looks_at = [0.2, 0.4, 0.6, 1.0]
"""
    text = f"""\
name = "{name}"
systems = ["fake-ppo"]
layouts = ["a0-l0-d1"]
games = ["CartPole-v1"]
seeds = [{seeds}]
frames = 2000
overrides = {{ sleep-s = {sleep_s}, updates = {UPDATES}, return-scale = {scale}, ledger = "{tmp_path / f'{name}.ledger'}" }}
{regression}
[entry_points.fake-ppo]
entry = "{FAKE}"
"""
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def run(sweep: Path, root: Path, *extra: str) -> subprocess.CompletedProcess:
    return harness("run", "--sweep", str(sweep), "--results-root", str(root), "--no-progress",
                   *extra)


def completions(tmp_path: Path, name: str) -> int:
    p = tmp_path / f"{name}.ledger"
    return len(p.read_text().splitlines()) if p.exists() else 0


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """A learning reference: 3 seeds whose returns rise to ~500 (normalised ~1)."""
    tmp = tmp_path_factory.mktemp("curve-ref")
    p = run(sweep_file(tmp, "ref", 25.0, None, sleep_s=0.0), tmp / "res")
    assert p.returncode == 0, p.stdout + p.stderr
    return tmp / "res" / "ref" / "runs"


@pytest.mark.slow
def test_a_candidate_that_does_not_learn_is_stopped_early_and_stays_stopped(tmp_path,
                                                                          reference):
    sweep = sweep_file(tmp_path, "broken", 0.0, reference, sleep_s=0.3)
    root = tmp_path / "res"
    p = run(sweep, root, "--share-cores", "--verbose")  # the design's internals too
    out = p.stdout
    assert p.returncode == EXIT_FAILED, out + p.stderr
    assert "joint law: union bound (the reference's 3 seeds" in out, out
    assert "PASS at the full budget only" in out
    line = next(x for x in out.splitlines() if ": REGRESSION;" in x)
    assert "look 1/4 at 20% of the budget (400 frames)" in line, line
    assert "stopped at 20% of the budget, 80% of its frames not spent" in line
    assert "regression over training time: REGRESSION for fake-ppo CartPole-v1 at look 1 " \
           "of 4 (20% of the budget); 80% of the frame budget not spent" in out
    assert out.count("  stopped: ") == 3 and completions(tmp_path, "broken") == 0
    runs = sorted((root / "broken" / "runs").iterdir())
    for d in runs:  # every record settled, with the decision as its reason
        m = json.loads((d / "manifest.json").read_text())
        assert m["status"] == "interrupted" and m["error"]["type"] == "Stopped", m["error"]
        assert m["error"]["message"].startswith(
            "stopped: regression decided at 20% of the budget (look 1 of 4, 400 frames"), m
        episodes = (d / "episodes.csv").read_text().splitlines()[1:]
        assert len(episodes) < UPDATES  # stopped, not run to the end
    before = (root / "broken" / "adaptive" / "curve-looks.jsonl").read_bytes()
    manifests = [(d / "manifest.json").read_bytes() for d in runs]
    again = run(sweep, root, "--share-cores")  # reads the decision back, starts nothing
    assert again.returncode == EXIT_FAILED, again.stdout + again.stderr
    assert "(recorded by an earlier run)" in again.stdout and again.stdout.count(
        "  stopped: ") == 3
    assert (root / "broken" / "adaptive" / "curve-looks.jsonl").read_bytes() == before
    assert [(d / "manifest.json").read_bytes() for d in runs] == manifests
    st = harness("status", "--sweep", str(sweep), "--results-root", str(root))
    assert "stopped, not re-run" in st.stdout and "will be re-run" not in st.stdout, st.stdout
    assert "REGRESSION for fake-ppo CartPole-v1 at look 1 of 4" in st.stdout
    reg = harness("regress", "--sweep", str(sweep), "--results-root", str(root))
    assert reg.returncode == EXIT_FAILED, reg.stdout + reg.stderr
    assert "regression verdict: REGRESSION" in reg.stdout


def test_the_key_of_a_gates_stored_plan_and_looks_stays_the_same():
    # a resumed sweep finds its gate's plan and looks by this key
    text = ('name = "t"\nsystems = ["cleanba-ppo"]\nlayouts = ["a0-l0-d1"]\n'
            'games = ["CartPole-v1"]\nseeds = [1, 2]\nframes = 1000\n'
            "[regression]\ndelta = 0.3\nlooks_at = [0.5, 1.0]\n")
    sweep = parse_sweep(text, "sweep.toml", check_games=False)
    gate = curve_gates(sweep, sweep.runs)[0]
    design = curve_design(sweep.regression)
    assert design is not None
    key = gate_key(gate, design, gate.options(gate_options(sweep)), Path("ref"), None)
    assert key == "56e5e38506334200"


@pytest.mark.parametrize("keys, line, words", [
    ("looks_at = [0.5, 0.9]", 8, "end at 1"),
    ("looks_at = 0.5", 8, "looks_at must be a list"),
    ("looks_at = [0.5, 1.0]\nlook_spending = 'linear'", 9, "valid: obrien-fleming, pocock"),
    ("looks_at = [0.5, 1.0]\nlook_correlation = 'guess'", 9, "valid: reference, union")])
def test_a_bad_looks_at_names_its_line(keys, line, words):
    text = ('name = "t"\nsystems = ["cleanba-ppo"]\nlayouts = ["a0-l0-d1"]\n'
            'games = ["CartPole-v1"]\nseeds = [1]\nframes = 1000\n'
            f"[regression]\n{keys}\n")
    with pytest.raises(SweepError) as e:
        parse_sweep(text, "sweep.toml", check_games=False)
    assert f"sweep.toml: line {line}: " in str(e.value) and words in str(e.value), e.value


def test_the_cli_refuses_a_bad_looks_at_with_exit_2_and_writes_nothing(tmp_path):
    path = sweep_file(tmp_path, "bad", 0.0, tmp_path)
    path.write_text(path.read_text().replace("[0.2, 0.4, 0.6, 1.0]", "[0.2, 0.9]"))
    p = run(path, tmp_path / "res")
    assert p.returncode == EXIT_BAD_INPUT and "end at 1" in p.stderr, p.stderr
    assert not (tmp_path / "res").exists()


@pytest.mark.slow
def test_with_adaptive_seeds_a_failure_over_time_ends_the_sweep_in_its_first_batch(
        tmp_path, reference):
    sweep = sweep_file(tmp_path, "adaptive", 0.0, reference, sleep_s=0.2)
    sweep.write_text(sweep.read_text() + "\n[adaptive]\nverdicts = ['gate']\n"
                     "first_seeds = 2\nbatch_seeds = 1\nmax_seeds = 3\n")
    root = tmp_path / "res"
    p = run(sweep, root, "--share-cores", "--verbose")
    assert p.returncode == EXIT_FAILED, p.stdout + p.stderr
    assert "alpha spent by the last look 0.025" in p.stdout  # half of the gate's alpha
    assert "2 new vs 3 reference seeds" in p.stdout
    assert "no look over seeds is taken" in p.stdout, p.stdout
    assert completions(tmp_path, "adaptive") == 0
    assert not (root / "adaptive" / "adaptive" / "looks.jsonl").exists()


@pytest.mark.slow
def test_a_killed_run_resumes_at_its_first_look_not_recorded(tmp_path, reference):
    sweep = sweep_file(tmp_path, "resume", 25.0, reference, sleep_s=0.3)
    root = tmp_path / "res"
    looks = root / "resume" / "adaptive" / "curve-looks.jsonl"
    # The runs wait after update 6 (30% of the budget: past look 1, before look 2) until the
    # SIGTERM (tests/harness_fake_trainer.py): no run can complete before it.
    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", "--sweep", str(sweep),
                             "--results-root", str(root), "--no-progress", "--share-cores"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, "FAKE_TRAINER_HOLD_AFTER": "6"})
    deadline = time.monotonic() + 120
    while not (looks.exists() and '"index": 1' in looks.read_text()):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"look 1 was never recorded (harness rc {proc.poll()})")
        time.sleep(0.1)  # a poll of the looks' file
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    assert '"index": 1' in looks.read_text() and completions(tmp_path, "resume") == 0, out
    p = run(sweep, root, "--share-cores")
    assert p.returncode == EXIT_OK, p.stdout + p.stderr
    assert "look 1/4 at 20% of the budget (400 frames): CONTINUE" in p.stdout
    assert "(recorded by an earlier run)" in p.stdout and ": PASS;" in p.stdout, p.stdout
    indexes = [json.loads(line)["index"] for line in looks.read_text().splitlines()]
    assert sorted(indexes) == [0, 1, 2, 3, 4]  # the plan and each look, once
    for d in (root / "resume" / "runs").iterdir():  # restarted, no attempt spent
        assert json.loads((d / "manifest.json").read_text())["status"] == "completed"
        assert (d / "previous_attempts" / "1").is_dir()
    # An unchanged candidate: CONTINUE at every look, PASS at the full budget only.
    decisions = re.findall(r": look \d/4 at \d+% of the budget \([\d,]+ frames\): (\w+);",
                           p.stdout)
    assert decisions == ["CONTINUE", "CONTINUE", "CONTINUE", "PASS"], p.stdout
    assert "the fixed gate at the full budget says PASS" in p.stdout
    reg = harness("regress", "--sweep", str(sweep), "--results-root", str(root))
    assert reg.returncode == EXIT_OK and "regression verdict: PASS" in reg.stdout, reg.stdout


def test_a_one_seed_candidate_completes_and_is_undecided_not_failed(tmp_path, reference):
    """`--seeds 1` completes every run, but one new seed has no spread of its
    own, so the looks cannot decide the gate: UNDECIDED (exit 4) with that reason, in
    `harness run` and `harness regress`; never exit 1 (but under --strict), never a run
    said not to complete."""
    sweep = sweep_file(tmp_path, "one", 25.0, reference, sleep_s=0.0, seeds="1")
    root = tmp_path / "res"
    p = run(sweep, root)
    assert p.returncode == EXIT_UNDECIDED, p.stdout + p.stderr
    assert "sweep one: 1 completed" in p.stdout
    assert ("regression over training time: UNDECIDED for fake-ppo CartPole-v1: these "
            "seeds cannot decide it at look 1: 1 new vs 3 reference seeds") in p.stdout
    assert "refused" not in p.stdout + p.stderr and "NONE" not in p.stdout
    reg = harness("regress", "--sweep", str(sweep), "--results-root", str(root))
    assert reg.returncode == EXIT_UNDECIDED, reg.stdout + reg.stderr
    assert "regression verdict: UNDECIDED" in reg.stdout
    assert "these seeds cannot decide it: 1 new vs 3 reference seeds" in reg.stdout
    strict = run(sweep, root, "--strict")
    assert strict.returncode == EXIT_FAILED, strict.stdout + strict.stderr
