"""`harness plan`/`run` check each run's command with the trainer's own parser first."""

from __future__ import annotations

import pytest

from harness.cli import main

SWEEP = """\
name = "v"
systems = ["cleanba-ppo", "cleanba-impala"]
layouts = ["a0-l0-d1", "a0-l0-d2"]
games = ["CartPole-v1"]
seeds = [1, 2]
frames = 8192

[overrides]
{override}
"""


@pytest.mark.parametrize("override, words", [
    ('num-envs = "x"', ["line 9", "num-envs = 'x'", "invalid literal for int()"]),
    ("num-envs = 7", ["line 9", "num-envs = 7", "cannot be split evenly", "a0-l0-d2"]),
    ("num-minibatches = 3", ["line 9", "num-minibatches = 3", "does not divide"]),
    ("num-actor-threads = 0", ["line 9", "--num-actor-threads must be >= 1"]),
    ("learning-rate = 'fast'", ["line 9", "learning-rate = 'fast'", "could not convert"]),
])
def test_bad_override_fails_plan_and_run_before_anything_starts(tmp_path, capsys, override,
                                                                  words):
    sweep = tmp_path / "s.toml"
    sweep.write_text(SWEEP.format(override=override))
    root = tmp_path / "res"
    for cmd in ("plan", "run"):
        assert main([cmd, "--sweep", str(sweep), "--results-root", str(root)]) == 2
        err = capsys.readouterr().err
        assert str(sweep) in err and "would fail at launch" in err
        for w in words:
            assert w in err, (w, err)
    assert not root.exists()  # nothing written


def test_good_sweep_with_scalar_lists_plans(tmp_path, capsys):
    sweep = tmp_path / "s.toml"
    sweep.write_text('name = "v"\nsystems = "cleanba-ppo"\nlayouts = "a0-l0-d2"\n'
                     'games = "CartPole-v1"\nseeds = 3\nframes = 8192\n'
                     '[overrides]\nnum-envs = 16\nnum-minibatches = 8\n')
    assert main(["plan", "--sweep", str(sweep), "--results-root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "1 runs" in out and "s3" in out and "--num-envs 16" in out


def test_preset_that_does_not_fit_the_game_fails_plan(tmp_path, capsys):
    sweep = tmp_path / "s.toml"
    sweep.write_text('name = "v"\nsystems = ["cleanba-ppo"]\nlayouts = ["a0-l0-d1"]\n'
                     'games = ["Breakout-v5"]\nseeds = [1]\nframes = 400000\n'
                     'preset = "cartpole"\n')
    assert main(["plan", "--sweep", str(sweep), "--results-root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "preset 'cartpole'" in err and "Breakout-v5" in err


SECTIONS = """\
name = "v"
systems = ["cleanba-ppo"]
layouts = ["a0-l0-d1"]
games = ["CartPole-v1"]
seeds = [1, 2]
frames = 8192

[report]
{report}

[regression]
{regression}
"""


@pytest.mark.parametrize("report, regression, words", [
    ("delta = -1", "", ["line 9", "delta must be a number > 0", "got -1"]),
    ("delta = nan", "", ["line 9", "delta must be a number > 0", "got nan"]),
    ("reps = 0", "", ["line 9", "reps must be an integer >= 1", "bootstrap replicates"]),
    ("seed = 1.5", "", ["line 9", "seed must be an integer >= 0"]),
    ("group_by = 3", "", ["line 9", "group_by must be a non-empty string"]),
    ("", 'delta = "big"', ["line 12", "delta must be a number > 0", "allowed drop"]),
    ("", "delta = 0", ["line 12", "delta must be a number > 0", "got 0"]),
    ("", "assume_equal_spread = 1", ["line 12", "assume_equal_spread must be true or false"]),
    ("", "games = []", ["line 12", "games must be a non-empty list of strings"]),
    ("", "reference = 7", ["line 12", "reference must be a non-empty string"]),
])
def test_bad_report_or_regression_value_fails_plan_and_run(tmp_path, capsys, report,
                                                           regression, words):
    """A value the report or the gate would refuse after the whole sweep has run is
    refused when the file is read, at its line, with what is valid."""
    sweep = tmp_path / "s.toml"
    sweep.write_text(SECTIONS.format(report=report, regression=regression))
    root = tmp_path / "res"
    for cmd in ("plan", "run"):
        assert main([cmd, "--sweep", str(sweep), "--results-root", str(root)]) == 2
        err = capsys.readouterr().err
        assert str(sweep) in err, err
        for w in words:
            assert w in err, (w, err)
    assert not root.exists()  # nothing written


def test_good_report_and_regression_values_plan(tmp_path, capsys):
    sweep = tmp_path / "s.toml"
    sweep.write_text(SECTIONS.format(
        report='delta = 0.2\nreps = 100\nseed = 0\ngroup_by = "layout.name"',
        regression='delta = 1\nassume_equal_spread = true\ngames = ["CartPole-v1"]'))
    assert main(["plan", "--sweep", str(sweep), "--results-root", str(tmp_path)]) == 0
