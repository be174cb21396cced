"""Calibration of `reproduce` (your runs against a published mean ± sd of 3 seeds):
per game on three game profiles, and the headline (exit 0 = reproduced) over a 57-game
published-like column; every draw decided by analysis.reproduce.published.judge_games
and reproduced (the verdicts' own vectorised core).

Per game: CONSISTENT at a true difference of one margin (false pass), HIGHER/LOWER at
no difference (false alarm), CONSISTENT at half the margin (power), and CONSISTENT when
your run collapsed to the random score on a game the published agent clearly learned.
Headline: exit 0 for a faithful reproduction (its complement is the false-fail rate),
exit 0 with three learned games collapsed to the random score (a false pass), and any
HIGHER/LOWER over the 57 games of a faithful reproduction (family-wise false alarm).
"""

from __future__ import annotations

import numpy as np

from analysis.calibration.cells import (
    FALSE_ALARM,
    FALSE_PASS,
    POWER,
    Cell,
    rate_cell,
    refused_cells,
)
from analysis.calibration.draws import rng_for, synthetic_column
from analysis.errors import AnalysisError
from analysis.reproduce.published import (
    CONSISTENT,
    DEFAULT_ABSOLUTE_MARGIN,
    DEFAULT_RELATIVE_MARGIN,
    HIGHER,
    LOWER,
    PUBLISHED_SEEDS,
    game_margins,
    judge_games,
    reproduced,
)

NOMINAL = 0.05
PROFILES = {
    "typical game (HNS 1.0 ± 0.2)": (1.0, 0.2),
    "low but learned (HNS 0.05 ± 0.01)": (0.05, 0.01),
    "high-scoring (HNS 10 ± 3)": (10.0, 3.0),
}
COLLAPSE = "CONSISTENT after collapse to random"
GAME_RATES = [(FALSE_PASS, NOMINAL), (FALSE_ALARM, NOMINAL), (POWER, None),
              (COLLAPSE, NOMINAL)]
FAITHFUL_FAIL = "exit 1, faithful reproduction"
COLLAPSED_PASS = "exit 0, 3 games collapsed"
ANY_FLAG = "any HIGHER/LOWER, faithful"
HEADLINE_RATES = [(FAITHFUL_FAIL, NOMINAL), (COLLAPSED_PASS, NOMINAL), (ANY_FLAG, NOMINAL)]


def _published(rng: np.random.Generator, sims: int, mean: np.ndarray, sd: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    draws = mean + sd * rng.standard_normal((sims, PUBLISHED_SEEDS, mean.size))
    return draws.mean(axis=1), draws.std(axis=1, ddof=1)


def game_cells(sims: int, n_user: int, profile: str, seed: int, ratio: float = 1.0
               ) -> list[Cell]:
    mu, sd = PROFILES[profile]
    verdict = "reproduce per game"
    scen = f"{n_user} seeds vs published 3, {profile}" + (
        f", sd ratio {ratio:g}" if ratio != 1 else "")
    rng = rng_for(seed, "reproduce game", n_user, profile, ratio)
    mean, sds = np.array([mu]), np.array([sd])
    pub_mean, pub_sd = _published(rng, sims, mean, sds)
    noise = ratio * sd * rng.standard_normal((sims, n_user, 1))
    margin = float(game_margins(mu, DEFAULT_RELATIVE_MARGIN, DEFAULT_ABSOLUTE_MARGIN))
    out = []
    sign = np.where(rng.random((sims, 1, 1)) < 0.5, -1.0, 1.0)
    for rate, true, want, nominal in (
            (FALSE_PASS, mu + sign * margin, (CONSISTENT,), NOMINAL),
            (FALSE_ALARM, mu, (HIGHER, LOWER), NOMINAL),
            (POWER, mu + sign * margin / 2, (CONSISTENT,), None),
            (COLLAPSE, 0.0, (CONSISTENT,), NOMINAL)):
        user = np.asarray(true) + noise if rate != COLLAPSE else 0.01 * noise
        try:
            v = judge_games(user, pub_mean, pub_sd, PUBLISHED_SEEDS)
        except AnalysisError as e:
            return refused_cells(verdict, scen, GAME_RATES, str(e), sims)
        out.append(rate_cell(verdict, scen, rate, np.isin(v, want), nominal))
    return out


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
        faithful = judge_games(user, pub_mean, pub_sd, PUBLISHED_SEEDS)
        broken = judge_games(collapsed, pub_mean, pub_sd, PUBLISHED_SEEDS)
    except AnalysisError as e:
        return refused_cells(verdict, scen, HEADLINE_RATES, str(e), sims)
    return [rate_cell(verdict, scen, FAITHFUL_FAIL, ~reproduced(faithful), NOMINAL),
            rate_cell(verdict, scen, COLLAPSED_PASS, reproduced(broken), NOMINAL),
            rate_cell(verdict, scen, ANY_FLAG, np.isin(faithful, (HIGHER, LOWER)).any(-1),
                      NOMINAL)]
