"""The env backend in records, sweeps and the protocol guard: a record names its
backend and version; records older than the key are EnvPool's; EnvPool and ALE runs are
not pooled unless the backend is the compared group (or the mismatch is allowed); sweeps
take `env_backends` as an axis without changing the ids of sweeps that do not."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analysis.inputs.load import BACKEND_KEY, manifest_get
from analysis.inputs.protocol import (
    ProtocolMismatch,
    check_paper_protocol,
    check_same_protocol,
    run_protocol,
)
from benchenv import ATARI_PROTOCOL
from harness.sweep import SweepError, parse_sweep
from runrecord import Run, Table

ENVPOOL = {**ATARI_PROTOCOL, "backend": "envpool", "backend_version": "1.2.5"}
ALE = {**ATARI_PROTOCOL, "backend": "ale", "backend_version": "0.12.1"}


def _run(run_id: str, protocol: dict | None, env_id: str = "Breakout-v5") -> Run:
    manifest: dict = {"run_id": run_id, "env_id": env_id, "status": "completed"}
    if protocol is not None:
        manifest["env_protocol"] = protocol
    empty = Table({"episode_return": np.array([])}, 0)
    return Run(Path(run_id), manifest, empty, empty, [])


def test_old_records_are_envpool_and_versions_never_differ():
    legacy = _run("old", dict(ATARI_PROTOCOL))  # written before the backend key
    newer = _run("new", {**ENVPOOL, "backend_version": "1.2.7"})
    assert run_protocol(legacy) == run_protocol(newer)
    assert manifest_get(legacy.manifest, BACKEND_KEY) == "envpool"
    assert check_same_protocol({"old": [legacy], "new": [_run("n", ENVPOOL), newer]}) == []
    assert check_paper_protocol([legacy, newer]) == []


def test_backends_are_not_pooled_unless_compared():
    envpool, ale = _run("e", ENVPOOL), _run("a", ALE)
    with pytest.raises(ProtocolMismatch) as e:
        check_same_protocol({"a0-l0-d1": [envpool, ale]})
    assert e.value.differing_keys == ["backend"] and "'ale'" in str(e.value)
    # the backend as the compared group: it may differ, nothing else may
    assert check_same_protocol({"envpool": [envpool], "ale": [ale]}, ignore=("backend",)) == []
    sticky0 = _run("s", {**ALE, "repeat_action_probability": 0.0})
    with pytest.raises(ProtocolMismatch):
        check_same_protocol({"envpool": [envpool], "ale": [sticky0]}, ignore=("backend",))
    # the published runs are EnvPool's: an ALE run differs from them by its backend
    with pytest.raises(ProtocolMismatch) as e:
        check_paper_protocol([ale])
    assert e.value.differing_keys == ["backend"]


SWEEP = """\
name = "b"
seeds = [1, 2]
frames = 4000

[[matrix]]
systems = ["cleanba-impala"]
layouts = ["a0-l0-d1"]
games = ["Breakout-v5"]
"""


def test_env_backends_is_a_sweep_axis():
    plain = parse_sweep(SWEEP, "s.toml").runs
    both = parse_sweep(SWEEP.replace('games =', 'env_backends = ["envpool", "ale"]\ngames ='),
                       "s.toml").runs
    assert len(both) == 2 * len(plain) == 4
    assert [r.env_backend for r in both] == ["envpool", "envpool", "ale", "ale"]
    assert len({r.run_id for r in both} | {r.run_id for r in plain}) == 6
    assert "env_backend" not in plain[0].definition()  # sweeps without the axis keep their ids
    argv = both[2].command("RUN")
    assert argv[argv.index("--env-backend") + 1] == "ale"
    assert "--env-backend" not in plain[0].command("RUN")


def test_env_backends_errors_name_the_line_and_valid_values():
    with pytest.raises(SweepError, match=r"line 8.*unknown env backend 'gym'.*envpool, ale"):
        parse_sweep(SWEEP.replace('games =', 'env_backends = ["gym"]\ngames ='), "s.toml")
    baseline = SWEEP.replace('"cleanba-impala"', '"monobeast-impala"').replace(
        'games =', 'env_backends = ["ale"]\ngames =')
    with pytest.raises(SweepError, match="run on EnvPool only"):
        parse_sweep(baseline, "s.toml")
    cartpole = SWEEP.replace('"Breakout-v5"', '"CartPole-v1"').replace(
        'games =', 'env_backends = ["ale"]\ngames =')
    with pytest.raises(SweepError, match="needs the EnvPool backend"):
        parse_sweep(cartpole, "s.toml")


def test_equivalence_compares_backends_only_when_grouped_by_them(tmp_path, capsys):
    """Through the CLI: three seeds on each backend, one layout. Grouped by layout (the
    default) the runs are refused (exit 2, naming the backend); grouped by the backend
    they are compared, EnvPool as the reference."""
    import json

    from synthetic_records import write_synthetic_run

    from analysis.cli import main

    for backend in ("envpool", "ale"):
        for seed in (1, 2, 3):
            run = write_synthetic_run(tmp_path, seed=seed, noise_seed_offset=10 * (backend == "ale"),
                                      sweep=f"s-{backend}")
            manifest = json.loads((run / "manifest.json").read_text())
            manifest["env_protocol"] = {"backend": backend, "backend_version": "x"}
            (run / "manifest.json").write_text(json.dumps(manifest))
    assert main(["equivalence", str(tmp_path)]) == 2
    assert "backend" in capsys.readouterr().err
    code = main(["equivalence", str(tmp_path), "--group-by", BACKEND_KEY,
                 "--reference", "envpool"])
    out = capsys.readouterr().out
    assert code == 0 and "ale" in out and "envpool" in out, out


def test_gpu_suite_ale_step_is_on_request_only(tmp_path):
    """benchmarks/gpu_suite.py: `ale-ppo` runs only when --only names it (the default plan's
    shares are fitted to a GPU call), after ours-ppo, whose SPS it is compared with; its
    results.md row shows only when it ran (the kit's rehearsal asserts no row is missing)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from gpu_suite import ALL_STEPS, SuiteConfig, check_config, step_caps
    from suite_table import render_markdown

    assert "ale-ppo" not in ALL_STEPS
    assert check_config(SuiteConfig(out=tmp_path / "o")) == ALL_STEPS
    assert check_config(SuiteConfig(out=tmp_path / "o", only=("ale-ppo", "ours-ppo"))) == (
        "ours-ppo", "ale-ppo")
    assert sum(step_caps(("ours-ppo", "ale-ppo"), 250.0).values()) == pytest.approx(250.0)
    with pytest.raises(ValueError, match="ale-ppo"):
        check_config(SuiteConfig(out=tmp_path / "o", only=("ale",)))
    assert "on ALE" not in render_markdown({"steps": {}})
    assert "on ALE" in render_markdown({"steps": {"ale-ppo": {"exit_code": 1}}})
