"""Score normalisation: (score - low) / (high - low) per env.

Atari: human-normalised score (HNS) with the 57-game random/human table
(`analysis.scales.atari_scores`). Other envs: a (low, high) pair declared here or by the user.

CartPole-v1: low = 22.1 = mean return of the uniform random policy, measured with EnvPool
1.2.5 (`envpool.make("CartPole-v1", env_type="gymnasium", num_envs=64, seed=0)`, actions
from `np.random.default_rng(0)`, 10,000 episodes: 22.12, standard error 0.12); high = 500,
the episode cap. So 0 is random and 1 is a perfect policy, like HNS's 0 (random) and 1
(human).
Acrobot-v1: low = -498.6, the random policy measured the same way (1,000 episodes, s.e.
0.4); high = 0, an upper bound no policy reaches (every episode takes at least one step).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from analysis.errors import AnalysisError
from analysis.scales.atari_scores import ATARI_RANDOM_HUMAN


@dataclass(frozen=True)
class Normaliser:
    """Maps raw scores of one env to (score - low) / (high - low)."""

    env_id: str
    low: float
    high: float
    source: str

    def __post_init__(self) -> None:
        if not np.isfinite(self.low) or not np.isfinite(self.high) or self.high == self.low:
            raise AnalysisError(
                f"normaliser for {self.env_id}: need finite low != high, got "
                f"({self.low}, {self.high})"
            )

    def __call__(self, scores):
        return (np.asarray(scores, dtype=np.float64) - self.low) / (self.high - self.low)


CUSTOM_NORMALISERS: dict[str, tuple[float, float, str]] = {
    "CartPole-v1": (22.1, 500.0, "random policy (EnvPool, 10,000 episodes) .. episode cap 500"),
    "Acrobot-v1": (-498.6, 0.0, "random policy (EnvPool, 1,000 episodes) .. upper bound 0"),
}


def atari_env_id(env_id: str) -> str:
    """`Breakout-v5` stays; `Breakout` and `BreakoutNoFrameskip-v4` become `Breakout-v5`."""
    if env_id in ATARI_RANDOM_HUMAN:
        return env_id
    base = env_id.split("-")[0].replace("NoFrameskip", "")
    return f"{base}-v5"


def get_normaliser(
    env_id: str, custom: Mapping[str, tuple[float, float]] | None = None
) -> Normaliser:
    """The normaliser for `env_id`: user-given `custom` first, then Atari, then built-ins.

    Raises AnalysisError naming the env when there is none.
    """
    if custom and env_id in custom:
        low, high = custom[env_id]
        return Normaliser(env_id, float(low), float(high), "user-given")
    atari = atari_env_id(env_id)
    if atari in ATARI_RANDOM_HUMAN:
        random, human = ATARI_RANDOM_HUMAN[atari]
        return Normaliser(env_id, random, human, "Atari human/random (DQN Zoo)")
    if env_id in CUSTOM_NORMALISERS:
        low, high, source = CUSTOM_NORMALISERS[env_id]
        return Normaliser(env_id, low, high, source)
    known = sorted(CUSTOM_NORMALISERS)
    raise AnalysisError(
        f"no score normaliser for env {env_id!r}: it is not one of the 57 Atari games and has "
        f"no (low, high) pair (built in: {known}). Give one, e.g. "
        f"--normaliser {env_id}=0,500 (low = random policy's return, high = best return)."
    )


def parse_normalisers(specs: list[str] | tuple[str, ...]) -> dict[str, tuple[float, float]]:
    """`["CartPole-v1=22.1,500"]` -> {"CartPole-v1": (22.1, 500.0)}."""
    out: dict[str, tuple[float, float]] = {}
    for spec in specs:
        try:
            env, pair = spec.split("=", 1)
            low, high = (float(x) for x in pair.split(","))
        except ValueError:
            raise AnalysisError(
                f"bad normaliser {spec!r}: expected ENV=LOW,HIGH, e.g. CartPole-v1=22.1,500"
            ) from None
        out[env.strip()] = (low, high)
    return out


def normalise(env_id: str, scores, custom: Mapping[str, tuple[float, float]] | None = None):
    """Normalised scores of `env_id` (HNS on Atari)."""
    return get_normaliser(env_id, custom)(scores)
