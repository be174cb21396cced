"""The equivalence users run is the equivalence the calibration measures: `pair_verdicts`
(the CLI's `analysis equivalence` and the report's loop over pairs, through
`equivalence` on groups of run records) and `equivalence_decision` (the calibration
suite's entry, on per-seed values) give the same verdict, and the same 90% interval
where both give one, on 10,000 random cases: NaN scores, one-seed sides, identical
sides, identical scores from records that differ elsewhere, a collapsed game, paired
and unpaired seeds, several pairs at once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from score_groups import group_scores

from analysis.scoring.scores import GroupScores
from analysis.stats.welch import TOST_TAIL, t_upper
from analysis.verdicts.compare import SuitePair, pair_verdicts
from analysis.verdicts.equivalence import (
    DIFFERENT,
    INCONCLUSIVE,
    PASS,
    equivalence_decision,
    equivalence_stats,
)
from analysis.verdicts.margins import Margin
from analysis.verdicts.regression import metric_per_seed
from analysis.verdicts.seed_pairing import iqm_over_tasks
from runrecord import Run, schema
from runrecord.reader import Table

CASES = 10_000
PAIRS_PER_CALL = 8  # several pairs through one pair_verdicts call, as the CLI passes them
GAMES = ("Breakout-v5", "Pong-v5", "Qbert-v5")
KINDS = ("noise", "identical", "same scores", "collapsed", "nan", "shifted")
PROTOCOL = {"backend": "envpool", "frame_skip": 4, "sticky_actions": 0.25}


def _run(system: str, seed: int, task: str, final: float, auc: float, length: float) -> Run:
    """A run whose records carry its scores, so that bitwise identity of the records is
    identity of the scores (and of an episode length the case may change alone)."""
    manifest = {"run_id": f"{system}-{task}-{seed}", "system": system,
                "architecture": "cleanba", "env_id": task, "seed": seed,
                "env_protocol": PROTOCOL}
    cols = {c: np.zeros(1) for c in schema.EPISODE_COLUMNS}
    cols.update(env_steps=np.array([auc]), episode_return=np.array([final]),
                episode_length=np.array([length]))
    updates = Table({"params_checksum": np.array(["0"])}, 1)
    return Run(Path(manifest["run_id"]), manifest, Table(cols, 1), updates)


def _group(name: str, seeds: list[int], tasks: list[str], final: np.ndarray,
           auc: np.ndarray, lengths: np.ndarray) -> GroupScores:
    curves = np.stack([auc, auc], axis=2)  # its mean over the grid is auc exactly
    runs = {(s, t): _run("cleanba-ppo", s, t, final[i, j], auc[i, j], lengths[i, j])
            for i, s in enumerate(seeds) for j, t in enumerate(tasks)}
    return group_scores(name, tasks, seeds, final, curves, runs)


def _case(rng: np.random.Generator) -> dict:
    games = list(GAMES[: int(rng.choice([1, 2, 3]))])
    n, m = (int(x) for x in rng.integers(1, 6, size=2))
    kind = str(rng.choice(KINDS))
    same = kind in ("identical", "same scores") or rng.random() < 0.5
    if same:
        m = n
    seeds_a = list(range(1, n + 1))
    seeds_b = seeds_a if same else list(range(11, 11 + m))
    if rng.random() < 0.5:  # rows need not be in seed order
        seeds_b = seeds_b[::-1]
    sd = float(rng.choice([0.02, 0.05, 0.1]))
    shape_b = (m, len(games))
    fb = 0.5 + 0.3 * rng.random(len(games)) + sd * rng.standard_normal(shape_b)
    ub = 0.8 * fb + sd * rng.standard_normal(shape_b)
    lb = np.full(shape_b, 100.0)
    if kind in ("identical", "same scores"):
        order = np.argsort(seeds_b)  # side a's row i is seed i + 1
        fa, ua, la = fb[order], ub[order], lb[order].copy()
        if kind == "same scores":  # equal scores, records that differ elsewhere
            la[int(rng.integers(n)), int(rng.integers(len(games)))] += 1
    else:
        noise = sd * rng.standard_normal((2, n, len(games)))
        fa, ua = fb.mean(axis=0) + noise[0], ub.mean(axis=0) + noise[1]
        la = np.full((n, len(games)), 100.0)
        if kind == "shifted":
            fa, ua = fa - rng.uniform(0, 0.4), ua - rng.uniform(0, 0.4)
        if kind == "collapsed":
            fa[:, 0], ua[:, 0] = 0.01 * rng.random(n), 0.01 * rng.random(n)
        if kind == "nan":
            side = fa if rng.random() < 0.5 else fb
            side[int(rng.integers(side.shape[0])), int(rng.integers(len(games)))] = np.nan
    return {"games": games, "seeds_a": seeds_a, "seeds_b": seeds_b,
            "a": (fa, ua, la), "b": (fb, ub, lb), "unpaired": bool(rng.random() < 0.3),
            "delta": float(rng.uniform(0.02, 0.3))}


def _pair(case: dict, k: int) -> SuitePair:
    a = _group(f"a{k}", case["seeds_a"], case["games"], *case["a"])
    b = _group(f"b{k}", case["seeds_b"], case["games"], *case["b"])
    return SuitePair(f"suite{k}", "", a, b)


def _calibrated(case: dict) -> tuple[str, tuple[float, float] | None]:
    """The calibration entry on the case's per-seed values, and its final 90% CI."""
    sa, sb = case["seeds_a"], case["seeds_b"]
    same = sorted(sa) == sorted(sb)
    paired = same and len(sa) >= 2 and not case["unpaired"]
    ia, ib = np.argsort(sa), np.argsort(sb)
    (fa, ua, la), (fb, ub, lb) = case["a"], case["b"]
    identical = same and all(np.array_equal(x[ia], y[ib], equal_nan=True)
                             for x, y in ((fa, fb), (ua, ub), (la, lb)))
    if not paired:  # Welch reads the rows as they are (a sum's order moves its last bit)
        ia, ib = np.arange(len(sa)), np.arange(len(sb))
    games = case["games"]
    per_seed = [metric_per_seed(x, games, iqm_over_tasks) for x in (fa[ia], fb[ib],
                                                                    ua[ia], ub[ib])]
    verdict = str(equivalence_decision(*per_seed, case["delta"], paired=paired,
                                       identical=identical).verdict)
    if identical or min(len(sa), len(sb)) < 2:
        return verdict, None
    diff, se, df = (float(x) for x in equivalence_stats(per_seed[0], per_seed[1], paired))
    if se == 0:
        return verdict, (diff, diff)
    h = float(t_upper(TOST_TAIL, df)) * se
    return verdict, (diff - h, diff + h)


