"""What the verdicts, tables and figures print does not contradict itself or overstate:
equivalence headings and significance, a reference number's unit, the per-game sd, games
too noisy in the published table, env versions, figure captions, aggregate caveats, the
one-seed wording of the docs, and a group label's missing keys; each on the case that
showed it (the shipped reference records, the published tables, imports of other tools'
runs).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from foreign_runs import history, write_monitor_run
from harness_cli import ROOT
from synthetic_records import write_final_score_run

from analysis.cli import main
from analysis.inputs.load import NO_CACHE_ENV, group_key
from analysis.inputs.published_data import CLEANBA_TABLES as PAPER_DATA
from analysis.output import figures as figs
from analysis.output.report import _runtime_references, per_game_table
from analysis.scoring.grouping import analyse
from analysis.scoring.scores import efficiency_curve
from analysis.scoring.tables import aggregate_groups
from analysis.verdicts.compare import pair_groups
from analysis.verdicts.seedplan import spread_from_analysis

REFERENCE = ROOT / "results" / "reference" / "smoke-cartpole"
IMPALA, PPO = "cleanba-impala / cleanba", "cleanba-ppo / cleanba"


@pytest.fixture(scope="module", autouse=True)
def _no_cache_in_the_checkout():
    """The shipped reference is read in place: no analysis cache is written beside it (a
    later test copies the folder and must find only the records)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(NO_CACHE_ENV, "1")
        yield


@pytest.fixture(scope="module")
def reference():
    return analyse([REFERENCE]).suites[0]


def _blocks(out: str) -> list[str]:
    return out.split("### ")[1:]


def test_equivalence_prints_each_verdict_as_its_line_the_table_only_with_verbose(capsys):
    """By default a verdict is its one line (outcome, estimate, CI, margin,
    seeds) under its heading; the per-metric table comes with --verbose."""
    assert main(["equivalence", str(REFERENCE)]) == 0
    out = capsys.readouterr().out
    blocks = _blocks(out)
    assert len(blocks) == 6 and "| metric (per seed)" not in out
    for b in blocks:
        line = b.splitlines()[1]
        assert line.startswith("equivalence "), b
        # an identical pair's evidence is its identity (difference exactly 0), no CI
        assert ("90% CI" in line and "delta " in line) or "exactly 0 on every seed" in line
        assert " seeds " in line or " seed " in line, line


def test_equivalence_headings_bitwise_table_and_significance(capsys):
    """Finding 4: a heading per comparison; the bitwise pair's table shows the per-seed
    differences ([0, 0], not a Welch CI of +-0.038) and says what identity without a
    determinism block does not show; IMPALA vs PPO inside the margin says the difference
    is significant and that the default margin is not chosen for two systems."""
    assert main(["equivalence", str(REFERENCE), "--verbose"]) == 0
    out = capsys.readouterr().out
    blocks = _blocks(out)
    assert len(blocks) == 6 and all("| metric (per seed)" in b for b in blocks)
    bitwise = [b for b in blocks if "PASS (bitwise identical)" in b]
    assert len(bitwise) == 2
    for b in bitwise:
        assert b.count("[+0.000, +0.000]") == 4 and "exactly 0 on every seed" in b
        assert "unknown: records without a determinism block" in b
        assert "does not show that they would on other software" in b
    assert "-0.038, +0.038" not in out
    assert main(["equivalence", str(REFERENCE), "--a", f"{IMPALA} / a0-l0-d1",
                 "--reference", f"{PPO} / a0-l0-d1", "--verbose"]) == 0
    out = capsys.readouterr().out
    assert "PASS (equivalent within ±0.2; the difference is significant)" in out
    assert "significant inside the margin: 97.5% CI IQM final [-0.134" in out
    assert "Welch (unpaired: different systems" in out
    assert "note: the default margin is the one for layouts of one system" in out


def test_regression_reference_number_states_and_checks_its_unit(capsys):
    """Finding 5: a raw CartPole return given as the normalised reference is refused
    (exit 2) naming the range and its normalised value; --reference-unit return takes
    it; the line states the unit; the help says it; per_game.md's sd is ddof=1."""
    base = ["regression", "--new", str(REFERENCE), "--where", "system=cleanba-ppo",
            "--reference", "248.7", "--reference-sd", "6.8", "--reference-seeds", "3"]
    assert main(base) == 2
    err = capsys.readouterr().err
    assert "cannot be a per-seed score of CartPole-v1" in err and "[-0.04624, 1]" in err
    assert "= 0.4742 normalised" in err and "--reference-unit return" in err
    assert main([*base, "--reference-unit", "return", "--verbose"]) == 0
    out = capsys.readouterr().out
    assert "regression: PASS" in out and "numbers in normalised ((return - 22.1) / 477.9" in out
    assert main([*base[:-6], "--reference", "0.47", "--reference-sd", "6.8",
                 "--reference-seeds", "3"]) == 2  # an sd wider than the whole range
    assert "--reference-sd 6.8 cannot be a spread" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["regression", "--help"])
    help_text = re.sub(r"[│\s]+", " ", capsys.readouterr().out)
    assert "normalised units (HNS on Atari" in help_text and "ddof=1" in help_text


