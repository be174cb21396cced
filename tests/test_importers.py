"""analysis.importers: what each reader reads from files the real writers made, what the
user must declare (exit 2 naming the fact, nothing written), the shape checks, provenance
and re-imports, and the protocol guard on imported records."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from foreign_runs import (
    cleanrl_run_dir,
    finish_wandb,
    gymnasium_monitor_run,
    history,
    table_rows,
    write_monitor_run,
    write_table_csv,
    write_tensorboard_run,
    write_wandb_offline_run,
)
from harness_cli import ROOT

import analysis
from analysis.cli import main
from analysis.errors import AnalysisError
from analysis.importers import TableColumns, import_runs
from analysis.inputs.load import load_records

ATARI = ["--protocol", "paper", "--frames-per-step", "4"]


def _tb(root: Path, game: str = "Breakout-v5", seeds=(1, 2, 3), **kw) -> dict:
    hs = {s: history(100.0, s, episodes=60, **kw) for s in seeds}
    for s, h in hs.items():
        write_tensorboard_run(cleanrl_run_dir(root, game, s), h)
    return hs


def _mon(root: Path, game: str = "Breakout-v5", seeds=(1, 2, 3), **kw) -> None:
    """Monitor runs (no library needed: these tests run in the core-only venv too)."""
    for s in seeds:
        write_monitor_run(root / f"seed_{s}", history(100.0, s, episodes=60, **kw), game,
                          envs=2)


def test_tensorboard_reads_both_scalar_kinds_and_lengths(tmp_path):
    """tensorboard's Writer stores tensors, torch's SummaryWriter simple_values: both read
    to the float32 values written, at their steps, lengths paired by step."""
    pytest.importorskip("tensorboard")
    h = history(50.0, 1, episodes=40)
    write_tensorboard_run(cleanrl_run_dir(tmp_path / "tb", "Pong-v5", 1), h)
    write_tensorboard_run(cleanrl_run_dir(tmp_path / "torch", "Pong-v5", 1), h, torch_style=True)
    for src in ("tb", "torch"):
        res = import_runs("tensorboard", tmp_path / src, tmp_path / f"out-{src}",
                          protocol="paper", frames_per_step=4)
        (run,) = load_records([res.written[0]]).included
        assert run.manifest["system"] == "ppo_atari_envpool" and run.manifest["seed"] == 1
        np.testing.assert_array_equal(run.episodes["episode_return"],
                                      h["returns"].astype(np.float32).astype(np.float64))
        np.testing.assert_array_equal(run.episodes["env_steps"], h["steps"])
        np.testing.assert_array_equal(run.episodes["frames"], 4 * h["steps"])
        np.testing.assert_array_equal(run.episodes["episode_length"], h["lengths"])
        assert np.all(np.diff(run.episodes["wall_time_s"]) >= 0)


def test_event_file_framing_matches_tensorboards_reader(tmp_path):
    """tf_records yields exactly the records tensorboard's own loader yields, and stops
    at a torn last record (a killed writer) with the records before it."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader

    from analysis.importers.folders import tf_records

    write_tensorboard_run(tmp_path / "r", history(5.0, 1, episodes=30), torch_style=True)
    (path,) = (tmp_path / "r").iterdir()
    ours = list(tf_records(path))
    assert ours == list(RawEventFileLoader(str(path)).Load()) and len(ours) > 60
    path.write_bytes(path.read_bytes()[:-7])
    assert list(tf_records(path)) == ours[:-1]


def test_monitor_files_of_one_run_are_its_envs_merged_by_time(tmp_path):
    h = history(30.0, 2, episodes=50)
    write_monitor_run(tmp_path / "sb3" / "seed_2", h, "Breakout-v5", envs=3)  # 17, 17, 16
    res = import_runs("monitor", tmp_path / "sb3", tmp_path / "out", protocol="paper",
                      frames_per_step=4)
    (run,) = load_records([tmp_path / "out"]).included
    assert len(res.written) == 1 and run.manifest["seed"] == 2
    assert run.manifest["imported"]["envs"] == 3 and len(run.manifest["imported"]["files"]) == 3
    assert sorted(np.unique(run.episodes["env_index"])) == [0, 1, 2]
    np.testing.assert_allclose(run.episodes["env_steps"], np.round(h["steps"] / 3) * 3)
    np.testing.assert_allclose(run.episodes["episode_return"], h["returns"], rtol=1e-6)


