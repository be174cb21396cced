"""Every gating verdict has three outcomes, each on its own evidence.

PASS / REGRESSION / UNDECIDED for the gate, REPRODUCED / NOT REPRODUCED / NOT SHOWN for
`reproduce`; a COLLAPSED game fails both; exit codes 0 / 1 / 4 (1 under --strict).
Rates are measured on the published columns' own per-game means and spreads
(the shipped tables, analysis/data/published/cleanba) through the verdicts' vectorised cores; the records-level cases
go through the real entry points.
"""

from __future__ import annotations

import numpy as np
import pytest
from synthetic_records import write_final_score_run

from analysis.cli import main
from analysis.inputs.load import load_runs
from analysis.inputs.published_data import CLEANBA_TABLES as PAPER_DATA
from analysis.reproduce import published_column, reproduce
from analysis.reproduce.judge import (
    COLLAPSED,
    NOT_REPRODUCED,
    NOT_SHOWN,
    REPRODUCED,
    headline,
    judge,
)
from analysis.scales.normalize import get_normaliser
from analysis.verdicts.equivalence import PASS, REGRESSION, UNDECIDED
from analysis.verdicts.gate import gate
from analysis.verdicts.regression import COLLAPSE_RULE, gate_rules
from calibration.columns import (
    collapse_one,
    draw_seeds,
    learned_truth,
    published_columns,
)
from runrecord.exits import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNDECIDED,
    verdict_exit,
    worst_exit,
)

TABLE = PAPER_DATA / "main_10CPU.csv"
COLUMN = "Cleanba IMPALA, 1 A100, 10 CPU"
DELTA = 0.16


def _bound(nominal: float, sims: int) -> float:
    return nominal + 3 * np.sqrt(nominal * (1 - nominal) / sims)


@pytest.fixture(scope="module")
def columns():
    return published_columns(PAPER_DATA)


def _write(root, finals: dict[str, list[float]], first_seed: int = 1) -> None:
    for game, values in finals.items():
        for k, v in enumerate(values):
            write_final_score_run(root, final=float(v), env_id=game, seed=first_seed + k)


# ---------------------------------------------------------------- exit codes

def test_exit_codes_of_three_outcomes():
    assert verdict_exit(True, False) == EXIT_OK
    assert verdict_exit(False, True) == EXIT_FAILED
    assert verdict_exit(True, True) == EXIT_FAILED  # evidence of failure wins
    assert verdict_exit(False, False) == EXIT_UNDECIDED == 4
    assert verdict_exit(False, False, strict=True) == EXIT_FAILED
    # several verdicts in one command: error > failure > undecided > pass
    assert worst_exit(EXIT_OK, EXIT_UNDECIDED) == EXIT_UNDECIDED
    assert worst_exit(EXIT_UNDECIDED, EXIT_FAILED) == EXIT_FAILED
    assert worst_exit(EXIT_FAILED, EXIT_BAD_INPUT, EXIT_UNDECIDED) == EXIT_BAD_INPUT
    assert worst_exit(EXIT_OK, EXIT_OK) == EXIT_OK


# ---------------------------------------------------------------- the gate, vectorised

def test_an_improvement_is_never_regression(columns):
    """Every seed of every game 20% better than the reference's same seed: no rule can
    find a regression, on any published column, in any draw."""
    rng = np.random.default_rng(33)
    for col in columns:
        ref = draw_seeds(rng, col, 300, 3)
        for better in (ref * 1.2, ref + 0.05 * np.abs(ref)):
            verdicts, _ = gate_rules(better, ref, list(col.games), DELTA)
            assert not np.any(verdicts == REGRESSION), col.name


def test_no_change_at_3_seeds_is_undecided_not_regression(columns):
    """Both sides drawn from the same published column, 3 seeds a side: REGRESSION in
    <= 5% (+3 MC SE) of seeded draws on every column (13 of 20 draws before each outcome
    had its own evidence); the rest PASS or UNDECIDED."""
    rng = np.random.default_rng(3)
    sims = 500
    for col in columns:
        new, ref = draw_seeds(rng, col, sims, 3), draw_seeds(rng, col, sims, 3)
        verdicts, fired = gate_rules(new, ref, list(col.games), DELTA)
        assert np.mean(verdicts == REGRESSION) <= _bound(0.05, sims), col.name
        assert np.all(np.isin(verdicts, (PASS, REGRESSION, UNDECIDED)))
        assert np.mean(fired[COLLAPSE_RULE]) <= _bound(0.01, sims), col.name
    # The column a reviewer would pick: mostly UNDECIDED or PASS, and UNDECIDED happens.
    col = next(c for c in columns if c.name.endswith(COLUMN))
    new, ref = draw_seeds(rng, col, sims, 3), draw_seeds(rng, col, sims, 3)
    verdicts, _ = gate_rules(new, ref, list(col.games), DELTA)
    assert np.mean(verdicts != REGRESSION) >= 0.95
    assert np.any(verdicts == UNDECIDED)


