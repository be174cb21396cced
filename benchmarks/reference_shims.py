"""Shims the reference Cleanba PPO script needs on today's JAX and EnvPool.

`benchmarks/reference_cleanba.py` copies this file beside a patched copy of the user's
`cleanba/cleanba_ppo.py` (in a temporary folder) and points the script's imports here.
Nothing of the reference's own code is in this repository.

- `SummaryWriter`: tensorboardX is not a dependency of this project; this writer appends
  each scalar with the wall-clock time it was logged to the JSON-lines file named by
  $CLEANBA_BENCH_SCALARS (the benchmark reads update times and losses from it).
- `device_put_sharded` / `device_put_replicated`: removed from JAX (0.8); the same
  placement through a NamedSharding over the devices, which `jax.pmap` accepts.
- `contains_nothing`: flax 0.12's TrainState.create tests `"overwrite_with_gradient" in
  params`, which the reference's AgentParams dataclass does not support.
- `OldGymApi`: the script uses EnvPool's `gym` API (4-tuple step, reset without info);
  `gym` is not installed with EnvPool any more, so the gymnasium env is wrapped to give
  the old API (done = terminated or truncated, the same info dict).
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

SCALARS_ENV_VAR = "CLEANBA_BENCH_SCALARS"


class SummaryWriter:
    """tensorboardX's add_scalar / close, logging to a JSON-lines file with wall times."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        del args, kwargs
        self._path = os.environ.get(SCALARS_ENV_VAR)
        self._lock = threading.Lock()

    def add_scalar(self, tag: str, value: Any, step: Any) -> None:
        if self._path is None:
            return
        line = json.dumps({"tag": tag, "value": float(value), "step": int(step),
                           "time": time.time()})
        with self._lock, open(self._path, "a") as f:
            f.write(line + "\n")

    def add_text(self, *args: Any, **kwargs: Any) -> None:
        del args, kwargs

    def close(self) -> None:
        pass


def _sharding(devices: Any) -> jax.sharding.NamedSharding:
    mesh = jax.sharding.Mesh(np.array(list(devices)), ("devices",))
    return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("devices"))


def device_put_sharded(shards: Any, devices: Any) -> jax.Array:
    """Stack `shards` (one per device) along a new axis 0 and place shard i on device i."""
    return jax.device_put(jnp.stack([jnp.asarray(s) for s in shards]), _sharding(devices))


def device_put_replicated(tree: Any, devices: Any) -> Any:
    """A leading device axis with one copy of every leaf per device."""
    devices = list(devices)
    return jax.tree.map(
        lambda x: jax.device_put(jnp.stack([jnp.asarray(x)] * len(devices)), _sharding(devices)),
        tree,
    )


def contains_nothing(self: Any, key: Any) -> bool:
    """`key in params` for a params dataclass with no special entries."""
    del self, key
    return False


class OldGymApi:
    """An EnvPool gymnasium env with the old gym API: reset() -> obs, step(a) -> (obs,
    reward, done, info)."""

    def __init__(self, env: Any) -> None:
        object.__setattr__(self, "_env", env)

    def reset(self) -> np.ndarray:
        obs, _ = self._env.reset()
        return obs

    def step(self, action: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
        obs, reward, terminated, truncated, info = self._env.step(action)
        return obs, reward, np.logical_or(terminated, truncated), info

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def __setattr__(self, name: str, value: Any) -> None:
        try:
            setattr(self._env, name, value)
        except AttributeError:  # a read-only property of today's EnvPool (num_envs)
            object.__setattr__(self, name, value)
