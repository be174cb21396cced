"""The actor's step recording (cleanba.core.records.record_step + EpisodeTracker, what
cleanba.core.actor.actor_loop calls on every env step) against real EnvPool envs: rewards,
dones, mask and episodes step by step, and raw (unclipped) Atari scores."""

from __future__ import annotations

import numpy as np
import pytest

from benchenv import env_protocol, make_env
from cleanba.core.records import EpisodeTracker, MissingRawReward, record_step

# CartPole's pole angle and cart position limits (gymnasium's CartPole-v1)
THETA_LIMIT = 12 * 2 * np.pi / 360
X_LIMIT = 2.4


def drive(env, actions_per_step, rewards_clipped=False):
    """Step `env` through record_step + EpisodeTracker as the actor does; per step: the
    record, (terminated, truncated), the observation and the finished episodes."""
    n = env.config["num_envs"]
    obs, _ = env.reset()
    prev_done = np.zeros(n, bool)
    tracker = EpisodeTracker(0, n)
    steps = []
    for t, actions in enumerate(actions_per_step):
        obs, reward, term, trunc, info = env.step(np.asarray(actions, np.int32))
        rec = record_step(prev_done, reward, term, trunc, info, rewards_clipped)
        episodes = tracker.step(rec.raw_reward, rec.done, rec.mask, (t + 1) * n, 0.0)
        steps.append((rec, term.copy(), trunc.copy(), obs.copy(), info, episodes))
        prev_done = rec.done
    return steps


def test_truncation_at_the_episode_cap_and_the_autoreset_step():
    # Cap 5, pushing right then left keeps the pole up: every episode is cut at 5 steps.
    # EnvPool's next-step autoreset: the step after a done only resets (reward 0, no done)
    # and is masked; then a new episode starts. Hand-derived, per step t = 0 .. 13:
    cap, n = 5, 2
    env = make_env("CartPole-v1", n, 3, protocol={"max_episode_steps": cap})
    steps = drive(env, [[t % 2] * n for t in range(14)])
    reward = [1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 1]
    done = [0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0]
    mask = [1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 1]
    for t, (rec, term, trunc, _, _, episodes) in enumerate(steps):
        for e in range(n):
            assert rec.reward[e] == reward[t], (t, e)
            assert rec.raw_reward[e] == reward[t], (t, e)
            assert rec.done[e] == done[t], (t, e)
            assert rec.mask[e] == mask[t], (t, e)
            assert not term[e]  # never a fall: the cap ends every episode
            assert trunc[e] == done[t], (t, e)
        if done[t]:
            assert [(ep.env_index, ep.episode_return, ep.episode_length, ep.env_steps)
                    for ep in episodes] == [(0, 5.0, 5, (t + 1) * n), (1, 5.0, 5, (t + 1) * n)]
        else:
            assert episodes == []


def test_termination_by_a_fall_is_a_done_with_the_true_length():
    # Always pushing left: the pole falls within a few dozen steps (no cap reached). The
    # done step is the first whose observation is outside CartPole's limits; the episode's
    # return and length are the steps up to and including it; the next step is the reset.
    n = 3
    env = make_env("CartPole-v1", n, 5)
    steps = drive(env, [[0] * n] * 60)
    for e in range(n):
        outside = [abs(obs[e, 2]) > THETA_LIMIT or abs(obs[e, 0]) > X_LIMIT
                   for _, _, _, obs, _, _ in steps]
        end = outside.index(True)
        for t, (rec, term, trunc, _, _, episodes) in enumerate(steps[: end + 2]):
            assert rec.done[e] == (t == end), (t, e)
            assert term[e] == (t == end) and not trunc[e], (t, e)
            assert rec.mask[e] == (t != end + 1), (t, e)
            assert rec.reward[e] == (0.0 if t == end + 1 else 1.0), (t, e)
            mine = [ep for ep in episodes if ep.env_index == e]
            if t == end:
                assert [(ep.episode_return, ep.episode_length) for ep in mine] == [
                    (end + 1.0, end + 1)]
            else:
                assert mine == []
        # after the reset step the observation is a fresh start again
        assert abs(steps[end + 1][3][e, 2]) < 0.05


def test_recorded_atari_returns_are_raw_scores_not_clipped_sums():
    # SpaceInvaders scores 5..30 points per alien (200 for the mothership), so a clipped
    # sum (1 per kill) is far below the game score. Two twin envs with the same seeds and
    # actions: one with the training protocol (clipped rewards, raw score in info) through
    # the actor's recording, one unclipped, summed here independently.
    n, cap, steps_ = 2, 200, 2 * 200 + 4
    proto = env_protocol("SpaceInvaders-v5", max_episode_steps=cap)
    clipped = make_env("SpaceInvaders-v5", n, 11, protocol=proto)
    raw = make_env("SpaceInvaders-v5", n, 11, protocol={**proto, "reward_clip": False})
    actions = np.random.default_rng(0).integers(0, 18, (steps_, n))
    recorded = drive(clipped, actions, rewards_clipped=True)
    raw_env_obs, _ = raw.reset()
    sums_raw, sums_clipped = np.zeros(n), np.zeros(n)
    expected, recorded_eps = [], []
    for t, (rec, _, _, obs, _, episodes) in enumerate(recorded):
        obs_raw, reward_raw, term, trunc, _ = raw.step(actions[t].astype(np.int32))
        np.testing.assert_array_equal(obs, obs_raw)  # the twins stay in step
        np.testing.assert_array_equal(rec.raw_reward, reward_raw)
        np.testing.assert_array_equal(rec.reward, np.sign(reward_raw))  # training signal
        sums_raw += np.where(rec.mask > 0, reward_raw, 0.0)
        sums_clipped += np.where(rec.mask > 0, np.sign(reward_raw), 0.0)
        for e in np.flatnonzero(term | trunc):
            expected.append((e, sums_raw[e], sums_clipped[e]))
            sums_raw[e] = sums_clipped[e] = 0.0
        recorded_eps += [(ep.env_index, ep.episode_return) for ep in episodes]
    assert len(expected) == 2 * n  # every env played two capped episodes
    assert recorded_eps == [(e, r) for e, r, _ in expected]
    assert all(r >= c for _, r, c in expected)
    assert sum(r > c for _, r, c in expected) >= 2  # points scored: raw sums exceed clipped
    assert all(r % 5 == 0 for _, r, _ in expected)


def test_a_missing_raw_reward_fails_loudly():
    # CartPole's info has no "reward" (it does not clip): with clipped rewards declared, the
    # recording must refuse rather than record the training reward as the game score
    env = make_env("CartPole-v1", 2, 1)
    env.reset()
    _, reward, term, trunc, info = env.step(np.zeros(2, np.int32))
    assert "reward" not in info
    with pytest.raises(MissingRawReward, match="reward_clip"):
        record_step(np.zeros(2, bool), reward, term, trunc, info, rewards_clipped=True)
    rec = record_step(np.zeros(2, bool), reward, term, trunc, info, rewards_clipped=False)
    np.testing.assert_array_equal(rec.raw_reward, reward)
