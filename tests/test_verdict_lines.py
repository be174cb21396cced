"""A verdict prints one line a reader understands (outcome, estimate,
interval, margin, seeds); how its interval was built (paired or Welch, t and df, the
numbers' unit) is behind --verbose and in the JSON. The regression gate, equivalence and
the adaptive looks, on the shipped reference records and synthetic runs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from harness_cli import ROOT
from synthetic_records import synthetic_layout_runs, write_final_score_run

from analysis.cli import main
from analysis.inputs.load import NO_CACHE_ENV
from analysis.inputs.published_data import CLEANBA_TABLES
from analysis.reproduce import published_column
from analysis.sequential import Look, SequentialDesign, sweep_looks

REFERENCE = ROOT / "results" / "reference" / "smoke-cartpole"
IMPALA, PPO = "cleanba-impala / cleanba", "cleanba-ppo / cleanba"
TABLE, COLUMN = CLEANBA_TABLES / "main_10CPU.csv", "Cleanba IMPALA, 1 A100, 10 CPU"
DESIGN_TEXT = ("paired by seed (", "precision-weighted", "PUBLISHED TOO NOISY", "Welch (", "one run per seed and group", "numbers in",
               " df", "DIFFERENT when")


@pytest.fixture(autouse=True)
def _no_cache_in_the_checkout(monkeypatch):
    monkeypatch.setenv(NO_CACHE_ENV, "1")


def _plain(line: str) -> bool:
    return not any(t in line for t in DESIGN_TEXT)


def test_regression_line_is_plain_and_verbose_adds_the_design(capsys, tmp_path):
    base = ["regression", "--new", str(REFERENCE), "--where", "system=cleanba-ppo",
            "--reference", "0.5", "--reference-sd", "0.1", "--reference-seeds", "3",
            "--json-out", str(tmp_path / "gate.json")]
    assert main(base) == 0
    (line, *rest) = capsys.readouterr().out.splitlines()
    assert line.startswith("regression: PASS for cleanba-ppo") and _plain(line), line
    assert "new - reference = -0.0298" in line and "one-sided 95% bounds [" in line
    assert "delta 0.2 normalised" in line and "new 0.4702 (3 seeds" in line
    assert not any(r.startswith("numbers in") for r in rest)
    assert main([*base, "--verbose"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == line
    assert out[1] == "numbers in normalised ((return - 22.1) / 477.9 for CartPole-v1)"
    saved = json.loads((tmp_path / "gate.json").read_text())
    assert saved["line"] == line and saved["detail"] == out[1:2]


def test_regression_of_runs_puts_its_pairing_behind_verbose(capsys):
    base = ["regression", "--new", str(REFERENCE), "--where", "system=cleanba-ppo",
            "--reference", str(REFERENCE), "--layout", "a0-l0-d1", "--layout", "a0-l1-d1"]
    code = main(base)
    out = capsys.readouterr().out
    assert code == 0 and _plain(out.splitlines()[0]), out
    assert main([*base, "--verbose"]) == 0
    assert "numbers in normalised" in capsys.readouterr().out


def test_equivalence_line_is_plain_and_verbose_adds_the_design(capsys):
    pair = ["equivalence", str(REFERENCE), "--a", f"{IMPALA} / a0-l0-d1",
            "--reference", f"{PPO} / a0-l0-d1"]
    assert main(pair) == 0
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if x.startswith("equivalence ")]
    assert _plain(line) and line.endswith("; 3 vs 3 independent seeds, 1 task"), line
    assert "design:" not in out
    assert main([*pair, "--verbose"]) == 0
    out = capsys.readouterr().out
    assert line in out.splitlines()
    assert ("design: one run per seed and group, Welch (unpaired: different systems"
            in out)
    assert main(["equivalence", str(REFERENCE), "--a", f"{IMPALA} / a0-l0-d2"]) == 0
    (paired,) = [x for x in capsys.readouterr().out.splitlines()
                 if x.startswith("equivalence ")]
    assert _plain(paired) and "3 seeds on both sides, paired by seed, 1 task" in paired



def test_look_lines_are_plain_and_keep_their_design_in_detail(tmp_path):
    runs = synthetic_layout_runs(tmp_path / "eq", range(1, 4), ["a0-l0-d1", "a0-l1-d1"],
                                 shift={"a0-l1-d1": 0.15}, noise=0.3)
    (look,) = sweep_looks(runs, SequentialDesign(3, 2, 5), 1)
    assert look.decision == "CONTINUE" and _plain(look.text), look.text
    assert "final diff" in look.text and "repeated CI [" in look.text
    assert "delta 0.2" in look.text and "3 vs 3 seeds" in look.text
    assert "2.0 df; DIFFERENT when +-" in look.detail and "final: t " in look.detail
    assert Look.from_json(json.loads(json.dumps(look.to_json()))) == look
    new = synthetic_layout_runs(tmp_path / "new", range(11, 14), ["a0-l0-d1"])
    (gate,) = sweep_looks(new, SequentialDesign(), 1, verdicts=("gate",),
                          reference_runs=synthetic_layout_runs(tmp_path / "ref", range(1, 4), ["a0-l0-d1"]))
    assert _plain(gate.text) and "lower bound" in gate.text, gate.text
    assert gate.detail.startswith("repeated bounds: t ") and " df" in gate.detail


def test_reproduce_line_is_plain_and_verbose_adds_how_it_was_built(tmp_path, capsys):
    col = published_column(TABLE, COLUMN)
    for game in ("Pong-v5", "Breakout-v5"):
        j = col.games.index(game)
        for seed in (1, 2, 3):
            final = float(np.random.default_rng(seed).normal(col.mean[j], col.sd[j]))
            write_final_score_run(tmp_path, final=final, env_id=game, seed=seed)
    args = ["reproduce", "--runs", str(tmp_path), "--published", str(TABLE), "--column",
            COLUMN, "--reps", "200"]
    code = main(args)
    out = capsys.readouterr().out.splitlines()
    (line,) = [x for x in out if x.startswith("reproduce cleanba-impala")]
    assert code in (0, 1, 4) and _plain(line), line
    assert "Aggregate: yours - published" in line and "90% CI [" in line
    assert line.endswith("vs +-10%; your seeds per game 3 vs 3 published"), line
    assert not any(x.startswith("aggregate: precision-weighted") for x in out)
    assert main([*args, "--verbose"]) == code
    out = capsys.readouterr().out.splitlines()
    assert line in out
    assert "aggregate: precision-weighted over the judged games, both sides' noise" in out
    assert out[out.index(line) + 1].startswith("judged games: 0 PUBLISHED TOO NOISY")
