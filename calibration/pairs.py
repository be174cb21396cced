"""Calibration of the per-seed verdicts (the regression gate and equivalence) on two
sides of per-seed values: every simulated draw is decided by the verdicts' own
vectorised cores (analysis.verdicts.regression.regression_lower_bound and
published_lower_bound, analysis.verdicts.equivalence.equivalence_decision).

Units: the reference side's per-seed sd is 1 and the margin delta is 1 (rates at the
margin do not depend on delta / sd; power does).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from analysis.verdicts.equivalence import DIFFERENT, PASS, equivalence_decision
from analysis.verdicts.regression import published_lower_bound, regression_lower_bound
from calibration.cells import FALSE_ALARM, FALSE_PASS, POWER, Cell, case_cells
from calibration.draws import NORMAL, correlated_pair, rng_for, unit_noise

DELTA = 1.0
CONFIDENCE = 0.95
NOMINAL = 0.05

GATE_SHIFTS = ((FALSE_PASS, -DELTA, NOMINAL), (FALSE_ALARM, 0.0, None),
               (POWER, -DELTA / 2, None))
EQUIVALENCE_SHIFTS = ((FALSE_PASS, DELTA, NOMINAL), (FALSE_ALARM, 0.0, NOMINAL),
                      (POWER, DELTA / 2, None))


def scenario_name(n_new: int, n_ref: int, ratio: float, dist: str) -> str:
    tail = "" if dist == NORMAL else f", {dist}"
    return f"{n_new} vs {n_ref} seeds, sd ratio {ratio:g}{tail}"


def _sides(seed: int, key: tuple, sims: int, n_new: int, n_ref: int, ratio: float,
           dist: str) -> tuple[np.ndarray, np.ndarray]:
    """Noise of the new side (sd `ratio`) and of the reference (sd 1), mean 0."""
    rng = rng_for(seed, *key)
    return ratio * unit_noise(rng, dist, (sims, n_new)), unit_noise(rng, dist, (sims, n_ref))


def _gate_cells(verdict: str, scen: str, sims: int,
                lower_bound: Callable[[float], np.ndarray]) -> list[Cell]:
    """The gate's three rates from `lower_bound(shift)`, the one-sided lower bounds of the
    draws with the new side shifted by `shift`: a true drop of delta (PASS is a false
    pass), no difference (REGRESSION is a false alarm; no nominal bound: the gate tests
    non-inferiority) and a drop of delta / 2 (P(PASS): power). A refusal refuses all."""
    def hits(rate: str, shift: float) -> np.ndarray:
        passed = lower_bound(shift) > -DELTA
        return ~passed if rate == FALSE_ALARM else passed

    return case_cells(verdict, scen, sims, GATE_SHIFTS, hits)


def gate_pair_cells(sims: int, n_new: int, n_ref: int, ratio: float, dist: str, seed: int,
                    verdict: str = "gate (per-seed value)") -> list[Cell]:
    """The gate at a true drop of delta (PASS is a false pass), at no difference
    (REGRESSION is a false alarm; no nominal bound: the gate tests non-inferiority) and
    at a drop of delta / 2 (P(PASS): power)."""
    scen = scenario_name(n_new, n_ref, ratio, dist)
    new, ref = _sides(seed, ("gate", n_new, n_ref, ratio, dist), sims, n_new, n_ref, ratio,
                      dist)
    return _gate_cells(verdict, scen, sims,
                       lambda shift: regression_lower_bound(new + shift, ref, CONFIDENCE)[1])


def gate_published_cells(sims: int, n_new: int, n_published: int, ratio: float, seed: int
                         ) -> list[Cell]:
    """The gate against a published number that is the mean of `n_published` seeds
    (given as mean ± sd, as the paper's tables are)."""
    verdict = "gate vs published mean ± sd"
    scen = f"{n_new} new vs published {n_published}-seed mean ± sd, sd ratio {ratio:g}"
    new, pub = _sides(seed, ("published", n_new, n_published, ratio), sims, n_new,
                      n_published, ratio, NORMAL)
    pub_mean, pub_sd = pub.mean(axis=1), pub.std(axis=1, ddof=1)
    return _gate_cells(verdict, scen, sims, lambda shift: published_lower_bound(
        new + shift, pub_mean, pub_sd, n_published, CONFIDENCE)[1])


def equivalence_pair_cells(sims: int, n_a: int, n_b: int, ratio: float, dist: str,
                           seed: int) -> list[Cell]:
    """Equivalence on two correlated metrics (final and AUC): PASS at a difference of
    delta on one metric (false pass), DIFFERENT at no difference (false alarm), PASS at
    delta / 2 (power)."""
    verdict = "equivalence (final + AUC)"
    scen = scenario_name(n_a, n_b, ratio, dist)
    rng = rng_for(seed, "equivalence", n_a, n_b, ratio, dist)
    a1, a2 = (ratio * z for z in correlated_pair(rng, dist, (sims, n_a)))
    b1, b2 = correlated_pair(rng, dist, (sims, n_b))
    return case_cells(verdict, scen, sims, EQUIVALENCE_SHIFTS, lambda rate, shift: (
        equivalence_decision(a1 + shift, b1, a2, b2, DELTA).verdict
        == (DIFFERENT if rate == FALSE_ALARM else PASS)))
