"""One verdict per decision, whatever the entry point: `python -m analysis regression` and
`harness regress` print the same gate lines and exit with the same code on the same
records (the shipped reference, and synthetic sweeps with a missing layout, two systems
and two suites); `python -m analysis equivalence` and the report compare the same pairs
with the same verdict lines."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from harness_cli import ROOT
from synthetic_records import write_synthetic_run

from analysis.cli import main as analysis_main
from analysis.output.report import build_report_assets
from harness.cli import main as harness_main
from harness.store import Store
from harness.sweep import load_sweep

REFERENCE = ROOT / "results" / "reference" / "smoke-cartpole"
FAKE = ROOT / "tests" / "harness_fake_trainer.py"
ATARI = {"total_frames": 400_000, "episodes": 150, "updates": 10}


def run_analysis(capsys, args: list[str]) -> tuple[int, list[str], str]:
    code = analysis_main(["regression", *args])
    out = capsys.readouterr()
    return code, out.out.splitlines(), out.err


def run_harness(capsys, sweep: Path, root: Path, reference: Path) -> tuple[int, list[str]]:
    code = harness_main(["regress", "--sweep", str(sweep), "--results-root", str(root),
                         "--reference", str(reference)])
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[-1].startswith("regression verdict: ")
    # a gate that could not run says so on stderr, as an error
    errors = [x for x in captured.err.splitlines() if x.startswith("regression: ERROR")]
    return code, lines[:-1] + errors


def write_sweep(tmp: Path, systems: list[str], games: list[str]) -> Path:
    entries = "".join(f'[entry_points.{s}]\nentry = "{FAKE}"\n' for s in systems)
    f = tmp / "gate.toml"
    f.write_text(f'name = "gate"\nsystems = {systems}\nlayouts = ["a0-l0-d1", "a0-l1-d1"]\n'
                 f'games = {games}\nseeds = [1, 2, 3]\nframes = 1000\n{entries}'
                 '[regression]\ndelta = 0.3\n')
    return f


def fill(sweep: Path, root: Path, ref: Path, *, shift: dict[str, float] | None = None,
         skip_layout: str | None = None) -> None:
    """Synthetic records for every planned run of the sweep (the new side, under the
    harness's run ids) and the same runs as a reference."""
    s = load_sweep(sweep)
    store = Store(root, s.name)
    for r in s.runs:
        kw = {"system": r.system, "env_id": r.env_id, "seed": r.seed, "layout": r.layout.name,
              **(ATARI if r.env_id != "CartPole-v1" else {})}
        write_synthetic_run(ref, **kw)
        if r.layout.name != skip_layout:
            write_synthetic_run(root, run_dir=store.run_dir(r.run_id),
                                shift=(shift or {}).get(r.system, 0.0), **kw)


def test_reference_records_gate_the_same(tmp_path, capsys):
    """The shipped smoke-cartpole records, gated against themselves by both entry points
    (the fixed gate: the preset without its looks over training time, which end in it)."""
    root = tmp_path / "res"
    shutil.copytree(REFERENCE, root / "smoke" / "runs")
    preset = ROOT / "harness" / "presets" / "smoke.toml"
    fixed = tmp_path / "smoke.toml"
    fixed.write_text("\n".join(line for line in preset.read_text().splitlines()
                               if not line.startswith("looks_at")) + "\n")
    code, lines = run_harness(capsys, preset, root, REFERENCE)
    assert code == 0 and sum(line.startswith("regression over training time: PASS for cleanba-")
                             for line in lines) == 2, lines
    code, lines = run_harness(capsys, fixed, root, REFERENCE)
    expected: list[str] = []
    codes = []
    for system in ("cleanba-impala", "cleanba-ppo"):
        c, out, _ = run_analysis(capsys, ["--new", str(root / "smoke" / "runs"), "--reference",
                                          str(REFERENCE), "--where", f"system={system}",
                                          "--delta", "0.3"])
        expected += out
        codes.append(c)
    assert code == max(codes) == 0
    assert lines == expected
    assert sum("PASS (bitwise identical) for cleanba-" in line for line in lines) == 2


def test_missing_layout_fails_both_the_same_way(tmp_path, capsys):
    sweep = write_sweep(tmp_path, ["fake-ppo"], ["CartPole-v1"])
    root, ref = tmp_path / "res", tmp_path / "ref"
    fill(sweep, root, ref, skip_layout="a0-l1-d1")
    code, lines = run_harness(capsys, sweep, root, ref)
    a_code, out, err = run_analysis(capsys, ["--new", str(root / "gate" / "runs"),
                                             "--reference", str(ref), "--delta", "0.3"])
    assert code == a_code == 2 and out == []
    message = "new runs: no completed run of fake-ppo on layout ['a0-l1-d1'] (CartPole-v1)"
    assert lines == [f"regression: ERROR fake-ppo: {message}"]
    assert f"error: {message}" in err


@pytest.mark.parametrize("case", ["two systems", "two suites"])
def test_each_system_and_suite_is_one_gate(tmp_path, capsys, case):
    if case == "two systems":  # fake-impala dropped: one PASS, one REGRESSION
        sweep = write_sweep(tmp_path, ["fake-impala", "fake-ppo"], ["CartPole-v1"])
        selections = ["system=fake-impala", "system=fake-ppo"]
    else:  # runs_by_suite order: the larger suite first, then by name
        sweep = write_sweep(tmp_path, ["fake-ppo"], ["CartPole-v1", "Breakout-v5"])
        selections = ["env_id=Breakout-v5", "env_id=CartPole-v1"]
    root, ref = tmp_path / "res", tmp_path / "ref"
    fill(sweep, root, ref, shift={"fake-impala": -0.6})
    code, lines = run_harness(capsys, sweep, root, ref)
    new = ["--new", str(root / "gate" / "runs"), "--reference", str(ref), "--delta", "0.3"]
    # One system and one suite per side: without a selection the CLI refuses.
    a_code, out, err = run_analysis(capsys, new)
    assert a_code == 2 and out == []
    assert ("runs of 2 systems" if case == "two systems" else "runs form 2 suites") in err
    expected: list[str] = []
    codes = []
    for where in selections:
        c, out, _ = run_analysis(capsys, [*new, "--where", where])
        expected += out
        codes.append(c)
    assert lines == expected and code == max(codes)
    assert code == (1 if case == "two systems" else 0)
    assert sum(line.startswith("regression: ") for line in lines) == 2


@pytest.mark.parametrize("case", ["reference", "one layout per system", "two suites"])
def test_equivalence_and_report_compare_the_same_pairs(tmp_path, capsys, case):
    """The report used to have no whole-suite fallback: two systems with one layout each
    got verdicts from the CLI and none in the report."""
    runs = tmp_path / "runs"
    if case == "reference":
        runs = REFERENCE
    for seed in (1, 2, 3):
        if case == "one layout per system":
            for system, shift in (("fake-a", 0.0), ("fake-b", -0.5)):
                write_synthetic_run(tmp_path, system=system, seed=seed, shift=shift)
        elif case == "two suites":
            for layout in ("a0-l0-d1", "a0-l1-d1"):
                write_synthetic_run(tmp_path, seed=seed, layout=layout)
                write_synthetic_run(tmp_path, seed=seed, layout=layout, env_id="Breakout-v5",
                                    **ATARI)
    code = analysis_main(["equivalence", str(runs)])
    cli = [line for line in capsys.readouterr().out.splitlines() if " vs reference " in line]
    assets = build_report_assets([runs], tmp_path / "report", reps=100, aggregate_reps=200)
    report = [v["line"] for v in assets["verdicts"] if v["kind"] == "equivalence"]
    assert cli == report and len(cli) == {"reference": 6, "one layout per system": 1,
                                          "two suites": 2}[case]
    assert code == (0 if all(": PASS" in line for line in cli) else 1)
    assert code == (1 if case == "one layout per system" else 0)
