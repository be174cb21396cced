"""docs/analysis.md, "Your runs from elsewhere": every worked example runs here, as
written, on files made with the real writers (tests/foreign_runs.py): each format's two
import commands, then summary, aggregate, equivalence, regression and reproduce on the
records they wrote.

Both versions of the agent (before, after) plateau at the published Cleanba IMPALA mean
of each game with 0.1% noise, so the verdicts are known: equivalent, no regression,
reproduced. The imported final scores are checked against the values the files hold.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import numpy as np
import pytest
from foreign_runs import (
    cleanrl_run_dir,
    final_score,
    finish_wandb,
    history,
    table_rows,
    write_monitor_run,
    write_table_csv,
    write_table_parquet,
    write_tensorboard_run,
    write_wandb_history_csv,
    write_wandb_offline_run,
)

from analysis.cli import main
from analysis.inputs.facts import final_window_mean
from analysis.inputs.load import load_records
from analysis.inputs.published_data import CLEANBA_TABLES as PAPER_DATA

DOC = Path(__file__).resolve().parents[1] / "docs" / "analysis.md"
TABLE = PAPER_DATA / "main_10CPU.csv"
COLUMN = "Cleanba IMPALA, 1 A100, 10 CPU"
GAMES = ("Breakout-v5", "Pong-v5")
SEEDS = (1, 2, 3)

def doc_commands(name: str) -> list[list[str]]:
    """The argv (after `python -m analysis`) of each line of the code block that follows
    `<!-- import-example: name -->` in docs/analysis.md."""
    text = DOC.read_text(encoding="utf-8")
    m = re.search(rf"<!-- import-example: {re.escape(name)} -->\n```\n(.*?)```", text, re.S)
    assert m, f"docs/analysis.md has no example {name!r}"
    out = []
    for line in m[1].strip().splitlines():
        words = shlex.split(line)
        assert words[:3] == ["python", "-m", "analysis"], line
        out.append(words[3:])  # as written: the table by its shipped name
    return out


def versions() -> dict[str, dict[tuple[str, int], dict[str, np.ndarray]]]:
    """{version: {(game, seed): history}}: both at the published means, other noise."""
    from analysis.reproduce import published_column

    col = published_column(TABLE, COLUMN)
    return {v: {(g, s): history(float(col.mean[col.games.index(g)]), s, salt=salt)
                for g in GAMES for s in SEEDS}
            for v, salt in (("before", 0), ("after", 7))}


def make_tensorboard(runs) -> None:
    for v, hs in runs.items():
        for (g, s), h in hs.items():  # seed 2 as torch's SummaryWriter writes scalars
            write_tensorboard_run(cleanrl_run_dir(Path("cleanrl", v), g, s), h,
                                  torch_style=(s == 2))


def make_monitor(runs) -> None:
    for v, hs in runs.items():
        for (g, s), h in hs.items():
            write_monitor_run(Path("sb3", v, g, f"seed_{s}"), h, g, envs=3 + s)  # ragged


def make_wandb(runs) -> None:
    for v, hs in runs.items():
        for (g, s), h in hs.items():
            root = Path("wandb-runs", v)
            root.mkdir(parents=True, exist_ok=True)
            write_wandb_offline_run(root, h, g, s)
    finish_wandb()


def make_wandb_csv(runs) -> None:
    for v, hs in runs.items():
        for (g, s), h in hs.items():
            write_wandb_history_csv(Path("exports", v, g, f"seed_{s}.csv"), h)


def make_table(runs) -> None:
    Path("scores").mkdir()
    for v, write in (("before", write_table_csv), ("after", write_table_parquet)):
        write(Path("scores", f"{v}.{'csv' if v == 'before' else 'parquet'}"),
              table_rows([(g, s, "cleanrl-ppo", "any", h) for (g, s), h in runs[v].items()]))


MAKERS = {"tensorboard": make_tensorboard, "monitor": make_monitor, "wandb": make_wandb,
          "wandb-csv": make_wandb_csv, "table": make_table}
WRITERS = {"tensorboard": ("tensorboard",), "monitor": (), "wandb": ("wandb",),
           "wandb-csv": ("pandas",), "table": ("pyarrow",)}
"""The libraries that write each format's files (dev extra): skipped where absent, e.g.
in a venv with only the core install."""


@pytest.mark.parametrize("fmt", list(MAKERS))
def test_worked_example_runs_as_documented(fmt, tmp_path, monkeypatch, capsys):
    for module in WRITERS[fmt]:
        pytest.importorskip(module)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    runs = versions()
    MAKERS[fmt](runs)
    for argv in doc_commands(fmt):
        assert main(argv) == 0, capsys.readouterr()
        assert "6 runs written" in capsys.readouterr().out

    # The records hold what the files hold: each run's final score (last 100 episodes).
    for v in ("before", "after"):
        rs = load_records([Path("imported", v)])
        assert len(rs.included) == 6 and not rs.left_out
        for r in rs.included:
            h = runs[v][(r.manifest["env_id"], r.manifest["seed"])]
            assert final_window_mean(r.episodes["episode_return"], r.episodes["env_steps"],
                                     100) == pytest.approx(final_score(h), rel=1e-5)
            assert r.manifest["imported"]["format"] == fmt
            assert all(len(f["sha256"]) == 64 for f in r.manifest["imported"]["files"])
            assert float(np.nanmax(r.episodes["frames"])) == pytest.approx(200e6, rel=1e-6)

    summary, aggregate, equivalence, regression, reproduce = doc_commands("verdicts")
    assert main(summary) == 0
    out = capsys.readouterr().out
    assert "12 completed runs, 0 left out" in out
    assert out.count("imported: ") == 12 and f"imported from {fmt} import of" in out
    assert re.search(r"/ before +\| 3 +\| 2 ", out) and re.search(r"/ after +\| 3 +\| 2 ", out)
    assert main(aggregate) == 0
    out = capsys.readouterr().out
    assert re.search(r"/ before +\| 3 +\| 2 ", out) and re.search(r"/ after +\| 3 +\| 2 ", out)
    assert main(equivalence) == 0
    assert "PASS (equivalent within ±" in capsys.readouterr().out
    assert main(regression) == 0
    assert "regression: PASS" in capsys.readouterr().out
    assert main(reproduce) == 0
    out = capsys.readouterr().out
    assert re.search(r"vs 'Cleanba IMPALA, 1 A100, 10 CPU': REPRODUCED; ", out), out
    assert "Per game: 2 consistent, 0 higher, 0 lower, 0 collapsed" in out
