"""The two Atari backends side by side: ale-py's AtariVectorEnv behind benchenv's adapter
gives EnvPool's steps exactly where the protocol lets them agree (noop_max=1, sticky
actions on): rewards (clipped and raw), terminated and truncated flags, lives, elapsed
steps, and every frame of a step that did not end an episode. A game that ends inside a
frame skip leaves a different stale frame in each backend (docs/cleanba.md), so frames of
terminal steps are not compared; the test counts them, so it cannot pass vacuously.
"""

from __future__ import annotations

import numpy as np
import pytest

import benchenv

pytest.importorskip("envpool")
pytest.importorskip("ale_py")

GAMES = ("Breakout-v5", "Pong-v5", "SpaceInvaders-v5")
NUM_ENVS = 4
STEPS = 1000


def _pair(env_id: str, seed: int, **overrides):
    return [benchenv.make_env(env_id, NUM_ENVS, seed, protocol=benchenv.env_protocol(
        env_id, backend=backend, **overrides)) for backend in ("envpool", "ale")]


def _trajectory(env, actions: np.ndarray) -> dict[str, np.ndarray]:
    obs, _ = env.reset()
    out: dict[str, list] = {k: [] for k in ("obs", "reward", "terminated", "truncated",
                                            "raw", "lives", "elapsed", "game_over")}
    out["obs"].append(obs)
    for a in actions:
        obs, reward, term, trunc, info = env.step(a)
        for key, value in (("obs", obs), ("reward", reward), ("terminated", term),
                           ("truncated", trunc), ("raw", info["reward"]),
                           ("lives", info["lives"]), ("elapsed", info["elapsed_step"]),
                           ("game_over", info["terminated"])):
            out[key].append(np.asarray(value))
    env.close()
    return {k: np.stack(v) for k, v in out.items()}


def _compare(env_id: str, seed: int, steps: int, actions_seed: int, **overrides) -> dict:
    """Step both backends with one fixed action sequence; assert every comparable value
    is identical; return counts of what was compared."""
    actions = np.random.default_rng(actions_seed).integers(0, 18, (steps, NUM_ENVS),
                                                           dtype=np.int32)
    e, a = (_trajectory(env, actions) for env in _pair(env_id, seed, **overrides))
    assert a["reward"].dtype == np.float32, "rewards are float32, as EnvPool's"
    for key in ("reward", "terminated", "truncated", "raw", "lives", "elapsed", "game_over"):
        bad = np.argwhere(a[key] != e[key])
        assert bad.size == 0, f"{env_id}: {key} differs first at (step, env) {bad[0]}"
    done = np.concatenate([np.zeros((1, NUM_ENVS), bool), e["terminated"] | e["truncated"]])
    bad = np.argwhere((a["obs"] != e["obs"]).any(axis=(2, 3, 4)) & ~done)
    assert bad.size == 0, f"{env_id}: a non-terminal frame differs first at {bad[0]}"
    return {"terminal": int(done.sum()), "truncated": int(e["truncated"].sum()),
            "frames": int((~done).sum()), "reward_steps": int((e["raw"] != 0).sum())}


@pytest.mark.slow
def test_ale_steps_exactly_as_envpool_under_the_protocol():
    for k, env_id in enumerate(GAMES):
        counts = _compare(env_id, seed=k + 1, steps=STEPS, actions_seed=k)
        # something of each kind was compared (random play ends Breakout games and scores)
        assert counts["frames"] > 0.98 * (STEPS + 1) * NUM_ENVS
        assert counts["reward_steps"] > 0, counts
        if env_id == "Breakout-v5":
            assert counts["terminal"] > 10, counts


@pytest.mark.slow
def test_ale_truncates_at_the_step_limit_as_envpool():
    """The limit in agent steps, truncated (not terminated) at the limit, including a game
    that ends exactly on the last step (ALE alone would call it terminated)."""
    counts = _compare("Pong-v5", seed=3, steps=250, actions_seed=7, max_episode_steps=60)
    assert counts["truncated"] == counts["terminal"] == 4 * NUM_ENVS
    # Breakout: find when env 0's first game ends, then set the limit to that very step
    envpool_env = benchenv.make_env("Breakout-v5", 1, 5)
    envpool_env.reset()
    actions = np.random.default_rng(11).integers(0, 18, (3000, 1), dtype=np.int32)
    length = next(t + 1 for t in range(3000) if envpool_env.step(actions[t])[2][0])
    envpool_env.close()
    for backend in ("envpool", "ale"):
        env = benchenv.make_env("Breakout-v5", 1, 5, protocol=benchenv.env_protocol(
            "Breakout-v5", backend=backend, max_episode_steps=length))
        env.reset()
        flags = [env.step(actions[t])[2:4] for t in range(length)]
        env.close()
        assert not any(f[0][0] or f[1][0] for f in flags[:-1]), backend
        assert (bool(flags[-1][0][0]), bool(flags[-1][1][0])) == (False, True), backend