def _same_interval(shipped: tuple[float, float], calibrated: tuple[float, float]) -> bool:
    return bool(np.array_equal(np.array(shipped), np.array(calibrated), equal_nan=True))


def test_the_shipped_equivalence_and_the_calibrated_one_agree_on_every_case():
    rng = np.random.default_rng(2026_12_05)
    seen: dict[str, int] = {}
    disagree = []
    for start in range(0, CASES, PAIRS_PER_CALL):
        cases = [_case(rng) for _ in range(min(PAIRS_PER_CALL, CASES - start))]
        deltas = {f"suite{k}": c["delta"] for k, c in enumerate(cases)}
        unpaired = cases[0]["unpaired"]  # one flag per call, as the CLI's --unpaired
        for c in cases:
            c["unpaired"] = unpaired
        shipped = pair_verdicts([_pair(c, k) for k, c in enumerate(cases)],
                                lambda suite, d=deltas: Margin(d[suite], suite, "given"),
                                unpaired=unpaired)
        for k, (case, v) in enumerate(zip(cases, shipped, strict=True)):
            assert v.result is not None, v.error
            verdict, ci = _calibrated(case)
            seen[verdict] = seen.get(verdict, 0) + 1
            if v.result.verdict != verdict or (
                    ci is not None and not _same_interval(v.result.final.ci90, ci)):
                disagree.append((start + k, v.result.verdict, verdict,
                                 v.result.final.ci90, ci))
    assert disagree == [], f"{len(disagree)} of {CASES} cases differ, e.g. {disagree[:3]}"
    assert all(seen.get(v, 0) > 300 for v in (PASS, DIFFERENT, INCONCLUSIVE)), seen


def test_a_one_seed_side_passes_only_on_identical_records():
    """Equal flat scores on one seed are not evidence; identical records are."""
    one = np.array([0.5])
    assert str(equivalence_decision(one, one, one, one, 0.1).verdict) == INCONCLUSIVE
    assert str(equivalence_decision(one, one, one, one, 0.1, identical=True).verdict) == PASS
    two = np.array([0.5, 0.5])
    assert str(equivalence_decision(one, two, one, two, 0.1).verdict) == INCONCLUSIVE