def test_per_game_table_sd_is_the_sample_sd(reference):
    table = per_game_table(reference, "per_game")
    gs = reference[f"{PPO} / a0-l0-d1"]
    raw = gs.final_raw[:, 0]
    cell = table.rows[0][list(reference).index(f"{PPO} / a0-l0-d1") + 1]
    assert cell == f"{raw.mean():.2f} ± {raw.std(ddof=1):.2f}" and "ddof=1" in table.title


def test_published_too_noisy_is_judged_and_not_learned_is_at_random(tmp_path):
    """Finding 6: Boxing (HNS 5.5) and Asterix (8.7) in spec_out's Moolib column were NOT
    LEARNED; now they are judged on their own spread and said PUBLISHED TOO NOISY, while
    Venture (at the random score) stays NOT LEARNED."""
    from analysis.inputs.load import load_runs
    from analysis.reproduce import NOT_LEARNED, published_column, reproduce

    col = published_column(PAPER_DATA / "spec_out.csv", "Moolib IMPALA, 8 A100, 80 CPU")
    rng = np.random.default_rng(3)
    games = ["Boxing-v5", "Asterix-v5", "Breakout-v5", "Pong-v5", "Venture-v5"]
    for g in games:
        j = col.games.index(g)
        for s in (1, 2, 3):
            write_final_score_run(tmp_path, final=float(rng.normal(col.mean[j], col.sd[j])),
                                  env_id=g, seed=s)
    res = reproduce(load_runs([tmp_path]), col, reps=200)
    by = {g.game: g for g in res.games}
    for g in ("Boxing-v5", "Asterix-v5"):
        assert by[g].verdict != NOT_LEARNED and by[g].noisy
        assert "PUBLISHED TOO NOISY" in by[g].notes[0]
    assert by["Venture-v5"].verdict == NOT_LEARNED and not by["Venture-v5"].noisy
    assert "sits at the random score" in by["Venture-v5"].notes[0]
    table = res.table().markdown()
    assert "(PUBLISHED TOO NOISY)" in table and "2 PUBLISHED TOO NOISY" in \
        res.detail_lines()[0]


def test_env_versions_are_different_tasks_unless_mapped(tmp_path, capsys):
    """Finding 6: aggregate paired an SB3 BreakoutNoFrameskip-v4 import with a CleanRL
    Breakout-v5 one (P(X > Y) across them) while the gate refused them; now one rule:
    apart unless --env-map, and the command says which. No 'None' in labels."""
    out = tmp_path / "out"
    for game, system in (("BreakoutNoFrameskip-v4", "sb3-ppo"), ("Breakout-v5", "cleanrl")):
        for s in (1, 2, 3):
            write_monitor_run(tmp_path / system / f"seed_{s}", history(100.0 + s, s,
                              episodes=40), game, envs=2)
        assert main(["import", "monitor", str(tmp_path / system), "--out", str(out),
                     "--protocol", "paper", "--frames-per-step", "4", "--frames", "200e6",
                     "--system", system]) == 0
    capsys.readouterr()
    assert main(["aggregate", str(out), "--reps", "200"]) == 0
    res = capsys.readouterr()
    assert "0 pairs" in res.out and "not compared: sb3-ppo / imported:monitor" in res.out
    assert "kept apart as different tasks" in res.err and "None" not in res.out
    assert main(["aggregate", str(out), "--reps", "200", "--env-map",
                 "BreakoutNoFrameskip-v4=Breakout-v5"]) == 0
    res = capsys.readouterr()
    assert "1 pair" in res.out and "scored as Breakout-v5 (--env-map)" in res.err
    assert main(["equivalence", str(out)]) == 2
    assert "--env-map BreakoutNoFrameskip-v4=Breakout-v5" in capsys.readouterr().err
    run = analyse([out]).runset.included[0]
    assert group_key(run, "system,architecture,layout.name").count(" / ") == 1


