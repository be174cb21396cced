"""`python -m analysis plan-sequential`: what a sequential design decides with, and what
it costs, at a given per-seed spread: its boundaries per look, and per verdict the
simulated P(PASS) by the cap and expected seeds per side at no difference, the seeds
the fixed design of the same power needs (the seed planner), and the false-pass rate at
the margin over all looks (normal per-seed values; analysis.sequential.simulate)."""

from __future__ import annotations

import time
from collections.abc import Mapping

import numpy as np

from analysis.sequential.design import SequentialDesign
from analysis.sequential.planning import fixed_equivalence_seeds, fixed_gate_seeds
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
from analysis.verdicts.seedplan import Spread, given_spread


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
