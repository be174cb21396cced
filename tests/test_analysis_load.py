"""Loading: run records that crashed or are unfinished, published tables, openrlbenchmark
CSVs, normalisers. Bad input gives one clear message and exit code 2, no traceback."""

import csv

import numpy as np
import pytest
from synthetic_records import write_synthetic_run

from analysis.cli import main
from analysis.errors import AnalysisError
from analysis.importers.orb import ColumnMap, load_openrlbenchmark_csv, load_openrlbenchmark_dir
from analysis.inputs.facts import final_window_mean
from analysis.inputs.load import load_published_table, load_runs
from analysis.inputs.published_data import CLEANBA_TABLES as PAPER_DATA
from analysis.scales.normalize import get_normaliser, parse_normalisers
from analysis.scoring.scores import binned_curve
from runrecord import RunWriter


def _no_traceback(captured):
    assert "Traceback" not in captured.err and "Traceback" not in captured.out


def test_hns_and_custom_normalisers():
    # Breakout: random 1.7, human 30.5
    assert get_normaliser("Breakout-v5")(30.5) == pytest.approx(1.0)
    assert get_normaliser("Breakout-v5")(1.7) == pytest.approx(0.0)
    assert get_normaliser("BreakoutNoFrameskip-v4")(30.5) == pytest.approx(1.0)
    assert get_normaliser("VideoPinball-v5").low == 16256.9
    assert get_normaliser("CartPole-v1")(500.0) == pytest.approx(1.0)
    assert get_normaliser("CartPole-v1")(22.1) == pytest.approx(0.0)
    assert get_normaliser("MyEnv-v0", {"MyEnv-v0": (0.0, 10.0)})(5.0) == 0.5
    with pytest.raises(AnalysisError, match="'Pendulum-v1'"):
        get_normaliser("Pendulum-v1")
    assert parse_normalisers(["A=1,3"]) == {"A": (1.0, 3.0)}
    with pytest.raises(AnalysisError, match="ENV=LOW,HIGH"):
        parse_normalisers(["A=1"])


def test_final_score_is_mean_of_last_n_episodes(tmp_path):
    d = write_synthetic_run(tmp_path, episodes=150)
    run = load_runs([tmp_path]).included[0]
    ret, steps = run.episodes["episode_return"], run.episodes["env_steps"]
    assert final_window_mean(ret, steps, 100) == pytest.approx(ret[-100:].mean())
    assert final_window_mean(ret, steps, 10) == pytest.approx(ret[-10:].mean())
    assert d.name == run.run_id


def test_binned_curve_means_and_fills_gaps():
    grid = np.array([10.0, 20.0, 30.0, 40.0])
    x = np.array([5.0, 10.0, 35.0, 50.0])  # bins: 0, 0, 3; 50 is past the grid
    r = np.array([1.0, 3.0, 8.0, 100.0])
    np.testing.assert_allclose(binned_curve(x, r, grid), [2.0, 4.0, 6.0, 8.0])


