"""baselines/torch_resnet.py: the PyTorch IMPALA ResNet is cleanba's Flax network.

Skipped with the reason when torch is not installed (CI installs no torch).
"""

import jax
import numpy as np
import pytest

torch = pytest.importorskip(
    "torch", reason="torch is not installed: the baselines' PyTorch network needs it "
                    "(pip install 'cleanba-bench[baselines]')")

from baselines import torch_resnet  # noqa: E402
from cleanba.numerics import networks  # noqa: E402

ATARI = (4, 84, 84)


def _flax_shapes(obs_shape, num_actions, **kw):
    """The Flax network and its parameter shapes (traced, not computed: no compile)."""
    net = networks.make_network(obs_shape, num_actions, **kw)
    dummy = jax.ShapeDtypeStruct((1, *obs_shape), np.uint8)
    shapes = jax.eval_shape(net.init, jax.random.PRNGKey(0), dummy)
    return net, shapes, sum(int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(shapes))


@pytest.mark.parametrize("obs_shape,num_actions,channels,hidden", [
    (ATARI, 18, (16, 32, 32), 256),  # the paper's Atari setting
    (ATARI, 4, (16, 32, 32), 256),  # Breakout's minimal action set
    ((3, 64, 48), 6, (8, 16), 32),  # odd sizes: the SAME pool's asymmetric pads matter
])
def test_parameter_count_equals_the_flax_resnet(obs_shape, num_actions, channels, hidden):
    _, _, flax_count = _flax_shapes(obs_shape, num_actions, channels=channels, hidden=hidden)
    torch_net = torch_resnet.ImpalaActorCritic(obs_shape, num_actions, channels, hidden)
    assert torch_resnet.parameter_count(torch_net) == flax_count
    if obs_shape == ATARI and num_actions == 18:
        assert flax_count == 1_094_115  # convs 97,744 + dense 3872x256 + heads 4,626 + 257


def test_pool_geometry_is_flax_same_padding():
    for size in range(1, 100):
        assert torch_resnet.same_pool_padding(size) == networks._same_pool_geometry(size)