def test_figures_say_what_they_show_and_draw_coinciding_aggregates_once(reference,
                                                                       tmp_path):
    """Finding 7: the median curve's caption defines it as rliable does; on a one-task
    suite at 3 seeds median, IQM and mean are one curve and one panel."""
    suite = {g: gs for g, gs in reference.items() if g.startswith(PPO)}
    curves = [efficiency_curve(gs, metrics=("median", "iqm", "mean"), reps=50)
              for gs in suite.values()]
    groups = figs.coinciding({m: [c.metrics[m] for c in curves]
                              for m in ("median", "iqm", "mean")})
    assert groups == [["median", "iqm", "mean"]]
    info = figs.efficiency_curves_figure(curves, tmp_path, metric="median",
                                         same_as=["iqm", "mean"])
    assert "median over tasks of the per-task mean over runs" in info.caption
    assert "over runs x tasks of the" not in info.caption
    assert info.title.startswith("Median = IQM = Mean")
    agg = aggregate_groups(suite, reps=200)
    panels = figs.aggregate_intervals_figure(agg.intervals, tmp_path)
    titles = [ax.get_title() for ax in panels.figure.axes if ax.get_title()]
    assert titles == ["Median = IQM = Mean", "Optimality gap"]
    assert "share a panel" in panels.caption


def test_aggregate_caveats_and_runtime_reference(reference, capsys):
    """Finding 7: 3-seed CIs carry the too-narrow note, P(X > Y) says what it means, the
    runtime ratios use each system's equivalence reference, and --out's help is true."""
    agg = aggregate_groups(reference, reps=200, pairs=[(f"{IMPALA} / a0-l0,1-d1",
                                                        f"{IMPALA} / a0-l0-d1")])
    text = "\n".join(agg.lines())
    assert "note: 3 seeds: percentile bootstrap CIs are too narrow" in text
    assert "cannot tell: the CI spans almost all of 0..1 (3 vs 3 seeds per task)" in text
    refs = _runtime_references(reference, pair_groups(reference))
    names = list(reference)
    assert {names[r] for r in refs} == {f"{IMPALA} / a0-l0-d1", f"{PPO} / a0-l0-d1"}
    with pytest.raises(SystemExit):
        main(["aggregate", "--help"])
    help_text = re.sub(r"[│\s]+", " ", capsys.readouterr().out)
    assert "printed only when not given" not in help_text and "printed either way" in help_text


def test_smoke_comment_and_plan_seeds_agree(reference):
    """Finding 7: the smoke preset quotes what plan-seeds says of the reference, and
    plan-seeds says where its df come from."""
    from analysis.inputs.load import load_runs

    text = (ROOT / "harness" / "presets" / "smoke.toml").read_text()
    spread = spread_from_analysis(analyse(load_runs([REFERENCE])))
    assert f"sd ({spread.sd_group:.3g} per layout" in text
    assert "the sum over systems of their seeds - 1: 2 systems x (3 - 1)" in \
        spread.describe()


def test_one_seed_side_is_described_alike_in_both_docs():
    """Finding 7: docs/harness.md said a one-seed side borrows the other side's variance;
    the gate does not (unless --assume-equal-spread): `analysis regression` refuses it
    (exit 2), `harness regress` says UNDECIDED (exit 4: every run completed)."""
    harness_md = " ".join((ROOT / "docs" / "harness.md").read_text().split())
    analysis_md = " ".join((ROOT / "docs" / "analysis.md").read_text().split())
    assert "the other side's variance when a side has one seed" not in harness_md
    assert "One seed on a side is refused" in analysis_md
    assert "One seed on a side cannot decide the gate" in harness_md
    assert "(exit 4: borrowing the other side's variance" in harness_md
    for doc in (harness_md, analysis_md):
        assert "--assume-equal-spread" in doc


def test_env_spaces_print_no_gymnasium_warning():
    """Finding 7: `harness plan` printed gymnasium's Box warnings with raw ANSI escapes."""
    pytest.importorskip("envpool")
    import benchenv
    from benchenv.envpool_env import _spaces

    _spaces.cache_clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        benchenv.env_spaces("CartPole-v1", benchenv.env_protocol("CartPole-v1"))
    assert [str(w.message) for w in caught] == []


def test_group_label_leaves_out_missing_keys():
    from runrecord import Run, Table

    run = Run(Path("x"), {"system": "sb3-ppo", "layout": {"name": "imported:monitor"}},
              Table({}, 0), Table({}, 0))
    assert group_key(run, "system,architecture,layout.name") == "sb3-ppo / imported:monitor"