def test_gymnasium_episodes_import_and_summarise(tmp_path, capsys):
    """Real CartPole episodes (gymnasium's RecordEpisodeStatistics) in Monitor files, 3
    seeds of 2 envs each: one run per seed, the returns those of the episodes."""
    pytest.importorskip("gymnasium")
    for seed in (1, 2, 3):
        gymnasium_monitor_run(tmp_path / "cartpole" / f"seed_{seed}", "CartPole-v1", seed)
    assert main(["import", "monitor", str(tmp_path / "cartpole"), "--out",
                 str(tmp_path / "out"), "--protocol", "frame_skip=1",
                 "--frames-per-step", "1"]) == 0
    rs = load_records([tmp_path / "out"])
    assert sorted(r.manifest["seed"] for r in rs.included) == [1, 2, 3]
    for r in rs.included:
        assert len(r.episodes) == 24 and r.manifest["env_protocol"] == {"frame_skip": 1}
        lengths = r.episodes["episode_length"]
        # CartPole pays 1 per step: an episode's return is its length.
        np.testing.assert_array_equal(r.episodes["episode_return"], lengths)
    capsys.readouterr()
    assert main(["summary", str(tmp_path / "out")]) == 0
    assert "3 completed runs" in capsys.readouterr().out


def test_wandb_offline_run_killed_before_its_exit_is_left_out(tmp_path):
    pytest.importorskip("wandb")
    for seed in (1, 2):
        write_wandb_offline_run(tmp_path / "w", history(10.0, seed, episodes=30),
                                "Breakout-v5", seed)
    finish_wandb()
    logs = sorted((tmp_path / "w").rglob("run-*.wandb"))
    killed = logs[1].read_bytes()
    logs[1].write_bytes(killed[: len(killed) // 2])  # torn mid-run: no exit record
    res = import_runs("wandb", tmp_path / "w", tmp_path / "out", protocol="paper",
                      frames_per_step=4)
    assert len(res.written) == 1
    assert any("no exit record" in w for w in res.warnings)
    (run,) = load_records([tmp_path / "out"]).included
    assert run.manifest["imported"]["wandb_run_id"] in logs[0].name


def test_wandb_panel_export_is_one_run_per_column(tmp_path, capsys):
    """A chart's "Export CSV": `<run name> - <metric>` columns (and __MIN/__MAX twins)
    over the x axis; CleanRL run names give task, system and seed."""
    pytest.importorskip("pandas")
    import pandas as pd

    hs = {s: history(20.0, s, episodes=30) for s in (1, 2)}
    frame = pd.DataFrame({"global_step": hs[1]["steps"]})
    for s, h in hs.items():
        name = f"Pong-v5__ppo_atari_envpool__{s}__{1_700_000_000 + s}"
        values = pd.Series(h["returns"]).where(np.arange(30) % (s + 1) == 0)  # ragged
        for col in ("", "__MIN", "__MAX"):
            frame[f"{name} - charts/episodic_return{col}"] = values
    frame.to_csv(tmp_path / "panel.csv", index=False)
    assert main(["import", "wandb-csv", str(tmp_path / "panel.csv"), "--out",
                 str(tmp_path / "out"), *ATARI]) == 0
    assert "W&B samples long histories" in capsys.readouterr().err
    runs = {r.manifest["seed"]: r for r in load_records([tmp_path / "out"]).included}
    assert sorted(runs) == [1, 2]
    for s, r in runs.items():
        every = np.arange(30) % (s + 1) == 0
        np.testing.assert_allclose(r.episodes["episode_return"], hs[s]["returns"][every])
        np.testing.assert_array_equal(r.episodes["env_steps"], hs[s]["steps"][every])
        assert r.manifest["env_id"] == "Pong-v5"
    (tmp_path / "x.csv").write_text("Step,run - charts/episodic_return\n1,2\n")
    assert main(["import", "wandb-csv", str(tmp_path / "x.csv"), "--out",
                 str(tmp_path / "o2"), *ATARI, "--seed", "1", "--task", "Pong-v5"]) == 2
    assert "W&B's Step counts log calls" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "fact"), [
    (["--frames-per-step", "4"], "--protocol"),
    (["--protocol", "paper"], "--frames-per-step"),
    (["--protocol", "sticky"], "not a preset"),
])
def test_undeclared_facts_exit_2_naming_them_and_write_nothing(tmp_path, capsys, argv, fact):
    _mon(tmp_path / "sb3", seeds=(1,))
    out = tmp_path / "out"
    assert main(["import", "monitor", str(tmp_path / "sb3"), "--out", str(out),
                 *argv]) == 2
    assert fact in capsys.readouterr().err
    assert not out.exists()


