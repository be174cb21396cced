"""Records stay comparable across JAX versions and devices: `python -m analysis
equivalence` (and the report) say when the two sides ran other jax, jaxlib, EnvPool
versions or device kinds (analysis.verdicts.stacks), in the printed lines and the JSON."""

from __future__ import annotations

import json

import pytest
from synthetic_records import write_synthetic_run

from analysis.cli import main as analysis_main
from analysis.output.report import build_report_assets
from analysis.verdicts.stacks import NOT_RECORDED, compare_stacks, run_stack

OLD = {"jax": "0.10.2", "jaxlib": "0.10.2", "envpool": "1.2.5"}
NEW = {"jax": "0.12.0.1", "jaxlib": "0.12.0.1", "envpool": "1.2.7"}
H100 = "NVIDIA H100 80GB HBM3"


def manifest(packages: dict | None = None, devices: tuple[str, ...] = ("cpu",),
             determinism: dict | None = None) -> dict:
    return {"provenance": {"packages": packages or {}}, "layout": {"devices": list(devices)},
            **({"determinism": determinism} if determinism else {})}


def test_run_stack_reads_provenance_layout_and_the_determinism_block():
    assert run_stack(manifest(OLD, ("cpu", "cpu"))) == {**OLD, "device_kind": "cpu"}
    assert run_stack(manifest(OLD, (H100, "cpu")))["device_kind"] == f"{H100} + cpu"
    # a baseline records no jax; a record with only the determinism block still tells
    baseline = run_stack(manifest({"envpool": "1.2.5"}, ()))
    assert baseline == {"jax": NOT_RECORDED, "jaxlib": NOT_RECORDED, "envpool": "1.2.5",
                        "device_kind": NOT_RECORDED}
    block = {"jax": "0.11.2", "jaxlib": "0.11.2", "device_kind": H100}
    assert run_stack(manifest({}, (), block)) == {"jax": "0.11.2", "jaxlib": "0.11.2",
                                                  "envpool": NOT_RECORDED,
                                                  "device_kind": H100}


def test_compare_names_each_difference_and_what_is_unknown():
    same = compare_stacks([manifest(OLD)] * 2, [manifest(OLD)])
    assert same.same and same.differences == [] and same.unrecorded == []
    assert same.line("a0-l1-d1", "a0-l0-d1") == (
        "software and device of a0-l1-d1 and reference a0-l0-d1: same (jax 0.10.2, "
        "jaxlib 0.10.2, EnvPool 1.2.5, device kind cpu)")
    moved = compare_stacks([manifest(NEW, (H100,))], [manifest(OLD)])
    assert not moved.same
    assert moved.differences == ["jax 0.12.0.1 (group) vs 0.10.2 (reference)",
                                 "jaxlib 0.12.0.1 (group) vs 0.10.2 (reference)",
                                 "EnvPool 1.2.7 (group) vs 1.2.5 (reference)",
                                 f"device kind {H100} (group) vs cpu (reference)"]
    assert moved.line("x", "y").startswith("software and device of x and reference y: "
                                           "DIFFER: jax 0.12.0.1 (group) vs 0.10.2 (reference); ")
    # a side mixing versions shows every one; only jaxlib differs here
    mixed = compare_stacks([manifest(OLD), manifest({**OLD, "jaxlib": "0.10.1"})],
                           [manifest(OLD)])
    assert mixed.differences == ["jaxlib 0.10.1 / 0.10.2 (group) vs 0.10.2 (reference)"]
    # no versions recorded on a side: unknown, not "differ"
    unknown = compare_stacks([manifest()], [manifest(OLD)])
    assert unknown.differences == [] and not unknown.same
    assert unknown.unrecorded == ["jax (in the group)", "jaxlib (in the group)", "EnvPool (in the group)"]
    assert unknown.line("x", "y").endswith(
        "same where recorded (device kind cpu); not recorded: jax (in the group), jaxlib (in the group), "
        "EnvPool (in the group)")


@pytest.mark.parametrize("case", ["same", "jax differs", "device differs"])
def test_equivalence_prints_and_stores_the_stacks(tmp_path, capsys, case):
    other = {"same": (OLD, ("cpu",)), "jax differs": (NEW, ("cpu",)),
             "device differs": (OLD, (H100,))}[case]
    for seed in (1, 2, 3):
        write_synthetic_run(tmp_path, seed=seed, layout="a0-l0-d1", packages=OLD)
        write_synthetic_run(tmp_path, seed=seed, layout="a0-l1-d1", packages=other[0],
                            devices=other[1])
    runs, out_json = tmp_path / "runs", tmp_path / "eq.json"
    # the records are identical per seed: the verdict passes whatever the versions
    assert analysis_main(["equivalence", str(runs), "--json-out", str(out_json)]) == 0
    out = capsys.readouterr().out.splitlines()
    lines = [line for line in out if "software and device of " in line]
    assert len(lines) == 1 and out[out.index(lines[0]) - 1].startswith("determinism of ")
    stored = json.loads(out_json.read_text())
    assert stored["stack_line"] == lines[0]
    assert stored["stacks"]["same"] is (case == "same")
    if case == "same":
        assert lines[0].endswith("same (jax 0.10.2, jaxlib 0.10.2, EnvPool 1.2.5, "
                                 "device kind cpu)")
        assert stored["stacks"]["differences"] == []
    elif case == "jax differs":
        assert "DIFFER: jax 0.12.0.1 (group) vs 0.10.2 (reference); jaxlib 0.12.0.1 (group) vs " \
               "0.10.2 (reference); EnvPool 1.2.7 (group) vs 1.2.5 (reference)" in lines[0]
        assert stored["stacks"]["a"]["jax"] == ["0.12.0.1"]
        assert stored["stacks"]["reference"]["jax"] == ["0.10.2"]
    else:
        assert stored["stacks"]["differences"] == [f"device kind {H100} (group) vs cpu "
                                                   "(reference)"]
    assert analysis_main(["equivalence", str(runs), "--bitwise-only", "--json-out",
                          str(out_json)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == lines[0]
    assert json.loads(out_json.read_text())["stacks"]["same"] is (case == "same")
    if case == "jax differs":  # the report's verdict carries the same line
        assets = build_report_assets([runs], tmp_path / "report", reps=100,
                                     aggregate_reps=200)
        assert [v["stacks"] for v in assets["verdicts"]
                if v["kind"] == "equivalence"] == lines
