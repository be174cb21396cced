"""A benchmark-only forward pass for the actors: a no-op (not a user flag).

`benchmarks/gpu_suite.py` and `cleanba.tools.throughput` measure what the actor loop itself
costs: every env step still calls the jitted policy step (transfers, dispatch, sampling,
recording, queues), but the network's forward pass is replaced by a function returning
zeros of the network's output shapes (logits (E, A), value (E,)). Zero logits make the
sampled actions uniform, like the random actions of EnvPool's raw stepping rate.

It enters through the actor's own seam: `make_context(..., actor_forward=noop_forward(A))`
puts it in `Context.actor_forward`, which `cleanba.core.actor.policy_network` reads once per
actor thread. The trainer never imports this module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp


def noop_forward(num_actions: int) -> Callable[[Any, jax.Array], tuple[jax.Array, jax.Array]]:
    """A forward function with the actor-critic's call and output shapes, no computation."""

    def forward(params: Any, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        del params
        batch = obs.shape[0]
        return jnp.zeros((batch, num_actions), jnp.float32), jnp.zeros(batch, jnp.float32)

    return forward
