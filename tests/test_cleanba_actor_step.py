"""cleanba.core.actor: the packed policy step gives the host exactly sample_step's outputs."""

from functools import partial

import jax
import numpy as np
import pytest

from cleanba.core.actor import packed_sample_step, sample_step, unpack_policy_step
from cleanba.numerics.networks import init_params, make_network


@pytest.mark.parametrize(("obs_shape", "num_actions", "inference_envs"),
                         [((4,), 2, 0), ((4,), 2, 4), ((4, 84, 84), 4, 0)])
def test_packed_step_unpacks_bit_identical_to_sample_step(obs_shape, num_actions, inference_envs):
    network = make_network(obs_shape, num_actions)
    params = init_params(network, obs_shape, jax.random.PRNGKey(0))
    dtype = np.uint8 if len(obs_shape) == 3 else np.float32
    obs = np.random.default_rng(0).integers(0, 255, (8, *obs_shape)).astype(dtype)
    env_index, key = np.arange(3, 11, dtype=np.int32), jax.random.PRNGKey(5)
    args = (params, obs, env_index, np.int32(17), key)
    plain = jax.device_get(jax.jit(partial(sample_step, network, inference_envs))(*args))
    packed = np.asarray(jax.jit(partial(packed_sample_step, network, inference_envs))(*args))
    unpacked = unpack_policy_step(packed)
    for got, want in zip(unpacked, plain, strict=True):
        assert (got.shape, got.dtype) == (want.shape, want.dtype)
        assert got.tobytes() == np.ascontiguousarray(want).tobytes()
    assert unpacked[0].flags.c_contiguous
