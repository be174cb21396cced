"""The unit of a number the user types for a suite (a published reference for the gate):
what it is called, the range a per-seed metric can take in it, and a raw return turned
into it.

The gate's per-seed metric is in normalised units: HNS on Atari ((score - random) /
(human - random)), (return - low) / (high - low) on other envs. Where an env's raw returns
are bounded (RETURN_RANGES: CartPole-v1's 0 .. 500 episode cap, Acrobot-v1's -500 .. 0),
so is every per-seed metric (IQM, mean or median over games of the final score, or of the
normalised AUC) of a suite made of such envs: a number outside that range cannot be in
the unit (a raw CartPole return of 248.7 typed as the normalised score), and is refused.
Atari scores have no known maximum, so HNS has no range to check: the unit is stated
instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from analysis.errors import AnalysisError
from analysis.scales.normalize import Normaliser, get_normaliser

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


def normalised_range(games: Sequence[str],
                     normalisers: Mapping[str, tuple[float, float]] | None = None
                     ) -> tuple[float, float] | None:
    """The range every per-seed metric of `games` lies in, in normalised units, or None
    when a game's returns have no known bounds (Atari, a user's env)."""
    lows, highs = [], []
    for g in games:
        if g not in RETURN_RANGES or (normalisers and g in normalisers):
            return None
        n = get_normaliser(g)
        lo, hi = (float(x) for x in n(RETURN_RANGES[g]))
        lows.append(min(lo, hi))
        highs.append(max(lo, hi))
    return (min(lows), max(highs)) if lows else None


def check_reference_number(value: float, sd: float | None, suite: str, games: Sequence[str],
                           normalisers: Mapping[str, tuple[float, float]] | None = None
                           ) -> None:
    """AnalysisError (exit 2) when a reference number (or its sd) cannot be in the gate's
    normalised units: outside the range the metric can take, naming that range and what
    the number would be if it were a raw return of a one-game suite."""
    rng = normalised_range(games, normalisers)
    if rng is None:
        return
    lo, hi = rng
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
