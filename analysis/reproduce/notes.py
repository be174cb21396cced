"""Why each game of `reproduce` got its verdict, in words (the lines under the table)."""

from __future__ import annotations

from analysis.reproduce.judge import (
    COLLAPSED,
    CONSISTENT,
    HIGHER,
    LOWER,
    MAX_SEEDS_ADVICE,
    NOT_LEARNED,
    PUBLISHED_TOO_NOISY,
)
from analysis.stats.welch import WelchInterval
from analysis.verdicts.per_game import COLLAPSE_LEVEL


def game_notes(verdict: str, w: WelchInterval, margin: float, p: float, seeds: int,
               judged: int, *, noisy: bool = False, absolute: float = 0.1) -> list[str]:
    """Why a game got its verdict, in words. noisy: the published agent is not clearly
    above random on it although its mean is beyond the `absolute` margin from random
    (PUBLISHED TOO NOISY: judged on its own spread)."""
    if verdict == NOT_LEARNED:
        return [f"the published agent sits at the random score on this game (within "
                f"{absolute:g} HNS of it and not clearly above it): not judged, not in the "
                "headline"]
    out = [f"{PUBLISHED_TOO_NOISY}: the published seeds disagree (not clearly above the "
           f"random score, yet more than {absolute:g} HNS above it on average), so this "
           "game is judged on its own spread, borrowing none from the other games, and "
           "not by the COLLAPSED rule"] if noisy else []
    if verdict == COLLAPSED:
        return out + [f"every seed of yours is within {COLLAPSE_LEVEL:.0%} of the random "
                      "score where the published agent learned this game on every seed: "
                      "fails the headline"]
    if verdict in (HIGHER, LOWER):
        return out + [f"p = {p:.2g}, significant after Holm over {judged} judged games"]
    if verdict == CONSISTENT:
        if w.ci95[0] > 0 or w.ci95[1] < 0:
            return out + ["differs from the published score (95% CI excludes 0), but "
                          "inside the margin"]
        return out
    half = (w.ci90[1] - w.ci90[0]) / 2
    why = (f"INCONCLUSIVE: the 90% CI (half-width {half:.3f}) is wider than the margin "
           f"{margin:.3f} allows, and no difference is significant after Holm")
    if seeds < 0 or seeds > MAX_SEEDS_ADVICE:
        return out + [why + f"; a 90% half-width of half the margin is out of reach even "
                      f"with {MAX_SEEDS_ADVICE} of your seeds: the published side's own "
                      "seeds are too noisy at this margin"]
    return out + [why + f"; about {seeds} of your seeds would settle it at the published "
                  "spread (a 90% half-width of half the margin)"]
