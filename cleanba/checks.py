"""Start-up checks that need no JAX backend and no env: does the preset fit the env."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cleanba.config import ConfigError


@dataclass(frozen=True)
class PresetChoice:
    """The preset a run was started from: its name and the env it was made for."""

    name: str
    env_id: str


def check_preset_fits(preset: PresetChoice, env_id: str, obs_shape: tuple[int, ...],
                      preset_obs_shape: tuple[int, ...], presets: Sequence[str]) -> None:
    """A preset's network and sizes are made for one kind of observation (images: the
    IMPALA ResNet and Atari settings; vectors: an MLP and CPU settings). Refuse an env whose
    observations are of the other kind rather than train it with settings made for another."""
    if len(obs_shape) == len(preset_obs_shape):
        return
    kind = {3: "image", 1: "vector"}
    raise ConfigError(
        f"preset {preset.name!r} is made for {kind.get(len(preset_obs_shape), 'other')} "
        f"observations ({preset.env_id}: {preset_obs_shape}), but {env_id} gives "
        f"{kind.get(len(obs_shape), 'other')} observations {obs_shape}; pick the preset "
        f"made for them (presets: {', '.join(presets)}; 'atari' for Atari games, "
        "'cartpole' for vector observations)"
    )