def test_a_seed_the_path_does_not_give_must_be_declared(tmp_path, capsys):
    h = history(30.0, 1, episodes=20)
    write_monitor_run(tmp_path / "run", h, "Breakout-v5", envs=2)
    write_monitor_run(tmp_path / "two" / "a", h, "Breakout-v5", envs=2)
    write_monitor_run(tmp_path / "two" / "b", h, "Breakout-v5", envs=2)
    base = ["--out", str(tmp_path / "out"), *ATARI]
    assert main(["import", "monitor", str(tmp_path / "run"), *base]) == 2
    assert "missing fact: the seed" in capsys.readouterr().err
    assert main(["import", "monitor", str(tmp_path / "two"), *base, "--seed", "1"]) == 2
    assert "they would all be one seed" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    assert main(["import", "monitor", str(tmp_path / "run"), *base, "--seed", "7"]) == 0
    assert load_records([tmp_path / "out"]).included[0].manifest["seed"] == 7
    assert main(["import", "monitor", str(tmp_path / "two"), "--out", str(tmp_path / "o2"),
                 *ATARI, "--path-pattern", r"(?P<seed>[ab])$"]) == 2  # a, b: not ints
    assert "gives seed 'a', not an integer" in capsys.readouterr().err


def _table(tmp_path: Path, n_seeds: int, episodes: int = 5, one_step: bool = False) -> Path:
    runs = [("Pong-v5", s, "algo", "x", history(10.0, s, episodes=episodes))
            for s in range(n_seeds)]
    rows = table_rows(runs)
    if one_step:
        rows = [[*r[:4], 1000, r[5]] for r in rows]
    path = tmp_path / "t.csv"
    write_table_csv(path, rows)
    return path


