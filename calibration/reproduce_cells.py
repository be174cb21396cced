"""Calibration of `reproduce` (your runs against a published mean ± sd of 3 seeds):
per game, and the headline (exit 0 = reproduced) over a 57-game
published-like column; every draw decided by analysis.reproduce.judge (judge,
headline) (the verdicts' own vectorised core).

Per game (over the judged games of a 57-game column): CONSISTENT at a true difference of
one margin (false pass), HIGHER/LOWER at no difference (false alarm), CONSISTENT at half
the margin (power), and CONSISTENT when your run collapsed to the random score on a
game the published agent clearly learned.
Headline: exit 0 for a faithful reproduction (its complement is the false-fail rate),
exit 0 with three learned games collapsed to the random score (a false pass), and any
HIGHER/LOWER over the 57 games of a faithful reproduction (family-wise false alarm).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from analysis.errors import AnalysisError
from analysis.reproduce.judge import (
    CONSISTENT,
    HIGHER,
    LOWER,
    NOT_REPRODUCED,
    REPRODUCED,
    Judgement,
    headline,
    judge,
)
from analysis.reproduce.published import (
    DEFAULT_ABSOLUTE_MARGIN,
    DEFAULT_RELATIVE_MARGIN,
    PUBLISHED_SEEDS,
)
from calibration.cells import (
    FALSE_ALARM,
    FALSE_PASS,
    POWER,
    Cell,
    case_cells,
    rate_cell,
    refused_cells,
)
from calibration.draws import rng_for, synthetic_column

NOMINAL = 0.05
COLLAPSE = "CONSISTENT after collapse to random"
FAITHFUL_FAIL = "NOT REPRODUCED (exit 1), faithful reproduction"
COLLAPSED_PASS = "REPRODUCED (exit 0), 3 games collapsed"
ANY_FLAG = "any HIGHER/LOWER, faithful"
HEADLINE_RATES = [(FAITHFUL_FAIL, NOMINAL), (COLLAPSED_PASS, None), (ANY_FLAG, NOMINAL)]


def _published(rng: np.random.Generator, sims: int, mean: np.ndarray, sd: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    draws = mean + sd * rng.standard_normal((sims, PUBLISHED_SEEDS, mean.size))
    return draws.mean(axis=1), draws.std(axis=1, ddof=1)


def judge_draws(user: np.ndarray, pub_mean: np.ndarray, pub_sd: np.ndarray) -> Judgement:
    """The verdicts of draws (..., seeds, games) against published means and sds
    (AnalysisError: refused, e.g. one seed per game)."""
    n = user.shape[-2]
    sd = user.std(axis=-2, ddof=1) if n > 1 else np.full(pub_mean.shape, np.nan)
    return judge(user.mean(axis=-2), sd, n, pub_mean, pub_sd, PUBLISHED_SEEDS,
                 relative=DEFAULT_RELATIVE_MARGIN, absolute=DEFAULT_ABSOLUTE_MARGIN,
                 user_max=user.max(axis=-2), user_min=user.min(axis=-2))


def game_cells(sims: int, n_user: int, seed: int, ratio: float = 1.0) -> list[Cell]:
    """Per-game rates over the judged games of a 57-game column (every judged game
    moved at once, so each draw gives one rate per game; the cell is their mean)."""
    verdict = "reproduce per game (57-game column)"
    scen = f"{n_user} seeds vs published 3" + (f", sd ratio {ratio:g}" if ratio != 1 else "")
    rng = rng_for(seed, "reproduce game", n_user, ratio)
    mean, sd = synthetic_column(seed)
    pub_mean, pub_sd = _published(rng, sims, mean, sd)
    noise = ratio * sd * rng.standard_normal((sims, n_user, mean.size))
    margin = np.maximum(DEFAULT_RELATIVE_MARGIN * mean,
                        np.minimum(DEFAULT_ABSOLUTE_MARGIN, 0.5 * mean))
    sign = np.where(rng.random((sims, 1, mean.size)) < 0.5, -1.0, 1.0)

    def hits(rate: str, case: tuple[Any, tuple[str, ...]]) -> np.ndarray:
        true, want = case  # the true means, and the verdicts that count
        j = judge_draws(true + noise if rate != COLLAPSE else 0.01 * noise, pub_mean, pub_sd)
        return np.isin(j.verdict, want)[j.learned]

    return case_cells(verdict, scen, sims, (
        (FALSE_PASS, (mean + sign * margin, (CONSISTENT,)), NOMINAL),
        (FALSE_ALARM, (mean, (HIGHER, LOWER)), NOMINAL),
        (POWER, (mean + sign * margin / 2, (CONSISTENT,)), None),
        (COLLAPSE, (0.0, (CONSISTENT,)), NOMINAL)), hits)


def headline_cells(sims: int, n_user: int, seed: int) -> list[Cell]:
    verdict = "reproduce headline (57 games)"
    scen = f"{n_user} seeds per game vs published 3"
    rng = rng_for(seed, "reproduce headline", n_user)
    mean, sd = synthetic_column(seed)
    pub_mean, pub_sd = _published(rng, sims, mean, sd)
    user = mean + sd * rng.standard_normal((sims, n_user, mean.size))
    learned = np.argsort(mean)[len(mean) // 2: len(mean) // 2 + 3]
    collapsed = user.copy()
    collapsed[..., learned] = 0.01 * sd[learned] * rng.standard_normal(
        (sims, n_user, learned.size))
    try:
        faithful_j = judge_draws(user, pub_mean, pub_sd)
        faithful, broken = faithful_j.verdict, headline(judge_draws(collapsed, pub_mean, pub_sd))
    except AnalysisError as e:
        return refused_cells(verdict, scen, HEADLINE_RATES, str(e), sims)
    head = headline(faithful_j)
    return [rate_cell(verdict, scen, FAITHFUL_FAIL, head == NOT_REPRODUCED, NOMINAL),
            rate_cell(verdict, scen, "REPRODUCED, faithful", head == REPRODUCED),
            rate_cell(verdict, scen, COLLAPSED_PASS, broken == REPRODUCED),
            rate_cell(verdict, scen, ANY_FLAG, np.isin(faithful, (HIGHER, LOWER)).any(-1),
                      NOMINAL)]
