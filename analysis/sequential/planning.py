"""What a look costs against the fixed design: the seed planner's answer
(analysis.verdicts.seedplan) for the spread seen at the look, and the sequential
design's own power at that spread, simulated through the same decision cores
(analysis.sequential.rci)."""

from __future__ import annotations

import math

import numpy as np

from analysis.sequential.design import SequentialDesign
from analysis.sequential.rci import different_alpha, equivalence_decisions, gate_decisions
from analysis.stats.welch import welch_stats
from analysis.verdicts.equivalence import PASS
from analysis.verdicts.regression import regression_lower_bound
from analysis.verdicts.seedplan import (
    Spread,
    equivalence_power,
    gate_power,
    seeds_needed,
)

PLAN_SIMS = 4_000
"""Draws per simulated power (a look's estimate, not a table: +-1 point is enough)."""
PLAN_TARGET = 0.8
PLAN_MAX_SEEDS = 100


def sequential_equivalence_power(design: SequentialDesign, spread: Spread, delta: float,
                                 sims: int = PLAN_SIMS, seed: int = 0) -> float:
    """P(PASS by the cap) of sequential equivalence at a true difference of 0, both
    metrics drawn jointly (the planner's model), decided by `equivalence_decisions`."""
    ns = design.seeds_at_looks()
    rng = np.random.default_rng([seed, ns[-1], 24])
    rho = spread.correlation
    z = rng.standard_normal((4, sims, ns[-1]))
    final = spread.sd_group * z[:2]
    auc = spread.sd_auc * (rho * z[:2] + math.sqrt(max(0.0, 1 - rho * rho)) * z[2:])
    c_pass, c_diff = design.boundaries(), design.boundaries(different_alpha(2))
    open_ = np.ones(sims, dtype=bool)
    passed = np.zeros(sims, dtype=bool)
    for k, n in enumerate(ns):
        stats = [welch_stats(x[0, :, :n], x[1, :, :n]) for x in (final, auc)]
        diff, se, df = (np.stack([s[i] for s in stats]) for i in range(3))
        dec, _ = equivalence_decisions(diff, se, df, delta, c_pass[k], c_diff[k],
                                       k == len(ns) - 1)
        passed |= open_ & (dec == PASS)
        open_ &= dec == "CONTINUE"
    return float(passed.mean())


def sequential_gate_power(design: SequentialDesign, sd: float, n_ref: int, delta: float,
                          sims: int = PLAN_SIMS, seed: int = 0) -> float:
    """P(PASS by the cap) of the sequential gate when nothing regressed."""
    ns = design.seeds_at_looks()
    rng = np.random.default_rng([seed, ns[-1], n_ref, 24])
    new = sd * rng.standard_normal((sims, ns[-1]))
    ref = sd * rng.standard_normal((sims, n_ref))
    c = design.boundaries(fixed_seeds=n_ref)
    open_ = np.ones(sims, dtype=bool)
    passed = np.zeros(sims, dtype=bool)
    for k, n in enumerate(ns):
        diff, _, se, df = regression_lower_bound(new[:, :n], ref)
        dec, _, _ = gate_decisions(diff, se, df, delta, c[k], k == len(ns) - 1)
        passed |= open_ & (dec == PASS)
        open_ &= dec == "CONTINUE"
    return float(passed.mean())


def fixed_equivalence_seeds(spread: Spread, delta: float, target: float,
                            sims: int = PLAN_SIMS) -> int | None:
    """Seeds per side the fixed TOST (both metrics) needs for `target` power (planner)."""
    return seeds_needed(lambda n: equivalence_power(spread, delta, n, sims), target,
                        max_seeds=PLAN_MAX_SEEDS)


def fixed_gate_seeds(spread: Spread, delta: float, target: float, n_ref: int,
                     sims: int = PLAN_SIMS) -> int | None:
    """New seeds the fixed gate needs for `target` power against `n_ref` reference seeds."""
    return seeds_needed(lambda n: gate_power(spread, delta, n, sims, n_ref=n_ref), target,
                        max_seeds=PLAN_MAX_SEEDS)


def needs_text(seeds: int | None, sd_text: str) -> str:
    """The cap line's estimate: seeds for PLAN_TARGET power of the fixed design."""
    if seeds is None:
        return (f"more than {PLAN_MAX_SEEDS} seeds per side for {PLAN_TARGET:.0%} power at "
                f"the spread seen ({sd_text}): widen the margin or reduce the noise")
    return (f"about {seeds} seeds per side for {PLAN_TARGET:.0%} power of the fixed design "
            f"at the spread seen ({sd_text}; seed planner, true difference 0)")
