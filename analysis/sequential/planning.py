"""What a look costs against the fixed design: the seed planner's answer
(analysis.verdicts.seedplan) for the spread seen at the look, and the sequential
design's own power at that spread, simulated through the same decision cores
(analysis.sequential.rci); and `design_plan_lines`, what `python -m analysis
plan-sequential` prints: the boundaries per look and, per verdict, P(PASS) by the cap,
expected seeds, the fixed design's seeds and the false-pass rate at the margin."""

from __future__ import annotations

import time
from collections.abc import Mapping

import numpy as np

from analysis.sequential.design import SequentialDesign
from analysis.sequential.rci import different_alpha
from analysis.sequential.simulate import (
    Paths,
    design_boundaries,
    equivalence_paths,
    gate_paths,
    normal_metrics,
)
from analysis.sequential.spending import spent_alpha, t_scale
from analysis.verdicts.margins import margin
from analysis.verdicts.seedplan import (
    Spread,
    equivalence_margins,
    gate_margins,
    given_spread,
    seeds_needed,
)

PLAN_SIMS = 4_000
"""Draws per simulated power (a look's estimate, not a table: +-1 point is enough)."""
PLAN_TARGET = 0.8
MIN_COMPARABLE_POWER = 0.5
"""Below this simulated power of the sequential design at the spread seen, "the fixed
design of equal power" is left out (None): a fixed design that passes as rarely needs
few seeds, which would read as cheaper than a design that cannot pass either."""
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
                            sims: int = PLAN_SIMS, true_diff: float = 0.0) -> int | None:
    """Seeds per side the fixed TOST (both metrics) needs for `target` power (planner)
    when the final metric truly differs by `true_diff`."""
    def power(n: int) -> float:
        return float(np.mean(equivalence_margins(spread, n, sims, true_diff=true_diff)
                             < delta))
    return seeds_needed(power, target, max_seeds=PLAN_MAX_SEEDS)


def fixed_gate_seeds(spread: Spread, delta: float, target: float, n_ref: int | None,
                     sims: int = PLAN_SIMS, true_diff: float = 0.0) -> int | None:
    """New seeds the fixed gate needs for `target` power against `n_ref` reference seeds
    (None: as many reference seeds as new ones) at a true difference `true_diff`."""
    def power(n: int) -> float:
        return float(np.mean(gate_margins(spread, n, n_ref, sims, true_diff=true_diff)
                             < delta))
    return seeds_needed(power, target, max_seeds=PLAN_MAX_SEEDS)


def equivalence_needs_text(spread: Spread, delta: float, seen: float) -> str:
    """The cap line's estimate for equivalence: seeds per side for PLAN_TARGET power of
    the fixed TOST if the true difference is 0, and at the final-score difference seen."""
    at_zero = fixed_equivalence_seeds(spread, delta, PLAN_TARGET)
    at_seen = fixed_equivalence_seeds(spread, delta, PLAN_TARGET, true_diff=abs(seen)) \
        if abs(seen) < delta else None
    return _needs(at_zero, at_seen, seen, delta, f"per-seed sd {spread.sd_group:.3g}",
                  "seeds per side")


def gate_needs_text(spread: Spread, delta: float, n_ref: int, seen: float) -> str:
    """The gate's cap estimate: new seeds against the fixed reference (if the true
    difference is 0, and at the difference seen); when no number of new seeds gets there
    (the reference's own noise dominates), seeds on both sides."""
    sd_text = f"per-seed sd {spread.sd_seed:.3g}"
    at_zero = fixed_gate_seeds(spread, delta, PLAN_TARGET, n_ref)
    where = f"new seeds against the {n_ref} reference seeds"
    ref: int | None = n_ref
    if at_zero is None:
        ref, where = None, ("seeds on BOTH sides (no number of new seeds alone gets there: "
                            "the reference's own noise dominates)")
        at_zero = fixed_gate_seeds(spread, delta, PLAN_TARGET, None)
    at_seen = fixed_gate_seeds(spread, delta, PLAN_TARGET, ref, true_diff=seen) \
        if seen > -delta else None
    return _needs(at_zero, at_seen, seen, delta, sd_text, where)


def _count(seeds: int | None) -> str:
    return f"about {seeds}" if seeds is not None else f"more than {PLAN_MAX_SEEDS}"


