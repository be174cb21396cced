"""cleanba/numerics/networks.py's IMPALA ResNet actor-critic, written in PyTorch for the baselines.

The paper ran every agent, baselines included, with IMPALA's ResNet; monobeast's stock
network is the much cheaper Nature CNN (AtariNet). This module rebuilds, layer for layer,
the network our trainers train on Atari (`cleanba.numerics.networks.make_network` for (C, H, W)
frames), so a baseline's throughput and scores compare like with like:

- frames (N, C, H, W) uint8, scaled by 1/255;
- per entry of `channels`: conv 3x3 (stride 1, SAME), max-pool 3x3 stride 2 with XLA's
  SAME padding (low/high pads as Flax computes them, not PyTorch's symmetric padding=1),
  two residual blocks (relu, conv 3x3, relu, conv 3x3, + input);
- relu, flatten, linear(hidden) (orthogonal sqrt 2, bias 0), relu;
- policy head linear(num_actions) (orthogonal 0.01) and value head linear(1) (orthogonal
  1.0), both on those features; convs use Flax's default init (LeCun truncated normal,
  bias 0).

The one difference from the Flax model is the flatten order (PyTorch flattens C, H, W;
Flax H, W, C): a permutation of the first linear layer's inputs, which changes neither the
function class nor the parameter count. tests/test_baselines_torch_resnet.py checks the
parameter count against the Flax model and that both compute the same outputs from the
same weights. Nothing here is torchbeast's or moolib's code.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

# Flax's default conv init (LeCun normal): a normal truncated at +-2 standard deviations,
# rescaled by this constant so that the truncated samples have variance 1 / fan_in.
_TRUNCATED_NORMAL_STDDEV_FACTOR = 0.87962566103423978


def same_pool_padding(size: int) -> tuple[int, int, int]:
    """(output size, low pad, high pad) of a 3-wide, stride-2 window with SAME padding.

    XLA pads SAME windows asymmetrically (the extra pad goes last); PyTorch's padding=1
    would shift the windows by one pixel on even sizes such as 84.
    """
    out = -(-size // 2)
    total = max((out - 1) * 2 + 3 - size, 0)
    return out, total // 2, total - total // 2


def _lecun_normal_(conv: nn.Conv2d) -> None:
    fan_in = conv.in_channels * conv.kernel_size[0] * conv.kernel_size[1]
    std = math.sqrt(1.0 / fan_in) / _TRUNCATED_NORMAL_STDDEV_FACTOR
    nn.init.trunc_normal_(conv.weight, mean=0.0, std=std, a=-2.0 * std, b=2.0 * std)
    assert conv.bias is not None
    nn.init.zeros_(conv.bias)


def _conv3x3(in_channels: int, out_channels: int) -> nn.Conv2d:
    conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=1, padding=1)
    _lecun_normal_(conv)
    return conv


def _linear(in_features: int, out_features: int, gain: float) -> nn.Linear:
    layer = nn.Linear(in_features, out_features)
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class ResidualBlock(nn.Module):
    """relu, conv 3x3, relu, conv 3x3, plus the input (channel count unchanged)."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv0 = _conv3x3(channels, channels)
        self.conv1 = _conv3x3(channels, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv0(F.relu(x))
        y = self.conv1(F.relu(y))
        return y + x


class ConvSequence(nn.Module):
    """conv 3x3, max-pool 3x3 stride 2 (SAME), two residual blocks."""

    def __init__(self, in_channels: int, channels: int):
        super().__init__()
        self.conv = _conv3x3(in_channels, channels)
        self.res0 = ResidualBlock(channels)
        self.res1 = ResidualBlock(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        _, top, bottom = same_pool_padding(x.shape[-2])
        _, left, right = same_pool_padding(x.shape[-1])
        x = F.pad(x, (left, right, top, bottom), value=-math.inf)
        x = F.max_pool2d(x, kernel_size=3, stride=2)
        return self.res1(self.res0(x))


class ImpalaResNet(nn.Module):
    """IMPALA ResNet torso: (N, C, H, W) uint8 frames -> (N, hidden) features."""

    def __init__(self, obs_shape: Sequence[int], channels: Sequence[int] = (16, 32, 32),
                 hidden: int = 256):
        super().__init__()
        if len(obs_shape) != 3:
            raise ValueError(f"ImpalaResNet expects (C, H, W) observations, got shape {tuple(obs_shape)}")
        in_channels, height, width = (int(d) for d in obs_shape)
        sequences = []
        for c in channels:
            sequences.append(ConvSequence(in_channels, c))
            in_channels = c
            height, width = same_pool_padding(height)[0], same_pool_padding(width)[0]
        self.sequences = nn.Sequential(*sequences)
        self.fc = _linear(in_channels * height * width, hidden, math.sqrt(2.0))

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        x = self.sequences(frames.float() / 255.0)
        x = torch.flatten(F.relu(x), 1)
        return F.relu(self.fc(x))


class ImpalaActorCritic(nn.Module):
    """ImpalaResNet torso with a policy head and a value head on its features.

    forward(frames (N, C, H, W)) -> (logits (N, num_actions), value (N,)).
    """

    def __init__(self, obs_shape: Sequence[int], num_actions: int,
                 channels: Sequence[int] = (16, 32, 32), hidden: int = 256):
        super().__init__()
        if num_actions < 1:
            raise ValueError(f"num_actions must be >= 1, got {num_actions}")
        self.torso = ImpalaResNet(obs_shape, channels, hidden)
        self.actor = _linear(hidden, num_actions, 0.01)
        self.critic = _linear(hidden, 1, 1.0)

    def forward(self, frames: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.torso(frames)
        return self.actor(features), self.critic(features).squeeze(-1)


class MonobeastImpalaNet(nn.Module):
    """ImpalaActorCritic behind the model interface monobeast's actors and learner call.

    Net(observation_shape, num_actions, use_lstm); initial_state(batch_size) -> ();
    forward({"frame": (T, B, C, H, W), ...}, core_state) -> ({"policy_logits" (T, B, A),
    "baseline" (T, B), "action" (T, B)}, ()). Actions are sampled in training mode and
    greedy in eval mode, like the stock AtariNet. Unlike AtariNet, the heads see only the
    frames (no last action or reward input): cleanba's network.
    """

    def __init__(self, observation_shape: Sequence[int], num_actions: int, use_lstm: bool = False):
        super().__init__()
        if use_lstm:
            raise ValueError("the IMPALA ResNet has no LSTM core: run without --use_lstm "
                             "(or --network atarinet)")
        self.observation_shape = tuple(observation_shape)
        self.num_actions = int(num_actions)
        self.use_lstm = False
        self.net = ImpalaActorCritic(observation_shape, num_actions)

    def initial_state(self, batch_size: int) -> tuple:
        return tuple()

    def forward(self, inputs, core_state=()):
        frames = inputs["frame"]
        T, B = frames.shape[:2]
        logits, value = self.net(torch.flatten(frames, 0, 1))
        if self.training:
            action = torch.multinomial(F.softmax(logits, dim=1), num_samples=1)
        else:
            action = torch.argmax(logits, dim=1)
        return (
            dict(policy_logits=logits.view(T, B, self.num_actions), baseline=value.view(T, B),
                 action=action.view(T, B)),
            tuple(),
        )


def parameter_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
