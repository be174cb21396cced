"""Did it reproduce? A user's runs against a published table column (analysis.reproduce).

The user run sets are drawn (fixed seeds) from the published column's own means and sds,
3 seeds a game, so the truth is known: every game truly equals the published one, except
where the test shifts it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from synthetic_records import final_score_history, write_final_score_run

from analysis.cli import main
from analysis.inputs.load import RunSet
from analysis.inputs.protocol import PAPER_FRAMES, ProtocolMismatch, paper_protocol
from analysis.inputs.published_data import CLEANBA_TABLES as PAPER
from analysis.reproduce import (
    CONSISTENT,
    HIGHER,
    LOWER,
    power_consistent,
    published_column,
    reproduce,
)
from analysis.stats.welch import welch_interval
from runrecord import Run, Table, schema

TABLE = PAPER / "main_10CPU.csv"
COLUMN = "Cleanba IMPALA, 1 A100, 10 CPU"

def _run(game: str, seed: int, final: float, *, layout: str = "a0-l0-d1",
         protocol: dict | None = None, frames: float = PAPER_FRAMES) -> Run:
    """An in-memory completed run whose final score is exactly `final` (the same history
    write_final_score_run writes to disk)."""
    h = final_score_history(final, total_frames=int(frames))
    n = len(h["frames"])
    episodes = Table({**h, "env_index": np.zeros(n), "episode_length": np.full(n, 1000.0)}, n)
    manifest = {"run_id": f"{game}-{seed}-{layout}", "system": "cleanba-impala",
                "architecture": "cleanba", "env_id": game, "seed": seed,
                "layout": {"name": layout}, "status": "completed",
                "env_protocol": protocol or paper_protocol(),
                "hyperparameters": {"total_frames": frames}}
    updates = Table({c: np.array([]) for c in schema.UPDATE_COLUMNS}, 0)
    return Run(Path(manifest["run_id"]), manifest, episodes, updates, [])


def _draws(col, seed: int, halve: tuple[str, ...] = ()) -> dict[str, list[float]]:
    """3 seeds a game from N(published mean, published sd (ddof=1)); `halve`: games whose
    scores are halved (a known shift)."""
    rng = np.random.default_rng(seed)
    out = {}
    for j, g in enumerate(col.games):
        v = rng.normal(col.mean[j], col.sd[j], 3)
        out[g] = list(v / 2 if g in halve else v)
    return out


def _runset(draws: dict[str, list[float]]) -> RunSet:
    return RunSet(included=[_run(g, s + 1, v) for g, vs in draws.items()
                            for s, v in enumerate(vs)])


def test_power_matches_the_verdict_code():
    """power_consistent's vectorised simulation agrees with 1,000 draws run through
    welch_interval one at a time, CONSISTENT when its 90% CI is inside the margin (MC sd
    of that share <= 0.016; we allow 0.065, four of them)."""
    rng = np.random.default_rng(7)
    for sd, margin in ((0.1, 0.3), (0.3, 0.5), (0.05, 0.06)):
        hits = 0
        for _ in range(1000):
            a, b = rng.normal(0, sd, 3), rng.normal(0, sd, 3)
            w = welch_interval(a, b)
            hits += -margin < w.ci90[0] and w.ci90[1] < margin
        assert abs(hits / 1000 - power_consistent(sd, 3, 3, margin)) < 0.065, (sd, margin)


def test_draws_from_the_column_are_consistent_but_for_a_stated_share():
    """Truth: every game equals the published one. Per game, the chance of CONSISTENT is
    p_g = power_consistent(published sd, 3, 3, margin_g); the number of non-consistent
    games is a sum of independent Bernoullis with mean E = sum(1 - p_g) (about 15 of 57
    for this column at the default margin: its large-spread games) and sd S; we require
    at most E + 4 S (a one-sided bound exceeded with probability < 1e-4 by the normal
    approximation) and at most 6 HIGHER/LOWER (false flags: each ~5%; Binomial(57, 0.05)
    exceeds 6 with probability < 0.03, 8 with < 0.002) on each of three fixed seeds."""
    col = published_column(TABLE, COLUMN)
    for seed in (0, 1, 2):
        res = reproduce(_runset(_draws(col, seed)), col, reps=200)
        p = np.array([g.power for g in res.games])
        e, s = float(np.sum(1 - p)), float(np.sqrt(np.sum(p * (1 - p))))
        not_consistent = sum(g.verdict != CONSISTENT for g in res.games)
        flagged = sum(g.verdict in (HIGHER, LOWER) for g in res.games)
        assert len(res.games) == 57
        assert not_consistent <= e + 4 * s, (seed, not_consistent, e, s)
        assert flagged <= 6, (seed, [(g.game, g.verdict) for g in res.games])
        assert 5 <= e <= 20  # the stated share itself: 9-35% of games, from the column's sds


def test_halved_scores_on_five_games_are_lower():
    col = published_column(TABLE, COLUMN)
    # Five games whose random score is near 0 (so halving the score about halves the HNS,
    # twice the default 25% margin) and whose published spread is small (sd <= 3% of the
    # mean), so the shift is far beyond noise. (Where the random score is far below 0, as
    # on Tennis, halving the raw score moves the HNS by less than 25%: CONSISTENT.)
    five = ("BankHeist-v5", "Boxing-v5", "Enduro-v5", "Breakout-v5", "Gravitar-v5")
    base = reproduce(_runset(_draws(col, 0)), col, reps=200)
    shifted = reproduce(_runset(_draws(col, 0, halve=five)), col, reps=200)
    verdicts = {g.game: g.verdict for g in shifted.games}
    assert all(verdicts[g] == LOWER for g in five), {g: verdicts[g] for g in five}
    # Every other game keeps its verdict (same draws).
    assert all(verdicts[g.game] == g.verdict for g in base.games if g.game not in five)
    assert shifted.counts[LOWER] >= 5 and shifted.exit_code == 1


def test_layout_copies_are_one_seed_and_counts_are_printed(tmp_path, capsys):
    col = published_column(TABLE, COLUMN)
    j = col.games.index("Pong-v5")
    draws = np.random.default_rng(3).normal(col.mean[j], col.sd[j], 2)
    for seed, v in zip((1, 2), draws, strict=True):
        for layout in ("a0-l0-d1", "a0-l1-d1"):  # one seed on two layouts: copies
            write_final_score_run(tmp_path, final=float(v), env_id="Pong-v5", seed=seed,
                                  layout=layout)
    code = main(["reproduce", "--runs", str(tmp_path), "--published", str(TABLE),
                 "--column", COLUMN, "--reps", "200"])
    out = capsys.readouterr().out
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("Pong-v5:"))
    assert "(2 seeds) vs published" in line and "(3 seeds)" in line
    assert "4 runs are 2 seeds (layout copies averaged per seed)" in line
    assert "1: " in out and "(x2)" in out  # per-seed finals, copies marked


def _write_breakout(root: Path, **kw) -> None:
    col = published_column(TABLE, COLUMN)
    j = col.games.index("Breakout-v5")
    for seed in (1, 2, 3):
        write_final_score_run(root, final=float(col.mean[j]), env_id="Breakout-v5", seed=seed,
                              **kw)


def test_other_sticky_actions_or_budget_exit_2_naming_the_key(tmp_path, capsys):
    sticky = tmp_path / "sticky"
    _write_breakout(sticky, env_protocol=dict(paper_protocol(), repeat_action_probability=0.0))
    out = tmp_path / "out"
    args = ["reproduce", "--published", str(TABLE), "--column", COLUMN, "--reps", "100",
            "--out", str(out)]
    assert main([*args, "--runs", str(sticky)]) == 2
    err = capsys.readouterr().err
    assert "repeat_action_probability" in err and "--allow-protocol-mismatch" in err
    assert not out.exists()
    assert main([*args, "--runs", str(sticky), "--allow-protocol-mismatch"]) == 0
    assert "protocol mismatch allowed" in capsys.readouterr().err

    short = tmp_path / "short"
    _write_breakout(short, total_frames=10_000_000)
    out2 = tmp_path / "out2"
    args2 = [*args[:-1], str(out2)]
    assert main([*args2, "--runs", str(short)]) == 2
    err = capsys.readouterr().err
    assert "frame_budget" in err and "10,000,000" in err and "200,000,000" in err
    assert not out2.exists()
    assert main([*args2, "--runs", str(short), "--allow-budget-mismatch"]) == 0
    text = capsys.readouterr().out
    lines = [x for x in text.splitlines() if x.startswith(("Breakout-v5:", "median", "IQM",
                                                            "aggregate", "reproduce "))]
    assert len(lines) == 5 and all("at 10M frames against 200M" in x for x in lines)
    assert (out2 / "reproduce_per_game.png").exists() and (out2 / "reproduce.json").exists()


def test_guard_is_a_protocol_mismatch_error():
    col = published_column(TABLE, COLUMN)
    runs = RunSet(included=[_run("Pong-v5", s, 19.0, protocol=dict(paper_protocol(),
                                                                    max_episode_steps=1000))
                            for s in (1, 2, 3)])
    with pytest.raises(ProtocolMismatch) as e:
        reproduce(runs, col, reps=10)
    assert e.value.differing_keys == ["max_episode_steps"]
    # Reward clipping is a training detail (the baselines clip in their learners).
    ok = RunSet(included=[_run("Pong-v5", s, 19.0, protocol=dict(paper_protocol(),
                                                                  reward_clip=False))
                          for s in (1, 2, 3)])
    assert reproduce(ok, col, reps=10).games[0].game == "Pong-v5"


def test_bad_column_and_unknown_game_exit_2_with_choices(tmp_path, capsys):
    _write_breakout(tmp_path / "runs")
    out = tmp_path / "out"
    base = ["reproduce", "--runs", str(tmp_path / "runs"), "--published", str(TABLE),
            "--out", str(out)]
    assert main([*base, "--column", "Cleanba IMPALA"]) == 2
    err = capsys.readouterr().err
    assert "Monobeast IMPALA, 1 A100, 10 CPU" in err and COLUMN in err
    assert main([*base, "--column", COLUMN, "--games", "Breakuot"]) == 2
    err = capsys.readouterr().err
    assert "unknown game 'Breakuot'" in err and "Breakout-v5" in err
    assert not out.exists()
