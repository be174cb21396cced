"""benchmarks/gpu_suite.py: its bad-input handling and its pure parts. The whole sequence
in --tiny mode on CPU (so the GPU suite cannot rot between GPU leases) runs in
tests/test_device_kit.py, through the device kit and run.sh on the GPU image's stack."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from harness_cli import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

from gpu_suite import (  # noqa: E402
    ALL_STEPS,
    SHARES,
    cap_now,
    compare_checksums,
    step_caps,
    window_sps,
)
from reference_cleanba import PATCHES, ReferenceError, patched_script  # noqa: E402
from suite_table import NOT_YET, TRAINING_ROWS, render_markdown  # noqa: E402

from runrecord.exits import EXIT_BAD_INPUT  # noqa: E402

SUITE = ROOT / "benchmarks" / "gpu_suite.py"


def run_suite(*args: str, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(SUITE), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


def test_bad_input_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    for args in (["--only", "no-such-step"], ["--reference-path", str(tmp_path)],
                 ["--actor-grid", "8x3"], ["--budget-s", "10"]):
        out = tmp_path / "never"
        proc = run_suite("--out", str(out), *args, timeout=120)
        assert proc.returncode == EXIT_BAD_INPUT, (args, proc.stderr)
        assert "error:" in proc.stderr and not out.exists()


def test_window_sps_by_hand() -> None:
    # updates end at 10, 20, 30, 40, 50 s with 100 steps each; the window starts after 2
    steps = [100.0, 200.0, 300.0, 400.0, 500.0]
    times = [10.0, 20.0, 25.0, 30.0, 40.0]
    got = window_sps(steps, times)
    assert got == {"steady_sps": 300 / 20, "first_half_sps": 100 / 5, "second_half_sps": 200 / 15}
    assert window_sps(steps[:3], times[:3])["steady_sps"] is None


def test_step_caps_share_the_budget_and_pass_savings_on() -> None:
    shares = step_caps(ALL_STEPS, 470.0)
    assert list(shares) == list(ALL_STEPS) and sum(shares.values()) == pytest.approx(470.0)
    assert shares == {step: pytest.approx(share) for step, share in SHARES}  # 470 s: as listed
    two = step_caps(("ours-ppo", "reference-ppo"), 100.0)  # the listed shares, scaled
    ppo, ref = dict(SHARES)["ours-ppo"], dict(SHARES)["reference-ppo"]
    assert two == {"ours-ppo": pytest.approx(100.0 * ppo / (ppo + ref)),
                   "reference-ppo": pytest.approx(100.0 * ref / (ppo + ref))}
    # at the start the first step gets its share; a step after one that saved 30 s gets
    # its share plus those 30 s; the last step gets whatever is left
    assert cap_now("environment", shares, 470.0) == pytest.approx(shares["environment"])
    left = 470.0 - shares["environment"] + 30.0 - shares["envpool-raw"]
    assert cap_now("actor-overhead", shares, left) == pytest.approx(shares["actor-overhead"] + 30)
    assert cap_now("deterministic", shares, 12.5) == 12.5


def test_compare_checksums() -> None:
    assert compare_checksums(["a", "b"], ["a", "b", "c"]) == {
        "updates_compared": 2, "checksums_identical": True, "first_mismatch_update": None}
    assert compare_checksums(["a", "b"], ["a", "x"])["first_mismatch_update"] == 2
    assert not compare_checksums([], [])["checksums_identical"]
    assert not compare_checksums(["", ""], ["", ""])["checksums_identical"]  # no checksums


def test_empty_results_say_not_yet_measured() -> None:
    table = render_markdown({"steps": {}})
    for label, _, _ in TRAINING_ROWS:
        assert f"| {label} | {NOT_YET} |" in table
    assert "EnvPool raw, Breakout-v5 | not yet measured" in table


def test_reference_patch_refuses_a_script_it_does_not_fit(tmp_path: Path) -> None:
    checkout = tmp_path / "cleanba-checkout"
    (checkout / "cleanba").mkdir(parents=True)
    fitting = "\n".join(p.old for p in PATCHES)  # every patched spot, nothing else
    (checkout / "cleanba" / "cleanba_ppo.py").write_text(fitting)
    script = patched_script(checkout, tmp_path / "work")
    text = script.read_text()
    assert all(p.new in text for p in PATCHES)
    assert (script.parent / "reference_shims.py").exists()
    (checkout / "cleanba" / "cleanba_ppo.py").write_text(fitting.replace("jax.tree_map(", ""))
    with pytest.raises(ReferenceError, match="jax.tree_map"):
        patched_script(checkout, tmp_path / "work2")
