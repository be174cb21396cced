"""The interim analysis of a sweep: `sweep_looks` gives every verdict's Look at one look
index, from the sweep's COMPLETED runs (the harness owns batches, storage and resume).

A sweep stops when every Look of its latest look index is decided (decision !=
CONTINUE); the last planned look always decides (a verdict word or UNDECIDED). A subject
decided at an earlier look stays decided: pass the earlier Looks as `previous` and its
Look is repeated at the new index with the first decision (the error rates are those of
the first decision; later looks never overturn it).

Each verdict's look: equivalence decides the pairs analysis.verdicts.compare compares;
the gate runs the sweep's (growing) runs against fixed reference runs through the fixed
gate's checks and numbers (analysis.verdicts.gate.gate); both on the repeated intervals
of analysis.sequential.design.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from analysis.errors import AnalysisError
from analysis.inputs.load import DEFAULT_LAST_N, RunSet
from analysis.scoring.grouping import analyse
from analysis.scoring.scores import GroupScores, runs_by_suite
from analysis.sequential.curves import GateOptions
from analysis.sequential.design import (
    CONTINUE,
    MIN_COMPARABLE_POWER,
    PLAN_MAX_SEEDS,
    UNDECIDED,
    Look,
    SequentialDesign,
    equivalence_decisions,
    equivalence_needs_text,
    gate_decisions,
    gate_needs_text,
    sequential_equivalence_power,
    sequential_gate_power,
)
from analysis.sequential.spending import t_scale
from analysis.verdicts.compare import pair_groups
from analysis.verdicts.equivalence import PASS, REGRESSION, EquivalenceResult, equivalence
from analysis.verdicts.gate import DEFAULT_GATE_METRIC
from analysis.verdicts.margins import margin
from analysis.verdicts.regression import AGGREGATE_RULE, ReferenceSpread, RegressionResult
from analysis.verdicts.seed_pairing import SEED_METRICS
from analysis.verdicts.seedplan import (
    equivalence_seeds_needed,
    gate_seeds_needed,
    given_spread,
    pooled_spread,
)
from runrecord import Run
from runrecord.words import signed

VERDICTS = ("equivalence", "gate")
"""The verdicts a sequential design decides (reproduce: not yet)."""


def sweep_looks(runs: Sequence[Run], design: SequentialDesign, look: int, *,
                verdicts: Sequence[str] = ("equivalence",),
                reference_runs: Sequence[Run] | None = None,
                delta: float | None = None, gate_delta: float | None = None,
                metric: str = "iqm", gate_metric: str = DEFAULT_GATE_METRIC,
                reference: str | None = None, layouts: Sequence[str] | None = None,
                group_by: str = "layout.name", last_n: int = DEFAULT_LAST_N,
                normalisers: Mapping[str, tuple[float, float]] | None = None,
                allow_protocol_mismatch: bool = False,
                spread: ReferenceSpread = ReferenceSpread(),
                previous: Sequence[Look] = (),
                regression_alpha: float | None = None) -> list[Look]:
    """All looks of one interim analysis of a sweep's COMPLETED runs at look index `look`
    (1-based; the caller guarantees every growing side has design.seeds_at_looks()[look-1]
    seeds, or the cap). Equivalence: one Look per pair of analysis.verdicts.compare
    (margin `delta`, per-seed `metric`, reference group `reference`). Gate: one Look per
    (system, suite), new = `runs`, reference = `reference_runs` (fixed; margin
    `gate_delta`, else `delta`, else the suite's; `gate_metric`, `layouts`, `spread` as
    analysis.verdicts.gate.gate). `previous`: Looks of earlier indices; a subject decided
    there keeps its first decision. regression_alpha: the gate's REGRESSION alpha when
    the looks over training time spend part of it (analysis.sequential.curves:
    TIME_SHARE). AnalysisError (exit 2) for a bad design or input."""
    design.validate()
    if isinstance(look, bool) or not isinstance(look, int) or not 1 <= look <= design.looks:
        raise AnalysisError(f"look must be a whole number in 1..{design.looks} for "
                            f"{design.describe()}, got {look!r}")
    unknown = [v for v in verdicts if v not in VERDICTS]
    if unknown:
        raise AnalysisError(f"sequential verdicts {unknown}; valid: {', '.join(VERDICTS)}")
    out: list[Look] = []
    if "equivalence" in verdicts:  # one Look per pair `python -m analysis equivalence` compares
        a = analyse(RunSet(included=list(runs)), group_by=group_by, last_n=last_n,
                    normalisers=normalisers, allow_protocol_mismatch=allow_protocol_mismatch)
        for name, suite in zip(a.suite_names, a.suites, strict=True):
            m = margin(name, delta, normalisers)
            for group, ref in pair_groups(suite, reference=reference).pairs:
                res = equivalence(group, ref, m.value, margin=m.describe(),
                                  metric=SEED_METRICS[metric], metric_name=metric)
                out.append(pair_look(res, group, ref, design, look, f"{name}: ", metric))
    if "gate" in verdicts:
        if not reference_runs:
            raise AnalysisError("the sequential gate needs reference runs (the fixed "
                                "reference side); none given")
        options = GateOptions(delta=gate_delta if gate_delta is not None else delta,
                              metric=gate_metric, layouts=layouts, last_n=last_n,
                              normalisers=normalisers,
                              allow_protocol_mismatch=allow_protocol_mismatch)
        out += gate_looks(runs, reference_runs, design, look, options, spread=spread,
                          regression_alpha=regression_alpha)
    for i, new in enumerate(out):  # the first earlier decision of its subject, repeated
        first = min((p for p in previous if p.verdict == new.verdict
                     and p.subject == new.subject and p.look < new.look and p.decided
                     and p.decision != UNDECIDED), key=lambda p: p.look, default=None)
        if first is not None:
            out[i] = replace(first, look=new.look, seeds=new.seeds,
                             text=f"{first.text} (decided at look {first.look}; kept)")
    return out


def pair_look(res: EquivalenceResult, group: GroupScores, ref: GroupScores,
              design: SequentialDesign, look: int, prefix: str, metric: str) -> Look:
    """The Look of one pair from its fixed-design result (Welch diff, se, df per metric)."""
    seeds = design.seeds_at_looks()
    last = look >= len(seeds)
    counts = (len(res.seeds_a), len(res.seeds_b))
    c_pass = design.boundary(look, seeds=counts)
    c_diff = design.boundary(look, design.different_alpha, seeds=counts)
    ws = (res.final, res.auc)
    diff, se, df = (np.array([[getattr(w, x)] for w in ws]) for x in ("diff", "se", "df"))
    decisions, reach = equivalence_decisions(diff, se, df, res.delta, c_pass, c_diff, last)
    decision, statistic = str(decisions[0]), float(reach[0])
    if res.bitwise.identical:
        decision, statistic = PASS, 0.0
    subject = f"{prefix}{res.group_a} vs {res.group_b}"
    lines, designs = [], []
    for name, w in (("final", res.final), ("AUC", res.auc)):
        if not np.isfinite(w.se):
            lines.append(f"{name} diff {signed(w.diff)} no repeated CI (a side with one seed "
                         "has no spread)")
            designs.append(f"{name}: no spread")
            continue
        t, t_diff = (float(t_scale(c, w.df)) for c in (c_pass, c_diff))
        lines.append(f"{name} diff {signed(w.diff)} repeated CI [{signed(w.diff - t * w.se)}, "
                     f"{signed(w.diff + t * w.se)}]")
        # how the repeated CI is built (the look's detail, --verbose)
        designs.append(f"{name}: t {t:.2f}, {w.df:.1f} df; DIFFERENT when +-{t_diff:.2f} se "
                       "excludes 0")
    detail = (f"largest |end| of the repeated {1 - 2 * design.alpha:.0%} CIs "
              f"{f'{statistic:.3f}' if np.isfinite(statistic) else 'n/a'}; "
              + "; ".join(designs))
    # the pooled per-seed spread of the pair's two metrics (none with < 2 seeds a side or
    # no spread at all)
    f = SEED_METRICS[metric]
    blocks = [np.stack([f(g.final, g.tasks), f(g.auc, g.tasks)], axis=1) for g in (group, ref)]
    sd_f, sd_a, rho, _ = pooled_spread(blocks) if min(map(len, blocks)) >= 2 \
        else (0.0, 0.0, 0.0, 0)
    fixed = needs = None
    if sd_f > 0 and sd_a > 0:
        spread = given_spread(sd_f, sd_a, rho)
        power = sequential_equivalence_power(design, spread, res.delta)
        fixed = equivalence_seeds_needed(spread, res.delta, power, max_seeds=PLAN_MAX_SEEDS) \
            if power >= MIN_COMPARABLE_POWER else None
        if last and decision == UNDECIDED:
            needs = equivalence_needs_text(spread, res.delta, res.final.diff)
    if res.bitwise.identical:  # the evidence is the identity: no interval beside it
        text = (f"equivalence look {look}/{len(seeds)} {subject}: PASS (bitwise identical): "
                f"every paired record matches bit for bit, so the difference is exactly 0 "
                f"on every seed (final and AUC); no interval is needed; "
                f"{len(res.seeds_a)} vs {len(res.seeds_b)} seeds")
        detail = ""
    else:
        text = (f"equivalence look {look}/{len(seeds)} {subject}: {decision}; "
                + "; ".join(lines) + f"; delta {res.margin or f'{res.delta:g}'}"
                + f"; {len(res.seeds_a)} vs {len(res.seeds_b)} seeds")
    return Look("equivalence", subject, look, {res.group_a: len(res.seeds_a),
                                               res.group_b: len(res.seeds_b)},
                statistic, float(res.delta), decision, text, needs or "", fixed, detail)


def gate_looks(runs: Sequence[Run], reference_runs: Sequence[Run], design: SequentialDesign,
               look: int, options: GateOptions, *, spread: ReferenceSpread = ReferenceSpread(),
               regression_alpha: float | None = None) -> list[Look]:
    """One Look per (system, suite) of `runs` against the reference runs of the same
    system and suite, on options.layouts (default: the layouts the new runs cover). The
    fixed gate's checks raise AnalysisError (exit 2) as they do for `harness regress`.
    regression_alpha: what REGRESSION spends when it is less than the design's alpha
    (the looks over training time took the rest: analysis.sequential.curves)."""
    out: list[Look] = []
    systems = sorted({str(r.manifest.get("system")) for r in runs})
    for system in systems:
        mine = [r for r in runs if str(r.manifest.get("system")) == system]
        ref_mine = [r for r in reference_runs if str(r.manifest.get("system")) == system]
        ref_by_suite = runs_by_suite(ref_mine) if ref_mine else {}
        for suite, new in runs_by_suite(mine).items():
            chosen = list(options.layouts) if options.layouts is not None else sorted(
                {str((r.manifest.get("layout") or {}).get("name")) for r in new})
            res = replace(options, layouts=chosen).gate(
                new, ref_by_suite.get(suite, []), confidence=1 - design.alpha, spread=spread)
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
            decision = UNDECIDED if last else CONTINUE
    other_rules = [r for r in res.rules if r != AGGREGATE_RULE]
    if other_rules and decision == PASS:
        decision = REGRESSION if last else CONTINUE
    elif other_rules and last:
        decision = REGRESSION
    t = float(t_scale(c, res.df)) if math.isfinite(res.df) else c
    sd = res.seed_sd
    fixed = needs = None
    if math.isfinite(sd) and sd > 0:
        spread = given_spread(sd)
        power = sequential_gate_power(design, sd, res.n_reference, res.delta)
        fixed = gate_seeds_needed(spread, res.delta, power, res.n_reference,
                                  max_seeds=PLAN_MAX_SEEDS) \
            if power >= MIN_COMPARABLE_POWER else None
        if last and decision == UNDECIDED:
            needs = gate_needs_text(spread, res.delta, res.n_reference, res.diff)
    fixed_says = ""
    if last and decision == UNDECIDED:
        fixed_says = f"; the fixed gate at the cap says {res.verdict}"
    rules = f"; rule(s) fired: {', '.join(other_rules)}" if other_rules else ""
    text = (f"gate look {look}/{len(seeds)} {subject}: {decision}; new - reference "
            f"{signed(res.diff, 4)}, repeated {1 - design.alpha:.0%} lower bound "
            f"{signed(float(lower), 4)} (upper {signed(float(upper), 4)}) vs "
            f"-delta {signed(-res.delta, 4)} (delta {res.margin or f'{res.delta:g}'}); "
            f"{res.n_new} new vs {res.n_reference} reference seeds{rules}{fixed_says}")
    detail = f"repeated bounds: t {t:.2f}, {res.df:.1f} df" \
        + (f"; {res.design}" if res.design else "")
    return Look("gate", subject, look, {"new": res.n_new, "reference": res.n_reference},
                float(lower), -float(res.delta), decision, text, needs or "", fixed, detail)
