"""A benchmark-only hook: actors with a no-op forward pass (not a user flag).

`benchmarks/gpu_suite.py` and `cleanba.throughput` measure what the actor loop itself
costs: every env step still calls the jitted policy step (transfers, dispatch, sampling,
recording, queues), but the network's forward pass is replaced by a function returning
zeros of the network's output shapes (logits (E, A), value (E,)). Zero logits make the
sampled actions uniform, like the random actions of EnvPool's raw stepping rate.

The actor loop reads `network_for_actor(...)` once when an actor thread starts; nothing
else in the trainer looks here. Only benchmarks set `NOOP_FORWARD`, through `noop_forward()`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

NOOP_FORWARD = False  # module-level switch, set by benchmarks through noop_forward()


@dataclass(frozen=True)
class NoopNetwork:
    """Stands in for the actor-critic: same call and output shapes, no computation."""

    num_actions: int

    def apply(self, params: Any, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        del params
        batch = obs.shape[0]
        return jnp.zeros((batch, self.num_actions), jnp.float32), jnp.zeros(batch, jnp.float32)


def network_for_actor(network: Any, num_actions: int) -> Any:
    """The network an actor thread runs: the real one, or the no-op while benchmarking."""
    return NoopNetwork(num_actions) if NOOP_FORWARD else network


@contextlib.contextmanager
def noop_forward() -> Iterator[None]:
    """Actor threads started inside this block run the no-op forward pass."""
    global NOOP_FORWARD
    previous, NOOP_FORWARD = NOOP_FORWARD, True
    try:
        yield
    finally:
        NOOP_FORWARD = previous
