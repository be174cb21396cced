"""The manifest's `determinism` block (runrecord.determinism, cleanba.core.records) and the
bitwise tier `python -m analysis equivalence` and the report print from it
(analysis.verdicts.stacks), on synthetic records with and without the block."""

from __future__ import annotations

from importlib.metadata import version

import pytest
from cleanba_runs import TINY, run
from synthetic_records import write_synthetic_run

from analysis.cli import main as analysis_main
from analysis.output.report import build_report_assets
from analysis.verdicts.stacks import MEANINGFUL, UNKNOWN, determinism_tier, run_stack
from runrecord import load_run
from runrecord.determinism import DETERMINISM_KEYS, determinism_block, max_isa
from runrecord.provenance import cpu_signature, cpu_signature_of

FLAGS = "--xla_force_host_platform_device_count=4"
ZEN4 = "AuthenticAMD family 25 model 17: avx512f"


def block(**change) -> dict:
    facts = {"deterministic": True, "groups": 4, "platform": "cpu", "device_kind": "cpu",
             "device_count": 4, "usable_cpus": 2, "cpu": ZEN4, "jax_version": "0.10.2",
             "jaxlib_version": "0.10.2", "xla_flags": FLAGS, "matmul_precision": None}
    return determinism_block(**{**facts, **change})


def test_block_keys_and_isa_cap():
    assert tuple(block()) == DETERMINISM_KEYS
    assert block()["max_isa"] is None
    capped = block(xla_flags=f"{FLAGS} --xla_cpu_max_isa=AVX2")
    assert capped["max_isa"] == "AVX2"
    assert max_isa("--xla_cpu_max_isa=AVX512F --xla_cpu_max_isa=AVX2") == "AVX2"  # last wins
    assert block(deterministic=False)["deterministic_groups"] is None


def test_tier_names_what_differs():
    same = [block(), block()]
    assert determinism_tier(same, same) == MEANINGFUL
    tier = determinism_tier(same, [block(jaxlib_version="0.10.1"),
                                   block(xla_flags=f"{FLAGS} --xla_cpu_max_isa=AVX2")])
    assert tier == ("bitwise not expected: jaxlib differs (0.10.1 vs 0.10.2); XLA flags "
                    "differ (not in every run: --xla_cpu_max_isa=AVX2)")
    tier = determinism_tier([block(deterministic=False)], [block()])
    assert tier.startswith("bitwise not expected: deterministic mode off in the group; ")
    assert "deterministic groups differs (4 vs None)" in tier
    # cores and virtual devices matter on CPU only
    gpu = {"platform": "gpu", "device_kind": "NVIDIA H100 80GB HBM3"}
    assert determinism_tier([block(**gpu)], [block(**gpu, usable_cpus=16)]) == MEANINGFUL
    assert determinism_tier([block()], [block(usable_cpus=1)]) == (
        "bitwise not expected: usable CPU cores differs (1 vs 2)")
    assert determinism_tier([block(), None], [block()]) == f"{UNKNOWN} (1 of 3 runs)"


def test_tier_tells_cpu_generations_apart():
    """Two hosts may print the same model name ('AMD EPYC') with and without AVX-512 (the
    host of results/reference/ printed this one's name, and PPO at the same commit gives
    other last bits here)."""
    zen3 = "AuthenticAMD family 25 model 1: avx2"
    assert determinism_tier([block()], [block(cpu=zen3)]) == (
        f"bitwise not expected: CPU differs ({ZEN4} vs {zen3})")
    # on a GPU the host CPU does not compute the learner's numbers
    gpu = {"platform": "gpu", "device_kind": "NVIDIA H100 80GB HBM3"}
    assert determinism_tier([block(**gpu)], [block(**gpu, cpu=zen3)]) == MEANINGFUL
    # a block written before the key existed says nothing about the CPU
    older = {k: v for k, v in block().items() if k != "cpu"}
    assert determinism_tier([block()], [older]) == MEANINGFUL
    assert determinism_tier([block(cpu=zen3)], [older, block()]) == (
        f"bitwise not expected: CPU differs ({ZEN4} vs {zen3})")


CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC
flags\t\t: fpu sse4_2 avx avx2 avx512f avx512bw

