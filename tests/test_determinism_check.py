"""The determinism check (`python -m cleanba.determinism_check`): its tier logic, and that
it sees non-determinism injected on purpose (CLEANBA_FAULT=noise:N) at update N."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cleanba_runs import trainer_env

from analysis.verdicts.equivalence import records_identical
from cleanba.tools.determinism_check import BITWISE, LAYOUTS, available, first_difference, tier
from harness.cli import main as harness_main
from runrecord import load_run


def test_first_difference_is_the_1_based_update():
    assert first_difference(["a", "b", "c"], ["a", "b", "c"]) is None
    assert first_difference(["a", "b", "c"], ["a", "x", "c"]) == 2
    assert first_difference(["a", "b"], ["a", "b", "c"]) == 3


def test_tier_names_the_weakest_promise_and_its_update():
    ref = ["a", "b", "c"]
    assert tier(ref, ref, {"a0-l1-d1": ref, "a0-l0,1-d1": ref}) == BITWISE
    assert tier(ref, ref, {"a0-l1-d1": ref, "a0-l0,1-d1": ["a", "b", "x"]}) == (
        "bitwise run to run only (layouts differ from update 3)")
    assert tier(ref, ["a", "y", "c"], {"a0-l1-d1": ["x", "b", "c"]}) == (
        "not bitwise (run to run differs from update 2)")


def names(devices: int, platform: str) -> list[str]:
    return [lay[0] for lay in available(LAYOUTS, devices, platform)]


def test_layouts_the_devices_allow():
    assert names(4, "cpu") == ["a0-l0-d1", "a0-l1-d1", "a0-l0,1-d1", "a0,1-l2,3-d1", "a0-l0-d2"]
    assert names(2, "cpu") == ["a0-l0-d1", "a0-l1-d1", "a0-l0,1-d1", "a0-l0-d2"]
    assert names(1, "gpu") == ["a0-l0-d1"]  # d2 would put two processes on one GPU


def test_harness_subcommand_parses_like_the_module(capsys):
    with pytest.raises(SystemExit) as e:
        harness_main(["determinism-check", "--config", "nope"])
    assert e.value.code == 2 and "nope" in capsys.readouterr().err


LAYOUT_NAMES = [lay[0] for lay in LAYOUTS]


def check(tmp_path: Path, **env: str) -> str:
    p = subprocess.run([sys.executable, "-m", "cleanba.determinism_check", "--out-dir",
                        str(tmp_path)], env=trainer_env(4, **env), capture_output=True,
                       text=True, timeout=900, cwd=Path(__file__).parents[1])
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    return p.stdout


@pytest.mark.slow
def test_the_check_reports_bitwise_layouts_and_an_injected_nondeterminism(tmp_path):
    out = check(tmp_path / "clean")
    assert "tier: bitwise across layouts" in out, out
    # The same records, whole: tests/test_cleanba_deterministic.py's matrix leaves CartPole
    # PPO on these five layouts to this run (losses and episodes too, not only checksums).
    runs = {d.name: load_run(d) for d in (tmp_path / "clean").iterdir()}
    assert sorted(runs) == sorted(["reference", "repeat", *LAYOUT_NAMES[1:]])
    reference = runs["reference"]
    assert len(reference.episodes) > 10 and all(reference.updates["params_checksum"])
    for name, r in runs.items():
        assert r.manifest["hyperparameters"]["deterministic"] is True
        assert records_identical(r, reference) is None, (name, records_identical(r, reference))
    # the facts printed are those every run's manifest records (its determinism block)
    recorded = reference.manifest["determinism"]
    for key in ("device_kind", "jaxlib", "xla_flags", "usable_cpus"):
        assert f"  {key}: {recorded[key]}\n" in out, (key, recorded[key], out)
    assert "a0-l0-d2" in out.split("tier: ")[0]  # two processes on CPU
    # noise from the OS's entropy in update 2's rewards: every run differs from update 2 on
    out = check(tmp_path / "noisy", CLEANBA_FAULT="noise:2")
    assert "tier: not bitwise (run to run differs from update 2)" in out, out
    # decided by the reference and its repeat: no other layout was run
    assert "not run: run to run already differs" in out, out
    assert sorted(p.name for p in (tmp_path / "noisy").iterdir()) == ["reference", "repeat"]
