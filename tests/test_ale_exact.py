"""The ale-exact backend (benchenv/ale_exact.py): its state saves and restores exactly, its
seeds matter, and its frame maths (benchenv/frames.py) and state bytes
(benchenv/state_bytes.py) do what they say."""

from __future__ import annotations

import numpy as np
import pytest

import benchenv
from benchenv import frames, state_bytes

pytest.importorskip("ale_py")

ENV = "Breakout-v5"
N = 3


def make(seed: int = 1, **overrides):
    protocol = benchenv.env_protocol(ENV, backend="ale-exact", **overrides)
    return benchenv.make_env(ENV, N, seed, protocol=protocol)


def actions(steps: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 18, (steps, N)).astype(np.int32)


def trace(env, acts: np.ndarray) -> list:
    out = []
    for a in acts:
        obs, rew, term, trunc, info = env.step(a)
        out.append((obs.copy(), rew.copy(), term.copy(), trunc.copy(),
                    {k: np.asarray(v).copy() for k, v in info.items()}))
    return out


def assert_same(a: list, b: list) -> None:
    assert len(a) == len(b)
    for t, (x, y) in enumerate(zip(a, b, strict=True)):
        for name, u, v in zip(("obs", "reward", "terminated", "truncated"), x[:4], y[:4], strict=True):
            assert np.array_equal(u, v), f"step {t}: {name} differs"
        assert x[4].keys() == y[4].keys()
        for k in x[4]:
            assert np.array_equal(x[4][k], y[4][k]), f"step {t}: info[{k!r}] differs"


def test_restoring_a_saved_state_replays_every_step_bit_for_bit():
    env = make(max_episode_steps=120)  # short episodes: resets inside the replay
    env.reset()
    acts = actions(420)
    trace(env, acts[:150])
    saved = env.get_state()
    first = trace(env, acts[150:])
    env.set_state(saved)
    again = trace(env, acts[150:])
    assert_same(first, again)
    # the replay crosses episode ends (resets, truncations) and sticky frames
    assert sum(int(x[3].sum()) for x in first) >= N
    # a fresh env of other seeds given the bytes is the saved env
    other = make(seed=9, max_episode_steps=120)
    other.set_state(saved)
    assert_same(first, trace(other, acts[150:]))
    # the state is a function of the env: the same bytes again
    other.set_state(saved)
    assert other.get_state() == saved


def test_a_state_from_another_env_is_refused():
    env = make()
    env.reset()
    saved = env.get_state()
    with pytest.raises(ValueError, match="another env"):
        make(max_episode_steps=100).set_state(saved)
    with pytest.raises(ValueError, match="magic"):
        make().set_state(b"not a state")


def test_seeds_matter_and_repeat():
    acts = actions(200)
    runs = {}
    for seed in (1, 2):
        env = make(seed)
        first = env.reset()[0]
        runs[seed] = [first] + [x[0] for x in trace(env, acts)]
    again = make(1)
    assert np.array_equal(again.reset()[0], runs[1][0])
    assert all(np.array_equal(a, x[0]) for a, x in zip(runs[1][1:], trace(again, acts), strict=True))
    assert any(not np.array_equal(a, b) for a, b in zip(runs[1], runs[2], strict=True))


def test_protocol_semantics_stack_reset_frame_and_step_limit():
    env = make(max_episode_steps=5, reward_clip=True)
    obs, info = env.reset()
    assert obs.shape == (N, 4, 84, 84) and obs.dtype == np.uint8
    assert all(np.array_equal(obs[:, 0], obs[:, k]) for k in range(4))  # padded with it
    assert obs.max() > 0
    out = trace(env, actions(6))
    for t in range(4):
        assert not out[t][3].any() and list(out[t][4]["elapsed_step"]) == [t + 1] * N
        # the stack shifts: last step's newest frame is one slot older
        if t:
            assert np.array_equal(out[t][0][:, 2], out[t - 1][0][:, 3])
    assert out[4][3].all() and not out[4][2].any()  # the limit: truncated
    reset_step = out[5]
    assert list(reset_step[4]["elapsed_step"]) == [0] * N
    assert not reset_step[1].any() and not reset_step[2].any() and not reset_step[3].any()
    assert all(np.array_equal(reset_step[0][:, 0], reset_step[0][:, k]) for k in range(4))


def test_area_resize_is_the_area_mean_rounded():
    rng = np.random.default_rng(3)
    img = rng.integers(0, 256, (2, 210, 160)).astype(np.uint8)
    rows = frames.area_weights(210, 84).astype(np.float64)
    cols = frames.area_weights(160, 84).astype(np.float64)
    assert (rows.sum(axis=1) == 210).all() and (cols.sum(axis=1) == 160).all()
    ref = np.floor(rows @ img.astype(np.float64) @ cols.T / (210 * 160) + 0.5)
    assert np.array_equal(frames.resize_area(img, 84, 84), ref.astype(np.uint8))
    # an integer-ratio case by hand: 2x2 blocks averaged
    small = np.array([[0, 2, 4, 6], [2, 4, 6, 9], [1, 1, 0, 0], [1, 1, 0, 1]], np.uint8)
    assert frames.resize_area(small, 2, 2).tolist() == [[2, 6], [1, 0]]
    flat = np.full((210, 160), 77, np.uint8)
    assert (frames.resize_area(flat, 84, 84) == 77).all()


def test_max_pool_and_stack_helpers():
    a = np.array([[1, 5]], np.uint8)
    b = np.array([[4, 2]], np.uint8)
    assert frames.max_pool(a, b).tolist() == [[4, 5]]
    assert frames.max_pool(a, None) is a
    stack = np.zeros((3, 1, 2), np.uint8)
    frames.fill_stack(stack, a)
    frames.push_frame(stack, b)
    assert stack[:, 0].tolist() == [[1, 5], [1, 5], [4, 2]]


def test_state_bytes_round_trip_and_refusals():
    arrays = {"x": np.arange(6, dtype=np.int32).reshape(2, 3), "y": np.array([True, False])}
    data = state_bytes.pack({"k": [1, 2]}, arrays)
    meta, back = state_bytes.unpack(data)
    assert meta == {"k": [1, 2]}
    assert all(np.array_equal(arrays[k], back[k]) and arrays[k].dtype == back[k].dtype
               for k in arrays)
    with pytest.raises(ValueError, match="truncated"):
        state_bytes.unpack(data[:-3])
    with pytest.raises(ValueError, match="after"):
        state_bytes.unpack(data + b"\0")
