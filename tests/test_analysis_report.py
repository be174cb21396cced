"""build_report_assets and the figures: every kind of sweep gives files, never a crash."""

import json

import matplotlib.image
import pytest
from synthetic_records import write_synthetic_run

from analysis.cli import main
from analysis.output.report import build_report_assets

ATARI = ("Breakout-v5", "Pong-v5", "Qbert-v5")


def _check_files(res):
    for f in res["figures"]:
        assert f["title"] and f["caption"]
        from pathlib import Path

        png, pdf = Path(f["png"]), Path(f["pdf"])
        assert png.stat().st_size > 10_000, f["name"]
        assert pdf.read_bytes()[:5] == b"%PDF-", f["name"]
        h, w = matplotlib.image.imread(png).shape[:2]
        assert h >= 200 and w >= 400, f["name"]
    for t in res["tables"]:
        assert t["markdown"].startswith("|")
        assert open(t["csv"]).readline().strip()
    for v in res["verdicts"]:
        assert json.loads(open(v["json"]).read())
        assert v["line"]


@pytest.fixture(scope="module")
def layout_sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    for layout, spf in (("a0-l0-d1", 1e-4), ("a0-l1,2-d1", 4e-5)):
        for s in (1, 2, 3):
            write_synthetic_run(root, seed=s, layout=layout, seconds_per_frame=spf)
            write_synthetic_run(root, seed=s, layout=layout, architecture="sync",
                                seconds_per_frame=spf * 1.5)
    write_synthetic_run(root, seed=9, status="failed")
    write_synthetic_run(root, seed=10, status="running")
    return root


def test_cartpole_layout_sweep_through_figures_cli(layout_sweep, tmp_path, capsys):
    # `figures` is build_report_assets plus printing and index.json
    assert main(["figures", str(layout_sweep), "--out", str(tmp_path), "--reps", "200",
                 "--aggregate-reps", "2000"]) == 0
    assert "PASS (bitwise identical)" in capsys.readouterr().out
    res = json.loads((tmp_path / "index.json").read_text())
    _check_files(res)
    names = {f["name"] for f in res["figures"]}
    assert {"aggregates", "median_vs_frames", "median_vs_time",
            "performance_profile", "runtimes", "staleness"} <= names
    # one task, 3 seeds: the median and IQM curves are one curve, drawn once
    assert "iqm_vs_frames" not in names
    median = next(f for f in res["figures"] if f["name"] == "median_vs_frames")
    assert median["title"].startswith("Median = IQM") and "drawn once" in median["caption"]
    assert any(n.startswith("per_game_curves") for n in names)
    assert any(n.startswith("sync_vs_cleanba") for n in names)
    eq = [v for v in res["verdicts"] if v["kind"] == "equivalence"]
    assert len(eq) == 2 and all(v["verdict"] == "PASS (bitwise identical)" for v in eq)
    assert res["runs"]["included"] == 12
    assert {x["status"] for x in res["runs"]["left_out"]} == {"failed", "running"}
    assert {t["name"] for t in res["tables"]} >= {"aggregates", "per_game", "runtimes",
                                                  "left_out_runs"}


def test_single_group_says_why_no_equivalence(tmp_path):
    for s in (1, 2):
        write_synthetic_run(tmp_path / "runs", seed=s)
    res = build_report_assets([tmp_path / "runs"], tmp_path / "out", reps=100,
                              aggregate_reps=500)
    _check_files(res)
    assert not [v for v in res["verdicts"] if v["kind"] == "equivalence"]
    assert any("no equivalence verdict" in w for w in res["warnings"])


def test_atari_and_cartpole_mixed_systems_and_bad_env(tmp_path):
    runs = tmp_path / "runs"
    for s in (1, 2, 3):
        for env in ATARI:
            for system, skill in (("cleanba-impala", 1.5), ("monobeast-impala", 1.2)):
                write_synthetic_run(runs, system=system, architecture="async", env_id=env,
                                    seed=s, skill=skill, total_frames=400_000,
                                    episodes=150, updates=10)
        write_synthetic_run(runs, seed=s)  # a CartPole suite beside the Atari one
    write_synthetic_run(runs, env_id="Pendulum-v1", score_range=(-1500.0, 0.0))
    res = build_report_assets([runs], tmp_path / "out", reps=100, aggregate_reps=500)
    _check_files(res)
    names = {f["name"] for f in res["figures"]}
    # Two suites: each in its own subfolder, names suffixed and titles prefixed by suite.
    assert {"aggregates_Atari", "aggregates_CartPole-v1"} <= names
    atari_agg = next(f for f in res["figures"] if f["name"] == "aggregates_Atari")
    assert "/Atari/" in atari_agg["png"] and atari_agg["title"].startswith("Atari: ")
    assert any("Pendulum-v1" in w for w in res["warnings"])
    agg = next(t for t in res["tables"] if t["name"] == "aggregates_Atari")
    assert "cleanba-impala" in agg["markdown"] and "monobeast-impala" in agg["markdown"]


def test_nothing_finished_and_missing_folder(tmp_path):
    write_synthetic_run(tmp_path / "runs", status="running")
    res = build_report_assets([tmp_path / "runs"], tmp_path / "out")
    assert res["runs"]["included"] == 0 and len(res["runs"]["left_out"]) == 1
    assert any("no completed runs" in w for w in res["warnings"])
    res = build_report_assets([tmp_path / "missing"], tmp_path / "out2")
    assert res["figures"] == [] and "no such folder" in res["warnings"][0]


def test_curves_and_aggregate_cli(layout_sweep, tmp_path, capsys):
    assert main(["curves", str(layout_sweep), "--out", str(tmp_path), "--reps", "100",
                 "--axis", "wall_time_s"]) == 0
    assert (tmp_path / "median_vs_wall_time_s.png").stat().st_size > 10_000
    assert (tmp_path / "curves_wall_time_s.csv").read_text().count("\n") == 4 * 2 * 50 + 1
    assert main(["aggregate", str(layout_sweep), "--reps", "500", "--out",
                 str(tmp_path), "--where", "architecture=cleanba"]) == 0
    out = capsys.readouterr().out
    assert "P(X > Y)" in out and "sync" not in out.split("P(X > Y)")[0].split("\n", 2)[2]
    assert (tmp_path / "aggregates.json").exists()
