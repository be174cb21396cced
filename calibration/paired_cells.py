"""Calibration of the pairing by seed (analysis.verdicts.seed_pairing): the gate and
equivalence on two sides that ran the same seeds, decided paired (analysis.stats.welch,
through the verdicts' own cores: regression_lower_bound(paired=True), equivalence_decision) and
unpaired (Welch) on the same draws, at a within-seed correlation rho of the two sides'
per-seed values: 0 (runs of a seed drift apart: other numerics), 0.5, 0.9 (they stay
together).

Units as calibration.pairs: per-seed sd 1 on both sides, margin delta 1. Rates:
the false pass at a true difference of delta (bound: nominal + 3 MC SE, for both tests at
every rho) and P(PASS) at delta / 2 (power: the gain, or at rho 0 and few seeds the cost,
of pairing); for equivalence also DIFFERENT at no difference (false alarm, bound).
"""

from __future__ import annotations

from analysis.verdicts.equivalence import DIFFERENT, PASS, equivalence_decision
from analysis.verdicts.regression import regression_lower_bound
from calibration.cells import FALSE_ALARM, FALSE_PASS, POWER, Cell, rate_cell
from calibration.draws import METRIC_CORRELATION, NORMAL, correlated_pair, mixed, rng_for
from calibration.pairs import CONFIDENCE, DELTA, NOMINAL

PAIRED = "paired by seed"
WELCH = "Welch"
CORRELATIONS = (0.0, 0.5, 0.9)


def scenario(n: int, rho: float) -> str:
    return f"{n} vs {n} seeds (the same seeds), within-seed correlation {rho:g}"


def paired_gate_cells(sims: int, n: int, rho: float, seed: int) -> list[Cell]:
    """The gate, paired and Welch, on the same draws."""
    rng = rng_for(seed, "paired gate", n, rho)
    new, ref = correlated_pair(rng, NORMAL, (sims, n), rho)
    out: list[Cell] = []
    for design, paired in ((PAIRED, True), (WELCH, False)):
        verdict = f"gate (per-seed value), {design}"
        for rate, shift, nominal in ((FALSE_PASS, -DELTA, NOMINAL),
                                     (POWER, -DELTA / 2, None)):
            lower = regression_lower_bound(new + shift, ref, CONFIDENCE, paired=paired)[1]
            out.append(rate_cell(verdict, scenario(n, rho), rate, lower > -DELTA, nominal))
    return out


def paired_equivalence_cells(sims: int, n: int, rho: float, seed: int) -> list[Cell]:
    """Equivalence on two metrics (final and AUC, correlated METRIC_CORRELATION within a
    side), paired and Welch, on the same draws."""
    rng = rng_for(seed, "paired equivalence", n, rho)
    a1, b1 = correlated_pair(rng, NORMAL, (sims, n), rho)
    a2, b2 = correlated_pair(rng, NORMAL, (sims, n), rho)
    # the second metric shares some of the first's noise
    a2, b2 = mixed(a1, a2, METRIC_CORRELATION), mixed(b1, b2, METRIC_CORRELATION)
    out: list[Cell] = []
    for design, paired in ((PAIRED, True), (WELCH, False)):
        verdict = f"equivalence (final + AUC), {design}"
        for rate, shift, nominal in ((FALSE_PASS, DELTA, NOMINAL),
                                     (FALSE_ALARM, 0.0, NOMINAL), (POWER, DELTA / 2, None)):
            verdicts = equivalence_decision(a1 + shift, b1, a2, b2, DELTA, paired=paired).verdict
            hits = verdicts == (DIFFERENT if rate == FALSE_ALARM else PASS)
            out.append(rate_cell(verdict, scenario(n, rho), rate, hits, nominal))
    return out


def paired_cells(sims: int, seeds: tuple[int, ...], seed: int,
                 correlations: tuple[float, ...] = CORRELATIONS) -> list[Cell]:
    out: list[Cell] = []
    for n in seeds:
        for rho in correlations:
            out += paired_gate_cells(sims, n, rho, seed)
            out += paired_equivalence_cells(sims, n, rho, seed)
    return out
