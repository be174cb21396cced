"""What a look costs against the fixed design: the seed planner's answer
(analysis.verdicts.seedplan) for the spread seen at the look, and the sequential
design's own power at that spread, simulated through the same decision cores
(analysis.sequential.rci)."""

from __future__ import annotations

import numpy as np

from analysis.sequential.design import SequentialDesign
from analysis.sequential.simulate import (
    design_boundaries,
    equivalence_paths,
    gate_paths,
    normal_metrics,
)
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
    metrics drawn jointly (the planner's model)."""
    rng = np.random.default_rng([seed, design.max_seeds, 24])
    sds, rho = (spread.sd_group, spread.sd_auc), spread.correlation
    a = normal_metrics(rng, sims, design.max_seeds, sds, rho)
    b = normal_metrics(rng, sims, design.max_seeds, sds, rho)
    return float(equivalence_paths(design_boundaries(design), a, b, delta).passed.mean())


def sequential_gate_power(design: SequentialDesign, sd: float, n_ref: int, delta: float,
                          sims: int = PLAN_SIMS, seed: int = 0) -> float:
    """P(PASS by the cap) of the sequential gate when nothing regressed."""
    rng = np.random.default_rng([seed, design.max_seeds, n_ref, 24])
    new = sd * rng.standard_normal((sims, design.max_seeds))
    ref = sd * rng.standard_normal((sims, n_ref))
    b = design_boundaries(design, fixed_seeds=n_ref)
    return float(gate_paths(b, new, ref, delta).passed.mean())


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