def test_one_collapsed_game_fails_the_gate_at_5_seeds(columns):
    rng = np.random.default_rng(5)
    sims = 300
    for col in columns:
        new, ref = draw_seeds(rng, col, sims, 5), draw_seeds(rng, col, sims, 5)
        broken, _ = collapse_one(rng, col, new)
        verdicts, fired = gate_rules(broken, ref, list(col.games), DELTA)
        assert np.mean(verdicts == REGRESSION) >= 0.95, col.name
        assert np.mean(fired[COLLAPSE_RULE]) >= 0.85, col.name  # the rest: other rules


# ---------------------------------------------------------------- reproduce, vectorised

def _judge(user, pub):
    return judge(user.mean(1), user.std(1, ddof=1), user.shape[1], pub.mean(1),
                 pub.std(1, ddof=1), 3, relative=0.25, absolute=0.1, user_max=user.max(1),
                 user_min=user.min(1))


def test_reproduce_headline_rates_on_the_main_10cpu_column(columns):
    """Faithful: NOT REPRODUCED <= 5% (+3 MC SE) at 3 seeds, REPRODUCED >= 50% at 5;
    one learned game collapsed: NOT REPRODUCED >= 95% (0% before each outcome had its own
    evidence)."""
    col = next(c for c in columns if c.name.endswith(COLUMN))
    rng = np.random.default_rng(7)
    sims = 1_000
    pub = draw_seeds(rng, col, sims, 3)
    user = draw_seeds(rng, col, sims, 3)
    head = headline(_judge(user, pub))
    assert np.mean(head == NOT_REPRODUCED) <= _bound(0.05, sims)
    broken, which = collapse_one(rng, col, user)
    j = _judge(broken, pub)
    assert np.mean(headline(j) == NOT_REPRODUCED) >= 0.95
    assert np.mean(j.verdict[np.arange(sims), which] == COLLAPSED) >= 0.95
    five = headline(_judge(draw_seeds(rng, col, sims, 5), pub))
    assert np.mean(five == REPRODUCED) >= 0.5


def test_collapse_rule_is_rare_on_faithful_draws_of_every_column(columns):
    rng = np.random.default_rng(11)
    sims = 500
    for col in columns:
        j = _judge(draw_seeds(rng, col, sims, 3), draw_seeds(rng, col, sims, 3))
        assert np.mean((j.verdict == COLLAPSED).any(-1)) <= _bound(0.01, sims), col.name
        assert learned_truth(col).any()


# ---------------------------------------------------------------- on records

def _column_finals(col, rng, n: int, games=None, sd_scale: float = 1.0):
    return {g: list(rng.normal(col.mean[j], sd_scale * col.sd[j], n))
            for j, g in enumerate(col.games) if games is None or g in games}


def test_single_collapsed_game_fails_both_verdicts_on_records(tmp_path, capsys):
    """Breakout at its random score on every seed (published 482 ± 9): the gate says
    REGRESSION (rule: COLLAPSED) and `reproduce` NOT REPRODUCED, both exit 1."""
    col = published_column(TABLE, COLUMN)
    rng = np.random.default_rng(4)
    ref = _column_finals(col, rng, 5)
    new = _column_finals(col, rng, 5)
    new["Breakout-v5"] = list(get_normaliser("Breakout-v5").low + rng.normal(0, 0.1, 5))
    _write(tmp_path / "ref", ref)
    _write(tmp_path / "new", new, first_seed=11)
    out = gate(load_runs([tmp_path / "new"]).included, load_runs([tmp_path / "ref"]).included)
    assert out.result.verdict == REGRESSION and out.exit_code == EXIT_FAILED
    assert "COLLAPSED" in out.result.line() and "Breakout-v5" in out.result.line()
    res = reproduce(load_runs([tmp_path / "new"]), col, reps=100)
    assert res.headline == NOT_REPRODUCED and res.exit_code == EXIT_FAILED
    assert {g.game: g.verdict for g in res.games}["Breakout-v5"] == COLLAPSED
    assert "COLLAPSED to the random score" in res.summary_line()


def test_a_breakout_collapse_is_not_reproduced(tmp_path):
    """The reviewer's case: Breakout published 300 ± 99 (3 seeds, HNS 10.4), yours at the
    random score on every seed. It was INCONCLUSIVE and the headline REPRODUCED, exit 0;
    now the game is COLLAPSED and the headline NOT REPRODUCED, exit 1."""
    table = PAPER_DATA / "smootheness_complete.csv"
    col = published_column(table, "Moolib (Resnet CNN) 8 A100, 80 CPU")
    rng = np.random.default_rng(12)
    finals = _column_finals(col, rng, 3)
    finals["Breakout-v5"] = [1.7, 1.7, 1.8]
    _write(tmp_path, finals)
    res = reproduce(load_runs([tmp_path]), col, reps=100)
    assert {g.game: g.verdict for g in res.games}["Breakout-v5"] == COLLAPSED
    assert res.headline == NOT_REPRODUCED and res.exit_code == EXIT_FAILED


