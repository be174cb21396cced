"""The EnvPool backend: EnvPool's own vector envs (Linux wheels only), the reference the
ALE backend is held to (benchenv/ale_env.py)."""

from __future__ import annotations

import functools
import warnings
from typing import Any


@functools.cache
def env_ids() -> tuple[str, ...]:
    import envpool

    return tuple(envpool.list_all_envs())


def make(env_id: str, num_envs: int, seeds: list[int], kwargs: dict[str, Any]):
    """A gymnasium-API EnvPool env; env i gets seeds[i]."""
    import envpool

    return envpool.make(env_id, env_type="gymnasium", num_envs=num_envs, seed=seeds[0],
                        env_seed=seeds, **kwargs)


@functools.cache
def _spaces(env_id: str, items: tuple[tuple[str, Any], ...]) -> tuple[tuple[int, ...], bool, str,
                                                                    int | None]:
    import envpool
    import numpy as np

    with warnings.catch_warnings():
        # gymnasium warns (with raw ANSI colour codes) about EnvPool's float64 Box bounds
        # when the spaces are built, on first access: it means nothing here.
        warnings.filterwarnings("ignore", message=".*precision lowered.*")
        spec = envpool.make_spec(env_id, **dict(items))
        obs, act = spec.observation_space, spec.action_space
    return (tuple(obs.shape), obs.dtype == np.uint8, type(act).__name__,
            getattr(act, "n", None))


def spaces(env_id: str, kwargs: dict[str, Any]) -> tuple[tuple[int, ...], bool, str, int | None]:
    """(observation shape, frames (uint8)?, action space class name, actions or None)."""
    return _spaces(env_id, tuple(sorted(kwargs.items())))