def test_episodes_read_as_seeds_are_refused(tmp_path, capsys, monkeypatch):
    """400 'seeds' of one task: a column of episode ids, not seeds (refused unless the
    user vouches for them; the limit is lowered here so that the vouched import is small)."""
    path = _table(tmp_path, 400, episodes=1)
    args = ["import", "table", str(path), "--out", str(tmp_path / "out"), *ATARI,
            "--task-column", "env", "--step-column", "global_step",
            "--return-column", "episodic_return"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "400 seeds" in err and "episodes" in err and "--allow-many-seeds" in err
    assert not (tmp_path / "out").exists()
    monkeypatch.setattr("analysis.importers.build.MAX_SEED_VALUES", 5)
    path = _table(tmp_path, 6, episodes=1)
    assert main(args) == 2
    assert "6 seeds" in capsys.readouterr().err
    assert main([*args, "--allow-many-seeds"]) == 0
    assert len(load_records([tmp_path / "out"]).included) == 6


def test_runs_whose_episodes_end_at_one_step_warn(tmp_path, capsys):
    path = _table(tmp_path, 3, one_step=True)
    assert main(["import", "table", str(path), "--out", str(tmp_path / "out"), *ATARI,
                 "--task-column", "env", "--step-column", "global_step",
                 "--return-column", "episodic_return"]) == 0
    err = capsys.readouterr().err
    assert err.count("end at one step") == 3


def test_two_sources_of_one_seed_are_refused(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    _tb(tmp_path / "cleanrl", seeds=(1,))
    h = history(10.0, 9, episodes=10)
    write_tensorboard_run(tmp_path / "cleanrl" / "again" / "Breakout-v5__ppo_atari_envpool__1__5", h)
    assert main(["import", "tensorboard", str(tmp_path / "cleanrl"), "--out",
                 str(tmp_path / "out"), *ATARI]) == 2
    assert "with seed 1" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_provenance_and_reimports(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    _tb(tmp_path / "cleanrl", seeds=(1, 2))
    args = ["import", "tensorboard", str(tmp_path / "cleanrl"), "--out", str(tmp_path / "out"),
            *ATARI]
    assert main(args) == 0
    run_dirs = sorted((tmp_path / "out" / "runs").iterdir())
    m = json.loads((run_dirs[0] / "manifest.json").read_text())
    f = m["imported"]["files"][0]
    src_file = tmp_path / "cleanrl" / f["path"]  # relative to SRC
    assert src_file.is_file() and f["bytes"] == src_file.stat().st_size
    import hashlib

    assert f["sha256"] == hashlib.sha256(src_file.read_bytes()).hexdigest()
    assert m["imported"]["reader"]["tag"] == "charts/episodic_return"
    assert "protocol paper" in m["imported"]["declared"]
    capsys.readouterr()
    assert main(args) == 0  # the same files again: kept as they are
    assert "2 already imported" in capsys.readouterr().out
    with open(src_file, "ab") as fh:  # a source file changed since
        fh.write(b"\0")
    assert main(args) == 2
    assert "other file contents" in capsys.readouterr().err


def test_protocol_guard_refuses_undeclared_or_different_protocols(tmp_path, capsys):
    _mon(tmp_path / "a")
    _mon(tmp_path / "b", salt=3)
    assert main(["import", "monitor", str(tmp_path / "a"), "--out", str(tmp_path / "A"),
                 *ATARI]) == 0
    for proto in (["unknown"], ["paper", "repeat_action_probability=0.0"]):
        shutil.rmtree(tmp_path / "B", ignore_errors=True)
        assert main(["import", "monitor", str(tmp_path / "b"), "--out",
                     str(tmp_path / "B"), "--protocol", *proto, "--frames-per-step", "4"]) == 0
        capsys.readouterr()
        assert main(["equivalence", str(tmp_path / "A"), str(tmp_path / "B"),
                     "--group-by", "sweep", "--reference", "A"]) == 2
        err = capsys.readouterr().err
        assert "different env protocols" in err
        assert main(["regression", "--new", str(tmp_path / "B"), "--reference",
                     str(tmp_path / "A")]) == 2
        capsys.readouterr()


def test_python_api_is_the_cli(tmp_path):
    path = _table(tmp_path, 3)
    res = analysis.import_runs("table", path, tmp_path / "out", protocol=["paper"],
                               frames_per_step=4, columns=TableColumns(
                                   task="env", step="global_step",
                                   episode_return="episodic_return", system="algo"))
    assert len(res.written) == 3
    assert {r.manifest["system"] for r in load_records([tmp_path / "out"]).included} == {"algo"}
    with pytest.raises(AnalysisError, match="--frames-per-step"):
        analysis.import_runs("table", path, tmp_path / "o2", protocol="paper",
                             columns=TableColumns(task="env", step="global_step"))


def test_importing_loads_no_jax_envpool_or_format_library():
    """`python -m analysis import` pays only for its own format's library, and never
    for JAX or EnvPool."""
    code = ("import sys, analysis.cli, analysis.importers; "
            "bad = [m for m in ('jax', 'envpool', 'cleanba', 'tensorboard', 'wandb', "
            "'pyarrow', 'torch') if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True, env={"PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "[]"


def test_report_lists_imported_runs_with_their_files(tmp_path):
    from analysis.output.report import build_report_assets

    _mon(tmp_path / "sb3", seeds=(1, 2))
    res = import_runs("monitor", tmp_path / "sb3", tmp_path / "out", protocol="paper",
                      frames_per_step=4)
    assets = build_report_assets([tmp_path / "out"], tmp_path / "report", reps=50,
                                 aggregate_reps=100)
    table = next(t for t in assets["tables"] if t["name"] == "imported_runs")
    assert table["markdown"].count("monitor import of") == 2
    for d in res.written:
        sha = json.loads((d / "manifest.json").read_text())["imported"]["files"][0]["sha256"]
        assert f"sha256 {sha[:12]}" in table["markdown"]


def test_monitor_torn_last_line_is_dropped_but_a_bad_row_is_refused(tmp_path, capsys):
    h = history(10.0, 1, episodes=12)
    (path, *_) = write_monitor_run(tmp_path / "seed_1", h, "Breakout-v5", envs=1)
    with open(path, "a", encoding="utf-8") as f:
        f.write("12.5,3")  # a writer killed mid-line
    assert main(["import", "monitor", str(tmp_path), "--out", str(tmp_path / "out"),
                 *ATARI]) == 0
    (run,) = load_records([tmp_path / "out"]).included
    assert len(run.episodes) == 12
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines[:5], "x,y,z", *lines[5:-1]]) + "\n")
    assert main(["import", "monitor", str(tmp_path), "--out", str(tmp_path / "o2"),
                 *ATARI]) == 2
    assert "line 6 is not numbers" in capsys.readouterr().err


def test_a_missing_format_library_exits_2_naming_the_install(tmp_path, capsys, monkeypatch):
    """The core install holds no format library: importing event files without
    tensorboard says what to install (exit 2), as a core-only venv would."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "tensorboard" else real(name, *a))
    (tmp_path / "cleanrl").mkdir()
    assert main(["import", "tensorboard", str(tmp_path / "cleanrl"), "--out",
                 str(tmp_path / "out"), *ATARI]) == 2
    assert "pip install 'cleanba-bench[imports]'" in capsys.readouterr().err
