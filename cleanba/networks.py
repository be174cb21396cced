"""Actor-critic networks of the Cleanba trainers (Flax linen).

- `ImpalaResNet`: the IMPALA ResNet torso of Cleanba / CleanRL (Espeholt et al. 2018) for
  uint8 Atari frames (B, 4, 84, 84), channels-first as EnvPool returns them.
- `MLPTorso`: CleanRL's CartPole torso (tanh, orthogonal sqrt(2) init) for flat (B, D) obs.
- `ActorCritic`: a shared torso with CleanRL's heads (actor orthogonal 0.01, critic 1.0).

CleanRL's CartPole agent uses two separate MLPs for actor and critic; here both heads share
one torso, like the Atari agent.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax.linen.initializers import constant, orthogonal


class ResidualBlock(nn.Module):
    """relu, conv 3x3, relu, conv 3x3, plus the input (channel count unchanged)."""

    channels: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        inputs = x
        x = nn.relu(x)
        x = nn.Conv(self.channels, kernel_size=(3, 3))(x)
        x = nn.relu(x)
        x = nn.Conv(self.channels, kernel_size=(3, 3))(x)
        return x + inputs


class ConvSequence(nn.Module):
    """conv 3x3, max-pool 3x3 stride 2 (SAME), two residual blocks."""

    channels: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = nn.Conv(self.channels, kernel_size=(3, 3))(x)
        x = nn.max_pool(x, window_shape=(3, 3), strides=(2, 2), padding="SAME")
        x = ResidualBlock(self.channels)(x)
        x = ResidualBlock(self.channels)(x)
        return x


class ImpalaResNet(nn.Module):
    """IMPALA ResNet torso. (B, C, H, W) uint8 frames -> (B, hidden) features.

    Frames are transposed to NHWC and scaled by 1/255; then one `ConvSequence` per entry of
    `channels`, relu, flatten, Dense(hidden) (orthogonal sqrt(2), bias 0), relu. Convs keep
    Flax's default init, as the reference does.
    """

    channels: Sequence[int] = (16, 32, 32)
    hidden: int = 256

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        if obs.ndim != 4:
            raise ValueError(f"ImpalaResNet expects (B, C, H, W) frames, got shape {obs.shape}")
        x = jnp.transpose(obs, (0, 2, 3, 1)).astype(jnp.float32) / 255.0
        for channels in self.channels:
            x = ConvSequence(channels)(x)
        x = nn.relu(x)
        x = x.reshape((x.shape[0], -1))
        x = nn.Dense(self.hidden, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(x)
        return nn.relu(x)


class MLPTorso(nn.Module):
    """(B, D) float obs -> (B, hidden[-1]); Dense + tanh layers, orthogonal sqrt(2) init."""

    hidden: Sequence[int] = (64, 64)

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        if obs.ndim != 2:
            raise ValueError(f"MLPTorso expects (B, D) observations, got shape {obs.shape}")
        x = obs.astype(jnp.float32)
        for width in self.hidden:
            x = nn.Dense(width, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(x)
            x = nn.tanh(x)
        return x


class ActorCritic(nn.Module):
    """Shared torso with a policy head and a value head.

    With `critic_torso` set, the value head reads its own torso instead (CleanRL's CartPole
    agent: separate actor and critic MLPs, which learns CartPole far faster than one shared
    torso).

    __call__(obs (B, *obs_shape)) -> (logits (B, num_actions), value (B,)).
    """

    torso: nn.Module
    num_actions: int
    critic_torso: nn.Module | None = None

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        features = self.torso(obs)
        critic_features = features if self.critic_torso is None else self.critic_torso(obs)
        logits = nn.Dense(
            self.num_actions, kernel_init=orthogonal(0.01), bias_init=constant(0.0), name="actor"
        )(features)
        value = nn.Dense(1, kernel_init=orthogonal(1.0), bias_init=constant(0.0), name="critic")(
            critic_features
        )
        return logits, value.squeeze(-1)


def make_network(
    obs_shape: tuple[int, ...],
    num_actions: int,
    channels: Sequence[int] = (16, 32, 32),
    hidden: int = 256,
    mlp_hidden: Sequence[int] = (64, 64),
    separate_critic: bool = False,
) -> ActorCritic:
    """The actor-critic for an observation shape (without the batch axis).

    3-D obs (C, H, W) (Atari frames) get the `ImpalaResNet(channels, hidden)` torso; 1-D obs
    (D,) (classic control) get `MLPTorso(mlp_hidden)`. Anything else raises ValueError.
    `separate_critic` gives the value head its own copy of the torso architecture.
    """
    obs_shape = tuple(int(d) for d in obs_shape)
    if num_actions < 1:
        raise ValueError(f"num_actions must be >= 1, got {num_actions}")
    torso: nn.Module
    if len(obs_shape) == 3:
        torso = ImpalaResNet(channels=tuple(channels), hidden=hidden)
    elif len(obs_shape) == 1:
        torso = MLPTorso(hidden=tuple(mlp_hidden))
    else:
        raise ValueError(
            f"no network for observation shape {obs_shape}: supported are 3-D image "
            f"observations (C, H, W), e.g. Atari (4, 84, 84), which get the IMPALA ResNet, and "
            f"1-D vector observations (D,), e.g. CartPole (4,), which get the MLP"
        )
    critic_torso = torso.clone(name=None) if separate_critic else None
    return ActorCritic(torso=torso, num_actions=num_actions, critic_torso=critic_torso)


def init_params(network: nn.Module, obs_shape: tuple[int, ...], key: jax.Array):
    """Initialise `network`'s parameters with one dummy observation of `obs_shape`.

    Image observations (3-D) are initialised with a uint8 dummy, as EnvPool delivers them.
    Jitted: the ResNet's op-by-op initialisation takes several seconds on CPU.
    """
    dtype = jnp.uint8 if len(obs_shape) == 3 else jnp.float32
    return jax.jit(network.init)(key, jnp.zeros((1, *obs_shape), dtype=dtype))
