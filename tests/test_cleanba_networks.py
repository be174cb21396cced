"""Tests of cleanba/numerics/networks.py: shapes, parameter counts by hand, head initialisation."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cleanba.numerics import networks

ATARI_OBS = (4, 84, 84)


@pytest.fixture(scope="module")
def atari_net_and_params():
    net = networks.make_network(ATARI_OBS, num_actions=18)
    params = networks.init_params(net, ATARI_OBS, jax.random.key(0))
    return net, params


def count(params) -> int:
    return sum(int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(params))


def test_resnet_parameter_count_matches_the_layer_shapes():
    net = networks.make_network(ATARI_OBS, num_actions=18)
    # shapes only (no compute): init traced abstractly
    params = jax.eval_shape(net.init, jax.random.key(0), jnp.zeros((1, *ATARI_OBS), jnp.uint8))

    def conv(c_in, c_out):  # 3x3 kernel + bias
        return 3 * 3 * c_in * c_out + c_out

    def dense(n_in, n_out):
        return n_in * n_out + n_out

    expected = 0
    c_in, size = 4, 84
    for c in (16, 32, 32):
        # conv to c channels, then two residual blocks of two c->c convs each
        expected += conv(c_in, c) + 4 * conv(c, c)
        size = math.ceil(size / 2)  # max-pool 3x3 stride 2, SAME: 84 -> 42 -> 21 -> 11
        c_in = c
    assert size == 11
    expected += dense(11 * 11 * 32, 256)  # flatten -> hidden
    expected += dense(256, 18) + dense(256, 1)  # actor and critic heads
    assert expected == 1_094_115  # the sum written out: 97,744 conv + 991,488 + 4,626 + 257
    assert count(params) == expected


def test_resnet_output_shapes_and_pixel_scaling(atari_net_and_params):
    net, params = atari_net_and_params
    obs = jax.random.randint(jax.random.key(1), (3, *ATARI_OBS), 0, 256).astype(jnp.uint8)
    apply = jax.jit(net.apply)
    logits, value = apply(params, obs)
    assert logits.shape == (3, 18) and value.shape == (3,)
    assert logits.dtype == jnp.float32 and value.dtype == jnp.float32
    assert np.all(np.isfinite(np.asarray(logits))) and np.all(np.isfinite(np.asarray(value)))
    # uint8 frames and the same frames as float give the same output (the /255 happens
    # inside), so actors can hand EnvPool's uint8 arrays over unchanged.
    logits_f, value_f = apply(params, obs.astype(jnp.float32))
    np.testing.assert_allclose(np.asarray(logits_f), np.asarray(logits), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(value_f), np.asarray(value), rtol=1e-5, atol=1e-6)


def test_mlp_shapes_and_parameter_count():
    net = networks.make_network((4,), num_actions=2)
    params = networks.init_params(net, (4,), jax.random.key(0))
    # 4 -> 64 -> 64 (tanh), heads 64 -> 2 and 64 -> 1
    assert count(params) == (4 * 64 + 64) + (64 * 64 + 64) + (64 * 2 + 2) + (64 + 1)
    logits, value = jax.jit(net.apply)(params, jnp.ones((5, 4)))
    assert logits.shape == (5, 2) and value.shape == (5,)


def test_heads_use_cleanrl_orthogonal_scales():
    net = networks.make_network((4,), num_actions=3)
    params = networks.init_params(net, (4,), jax.random.key(3))["params"]
    actor = np.asarray(params["actor"]["kernel"])  # (64, 3)
    critic = np.asarray(params["critic"]["kernel"])  # (64, 1)
    # orthogonal(scale) on a (64, k) kernel: columns orthogonal with norm `scale`
    np.testing.assert_allclose(actor.T @ actor, 0.01**2 * np.eye(3), atol=1e-7)
    np.testing.assert_allclose(critic.T @ critic, [[1.0]], atol=1e-5)
    assert np.all(np.asarray(params["actor"]["bias"]) == 0.0)
    hidden = np.asarray(params["torso"]["Dense_1"]["kernel"])  # (64, 64)
    np.testing.assert_allclose(hidden.T @ hidden, 2.0 * np.eye(64), atol=1e-4)


def test_make_network_picks_the_torso_from_the_obs_rank():
    assert isinstance(networks.make_network(ATARI_OBS, 18).torso, networks.ImpalaResNet)
    assert isinstance(networks.make_network((8,), 4).torso, networks.MLPTorso)
    net = networks.make_network(ATARI_OBS, 6, channels=(8, 8), hidden=32)
    assert net.torso.channels == (8, 8) and net.torso.hidden == 32


@pytest.mark.parametrize("bad_shape", [(84, 84), (2, 4, 84, 84), ()])
def test_make_network_rejects_other_obs_shapes_with_a_clear_message(bad_shape):
    with pytest.raises(ValueError) as err:
        networks.make_network(bad_shape, 4)
    message = str(err.value)
    assert str(bad_shape) in message
    assert "(C, H, W)" in message and "(D,)" in message


def test_make_network_rejects_zero_actions():
    with pytest.raises(ValueError, match="num_actions"):
        networks.make_network((4,), 0)


def test_max_pool_gradient_goes_to_each_windows_first_maximum_by_hand():
    # 4x4 input, windows 3x3 stride 2 SAME (pad 0 low, 1 high): outputs read rows/cols
    # {0,1,2} and {2,3}. The 9 at (1,1) is the maximum of window (0,0) only; the tie of 5s
    # in window (1,1) (rows/cols 2-3) goes to the first in row-major order, (2,2).
    x = jnp.array([[0, 1, 2, 0],
                   [3, 9, 1, 4],
                   [2, 0, 5, 5],
                   [1, 7, 5, 0]], jnp.float32)[None, :, :, None]
    y = networks.max_pool_3x3_s2(x)
    assert y[0, :, :, 0].tolist() == [[9, 5], [7, 5]]
    weights = jnp.array([[1.0, 10.0], [100.0, 1000.0]])[None, :, :, None]
    grad = jax.grad(lambda v: (networks.max_pool_3x3_s2(v) * weights).sum())(x)[0, :, :, 0]
    expected = np.zeros((4, 4), np.float32)
    expected[1, 1] = 1.0           # window (0,0): the 9
    expected[2, 2] = 10.0 + 1000.0  # window (0,1)'s 5 at (2,2) comes first; (1,1)'s tie too
    expected[3, 1] = 100.0         # window (1,0): the 7
    np.testing.assert_array_equal(np.asarray(grad), expected)


@pytest.mark.parametrize("shape", [(2, 84, 84, 3), (2, 42, 42, 4), (2, 21, 21, 5), (1, 7, 9, 2),
                                   (1, 1, 1, 1), (1, 2, 3, 1)])
@pytest.mark.parametrize("ties", [False, True])
def test_max_pool_matches_flax_max_pool_and_its_gradient(shape, ties):
    import flax.linen as nn

    rng = np.random.default_rng(sum(shape))
    x = rng.normal(size=shape).astype(np.float32)
    if ties:  # many equal maxima: rounded, rectified values
        x = np.maximum(np.round(x), 0).astype(np.float32)
    ref_out = nn.max_pool(jnp.asarray(x), (3, 3), (2, 2), "SAME")
    out = networks.max_pool_3x3_s2(jnp.asarray(x))
    np.testing.assert_array_equal(np.asarray(out), np.asarray(ref_out))
    weights = jnp.asarray(rng.normal(size=out.shape).astype(np.float32))
    ref = jax.grad(lambda v: (nn.max_pool(v, (3, 3), (2, 2), "SAME") * weights).sum())(x)
    got = jax.grad(lambda v: (networks.max_pool_3x3_s2(v) * weights).sum())(x)
    # Same routing; where one input is the maximum of several windows the two add the
    # routed gradients in a different order.
    np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=1e-6, atol=1e-6)
    assert np.array_equal(np.asarray(got) != 0, np.asarray(ref) != 0)


def test_cpu_conv_flag_is_added_once_and_never_overrides_the_users_choice():
    from cleanba.core.xla_flags import CPU_CONV_FLAG, GPU_DETERMINISM_FLAG, with_flag

    def with_cpu_conv_flag(flags: str) -> str:
        return with_flag(flags, CPU_CONV_FLAG)

    assert with_cpu_conv_flag("") == CPU_CONV_FLAG
    assert with_cpu_conv_flag("--xla_force_host_platform_device_count=4") == (
        f"--xla_force_host_platform_device_count=4 {CPU_CONV_FLAG}")
    assert with_cpu_conv_flag(with_cpu_conv_flag("")) == CPU_CONV_FLAG
    mine = "--xla_cpu_experimental_ynn_fusion_type=individual_convolution"
    assert with_cpu_conv_flag(mine) == mine
    # the GPU determinism flag goes through the same rule
    assert with_flag(CPU_CONV_FLAG, GPU_DETERMINISM_FLAG) == (
        f"{CPU_CONV_FLAG} {GPU_DETERMINISM_FLAG}")
    assert with_flag("--xla_gpu_deterministic_ops=false", GPU_DETERMINISM_FLAG) == (
        "--xla_gpu_deterministic_ops=false")