def _copy_flax_weights(params, torch_net, obs_shape, channels):
    """Load the Flax model's weights into the torch model (layout conversions only)."""
    p = params["params"]
    torso = p["torso"]

    def conv(dst, src):
        dst.weight.data = torch.from_numpy(np.asarray(src["kernel"]).transpose(3, 2, 0, 1).copy())
        dst.bias.data = torch.from_numpy(np.asarray(src["bias"]).copy())

    def dense(dst, src, kernel=None):
        k = np.asarray(src["kernel"]) if kernel is None else kernel
        dst.weight.data = torch.from_numpy(k.T.copy())
        dst.bias.data = torch.from_numpy(np.asarray(src["bias"]).copy())

    for i, seq in enumerate(torch_net.torso.sequences):
        fs = torso[f"ConvSequence_{i}"]
        conv(seq.conv, fs["Conv_0"])
        for j, block in enumerate((seq.res0, seq.res1)):
            fb = fs[f"ResidualBlock_{j}"]
            conv(block.conv0, fb["Conv_0"])
            conv(block.conv1, fb["Conv_1"])
    # Flax flattens (H, W, C), torch (C, H, W): permute the first dense layer's inputs.
    h, w = obs_shape[1], obs_shape[2]
    for _ in channels:
        h, w = -(-h // 2), -(-w // 2)
    k = np.asarray(torso["Dense_0"]["kernel"])
    k = k.reshape(h, w, channels[-1], -1).transpose(2, 0, 1, 3).reshape(h * w * channels[-1], -1)
    dense(torch_net.torso.fc, torso["Dense_0"], k)
    dense(torch_net.actor, p["actor"])
    dense(torch_net.critic, p["critic"])


def test_same_weights_give_the_flax_outputs():
    # Small but with every pooling case: 37 pads (1, 1), 50 and 84 pad (0, 1), 25 pads (1, 1).
    obs_shape, channels, num_actions, hidden = (3, 37, 50), (8, 16), 7, 64
    net, shapes, _ = _flax_shapes(obs_shape, num_actions, channels=channels, hidden=hidden)
    rng = np.random.default_rng(0)
    params = jax.tree_util.tree_map(
        lambda x: (rng.standard_normal(x.shape) / np.sqrt(np.prod(x.shape[:-1]) or 1))
        .astype(np.float32), shapes)
    torch_net = torch_resnet.ImpalaActorCritic(obs_shape, num_actions, channels, hidden)
    _copy_flax_weights(params, torch_net, obs_shape, channels)
    frames = rng.integers(0, 256, (5, *obs_shape), dtype=np.uint8)
    flax_logits, flax_value = net.apply(params, frames)
    with torch.no_grad():
        logits, value = torch_net(torch.from_numpy(frames))
    assert logits.shape == (5, num_actions) and value.shape == (5,)
    assert float(np.abs(np.asarray(flax_logits)).max()) > 0.1  # not a trivially small output
    np.testing.assert_allclose(logits.numpy(), np.asarray(flax_logits), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(value.numpy(), np.asarray(flax_value), rtol=1e-4, atol=1e-5)


def test_initialisation_is_flaxs():
    torch.manual_seed(0)
    t = torch_resnet.ImpalaActorCritic(ATARI, 18)
    # Convs: LeCun normal truncated at 2 std (std sqrt(1 / fan_in) after truncation), bias 0.
    for conv, fan_in in ((t.torso.sequences[0].conv, 4 * 9), (t.torso.sequences[2].res1.conv1, 32 * 9)):
        w = conv.weight.detach()
        assert abs(float(w.std()) - np.sqrt(1 / fan_in)) < 0.1 * np.sqrt(1 / fan_in)
        assert float(w.abs().max()) <= 2 * np.sqrt(1 / fan_in) / 0.87962566103423978 + 1e-6
        assert float(conv.bias.detach().abs().max()) == 0.0
    # Dense layers orthogonal with cleanba's gains: sqrt 2 (torso), 0.01 (actor), 1 (critic).
    for layer, gain in ((t.torso.fc, np.sqrt(2)), (t.actor, 0.01), (t.critic, 1.0)):
        w = layer.weight.detach().numpy().astype(np.float64)
        small = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
        np.testing.assert_allclose(small, gain**2 * np.eye(len(small)), atol=1e-5 * max(gain**2, 1))
        assert float(layer.bias.detach().abs().max()) == 0.0


def test_monobeast_interface_shapes_and_modes():
    torch.manual_seed(0)
    net = torch_resnet.MonobeastImpalaNet(ATARI, 18, use_lstm=False)
    assert net.num_actions == 18 and net.initial_state(batch_size=3) == ()
    T, B = 3, 2
    inputs = {"frame": torch.randint(0, 256, (T, B, *ATARI), dtype=torch.uint8),
              "reward": torch.zeros(T, B), "done": torch.zeros(T, B, dtype=torch.bool),
              "last_action": torch.zeros(T, B, dtype=torch.int64)}
    out, state = net(inputs, ())
    assert state == ()
    assert out["policy_logits"].shape == (T, B, 18)
    assert out["baseline"].shape == (T, B)
    assert out["action"].shape == (T, B) and out["action"].dtype == torch.int64
    assert ((out["action"] >= 0) & (out["action"] < 18)).all()
    net.eval()
    greedy, _ = net(inputs, ())
    assert torch.equal(greedy["action"], greedy["policy_logits"].argmax(-1))
    # Same (T, B) frames as one flat batch give the same outputs.
    logits, value = net.net(inputs["frame"].flatten(0, 1))
    torch.testing.assert_close(greedy["policy_logits"].flatten(0, 1), logits)
    torch.testing.assert_close(greedy["baseline"].flatten(0, 1), value)
    with pytest.raises(ValueError, match="no LSTM"):
        torch_resnet.MonobeastImpalaNet(ATARI, 18, use_lstm=True)
