"""Guards of the verdict CLIs: seeds counted once, protocol mismatches refused, bad input
(non-integer seeds, empty folders, unknown flags) answered with exit 2 or a left-out run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from synthetic_records import write_synthetic_run

from analysis.cli import main
from analysis.inputs.load import load_runs

LAYOUTS = ("a0-l0-d1", "a0-l1-d1", "a0-l0,1-d1", "a0-l0-d2")


def _set_manifest(run_dir: Path, **changes) -> None:
    path = run_dir / "manifest.json"
    m = json.loads(path.read_text())
    m.update(changes)
    path.write_text(json.dumps(m))


def _layout_sweep(root: Path, shift: float = 0.0, layouts=LAYOUTS, seeds=(1, 2, 3),
                  envs=("CartPole-v1",)) -> list[Path]:
    return [write_synthetic_run(root, seed=s, layout=lay, shift=shift, env_id=env,
                                episodes=120, updates=5)
            for lay in layouts for s in seeds for env in envs]


def test_regression_cli_counts_seeds_not_layout_copies(tmp_path, capsys):
    _layout_sweep(tmp_path / "ref")
    _layout_sweep(tmp_path / "new")
    out = tmp_path / "r.json"
    assert main(["regression", "--new", str(tmp_path / "new"), "--reference",
                 str(tmp_path / "ref"), "--json-out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.count("3 seeds (12 runs: layout copies averaged per seed)") == 2
    assert "delta 0.2 normalised (= 95.58 CartPole-v1 return; default)" in text
    d = json.loads(out.read_text())
    assert d["n_new"] == d["n_reference"] == 3 and d["games"] == ["CartPole-v1"]


def test_regression_cli_refuses_different_games(tmp_path, capsys):
    _layout_sweep(tmp_path / "ref", layouts=("a0-l0-d1",), envs=("Pong-v5", "Breakout-v5"))
    _layout_sweep(tmp_path / "new", layouts=("a0-l0-d1",), envs=("Pong-v5",))
    assert main(["regression", "--new", str(tmp_path / "new"), "--reference",
                 str(tmp_path / "ref")]) == 2
    assert "missing in the new runs: ['Breakout-v5']" in capsys.readouterr().err


def test_sticky_action_mismatch_is_refused_unless_allowed(tmp_path, capsys):
    for d in _layout_sweep(tmp_path / "ref", layouts=("a0-l0-d1",)):
        _set_manifest(d, env_protocol={"repeat_action_probability": 0.25})
    for d in _layout_sweep(tmp_path / "new", layouts=("a0-l0-d1",)):
        _set_manifest(d, env_protocol={"repeat_action_probability": 0.0})
    args = ["regression", "--new", str(tmp_path / "new"), "--reference", str(tmp_path / "ref")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "repeat_action_probability" in err and "--allow-protocol-mismatch" in err
    assert main([*args, "--allow-protocol-mismatch"]) == 0
    assert "WARNING (protocol mismatch allowed)" in capsys.readouterr().out
    # Pooling them in one analysis (aggregates, equivalence) is refused the same way.
    for sub in ("aggregate", "equivalence", "curves"):
        extra = ["--reps", "200"] if sub == "aggregate" else []
        assert main([sub, str(tmp_path), *extra, "--out" if sub == "curves" else "--where",
                     str(tmp_path / "c") if sub == "curves" else "seed=1"]) == 2, sub
        assert "repeat_action_probability" in capsys.readouterr().err
    assert main(["equivalence", str(tmp_path), "--group-by",
                 "env_protocol.repeat_action_probability",
                 "--allow-protocol-mismatch"]) == 0
    assert "WARNING (protocol mismatch allowed)" in capsys.readouterr().err


def test_empty_cartpole_protocol_is_a_known_matching_protocol(tmp_path, capsys):
    for root in ("ref", "new"):
        for d in _layout_sweep(tmp_path / root, layouts=("a0-l0-d1",)):
            _set_manifest(d, env_protocol={})
    assert main(["regression", "--new", str(tmp_path / "new"), "--reference",
                 str(tmp_path / "ref")]) == 0


def test_non_integer_seed_is_a_left_out_run(tmp_path, capsys):
    dirs = _layout_sweep(tmp_path, layouts=("a0-l0-d1",))
    _set_manifest(dirs[0], seed="one")
    rs = load_runs([tmp_path])
    assert len(rs.included) == 2 and len(rs.left_out) == 1
    assert "seed 'one' is not an integer" in rs.left_out[0].reason
    assert main(["summary", str(tmp_path)]) == 0
    assert "seed 'one' is not an integer" in capsys.readouterr().err


def test_figures_on_a_missing_or_empty_folder_exits_2(tmp_path, capsys):
    assert main(["figures", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    assert "no such folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["figures", str(tmp_path / "empty"), "--out", str(tmp_path / "o")]) == 2
    assert "no run records" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()  # nothing written


def test_unknown_flag_suggests_only_the_subcommands_own_flags(capsys):
    with pytest.raises(SystemExit) as e:
        main(["paper-tables", "--table", "x.csv", "--delta", "3"])
    assert e.value.code == 2
    err = capsys.readouterr().err + capsys.readouterr().out
    assert "--delta" in err and "equivalence" not in err and "regression --help" not in err


def test_plan_seeds_cli_from_pilot_runs_and_from_a_given_sd(tmp_path, capsys):
    _layout_sweep(tmp_path, layouts=("a0-l0-d1", "a0-l1-d1"), seeds=(1, 2, 3, 4))
    assert main(["plan-seeds", str(tmp_path), "--sims", "2000"]) == 0
    out = capsys.readouterr().out
    assert "pooled from 1 distinct group" in out  # a0-l1-d1 copies a0-l0-d1 bitwise
    assert "| regression gate | 0.2 |" in out and "planned in" in out
    assert main(["plan-seeds", "--sd", "0.063", "--sims", "2000"]) == 0
    out = capsys.readouterr().out
    assert "0.16 HNS (Atari default)" in out and "given" in out
    assert main(["plan-seeds", "--sd", "-1"]) == 2


def test_openrlbenchmark_csv_without_a_seed_in_its_name_is_left_out(tmp_path):
    from analysis.importers.orb import load_openrlbenchmark_dir

    p = tmp_path / "cleanrl-ppo" / "CartPole-v1" / "final.csv"
    p.parent.mkdir(parents=True)
    p.write_text("global_step,charts/episodic_return,_runtime\n100,20.0,1.0\n")
    rs = load_openrlbenchmark_dir(tmp_path)
    assert not rs.included and "no seed in the file name" in rs.left_out[0].reason
