"""benchenv: the environments every system runs on: EnvPool construction, the Atari protocol and
run seeds -> env seeds. Shared by our trainers, the baseline adapters, the harness and the
analysis (no JAX, no trainer code here), so none of them imports cleanba to learn it.

The Atari protocol is the paper's ("Machado" settings): sticky actions 0.25, full action
space, no life-loss signal, at most 108k frames per episode, 84x84 grey, stack 4, frame
skip 4. Reward clipping is for training only: returns are recorded from the raw game
score (EnvPool's info["reward"]).
"""

from __future__ import annotations

import difflib
import functools
from typing import Any

ATARI_PROTOCOL: dict[str, Any] = {
    "episodic_life": False,  # no life-loss signal: an episode is a whole game
    "repeat_action_probability": 0.25,  # sticky actions
    "full_action_space": True,  # 18 actions on every game
    "noop_max": 1,
    "max_episode_steps": 27000,  # agent steps = 108k frames
    "img_height": 84,
    "img_width": 84,
    "stack_num": 4,
    "frame_skip": 4,
    "gray_scale": True,
    "reward_clip": True,  # training signal only; raw scores come from info["reward"]
}


class EnvError(ValueError):
    """An env id or env option that EnvPool does not offer."""


@functools.cache
def _all_env_ids() -> tuple[str, ...]:
    import envpool

    return tuple(envpool.list_all_envs())


def is_atari(env_id: str) -> bool:
    """Atari games in EnvPool are the `<Game>-v5` ids."""
    return env_id.endswith("-v5")


def frames_per_step(env_id: str) -> int:
    return int(ATARI_PROTOCOL["frame_skip"]) if is_atari(env_id) else 1


def check_env_id(env_id: str) -> None:
    """Raise EnvError naming close matches when EnvPool has no such env."""
    ids = _all_env_ids()
    if env_id in ids:
        return
    close = difflib.get_close_matches(env_id, ids, n=5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise EnvError(
        f"unknown env id {env_id!r}: EnvPool has {len(ids)} envs "
        f"(Atari games as '<Game>-v5', e.g. Breakout-v5; classic control e.g. CartPole-v1).{hint}"
    )


def env_protocol(env_id: str, reward_clip: bool = True, **overrides: Any) -> dict[str, Any]:
    """The EnvPool kwargs for `env_id` (what a manifest records as env_protocol)."""
    if is_atari(env_id):
        kwargs = dict(ATARI_PROTOCOL)
        kwargs["reward_clip"] = reward_clip
    else:
        kwargs = {}
    kwargs.update(overrides)
    return kwargs


# --- env seeds --------------------------------------------------------------------------
# EnvPool takes int32 seeds, so env seeds live in [0, 2**31). A run's env i gets
# mix31(seed * 2**ENV_INDEX_BITS + i): (seed, i) packed into 31 bits, then a bijective
# integer hash. Distinct (seed, i) pairs therefore give distinct env seeds (no two envs of
# any runs share a stream, unlike seed + i where run 1's env 2 was run 2's env 1), and
# the hash spreads neighbouring pairs over the whole range.
ENV_SEED_BITS = 31
ENV_INDEX_BITS = 15
MAX_ENVS = 2**ENV_INDEX_BITS  # global envs per run
MAX_SEED = 2 ** (ENV_SEED_BITS - ENV_INDEX_BITS) - 1  # run seeds 0 .. MAX_SEED
_MASK31 = 2**ENV_SEED_BITS - 1


def mix31(x: int) -> int:
    """A bijection of [0, 2**31): xor-shifts and multiplications by odd constants modulo
    2**31 (each step invertible), the shape of Wellons' lowbias32 hash on 31 bits."""
    x &= _MASK31
    x ^= x >> 16
    x = (x * 0x7FEB352D) & _MASK31
    x ^= x >> 15
    x = (x * 0x846CA68B) & _MASK31
    x ^= x >> 16
    return x


def check_seed(seed: int) -> None:
    """Raise ValueError unless `seed` is a run seed the env-seed derivation accepts."""
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"--seed must be an integer in 0..{MAX_SEED}, got {seed} (env seeds "
                         f"pack the run seed and the env index into EnvPool's int32 range)")


def env_seeds(base_seed: int, first_env_index: int, num_envs: int) -> list[int]:
    """EnvPool seeds of envs [first, first + num) of the run with seed `base_seed`:
    mix31(seed * MAX_ENVS + global env index).

    Depends only on (run seed, global env index), never on which thread, device or process
    runs the env, so one seed gives the same streams on every layout (the deterministic
    mode relies on it), and distinct (seed, index) pairs never share a seed.
    """
    check_seed(base_seed)
    if first_env_index < 0 or first_env_index + num_envs > MAX_ENVS:
        raise ValueError(f"env indices {first_env_index}..{first_env_index + num_envs - 1} "
                         f"outside 0..{MAX_ENVS - 1}")
    return [mix31(base_seed * MAX_ENVS + first_env_index + i) for i in range(num_envs)]


def make_env(
    env_id: str,
    num_envs: int,
    base_seed: int,
    first_env_index: int = 0,
    protocol: dict[str, Any] | None = None,
    **envpool_kwargs: Any,
):
    """A gymnasium-API EnvPool env; env i is the run's env first_env_index + i and gets its
    seed from `env_seeds`."""
    import envpool

    check_env_id(env_id)
    kwargs = dict(env_protocol(env_id) if protocol is None else protocol)
    kwargs.update(envpool_kwargs)
    seeds = env_seeds(base_seed, first_env_index, num_envs)
    return envpool.make(
        env_id,
        env_type="gymnasium",
        num_envs=num_envs,
        seed=seeds[0],
        env_seed=seeds,
        **kwargs,
    )