processor\t: 1
vendor_id\t: GenuineIntel
"""


def test_cpu_signature_reads_the_first_processor():
    assert cpu_signature_of(CPUINFO) == ZEN4
    assert cpu_signature_of(CPUINFO.replace(" avx512f avx512bw", "")) == (
        "AuthenticAMD family 25 model 17: avx2")
    assert cpu_signature_of("") is None


@pytest.mark.parametrize("case", ["same", "jaxlib differs", "mode off", "no block"])
def test_equivalence_and_report_print_the_tier(tmp_path, capsys, case):
    reference = block() if case != "no block" else None
    other = {"jaxlib differs": block(jaxlib_version="0.10.1"),
             "mode off": block(deterministic=False)}.get(case, reference)
    for seed in (1, 2, 3):
        write_synthetic_run(tmp_path, seed=seed, layout="a0-l0-d1", determinism=reference)
        write_synthetic_run(tmp_path, seed=seed, layout="a0-l1-d1", determinism=other)
    runs = tmp_path / "runs"
    assert analysis_main(["equivalence", str(runs)]) == 0
    out = capsys.readouterr().out.splitlines()
    tiers = [line for line in out if line.startswith("determinism of ")]
    # The records are identical (below): a tier that does not promise it says both, never
    # "bitwise not expected" under "PASS (bitwise identical)".
    expected = {"same": MEANINGFUL,
                "jaxlib differs": "bitwise identical here, though not guaranteed: jaxlib "
                                  "differs (0.10.1 vs 0.10.2)",
                "mode off": "bitwise identical here, though not guaranteed: deterministic "
                            "mode off in the group; deterministic groups differs (4 vs None)",
                "no block": f"{UNKNOWN} (6 of 6 runs)"}[case]
    assert len(tiers) == 1 and tiers[0].endswith(f"/ a0-l0-d1: {expected}"), tiers
    assert "PASS (bitwise identical)" in "\n".join(out) and "not expected" not in tiers[0]
    assert out[out.index(tiers[0]) - 1].startswith("equivalence ")  # under its verdict
    assets = build_report_assets([runs], tmp_path / "report", reps=100, aggregate_reps=200)
    assert [v["determinism"] for v in assets["verdicts"]
            if v["kind"] == "equivalence"] == tiers
    # synthetic records depend on the seed only: both layouts' records are identical
    assert analysis_main(["equivalence", str(runs), "--bitwise-only"]) == 0
    assert capsys.readouterr().out.splitlines()[-2] == tiers[0]  # then the stack line


def test_trainer_manifest_carries_the_block(tmp_path):
    """A real tiny run: the block holds the run's JAX facts and flags; a record without
    the block (older, or a baseline's: null) still loads and reads as unknown."""
    run_dir = tmp_path / "run"
    p = run("ppo", run_dir, *TINY, "--total-timesteps", "64", "--deterministic",
            "--deterministic-groups", "2", devices=2)
    assert p.returncode == 0, p.stderr
    got = load_run(run_dir).manifest["determinism"]
    assert tuple(got) == DETERMINISM_KEYS
    assert got["deterministic"] is True and got["deterministic_groups"] == 2
    assert (got["platform"], got["device_kind"], got["device_count"]) == ("cpu", "cpu", 2)
    assert (got["jax"], got["jaxlib"]) == (version("jax"), version("jaxlib"))
    assert "--xla_force_host_platform_device_count=2" in got["xla_flags"].split()
    assert got["max_isa"] is None and got["default_matmul_precision"] is None
    assert got["cpu"] == cpu_signature() and got["cpu"]  # this Linux host's signature
    # what `analysis equivalence` compares across sides: this environment's versions
    assert run_stack(load_run(run_dir).manifest) == {
        "jax": version("jax"), "jaxlib": version("jaxlib"), "envpool": version("envpool"),
        "device_kind": "cpu"}
    old = load_run(write_synthetic_run(tmp_path)).manifest
    assert old.get("determinism") is None
    assert determinism_tier([got], [old.get("determinism")]) == f"{UNKNOWN} (1 of 2 runs)"


def test_both_sides_off_is_said_once():
    off = [block(deterministic=False)]
    assert determinism_tier(off, off) == ("bitwise not expected: deterministic mode off on "
                                          "both sides")