def test_ale_backend_interface():
    """What the trainers read of an ALE env: shapes, dtypes, the protocol's backend and
    version, the raw reward beside the clipped one; and what it refuses."""
    proto = benchenv.env_protocol("Breakout-v5", backend="ale")
    assert proto["backend"] == "ale" and proto["backend_version"]
    assert benchenv.defining_protocol(proto) == {k: v for k, v in proto.items()
                                                 if k != "backend_version"}
    spaces = benchenv.env_spaces("Breakout-v5", proto)
    assert (spaces.obs_shape, spaces.frames, spaces.num_actions) == ((4, 84, 84), True, 18)
    minimal = benchenv.env_protocol("Breakout-v5", backend="ale", full_action_space=False)
    assert benchenv.env_spaces("Breakout-v5", minimal).num_actions == 4
    env = benchenv.make_env("Breakout-v5", 2, 1, protocol=proto)
    obs, info = env.reset()
    assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
    assert (obs == obs[:, :1]).all(), "the reset stack holds the reset frame 4 times"
    _, reward, term, trunc, info = env.step(np.zeros(2, np.int32))
    assert reward.dtype == np.float32 and term.dtype == bool and trunc.dtype == bool
    assert set(info) >= {"env_id", "lives", "reward", "terminated", "elapsed_step"}
    env.close()
    with pytest.raises(benchenv.EnvError, match="needs the EnvPool backend"):
        benchenv.check_env_id("CartPole-v1", "ale")
    with pytest.raises(benchenv.EnvError, match="Did you mean: Breakout-v5"):
        benchenv.check_env_id("Breakout-v4", "ale")
    with pytest.raises(benchenv.EnvError, match="unknown env backend"):
        benchenv.check_backend("gym")


@pytest.mark.slow
def test_ale_trains_bit_identically_to_envpool_on_any_layout(tmp_path):
    """--deterministic PPO on Breakout: EnvPool on a0-l0-d1 and ALE on a0-l0,1-d1 write
    identical records (params checksums, losses, episodes). Under the protocol the backends
    give the same steps, and the frames they differ on (a game's last) only ever feed
    masked steps. The ALE run matching EnvPool's bits on another layout is also ALE's
    run-to-run determinism (a run that varied could not hit them). Episodes end during the
    run (terminal frames are exercised)."""
    from cleanba_runs import run

    from analysis.verdicts.equivalence import records_identical
    from runrecord import load_run

    args = ["--env-id", "Breakout-v5", "--num-envs", "4", "--num-steps", "32",
            "--num-minibatches", "2", "--update-epochs", "1", "--total-timesteps", str(4 * 32 * 6),
            "--num-actor-threads", "1", "--progress-interval-s", "0", "--seed", "3",
            "--deterministic", "--deterministic-groups", "2"]
    runs = {}
    for name, backend, actors, learners in (("envpool", "envpool", ["0"], ["0"]),
                                            ("ale", "ale", ["0"], ["0", "1"])):
        p = run("ppo", tmp_path / name, *args, "--env-backend", backend, "--actor-device-ids",
                *actors, "--learner-device-ids", *learners, preset="atari", devices=4,
                timeout=600)
        assert p.returncode == 0, p.stderr[-3000:]
        assert f"on {backend} " in p.stdout, p.stdout  # the start-up line names the backend
        runs[name] = load_run(tmp_path / name)
    reference = runs["envpool"]
    assert len(reference.episodes) >= 2 and all(reference.updates["params_checksum"])
    assert runs["ale"].manifest["env_protocol"]["backend"] == "ale"
    assert records_identical(runs["ale"], reference) is None, \
        records_identical(runs["ale"], reference)
