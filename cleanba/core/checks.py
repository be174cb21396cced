"""Every start-up check of a Cleanba run, in one place.

`check_run` is called by the trainers before they write anything (cleanba/core/runtime.py
`prepare`) and by `harness plan|run` before they launch anything (harness/validate.py), so
the two cannot disagree: the same checks, in the same order, raising the same errors
(ConfigError, benchenv.EnvError: both ValueErrors) with the same words. In order: the env
id, the layout split (cleanba.core.layout.make_plan), the env's spaces (discrete actions), the
preset against the env (images vs vectors), the algorithm's own sizes (make_algorithm).
None of them starts a JAX backend or makes an env; only the trainer's `topology` may start
jax.distributed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import benchenv
from cleanba.core.algorithm import Algorithm, AlgorithmFactory
from cleanba.core.config import CommonConfig, ConfigError
from cleanba.core.layout import Plan, make_plan


@dataclass(frozen=True)
class PresetChoice:
    """The preset a run was started from: its name and the env it was made for."""

    name: str
    env_id: str


def preset_choice(presets: Mapping[str, tuple[str, Any]], name: str | None,
                  ) -> PresetChoice | None:
    """The trainer preset `name` of `presets` (a trainer's PRESETS: name -> (text, config)),
    or None when there is no such preset."""
    if name is None or name not in presets:
        return None
    return PresetChoice(name, presets[name][1].env_id)


@dataclass(frozen=True)
class Topology:
    """Where a run executes, as one of its processes sees it."""

    num_processes: int
    process_index: int
    local_devices: int


@dataclass(frozen=True)
class EnvSpec:
    """What the trainers need to know of an env before making it."""

    protocol: dict[str, Any]  # the env settings and backend (benchenv.env_protocol)
    obs_shape: tuple[int, ...]
    obs_dtype: Any  # np.uint8 (frames) or np.float32
    num_actions: int


@dataclass(frozen=True)
class Checked:
    """A run that passed every start-up check: its plan, env and algorithm."""

    plan: Plan
    env: EnvSpec
    algorithm: Algorithm


def env_spec(env_id: str, backend: str | None = None) -> EnvSpec:
    """`env_id`'s protocol on `backend` and its spaces (no env is made); ConfigError unless
    its actions are discrete."""
    protocol = benchenv.env_protocol(env_id, backend=backend)
    spaces = benchenv.env_spaces(env_id, protocol)
    if spaces.num_actions is None:
        raise ConfigError(
            f"{env_id} has a {spaces.action_space} action space; the Cleanba "
            "trainers support discrete actions (Atari, CartPole-v1, ...)"
        )
    return EnvSpec(protocol, spaces.obs_shape, np.uint8 if spaces.frames else np.float32,
                   int(spaces.num_actions))


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


def _preset_obs_shape(preset: PresetChoice, env: EnvSpec) -> tuple[int, ...]:
    """The observation shape of a preset's own env: asked of the run's backend when the
    preset's env is an Atari game, as the run's; a classic-control preset's vectors (its
    env may be one the run's backend lacks: CartPole on ALE) are (4,) for CartPole-v1."""
    if benchenv.is_atari(preset.env_id):
        return env_spec(preset.env_id, benchenv.protocol_backend(env.protocol)).obs_shape
    return (4,)


def check_run(config: CommonConfig, factory: AlgorithmFactory,
              topology: Callable[[CommonConfig], Topology],
              preset: PresetChoice | None = None, presets: Sequence[str] = ()) -> Checked:
    """Every check that can fail on bad arguments, in the order a trainer meets them; raises
    ConfigError or benchenv.EnvError. `topology` says where the run executes once the env id
    is known to be good (the trainer starts jax.distributed there and asks JAX; the harness
    knows it from the sweep). `preset`: the preset the config came from (checked against the
    env), `presets`: all preset names (for the message)."""
    benchenv.check_env_id(config.env_id, config.env_backend)
    where = topology(config)
    plan = make_plan(config, where.num_processes, where.process_index, where.local_devices)
    env = env_spec(config.env_id, config.env_backend)
    if preset is not None:
        check_preset_fits(preset, config.env_id, env.obs_shape,
                          _preset_obs_shape(preset, env), presets)
    algorithm = factory(config, plan, env.obs_shape, env.num_actions)
    return Checked(plan, env, algorithm)