def test_gate_exit_codes_on_records(tmp_path, capsys):
    """PASS 0 (bit-identical: said first, no interval), UNDECIDED 4 (1 with --strict,
    with the seeds that would decide it), REGRESSION 1."""
    col = published_column(TABLE, COLUMN)
    rng = np.random.default_rng(8)
    games = ["Breakout-v5", "Pong-v5", "Alien-v5", "Amidar-v5"]
    ref = _column_finals(col, rng, 3, games)
    _write(tmp_path / "ref", ref)
    base = ["regression", "--reference", str(tmp_path / "ref")]
    assert main([*base, "--new", str(tmp_path / "ref")]) == EXIT_OK
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith("regression: PASS (bitwise identical)") and "bounds" not in line
    noisy = {g: [v + s for v, s in zip(vs, (-1, 0, 1), strict=True)] for g, vs in
             _column_finals(col, rng, 3, games, sd_scale=4.0).items()}
    _write(tmp_path / "noisy", noisy, first_seed=21)
    assert main([*base, "--new", str(tmp_path / "noisy"), "--delta", "0.05"]) == EXIT_UNDECIDED
    out = capsys.readouterr().out
    assert ": UNDECIDED" in out and "(seed planner)" in out and "--until-decided" in out
    assert "no regression shown" in out
    assert main([*base, "--new", str(tmp_path / "noisy"), "--delta", "0.05",
                 "--strict"]) == EXIT_FAILED
    capsys.readouterr()
    worse = {g: [v / 10 for v in vs] for g, vs in ref.items()}
    _write(tmp_path / "worse", worse, first_seed=31)
    assert main([*base, "--new", str(tmp_path / "worse")]) == EXIT_FAILED
    assert ": REGRESSION" in capsys.readouterr().out


def test_reproduce_exit_codes_on_records(tmp_path, capsys):
    """REPRODUCED 0 (10 faithful seeds), NOT SHOWN 4 (2 noisy seeds on three games; 1 with
    --strict, with the seeds that would show it)."""
    col = published_column(TABLE, COLUMN)
    rng = np.random.default_rng(10)
    _write(tmp_path / "good", _column_finals(col, rng, 10))
    base = ["reproduce", "--published", str(TABLE), "--column", COLUMN, "--reps", "100"]
    assert main([*base, "--runs", str(tmp_path / "good")]) == EXIT_OK
    assert ": REPRODUCED;" in capsys.readouterr().out
    games = ["Alien-v5", "Amidar-v5", "Asterix-v5"]
    _write(tmp_path / "few", _column_finals(col, rng, 2, games, sd_scale=2.0))
    code = main([*base, "--runs", str(tmp_path / "few")])
    out = capsys.readouterr().out
    assert code == EXIT_UNDECIDED, out[-1500:]
    assert ": NOT SHOWN;" in out and "no failure shown, and no reproduction shown" in out
    assert "more seeds than the planner's cap (200) would be needed to show it at this " \
           "spread" in out  # the published noise dominates
    assert "--until-decided" in out
    assert main([*base, "--runs", str(tmp_path / "few"), "--strict"]) == EXIT_FAILED
    assert NOT_SHOWN in capsys.readouterr().out


def test_bit_identical_equivalence_look_prints_no_interval():
    """An adaptive look on identical records says PASS (bitwise identical) first and
    prints no interval beside it (it printed a CI 65x wider than the margin)."""
    from analysis.scoring.scores import GroupScores  # noqa: F401  (the type the look takes)
    from analysis.sequential.design import SequentialDesign
    from analysis.sequential.looks import pair_look
    from analysis.stats.welch import WelchInterval
    from analysis.verdicts.equivalence import BitwiseResult, EquivalenceResult

    w = WelchInterval(0.0, 0.03, 4.0, (-0.065, 0.065), (-0.08, 0.08), 3, 3, 1.0, 1.0)
    res = EquivalenceResult(PASS, "a", "b", 0.001, w, w, BitwiseResult(True, 3, "same"),
                            seeds_a=[1, 2, 3], seeds_b=[1, 2, 3], tasks=["CartPole-v1"])

    class Side:
        final = auc = np.ones((3, 1))
        tasks = ["CartPole-v1"]

    look = pair_look(res, Side(), Side(), SequentialDesign(3, 2, 9), 1, "", "iqm")
    assert look.decision == PASS
    assert "PASS (bitwise identical)" in look.text and "CI" not in look.text
    assert "PASS (bitwise identical)" in res.line() and "CI" not in res.line()
