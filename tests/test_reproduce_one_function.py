"""The reproduce verdicts users run are the ones the calibration measures: `compare_all`
with `headline` (what `python -m analysis reproduce` runs on the user's per-seed raw
scores and a published column) and the calibration suite's `judge_draws` with `headline`
(on HNS draws) give the same per-game verdicts and the same headline, on
10,000 random cases: NaN scores, one-seed sides (refused, or judged with the borrowed
spread), a game copied from the published mean, a collapsed game, a game the published
agent did not learn, faithful and shifted reproductions."""

from __future__ import annotations

import numpy as np

from analysis.errors import AnalysisError
from analysis.reproduce.judge import (
    NOT_REPRODUCED,
    NOT_SHOWN,
    REPRODUCED,
    headline,
    judge,
)
from analysis.reproduce.published import (
    DEFAULT_ABSOLUTE_MARGIN,
    DEFAULT_RELATIVE_MARGIN,
    PublishedColumn,
    UserScores,
    compare_all,
)
from analysis.scales.normalize import ATARI_RANDOM_HUMAN, get_normaliser
from analysis.scoring.scores import SeedValues
from calibration.reproduce_cells import PUBLISHED_SEEDS, judge_draws

CASES = 10_000
GAMES = list(ATARI_RANDOM_HUMAN)[:5]
KINDS = ("faithful", "shifted", "collapsed", "not learned", "nan", "copied")


def _case(rng: np.random.Generator) -> dict:
    g = int(rng.integers(2, len(GAMES) + 1))  # each game: a 5,000-draw power simulation
    games = GAMES[:g]
    n = int(rng.choice([1, 2, 3, 5]))
    kind = str(rng.choice(KINDS))
    pub_hns = rng.uniform(0.3, 3.0, g)
    pub_sd = pub_hns * rng.uniform(0.02, 0.3, g)
    if kind == "not learned":
        pub_hns[0], pub_sd[0] = 0.01, 0.05
    hns = pub_hns + pub_sd * rng.standard_normal((n, g))
    if kind == "shifted":
        hns *= rng.uniform(0.5, 1.5)
    if kind == "collapsed":
        hns[:, 0] = 0.001 * rng.random(n)
    if kind == "nan":
        hns[int(rng.integers(n)), int(rng.integers(g))] = np.nan
    if kind == "copied":
        hns[:, :] = pub_hns
    norms = [get_normaliser(x) for x in games]
    lo = np.array([m.low for m in norms])
    span = np.array([m.high - m.low for m in norms])
    return {"games": games, "raw": lo + hns * span, "pub_raw": lo + pub_hns * span,
            "pub_std0": pub_sd * span / np.sqrt(PUBLISHED_SEEDS / (PUBLISHED_SEEDS - 1)),
            "equal_spread": bool(rng.random() < 0.5)}


def _shipped(case: dict) -> tuple:
    games = case["games"]
    pub = PublishedColumn(None, "drawn", list(games), case["pub_raw"], case["pub_std0"])  # type: ignore[arg-type]
    n = case["raw"].shape[0]
    per_game = {x: SeedValues(x, [x], list(range(n)), case["raw"][:, [j]], [1] * n)
                for j, x in enumerate(games)}
    try:
        results, jd = compare_all(UserScores("cleanba-ppo", per_game), pub,
                                  relative=DEFAULT_RELATIVE_MARGIN,
                                  absolute=DEFAULT_ABSOLUTE_MARGIN,
                                  assume_equal_spread=case["equal_spread"] or n > 1)
    except AnalysisError as e:
        return ("refused", str(e)[:40])
    return (tuple(r.verdict for r in results), str(headline(jd)))


def _calibrated(case: dict) -> tuple:
    """The calibration's entry on the case's HNS, as the calibration draws them."""
    games, raw = case["games"], case["raw"]
    hns = np.stack([get_normaliser(x)(raw[:, j]) for j, x in enumerate(games)], axis=1)
    pub_hns = np.array([get_normaliser(x)(case["pub_raw"][j]) for j, x in enumerate(games)])
    span = np.array([abs(get_normaliser(x).high - get_normaliser(x).low) for x in games])
    pub_sd = case["pub_std0"] * np.sqrt(PUBLISHED_SEEDS / (PUBLISHED_SEEDS - 1)) / span
    try:
        if hns.shape[0] == 1 and case["equal_spread"]:  # the user vouches (--assume-...)
            jd = judge(hns[0], np.full(len(games), np.nan), 1, pub_hns, pub_sd,
                       PUBLISHED_SEEDS, relative=DEFAULT_RELATIVE_MARGIN,
                       absolute=DEFAULT_ABSOLUTE_MARGIN, assume_equal_spread=True,
                       user_max=hns[0], user_min=hns[0])
        else:
            jd = judge_draws(hns, pub_hns, pub_sd)
    except AnalysisError as e:
        return ("refused", str(e)[:40])
    verdicts = tuple(str(v) for v in jd.verdict)
    head = str(headline(jd))
    return (verdicts, head)


def test_the_shipped_reproduce_and_the_calibrated_one_agree_on_every_case():
    rng = np.random.default_rng(2026_12_06)
    seen: dict[str, int] = {}
    disagree = []
    for i in range(CASES):
        case = _case(rng)
        shipped, calibrated = _shipped(case), _calibrated(case)
        seen[shipped[1] if shipped[0] != "refused" else "refused"] = seen.get(
            shipped[1] if shipped[0] != "refused" else "refused", 0) + 1
        if shipped != calibrated:
            disagree.append((i, shipped, calibrated))
    assert disagree == [], f"{len(disagree)} of {CASES} cases differ, e.g. {disagree[:3]}"
    assert all(seen.get(v, 0) > 100 for v in (REPRODUCED, NOT_REPRODUCED, NOT_SHOWN,
                                                "refused")), seen
