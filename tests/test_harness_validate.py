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
