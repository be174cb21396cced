"""Learning: the CartPole presets reach a mean return >= 400 within their fixed budget, and
an Atari smoke run writes valid records with raw game scores."""

from __future__ import annotations

import numpy as np
import pytest
from cleanba_runs import check_valid_record, run

from runrecord import load_run


@pytest.mark.slow
@pytest.mark.parametrize("alg", ["ppo", "impala"])
def test_cartpole_preset_learns(tmp_path, alg):
    p = run(alg, tmp_path, "--seed", "1", "--progress-interval-s", "0", timeout=400)
    assert p.returncode == 0, p.stderr
    r = load_run(tmp_path)
    returns = r.episodes["episode_return"]
    assert returns[-50:].mean() >= 400, returns[-50:]
    assert returns[:50].mean() < 100  # it learned during the run (a random policy gets ~22)


@pytest.mark.slow
def test_breakout_smoke_writes_raw_whole_game_scores(tmp_path):
    # IMPALA (one gradient step per batch) keeps this cheap; 4 envs x 256 steps each is
    # enough for a random-ish Breakout policy to lose all 5 lives at least once.
    num_envs, steps, updates = 4, 32, 8
    p = run("impala", tmp_path, "--env-id", "Breakout-v5", "--num-envs", str(num_envs),
            "--num-steps", str(steps), "--num-actor-threads", "1", "--num-minibatches", "1",
            "--total-timesteps", str(num_envs * steps * updates), "--progress-interval-s", "0",
            preset="atari", timeout=400)
    assert p.returncode == 0, p.stderr
    r = check_valid_record(tmp_path, num_envs, num_envs * steps, updates)
    m = r.manifest
    assert m["env_protocol"]["reward_clip"] is True  # training signal only
    assert m["env_protocol"]["episodic_life"] is False
    assert m["env_protocol"]["repeat_action_probability"] == 0.25
    assert m["env_protocol"]["full_action_space"] is True
    assert m["env_protocol"]["max_episode_steps"] == 27000
    np.testing.assert_array_equal(r.episodes["frames"], 4 * r.episodes["env_steps"])
    np.testing.assert_array_equal(r.updates["frames"], 4 * r.updates["env_steps"])
    ret = r.episodes["episode_return"]
    # Breakout scores are whole points; a whole game (5 lives) lasts > 100 agent steps
    np.testing.assert_array_equal(ret, np.round(ret))
    assert np.all(ret >= 0)
    assert np.all(r.episodes["episode_length"] > 100)
