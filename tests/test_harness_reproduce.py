"""A sweep that names a published reference ([report] published = {table, column}) gets
a 'Did it reproduce?' section in its report; a wrong column is a line-precise error."""

from __future__ import annotations

import json

import pytest
from synthetic_records import write_final_score_run

from analysis.inputs.published_data import CLEANBA_TABLES as PAPER
from analysis.reproduce.published import published_column
from harness.report import build_report
from harness.store import Store
from harness.sweep import SweepError, parse_sweep

TABLE = PAPER / "main_10CPU.csv"
COLUMN = "Cleanba IMPALA, 1 A100, 10 CPU"

def sweep_text(column: str = COLUMN) -> str:
    return f"""\
name = "repro"
systems = ["cleanba-impala"]
layouts = ["a0-l0-d1"]
games = ["Breakout-v5", "Pong-v5"]
seeds = [1, 2, 3]
frames = 200000000
[report]
reps = 100
published = {{table = "cleanba:main_10CPU", column = "{column}"}}
"""


def test_report_has_a_reproduce_section(tmp_path):
    sweep = parse_sweep(sweep_text(), tmp_path / "repro.toml", check_games=False)
    store = Store(tmp_path / "res", sweep.name)
    col = published_column(TABLE, COLUMN)
    for spec in sweep.runs:  # the published means themselves: CONSISTENT
        write_final_score_run(tmp_path, final=float(col.mean[col.index(spec.env_id)]),
                              env_id=spec.env_id, seed=spec.seed,
                              run_dir=store.run_dir(spec.run_id))
    page, assets = build_report(sweep, store)
    lines = [v["line"] for v in assets["verdicts"] if v["kind"] == "reproduce"]
    assert lines[0].startswith("reproduce cleanba-impala / cleanba vs 'Cleanba IMPALA")
    assert ": REPRODUCED; no game flagged or collapsed, and the aggregate's 90% CI lies " \
        "inside +-10%" in lines[0]
    assert "2 consistent, 0 higher, 0 lower, 0 collapsed, 0 inconclusive of 2 judged" in lines[0]
    # the report speaks the CI's words
    assert [v["verdict"] for v in assets["verdicts"] if v["kind"] == "reproduce"][0] == \
        "REPRODUCED"
    assert any(f["name"] == "reproduce_per_game" for f in assets["figures"])
    assert any(t["name"] == "reproduce_per_game" for t in assets["tables"])
    html = page.read_text()
    assert "Pong-v5" in html and "reproduce cleanba-impala" in html
    data = json.loads((store.report_dir() / "reproduce.json").read_text())
    assert [g["verdict"] for g in data["games"]] == ["CONSISTENT", "CONSISTENT"]


def test_wrong_published_column_is_a_line_error(tmp_path):
    with pytest.raises(SweepError) as e:
        parse_sweep(sweep_text("Cleanba IMPALA"), tmp_path / "x.toml", check_games=False)
    assert "line 9" in str(e.value) and "Monobeast IMPALA, 1 A100, 10 CPU" in str(e.value)
