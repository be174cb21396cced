"""cleanba.tools.actor_hook (the benchmark-only no-op forward pass) and cleanba.tools.throughput."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

from cleanba import ppo
from cleanba.core.actor import policy_network
from cleanba.core.control import Control
from cleanba.core.runtime import make_context, prepare
from cleanba.numerics.networks import init_params, make_network
from cleanba.tools import actor_hook, throughput


def test_noop_forward_has_the_real_shapes() -> None:
    obs_shape, num_actions = (4, 84, 84), 18
    network = make_network(obs_shape, num_actions)
    params = init_params(network, obs_shape, jax.random.PRNGKey(0))
    obs = np.zeros((5, *obs_shape), np.uint8)
    real_logits, real_value = network.apply(params, obs)
    logits, value = actor_hook.noop_forward(num_actions)(params, obs)
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


def test_envpool_async_rate_steps_every_env_and_needs_even_halves() -> None:
    """Each thread's pool used with send/recv on half its envs at a time: every recv hands
    back one half, so 2 x steps recvs step each env `steps` times on average."""
    rate = throughput.envpool_async_rate("CartPole-v1", 8, 2, 40)
    assert rate.env_steps == 8 * 40 and rate.seconds > 0 and rate.cpu_seconds > 0
    with pytest.raises(ValueError, match="3 envs per thread is odd"):
        throughput.envpool_async_rate("CartPole-v1", 6, 2, 40)


def test_the_actor_loop_rate_runs_each_actor_mode() -> None:
    for mode in ("serial", "double-buffer"):
        rate = throughput.actor_loop_rate("CartPole-v1", 4, 1, 16, rollouts=3, actor_mode=mode)
        assert rate.env_steps == 4 * 16 and rate.seconds > 0, mode


def test_forward_enters_the_actor_only_through_its_context() -> None:
    """A run's actors apply the algorithm's network; a benchmark's injected forward
    function (make_context(actor_forward=...)) replaces it for that context only."""
    config = dataclasses.replace(
        ppo.PRESETS["cartpole"][1], num_envs=4, num_steps=4, total_timesteps=32,
        actor_device_ids=(0,), learner_device_ids=(0,))
    prep = prepare(config, ppo.make_algorithm, ppo.SYSTEM)
    run, _, _ = make_context(config, prep, Control())
    assert run.actor_forward is None and policy_network(run) is prep.algorithm.network
    noop = actor_hook.noop_forward(prep.checked.env.num_actions)
    bench, _, _ = make_context(config, prep, Control(), actor_forward=noop)
    assert policy_network(bench).apply is noop
    assert policy_network(run) is prep.algorithm.network

