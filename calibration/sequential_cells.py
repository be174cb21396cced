"""Calibration of the sequential designs (analysis.sequential): a sweep that adds seeds
in batches and decides after each, simulated through the same decision cores
(analysis.sequential.design), beside naive re-testing (the fixed verdict re-applied
after every batch, the same stopping rule with unadjusted boundaries).

Rates over all looks: the false-pass rate at the margin (equivalence: a true difference
of delta on the final metric; the gate: a true drop of delta), the false-alarm rate at
no difference (equivalence's DIFFERENT), P(PASS) at no difference (power), and the
expected seeds per side at no difference beside the seeds the fixed design needs for the
same power (the seed planner, analysis.verdicts.seedplan, on the same model). "PASS at
any look" counts a PASS at some look even where the procedure stopped earlier: what the
repeated confidence intervals bound whatever the stopping rule (e.g. a sweep that goes on
for another verdict).

Units: the reference side's per-seed sd is 1 and delta is DELTA_SD (the gate's rates at
the margin do not depend on delta / sd; equivalence's do, through its lower bound and the
DIFFERENT stop: 2 sd is where its false-pass rate is highest among 1, 2, 4 and 8 sd, and
WIDE_DELTA_SD, where both are out of play, is the worst case of "PASS at any look", the
repeated bound alone).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from analysis.sequential.design import (
    PLAN_MAX_SEEDS,
    Paths,
    SequentialDesign,
    design_boundaries,
    equivalence_paths,
    gate_paths,
    naive_boundaries,
)
from analysis.verdicts.equivalence import DIFFERENT, REGRESSION
from analysis.verdicts.seedplan import equivalence_seeds_needed, gate_seeds_needed, given_spread
from calibration.cells import (
    FALSE_ALARM,
    FALSE_PASS,
    Cell,
    mean_cell,
    rate_cell,
)
from calibration.draws import METRIC_CORRELATION, NORMAL, correlated_pair, rng_for, unit_noise

NOMINAL = 0.05
DELTA_SD = 2.0
WIDE_DELTA_SD = 8.0
ANY_LOOK = "false pass at margin, PASS at any look"
POWER_AT_0 = "P(PASS) at 0"
SEEDS_AT_0 = "expected seeds per side at 0"
FIXED_SEEDS = "fixed design: seeds for the same power"
NAIVE = "naive re-testing"


def design_name(design: SequentialDesign) -> str:
    seeds = design.seeds_at_looks()
    return f"{'/'.join(map(str, seeds))} seeds, {design.spending}"


def _scenario(design: SequentialDesign, ratio: float, dist: str, extra: str = "",
              delta: float = DELTA_SD) -> str:
    tail = "" if dist == NORMAL else f", {dist}"
    sd = f", sd ratio {ratio:g}" if ratio != 1 else ""
    return f"{design_name(design)}{extra}{sd}{tail}, delta {delta:g} sd"


def sequential_equivalence_cells(sims: int, design: SequentialDesign, ratio: float,
                                 dist: str, seed: int, delta: float = DELTA_SD
                                 ) -> list[Cell]:
    """The rates of module docstring for equivalence at margin `delta` (in sd); the
    draws do not depend on `delta` (common random numbers across margins)."""
    verdict = "sequential equivalence (final + AUC)"
    scen = _scenario(design, ratio, dist, delta=delta)
    rng = rng_for(seed, "sequential equivalence", design_name(design), ratio, dist)
    cap = design.max_seeds
    a = ratio * np.stack(correlated_pair(rng, dist, (sims, cap)))  # (final, AUC) x draws
    b = np.stack(correlated_pair(rng, dist, (sims, cap)))
    margin = a.copy()
    margin[0] += delta
    planned, naive = design_boundaries(design), naive_boundaries(design)
    at_margin = equivalence_paths(planned, margin, b, delta)
    at_zero = equivalence_paths(planned, a, b, delta)
    naive_margin = equivalence_paths(naive, margin, b, delta)
    power = float(at_zero.passed.mean())
    spread = given_spread(1.0, 1.0, METRIC_CORRELATION)
    fixed = equivalence_seeds_needed(spread, delta, power, sims, max_seeds=PLAN_MAX_SEEDS) if ratio == 1 and \
        dist == NORMAL and power < 1 else None
    alarm = rate_cell(verdict, scen, FALSE_ALARM, at_zero.decision == DIFFERENT, NOMINAL)
    return _path_cells(verdict, scen, at_margin, at_zero, alarm, fixed, naive_margin.passed)


def _path_cells(verdict: str, scen: str, at_margin: Paths, at_zero: Paths, alarm: Cell,
                fixed: int | None, naive_passed: np.ndarray) -> list[Cell]:
    """The rates of the module docstring from a design's paths at the margin and at no
    difference (`alarm`: its rate of the wrong decision at 0), the fixed design's seeds
    (when estimated) and the naive re-testing row beside them."""
    sims = len(at_zero.passed)
    cells = [rate_cell(verdict, scen, FALSE_PASS, at_margin.passed, NOMINAL),
             rate_cell(verdict, scen, ANY_LOOK, at_margin.pass_any_look, NOMINAL), alarm,
             rate_cell(verdict, scen, POWER_AT_0, at_zero.passed),
             mean_cell(verdict, scen, SEEDS_AT_0, at_zero.seeds, "seeds")]
    if fixed is not None:
        cells.append(Cell(verdict, scen, FIXED_SEEDS, float(fixed), sims, unit="seeds",
                          value_se=0.0))
    naive = f"{NAIVE}: {verdict.removeprefix('sequential ')}"
    return [*cells, _naive(naive, scen, naive_passed)]


def sequential_gate_cells(sims: int, design: SequentialDesign, n_ref: int, ratio: float,
                          dist: str, seed: int) -> list[Cell]:
    verdict = "sequential gate (per-seed value)"
    scen = _scenario(design, ratio, dist, f" vs {n_ref} reference seeds")
    rng = rng_for(seed, "sequential gate", design_name(design), n_ref, ratio, dist)
    new = ratio * unit_noise(rng, dist, (sims, design.max_seeds))
    ref = unit_noise(rng, dist, (sims, n_ref))
    planned = design_boundaries(design, fixed_seeds=n_ref)
    at_margin = gate_paths(planned, new - DELTA_SD, ref, DELTA_SD)
    at_zero = gate_paths(planned, new, ref, DELTA_SD)
    naive_margin = gate_paths(naive_boundaries(design), new - DELTA_SD, ref, DELTA_SD)
    power = float(at_zero.passed.mean())
    fixed = gate_seeds_needed(given_spread(1.0), DELTA_SD, power, n_ref, sims,
                              max_seeds=PLAN_MAX_SEEDS) if \
        ratio == 1 and dist == NORMAL else None
    alarm = rate_cell(verdict, scen, "REGRESSION at 0", at_zero.decision == REGRESSION)
    return _path_cells(verdict, scen, at_margin, at_zero, alarm, fixed, naive_margin.passed)


def _naive(verdict: str, scen: str, passed: np.ndarray) -> Cell:
    """Naive re-testing's false-pass rate, against the nominal it does not keep."""
    return replace(rate_cell(verdict, scen, FALSE_PASS, passed, NOMINAL), shown_only=True)
