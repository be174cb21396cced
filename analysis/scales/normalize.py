"""Score normalisation: (score - low) / (high - low) per env, and the unit of a number the
user types in it (below).

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

from collections.abc import Mapping, Sequence
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


# ---------------------------------------------------------------- units
# The unit of a number the user types for a suite (a published reference for the gate):
# what it is called, the range a per-seed metric can take in it, and a raw return turned
# into it.
#
# The gate's per-seed metric is in normalised units: HNS on Atari ((score - random) /
# (human - random)), (return - low) / (high - low) on other envs. Where an env's raw returns
# are bounded (RETURN_RANGES: CartPole-v1's 0 .. 500 episode cap, Acrobot-v1's -500 .. 0),
# so is every per-seed metric (IQM, mean or median over games of the final score, or of the
# normalised AUC) of a suite made of such envs: a number outside that range cannot be in
# the unit (a raw CartPole return of 248.7 typed as the normalised score), and is refused.
# Atari scores have no known maximum, so HNS has no range to check: the unit is stated
# instead.

RETURN_RANGES: dict[str, tuple[float, float]] = {
    "CartPole-v1": (0.0, 500.0),  # 1 per step, episodes capped at 500 steps
    "Acrobot-v1": (-500.0, 0.0),  # -1 per step, episodes capped at 500 steps
}
"""The lowest and highest return an episode can have, for envs where they are known."""


def unit_name(suite: str, normalisers: Mapping[str, tuple[float, float]] | None = None
              ) -> str:
    """`HNS` on Atari; `normalised (CartPole-v1 return - 22.1) / 477.9` for one env."""
    if suite == "Atari":
        return "HNS (human-normalised: (score - random) / (human - random))"
    try:
        n = get_normaliser(suite, normalisers)
    except AnalysisError:
        return "normalised"
    return f"normalised ((return - {n.low:g}) / {n.high - n.low:g} for {suite})"


def check_reference_number(value: float, sd: float | None, suite: str, games: Sequence[str],
                           normalisers: Mapping[str, tuple[float, float]] | None = None
                           ) -> None:
    """AnalysisError (exit 2) when a reference number (or its sd) cannot be in the gate's
    normalised units: outside the range the metric can take, naming that range and what
    the number would be if it were a raw return of a one-game suite. Nothing to check
    when a game's returns have no known bounds (Atari, a user's env)."""
    lows, highs = [], []
    for g in games:
        if g not in RETURN_RANGES or (normalisers and g in normalisers):
            return
        lo, hi = (float(x) for x in get_normaliser(g)(RETURN_RANGES[g]))
        lows.append(min(lo, hi))
        highs.append(max(lo, hi))
    if not lows:
        return
    lo, hi = min(lows), max(highs)  # the range every per-seed metric of `games` lies in
    hint = ""
    if len(games) == 1:
        n: Normaliser = get_normaliser(games[0], normalisers)
        rlo, rhi = RETURN_RANGES[games[0]]
        if rlo <= value <= rhi:
            hint = (f"; as a raw {games[0]} return it would be ({value:g} - {n.low:g}) / "
                    f"{n.high - n.low:g} = {float(n(value)):.4g} normalised (or give "
                    "--reference-unit return)")
    if not lo <= value <= hi:
        raise AnalysisError(
            f"--reference {value:g} cannot be a per-seed score of {suite} in "
            f"{unit_name(suite, normalisers)}: it lies in [{lo:.4g}, {hi:.4g}]{hint}")
    if sd is not None and sd > hi - lo:
        raise AnalysisError(
            f"--reference-sd {sd:g} cannot be a spread of {suite} scores in normalised "
            f"units: they lie in [{lo:.4g}, {hi:.4g}], so an sd is at most {hi - lo:.4g}")


def return_to_normalised(value: float, sd: float | None, games: Sequence[str],
                         normalisers: Mapping[str, tuple[float, float]] | None = None
                         ) -> tuple[float, float | None]:
    """A raw return (and its sd) of a one-game suite in normalised units. AnalysisError
    for several games: a raw return belongs to one game."""
    if len(games) != 1:
        raise AnalysisError(f"--reference-unit return needs a one-game suite (a raw return "
                            f"is one game's); these runs cover {len(games)} games: give "
                            "the per-seed metric in normalised units")
    n = get_normaliser(games[0], normalisers)
    span = abs(n.high - n.low)
    return float(n(value)), (None if sd is None else sd / span)