def test_unfinished_and_failed_runs_are_left_out(tmp_path, capsys):
    write_synthetic_run(tmp_path, seed=1)
    write_synthetic_run(tmp_path, seed=2, status="failed")
    write_synthetic_run(tmp_path, seed=3, status="running")
    write_synthetic_run(tmp_path, seed=4, status="interrupted")
    rs = load_runs([tmp_path])
    assert len(rs.included) == 1
    reasons = {x.status: x.reason for x in rs.left_out}
    assert set(reasons) == {"failed", "running", "interrupted"}
    assert "synthetic failure" in reasons["failed"]
    assert main(["summary", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "3 left out" in captured.out and "[failed]" in captured.err


def test_torn_last_line_is_dropped_and_warned(tmp_path, capsys):
    d = write_synthetic_run(tmp_path, episodes=120)
    with open(d / "episodes.csv", "a") as f:
        f.write("99999,99999,1.0,0,1")  # killed mid-line
    rs = load_runs([tmp_path])
    assert len(rs.included[0].episodes) == 120
    assert any("torn" in w for w in rs.warnings)
    assert main(["summary", str(tmp_path)]) == 0
    assert "torn" in capsys.readouterr().err


def test_empty_episodes_file(tmp_path, capsys):
    w = RunWriter(tmp_path / "r", {"run_id": "r", "system": "cleanba-ppo",
                                   "architecture": "sync", "env_id": "CartPole-v1", "seed": 1})
    w.finish("completed")
    rs = load_runs([tmp_path])
    assert not rs.included and "no finished episode" in rs.left_out[0].reason
    assert main(["summary", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert "no finished episode" in captured.err and "no completed runs" in captured.err
    _no_traceback(captured)


def test_missing_column(tmp_path, capsys):
    d = write_synthetic_run(tmp_path)
    text = (d / "episodes.csv").read_text().splitlines()
    rows = list(csv.reader(text))
    keep = [i for i, c in enumerate(rows[0]) if c != "episode_return"]
    (d / "episodes.csv").write_text(
        "\n".join(",".join(r[i] for i in keep) for r in rows) + "\n")
    rs = load_runs([tmp_path])
    assert rs.left_out[0].status == "unreadable"
    assert "episode_return" in rs.left_out[0].reason
    assert main(["aggregate", str(tmp_path), "--reps", "100"]) == 2
    captured = capsys.readouterr()
    assert "missing column" in captured.err
    _no_traceback(captured)


def test_env_without_normaliser(tmp_path, capsys):
    write_synthetic_run(tmp_path, env_id="Pendulum-v1", score_range=(-1500.0, 0.0))
    assert main(["aggregate", str(tmp_path), "--reps", "100"]) == 2
    captured = capsys.readouterr()
    assert "no score normaliser for env 'Pendulum-v1'" in captured.err
    _no_traceback(captured)
    assert main(["aggregate", str(tmp_path), "--reps", "100", "--normaliser",
                 "Pendulum-v1=-1500,0"]) == 0


def test_missing_folder_and_no_inputs(tmp_path, capsys):
    assert main(["summary", str(tmp_path / "nope")]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert main(["summary"]) == 2
    assert "at least one" in capsys.readouterr().err


def test_published_table_parsing(tmp_path):
    t = load_published_table(PAPER_DATA / "main_10CPU.csv")
    assert len(t.games) == 57 and len(t.columns) == 4
    j = t.columns.index("Cleanba IMPALA, 1 A100, 10 CPU")
    assert t.mean[0, j] == 5592.46 and t.std[0, j] == 2052.31
    bad = tmp_path / "bad.csv"
    bad.write_text(",A\nAlien-v5,lots\n")
    with pytest.raises(AnalysisError, match="Alien-v5.*'lots'"):
        load_published_table(bad)


def test_openrlbenchmark_csv_with_column_map(tmp_path):
    p = tmp_path / "cleanba-impala" / "Breakout-v5" / "seed1.csv"
    p.parent.mkdir(parents=True)
    p.write_text("step,ret,t\n100,1.5,10\n150,,11\n200,30.5,20\n")
    cols = ColumnMap(step="step", episode_return="ret", wall_time="t")
    run = load_openrlbenchmark_csv(p, env_id="Breakout-v5", system="x", seed=1, columns=cols)
    np.testing.assert_array_equal(run.episodes["frames"], [400.0, 800.0])  # 4 frames/step
    np.testing.assert_array_equal(run.episodes["episode_return"], [1.5, 30.5])
    rs = load_openrlbenchmark_dir(tmp_path, columns=cols)
    assert rs.included[0].manifest["system"] == "cleanba-impala"
    assert rs.included[0].manifest["seed"] == 1
    with pytest.raises(AnalysisError, match="missing column.*with --step-column and --return-column"):
        load_openrlbenchmark_csv(p, env_id="Breakout-v5", system="x", seed=1)


def test_openrlbenchmark_dir_through_cli(tmp_path, capsys):
    rng = np.random.default_rng(0)
    for seed in (1, 2, 3):
        p = tmp_path / "orb" / "cleanrl-ppo" / "CartPole-v1" / f"{seed}.csv"
        p.parent.mkdir(parents=True, exist_ok=True)
        steps = np.arange(1, 201) * 500
        rets = np.minimum(500, 20 + steps / 200 + rng.normal(0, 5, 200))
        with open(p, "w") as f:
            f.write("global_step,charts/episodic_return,_runtime\n")
            for s, r in zip(steps, rets, strict=True):
                f.write(f"{s},{r},{s / 1000}\n")
    assert main(["summary", "--orb", str(tmp_path / "orb")]) == 0
    assert "cleanrl-ppo" in capsys.readouterr().out


def test_two_runs_in_one_cell_name_what_differs(tmp_path, capsys):
    write_synthetic_run(tmp_path, seed=1, skill=0.5)
    write_synthetic_run(tmp_path, seed=1, skill=0.9)
    assert main(["summary", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "two runs for seed 1 on CartPole-v1" in err and "hyperparameters.skill" in err
    assert main(["summary", str(tmp_path), "--group-by",
                 "layout.name,hyperparameters.skill"]) == 0
    assert "/ 0.9" in capsys.readouterr().out
