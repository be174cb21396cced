"""The gate users run is the gate the calibration measures: `regression_gate` (the CLI's
and the harness's path, on groups of run records) and `gate_rules` (the calibration
suite's entry, on score matrices) give the same verdict and the same rules on 10,000 random
cases: NaN bounds, one-seed sides, identical sides, a collapsed game, paired and unpaired
designs, layout copies. The games a verdict line names (flagged, collapsed) are the ones
whose rules fired."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from score_groups import group_scores

from analysis.errors import AnalysisError
from analysis.scoring.scores import GroupScores
from analysis.verdicts.regression import (
    COLLAPSE_RULE,
    PASS,
    PER_GAME_RULE,
    REGRESSION,
    UNDECIDED,
    ReferenceSpread,
    gate_rules,
    regression_gate,
)
from runrecord import Run

CASES = 10_000
GAMES = ("Breakout-v5", "Pong-v5", "Qbert-v5")
KINDS = ("noise", "identical", "collapsed", "reference at zero", "shifted")
PROTOCOL = {"backend": "envpool", "frame_skip": 4, "sticky_actions": 0.25}


def _run(system: str, seed: int, task: str) -> Run:
    manifest = {"run_id": f"{system}-{task}-{seed}", "system": system,
                "architecture": "cleanba", "env_id": task, "seed": seed,
                "env_protocol": PROTOCOL}
    return Run(Path(manifest["run_id"]), manifest, None, None)  # type: ignore[arg-type]


def _group(name: str, system: str, seeds: list[int], tasks: list[str],
           final: np.ndarray, with_runs: bool) -> GroupScores:
    curves = np.repeat(final[:, :, None], 2, axis=2)
    runs = {(s, t): _run(system, s, t) for s in seeds for t in tasks} if with_runs else {}
    return group_scores(name, tasks, seeds, final, curves, runs)


def _case(rng: np.random.Generator) -> dict:
    games = list(GAMES[: int(rng.choice([1, 2, 3]))])
    n, m = (int(x) for x in rng.integers(1, 6, size=2))
    kind = str(rng.choice(KINDS))
    same = kind == "identical" or rng.random() < 0.5
    if same:
        m = n
    new_seeds = list(range(1, n + 1))
    ref_seeds = new_seeds if same else list(range(11, 11 + m))
    ref = 0.5 + 0.3 * rng.random(len(games)) + 0.1 * rng.standard_normal((m, len(games)))
    if kind == "identical":
        new = ref.copy()
    else:
        new = ref.mean(axis=0) + 0.1 * rng.standard_normal((n, len(games)))
        if kind == "shifted":
            new = new - rng.uniform(0, 0.6)
        if kind == "collapsed":
            new[:, 0] = 0.01 * rng.random(n)
        if kind == "reference at zero":  # relative scores and spreads are then NaN
            ref = np.zeros((m, len(games)))
    copies = int(rng.integers(1, 3))  # layout copies of each seed, off by float noise
    jitter = 0.0 if kind == "identical" else 1e-3
    return {"games": games, "new": new, "ref": ref, "new_seeds": new_seeds,
            "ref_seeds": ref_seeds, "copies": copies, "jitter": jitter,
            "paired_runs": bool(rng.random() < 0.5), "delta": float(rng.uniform(0.02, 0.3)),
            "equal_spread": bool(rng.random() < 0.7), "rng": rng}


def _groups(side: str, values: np.ndarray, seeds: list[int], case: dict):
    """The side as its layout copies; the per-seed means the calibration entry sees."""
    rng = case["rng"]
    copies = [values + case["jitter"] * rng.standard_normal(values.shape)
              for _ in range(case["copies"])]
    if case["jitter"] == 0.0:
        copies = [values.copy() for _ in copies]
    groups = [_group(f"{side}-layout{k}", "cleanba-ppo", seeds, case["games"], c,
                     case["paired_runs"]) for k, c in enumerate(copies)]
    return groups, np.mean(copies, axis=0)


def _both(case: dict) -> tuple[tuple, tuple]:
    new_groups, new_means = _groups("new", case["new"], case["new_seeds"], case)
    ref_groups, ref_means = _groups("ref", case["ref"], case["ref_seeds"], case)
    paired = (case["paired_runs"] and case["new_seeds"] == case["ref_seeds"]
              and len(case["new_seeds"]) >= 2)
    try:
        res = regression_gate(new_groups, ref_groups, case["delta"],
                              spread=ReferenceSpread(equal_spread=case["equal_spread"]))
        shipped: tuple = (res.verdict, tuple(res.rules))
        # what the line names comes from the rules that decided, never apart from them
        assert bool(res.flagged_games) == (PER_GAME_RULE in res.rules), res
        assert bool(res.collapsed_games) == (COLLAPSE_RULE in res.rules), res
    except AnalysisError as e:
        shipped = ("refused", str(e).split(";")[0][:40])
    try:
        verdict, fired = gate_rules(new_means, ref_means, case["games"], case["delta"],
                                    paired=paired, assume_equal_spread=case["equal_spread"],
                                    same_seeds=case["new_seeds"] == case["ref_seeds"])
        calibrated: tuple = (str(verdict), tuple(r for r, f in fired.items() if bool(f)))
    except AnalysisError as e:
        calibrated = ("refused", str(e).split(";")[0][:40])
    return shipped, calibrated


def test_the_shipped_gate_and_the_calibrated_gate_agree_on_every_case():
    rng = np.random.default_rng(2026_12_04)
    seen: dict[str, int] = {}
    disagree = []
    for i in range(CASES):
        case = _case(rng)
        shipped, calibrated = _both(case)
        seen[shipped[0]] = seen.get(shipped[0], 0) + 1
        if shipped != calibrated:
            disagree.append((i, shipped, calibrated))
    assert disagree == [], f"{len(disagree)} of {CASES} cases differ, e.g. {disagree[:3]}"
    # the cases reach every outcome, and the refusals of a one-seed side
    assert all(seen.get(v, 0) > 100 for v in (PASS, REGRESSION, UNDECIDED, "refused")), seen


@pytest.mark.parametrize("kind, verdict", [("identical", PASS), ("collapsed", REGRESSION)])
def test_the_cases_mean_what_they_say(kind, verdict):
    rng = np.random.default_rng(3)
    for _ in range(200):
        case = _case(rng)
        if case["games"] and len(case["new_seeds"]) >= 2 and case_kind(case) == kind:
            shipped, _ = _both(case)
            assert shipped[0] == verdict, shipped


def case_kind(case: dict) -> str:
    if case["new"].shape == case["ref"].shape and np.array_equal(case["new"], case["ref"]):
        return "identical"
    if np.all(case["new"][:, 0] < 0.011) and np.all(case["ref"] != 0):
        return "collapsed"
    return "other"
