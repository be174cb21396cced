"""cleanba.actor_hook (the benchmark-only no-op forward pass) and cleanba.throughput."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from cleanba import actor_hook, throughput
from cleanba.networks import init_params, make_network


def test_noop_forward_only_inside_the_block_and_with_the_real_shapes() -> None:
    obs_shape, num_actions = (4, 84, 84), 18
    network = make_network(obs_shape, num_actions)
    assert actor_hook.network_for_actor(network, num_actions) is network
    params = init_params(network, obs_shape, jax.random.PRNGKey(0))
    obs = np.zeros((5, *obs_shape), np.uint8)
    real_logits, real_value = network.apply(params, obs)
    with actor_hook.noop_forward():
        noop = actor_hook.network_for_actor(network, num_actions)
        assert noop is not network
        logits, value = noop.apply(params, obs)
    assert actor_hook.network_for_actor(network, num_actions) is network
    assert (logits.shape, logits.dtype) == (real_logits.shape, real_logits.dtype)
    assert (value.shape, value.dtype) == (real_value.shape, real_value.dtype)
    assert not np.any(np.asarray(logits)) and not np.any(np.asarray(value))


def test_split_of_envs_over_threads() -> None:
    assert throughput.check_split(128, 2) == 64
    with pytest.raises(ValueError, match="must divide"):
        throughput.check_split(8, 3)


def test_rates_by_wall_clock_and_cpu_time() -> None:
    rate = throughput.Rate(env_steps=1000, seconds=2.0, cpu_seconds=4.0)
    assert (rate.steps_per_s, rate.steps_per_cpu_s) == (500.0, 250.0)
