"""Shared adapter pieces: the EnvPool env behind the old gym API, version stats, redaction."""

import json
import os

import numpy as np
import pytest

from baselines import common
from baselines.common import BaselineUnavailable, OldGymEnv, baseline_protocol, version_stats
from benchenv import env_seeds


def test_protocol_is_the_papers_with_raw_rewards():
    p = baseline_protocol("Breakout-v5")
    assert p["repeat_action_probability"] == 0.25
    assert p["full_action_space"] is True
    assert p["episodic_life"] is False
    assert p["max_episode_steps"] == 27000
    assert (p["img_height"], p["img_width"], p["stack_num"], p["frame_skip"]) == (84, 84, 4, 4)
    assert p["reward_clip"] is False  # both baselines clip rewards themselves


def _play(env, actions):
    frames = [env.reset()]
    for a in actions:
        obs, r, done, info = env.step(a)
        frames.append(obs)
        if done:
            frames.append(env.reset())
    return np.stack(frames)


def test_old_gym_api_shapes_and_seeds():
    protocol = baseline_protocol("Breakout-v5")
    env = OldGymEnv("Breakout-v5", seed=3, env_index=2, protocol=protocol)
    assert env.observation_space.shape == (4, 84, 84)
    assert env.action_space.n == 18
    # Our trainers' seed of global env 2 of run seed 3, whatever the baseline asks for.
    assert env.seed(12345) == env_seeds(3, 2, 1) == [env.env_seed]
    obs = env.reset()
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    obs, r, done, info = env.step(np.int64(1))
    assert isinstance(r, float) and isinstance(done, bool) and "lives" in info

    actions = np.random.default_rng(0).integers(0, 18, 120)
    same_a = _play(OldGymEnv("Breakout-v5", 3, 2, protocol), actions)
    same_b = _play(OldGymEnv("Breakout-v5", 3, 2, protocol), actions)
    other_env = _play(OldGymEnv("Breakout-v5", 3, 3, protocol), actions)
    other_run = _play(OldGymEnv("Breakout-v5", 4, 2, protocol), actions)
    assert np.array_equal(same_a, same_b)
    assert not np.array_equal(same_a, other_env)
    assert not np.array_equal(same_a, other_run)


def test_episode_end_reports_the_raw_whole_game_return():
    ends, steps = [], []
    env = OldGymEnv("Breakout-v5", 1, 0, baseline_protocol("Breakout-v5"),
                    on_episode_end=ends.append, on_step=lambda: steps.append(1))
    env.reset()
    rng = np.random.default_rng(1)
    total, length, lives_seen = 0.0, 0, set()
    while not ends:
        _, r, done, info = env.step(rng.integers(0, 18))
        total += r
        length += 1
        lives_seen.add(info["lives"])
    assert len(lives_seen) > 1  # lives were lost inside the one episode: no life-loss ends
    assert ends[0].episode_return == total and ends[0].episode_length == length
    assert ends[0].env_index == 0 and len(steps) == length
    with pytest.raises(RuntimeError, match="call reset"):
        env.step(0)
    env.reset()
    env.step(0)


def test_version_stats_by_hand():
    # 3 steps x 4 trajectories: the 2nd and 4th see a new version mid-rollout.
    v = np.array([[1, 1, 2, 3],
                  [1, 2, 2, 3],
                  [1, 2, 2, 4]])
    assert version_stats(v) == {
        "rollout_policy_version_min": 1,
        "rollout_policy_version_max": 4,
        "num_rollouts": 4,
        "policy_changes_mid_rollout": 2,
    }
    with pytest.raises(ValueError, match=r"\[T, B\]"):
        version_stats(np.array([1, 2]))


def test_find_checkout_flag_then_env_var(tmp_path, monkeypatch):
    (tmp_path / "torchbeast").mkdir()
    (tmp_path / "torchbeast" / "monobeast.py").write_text("")
    monkeypatch.delenv("TORCHBEAST_PATH", raising=False)
    args = ("TORCHBEAST_PATH", "torchbeast", "torchbeast/monobeast.py", "https://x")
    assert common.find_checkout(tmp_path, *args) == tmp_path.resolve()
    monkeypatch.setenv("TORCHBEAST_PATH", str(tmp_path))
    assert common.find_checkout(None, *args) == tmp_path.resolve()
    with pytest.raises(BaselineUnavailable, match=f"torchbeast checkout not found at {tmp_path / 'nope'}"):
        common.find_checkout(tmp_path / "nope", *args)
    monkeypatch.delenv("TORCHBEAST_PATH")
    with pytest.raises(BaselineUnavailable, match="--torchbeast-path DIR or set TORCHBEAST_PATH"):
        common.find_checkout(None, *args)


def test_redaction_removes_environ_copies(tmp_path):
    (tmp_path / "a").mkdir()
    secret = {"HOME": "/root", "WANDB_API_KEY": "s3cret"}
    (tmp_path / "a" / "meta.json").write_text(json.dumps({"env": secret, "args": {"env": "Pong"}}))
    real = tmp_path / "meta.json.20240101-000000.1"
    real.write_text(json.dumps({"env": secret}))
    os.symlink(real.name, tmp_path / "meta.json")  # moolib links meta.json to the dated file
    changed = common.redact_native_logs(tmp_path)
    assert sorted(changed) == sorted([tmp_path / "a" / "meta.json", real])
    for p in changed:
        assert "s3cret" not in p.read_text()
        assert json.loads(p.read_text())["env"] == common.REDACTED
    assert json.loads((tmp_path / "a" / "meta.json").read_text())["args"] == {"env": "Pong"}


def test_finish_native_tidies_and_notes_the_native_log(tmp_path):
    from baselines.native_logs import NativeLog, NativeLogError

    native = tmp_path / "native"
    (native / "sys").mkdir(parents=True)
    (native / "latest").symlink_to(native / "sys")
    (native / "sys" / "meta.json").write_text(json.dumps({"env": {"HOME": "/x"}}))
    (native / "sys" / "logs.csv").write_text("rows\n")

    def read(path):
        return NativeLog(path, ["a"], [{"a": 1.0}, {"a": 2.0}], ["w"])

    note = common.finish_native(native, tmp_path, "sys/logs.csv", read)
    assert note == {"dir": "native", "logs": {"file": "sys/logs.csv", "rows": 2,
                                              "warnings": ["w"]}}
    assert not (native / "latest").exists()
    assert json.loads((native / "sys" / "meta.json").read_text())["env"] == common.REDACTED

    def broken(path):
        raise NativeLogError("bad")

    assert common.finish_native(native, tmp_path, "sys/logs.csv", broken)["logs"] == {
        "file": "sys/logs.csv", "error": "bad"}
    assert common.finish_native(native, tmp_path, "none.csv", read)["logs"] is None


def test_update_row_holds_the_columns_both_baselines_write():
    row = common.update_row(update=3, env_steps=80, frame_skip=4, wall_time_s=2.5,
                            learner_version=4, sps=32.0, learning_rate=1e-4,
                            learner_delay_s=0.0)
    assert row == {"update": 3, "env_steps": 80, "frames": 320, "wall_time_s": 2.5,
                   "learner_version": 4, "sps": 32.0, "stat_learning_rate": 1e-4,
                   "stat_learner_delay_s": 0.0, "rollout_queue_get_s": 0.0,
                   "param_queue_get_s": 0.0, "params_checksum": ""}
