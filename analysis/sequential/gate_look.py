"""The sequential regression gate at one look: per system and suite, the sweep's runs
(growing) against fixed reference runs, through the fixed gate's checks and numbers
(analysis.verdicts.gate.gate), decided on the repeated bound (analysis.sequential.rci)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from analysis.inputs.load import DEFAULT_LAST_N
from analysis.scoring.scores import runs_by_suite
from analysis.sequential.design import SequentialDesign
from analysis.sequential.look_record import Look
from analysis.sequential.planning import (
    MIN_COMPARABLE_POWER,
    fixed_gate_seeds,
    gate_needs_text,
    sequential_gate_power,
)
from analysis.sequential.rci import UNDECIDED, gate_decisions
from analysis.sequential.spending import t_scale
from analysis.verdicts.equivalence import PASS, REGRESSION
from analysis.verdicts.gate import DEFAULT_GATE_METRIC, gate
from analysis.verdicts.regression import AGGREGATE_RULE, ReferenceSpread, RegressionResult
from analysis.verdicts.seedplan import given_spread
from runrecord import Run


def gate_looks(runs: Sequence[Run], reference_runs: Sequence[Run], design: SequentialDesign,
               look: int, *, delta: float | None = None, metric: str = DEFAULT_GATE_METRIC,
               layouts: Sequence[str] | None = None, last_n: int = DEFAULT_LAST_N,
               normalisers: Mapping[str, tuple[float, float]] | None = None,
               allow_protocol_mismatch: bool = False,
               spread: ReferenceSpread = ReferenceSpread(),
               regression_alpha: float | None = None) -> list[Look]:
    """One Look per (system, suite) of `runs` against the reference runs of the same
    system and suite, on `layouts` (default: the layouts the new runs cover). The fixed
    gate's checks raise AnalysisError (exit 2) as they do for `harness regress`.
    regression_alpha: what REGRESSION spends when it is less than the design's alpha
    (the looks over training time took the rest: analysis.sequential.curve_design)."""
    out: list[Look] = []
    systems = sorted({str(r.manifest.get("system")) for r in runs})
    for system in systems:
        mine = [r for r in runs if str(r.manifest.get("system")) == system]
        ref_mine = [r for r in reference_runs if str(r.manifest.get("system")) == system]
        ref_by_suite = runs_by_suite(ref_mine) if ref_mine else {}
        for suite, new in runs_by_suite(mine).items():
            chosen = list(layouts) if layouts is not None else sorted(
                {str((r.manifest.get("layout") or {}).get("name")) for r in new})
            res = gate(new, ref_by_suite.get(suite, []), delta=delta, metric=metric,
                       layouts=chosen, confidence=1 - design.alpha, last_n=last_n,
                       normalisers=normalisers,
                       allow_protocol_mismatch=allow_protocol_mismatch, spread=spread).result
            out.append(result_look(res, design, look, f"{system} {suite}", regression_alpha))
    return out


def result_look(res: RegressionResult, design: SequentialDesign, look: int, subject: str,
                regression_alpha: float | None = None) -> Look:
    """The Look of one gate from the fixed gate's result (diff, se, df, rules);
    REGRESSION on the boundary of `regression_alpha` when given."""
    seeds = design.seeds_at_looks()
    last = look >= len(seeds)
    c = design.boundary(look, fixed_seeds=res.n_reference,
                        seeds=(res.n_new, res.n_reference))
    decisions, lower, upper = gate_decisions(res.diff, res.se, res.df, res.delta, c, last)
    decision = str(decisions)
    if regression_alpha is not None and decision == REGRESSION:
        c_fail = design.boundary(look, alpha=regression_alpha, fixed_seeds=res.n_reference,
                                 seeds=(res.n_new, res.n_reference))
        _, _, upper_fail = gate_decisions(res.diff, res.se, res.df, res.delta, c_fail, last)
        if not float(upper_fail) < -res.delta:
            decision = UNDECIDED if last else "CONTINUE"
    other_rules = [r for r in res.rules if r != AGGREGATE_RULE]
    if other_rules and decision == PASS:
        decision = REGRESSION if last else "CONTINUE"
    elif other_rules and last:
        decision = REGRESSION
    t = float(t_scale(c, res.df)) if math.isfinite(res.df) else c
    sd = res.se / math.sqrt(1 / res.n_new + 1 / res.n_reference) if res.se > 0 else math.nan
    fixed = needs = None
    if math.isfinite(sd) and sd > 0:
        spread = given_spread(sd)
        power = sequential_gate_power(design, sd, res.n_reference, res.delta)
        fixed = fixed_gate_seeds(spread, res.delta, power, res.n_reference) \
            if power >= MIN_COMPARABLE_POWER else None
        if last and decision == UNDECIDED:
            needs = gate_needs_text(spread, res.delta, res.n_reference, res.diff)
    fixed_says = ""
    if last and decision == UNDECIDED:
        fixed_says = f"; the fixed gate at the cap says {res.verdict}"
    rules = f"; rule(s) fired: {', '.join(other_rules)}" if other_rules else ""
    text = (f"gate look {look}/{len(seeds)} {subject}: {decision}; new - reference "
            f"{res.diff:+.4f}, repeated {1 - design.alpha:.0%} lower bound "
            f"{float(lower):+.4f} (upper {float(upper):+.4f}) vs "
            f"-delta {-res.delta:+.4f} (delta {res.margin or f'{res.delta:g}'}); "
            f"{res.n_new} new vs {res.n_reference} reference seeds{rules}{fixed_says}")
    detail = f"repeated bounds: t {t:.2f}, {res.df:.1f} df" \
        + (f"; {res.design}" if res.design else "")
    return Look("gate", subject, look, {"new": res.n_new, "reference": res.n_reference},
                float(lower), -float(res.delta), decision, text, needs or "", fixed, detail)