def _needs(at_zero: int | None, at_seen: int | None, seen: float, delta: float,
           sd_text: str, where: str) -> str:
    if abs(seen) < delta or seen > 0:
        seen_text = f"{_count(at_seen)} at the difference seen ({seen:+.3g})"
    else:
        seen_text = (f"at the difference seen ({seen:+.3g}, beyond the margin) no number "
                     "of seeds would pass")
    return (f"the fixed design would need {_count(at_zero)} {where} for "
            f"{PLAN_TARGET:.0%} power if the true difference is 0, {seen_text} (seed "
            f"planner, {sd_text})")


def boundary_table(design: SequentialDesign, reference_seeds: int) -> str:
    """Per look: seeds, information, alpha spent, the PASS boundary (normal, and as t at
    the 2(n - 1) df of equal spreads), DIFFERENT's, and the gate's vs the reference."""
    seeds = design.seeds_at_looks()
    t = design.information_fractions()
    spent = spent_alpha(t, design.alpha, design.spending)
    c, c_diff = design.boundaries(), design.boundaries(different_alpha(2, design.alpha))
    c_gate = design.boundaries(fixed_seeds=reference_seeds)
    head = ["look", "seeds per side", "information", "alpha spent", "PASS c",
            "as t at 2(n-1) df", "DIFFERENT c", f"gate c (vs {reference_seeds} reference)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for k, n in enumerate(seeds):
        lines.append(f"| {k + 1} | {n} | {t[k]:.2f} | {spent[k]:.4f} | {c[k]:.3f} | "
                     f"{float(t_scale(c[k], 2 * (n - 1))):.2f} | {c_diff[k]:.3f} | "
                     f"{c_gate[k]:.3f} |")
    return "\n".join(lines)


def _row(name: str, delta: float, zero: Paths, at_margin: Paths, fixed: int | None) -> str:
    fixed_text = str(fixed) if fixed is not None else "> 100"
    return (f"| {name} | {delta:g} | {zero.passed.mean():.1%} | {zero.seeds.mean():.2f} | "
            f"{fixed_text} | {at_margin.passed.mean():.3f} |")


def design_plan_lines(design: SequentialDesign, spread: Spread, suite: str, *,
                      delta: float | None = None, gate_delta: float | None = None,
                      reference_seeds: int | None = None,
                      normalisers: Mapping[str, tuple[float, float]] | None = None,
                      sims: int = 20_000, seed: int = 0) -> list[str]:
    """The design, its boundary table and its cost table (module docstring). Margins:
    the suite's defaults unless given (the gate's defaults to `delta`); the gate's
    reference stays at `reference_seeds` (default: the cap)."""
    design.validate()
    start = time.perf_counter()
    eq = margin(suite, delta, normalisers)
    gate = margin(suite, gate_delta if gate_delta is not None else delta, normalisers)
    m = design.max_seeds if reference_seeds is None else int(reference_seeds)
    rng = np.random.default_rng([seed, design.max_seeds, m, 2024])
    sds, rho = (spread.sd_group, spread.sd_auc), spread.correlation
    a, b = (normal_metrics(rng, sims, design.max_seeds, sds, rho) for _ in range(2))
    shifted = a.copy()
    shifted[0] += eq.value
    planned = design_boundaries(design)
    zero = equivalence_paths(planned, a, b, eq.value)
    eq_row = _row("equivalence (final + AUC)", eq.value, zero,
                  equivalence_paths(planned, shifted, b, eq.value),
                  fixed_equivalence_seeds(spread, eq.value, float(zero.passed.mean()), sims))
    new = spread.sd_seed * rng.standard_normal((sims, design.max_seeds))
    ref = spread.sd_seed * rng.standard_normal((sims, m))
    gate_b = design_boundaries(design, fixed_seeds=m)
    g_zero = gate_paths(gate_b, new, ref, gate.value)
    gate_row = _row(f"gate (vs {m} reference seeds)", gate.value, g_zero,
                    gate_paths(gate_b, new - gate.value, ref, gate.value),
                    fixed_gate_seeds(given_spread(spread.sd_seed), gate.value,
                                     float(g_zero.passed.mean()), m, sims))
    head = ["verdict", "delta", "P(PASS) by the cap at 0", "expected seeds per side at 0",
            "fixed design: seeds for the same power", "false pass at the margin"]
    return [f"design: {design.describe()}",
            f"margins: equivalence {eq.describe()}; regression gate {gate.describe()}",
            f"spread: {spread.describe()}",
            boundary_table(design, m), "",
            f"normal per-seed values, {sims} simulations, seed {seed}:",
            "| " + " | ".join(head) + " |", "|" + "---|" * len(head), eq_row, gate_row,
            f"planned in {time.perf_counter() - start:.1f} s"]
