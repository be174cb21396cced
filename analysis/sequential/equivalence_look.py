"""Sequential equivalence at one look: the pairs analysis.verdicts.pairing compares, each
decided on its repeated confidence intervals (analysis.sequential.rci)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from analysis.inputs.load import DEFAULT_LAST_N, RunSet
from analysis.scoring.grouping import analyse
from analysis.scoring.scores import GroupScores
from analysis.sequential.design import SequentialDesign
from analysis.sequential.look_record import Look
from analysis.sequential.planning import (
    MIN_COMPARABLE_POWER,
    equivalence_needs_text,
    fixed_equivalence_seeds,
    sequential_equivalence_power,
)
from analysis.sequential.rci import UNDECIDED, different_alpha, equivalence_decisions
from analysis.sequential.spending import t_scale
from analysis.stats.welch import WelchInterval
from analysis.verdicts.equivalence import PASS, EquivalenceResult, equivalence
from analysis.verdicts.margins import margin
from analysis.verdicts.pairing import pair_groups
from analysis.verdicts.seed_metrics import SEED_METRICS
from analysis.verdicts.seedplan import Spread, given_spread
from runrecord import Run


def equivalence_looks(runs: Sequence[Run], design: SequentialDesign, look: int, *,
                      delta: float | None = None, metric: str = "iqm",
                      reference: str | None = None, group_by: str = "layout.name",
                      last_n: int = DEFAULT_LAST_N,
                      normalisers: Mapping[str, tuple[float, float]] | None = None,
                      allow_protocol_mismatch: bool = False) -> list[Look]:
    """One Look per (group, reference) pair of every suite of `runs` (the pairs
    `python -m analysis equivalence` compares), at look index `look`."""
    a = analyse(RunSet(included=list(runs)), group_by=group_by, last_n=last_n,
                normalisers=normalisers, allow_protocol_mismatch=allow_protocol_mismatch)
    out: list[Look] = []
    for name, suite in zip(a.suite_names, a.suites, strict=True):
        m = margin(name, delta, normalisers)
        for group, ref in pair_groups(suite, reference=reference).pairs:
            res = equivalence(group, ref, m.value, margin=m.describe(),
                              metric=SEED_METRICS[metric], metric_name=metric)
            out.append(pair_look(res, group, ref, design, look, f"{name}: ", metric))
    return out


def pair_look(res: EquivalenceResult, group: GroupScores, ref: GroupScores,
              design: SequentialDesign, look: int, prefix: str, metric: str) -> Look:
    """The Look of one pair from its fixed-design result (Welch diff, se, df per metric)."""
    seeds = design.seeds_at_looks()
    last = look >= len(seeds)
    counts = (len(res.seeds_a), len(res.seeds_b))
    c_pass = design.boundary(look, seeds=counts)
    c_diff = design.boundary(look, different_alpha(2, design.alpha), seeds=counts)
    ws = (res.final, res.auc)
    diff, se, df = (np.array([[getattr(w, x)] for w in ws]) for x in ("diff", "se", "df"))
    decisions, reach = equivalence_decisions(diff, se, df, res.delta, c_pass, c_diff, last)
    decision, statistic = str(decisions[0]), float(reach[0])
    if res.bitwise.identical:
        decision, statistic = PASS, 0.0
    subject = f"{prefix}{res.group_a} vs {res.group_b}"
    names = ("final", "AUC")
    lines = [f"{name} diff {w.diff:+.3f} {_interval(w, c_pass)}"
             for name, w in zip(names, ws, strict=True)]
    detail = (f"largest |end| of the repeated {1 - 2 * design.alpha:.0%} CIs "
              f"{f'{statistic:.3f}' if np.isfinite(statistic) else 'n/a'}; "
              + "; ".join(f"{name}: {_interval_design(w, c_pass, c_diff)}"
                          for name, w in zip(names, ws, strict=True)))
    bitwise = "; records bitwise identical" if res.bitwise.identical else ""
    spread = _spread(group, ref, metric)
    fixed = needs = None
    if spread is not None:
        power = sequential_equivalence_power(design, spread, res.delta)
        fixed = fixed_equivalence_seeds(spread, res.delta, power) \
            if power >= MIN_COMPARABLE_POWER else None
        if last and decision == UNDECIDED:
            needs = equivalence_needs_text(spread, res.delta, res.final.diff)
    if res.bitwise.identical:  # the evidence is the identity: no interval beside it
        text = (f"equivalence look {look}/{len(seeds)} {subject}: PASS (bitwise identical): "
                f"every paired record matches bit for bit, so the difference is exactly 0 "
                f"on every seed (final and AUC); no interval is needed; "
                f"{len(res.seeds_a)} vs {len(res.seeds_b)} seeds")
        return Look("equivalence", subject, look, {res.group_a: len(res.seeds_a),
                                                   res.group_b: len(res.seeds_b)},
                    0.0, float(res.delta), decision, text, "", fixed)
    text = (f"equivalence look {look}/{len(seeds)} {subject}: {decision}; "
            + "; ".join(lines) + f"; delta {res.margin or f'{res.delta:g}'}"
            + f"; {len(res.seeds_a)} vs {len(res.seeds_b)} seeds{bitwise}")
    return Look("equivalence", subject, look, {res.group_a: len(res.seeds_a),
                                               res.group_b: len(res.seeds_b)},
                statistic, float(res.delta), decision, text, needs or "", fixed, detail)


def _interval(w: WelchInterval, c_pass: float) -> str:
    """`repeated CI [lo, hi]`, or why there is none."""
    if not np.isfinite(w.se):
        return "no repeated CI (a side with one seed has no spread)"
    t = float(t_scale(c_pass, w.df))
    return f"repeated CI [{w.diff - t * w.se:+.3f}, {w.diff + t * w.se:+.3f}]"


def _interval_design(w: WelchInterval, c_pass: float, c_diff: float) -> str:
    """How the repeated CI is built: `t 4.30, 2.0 df; DIFFERENT when +-6.96 se excludes
    0` (the look's detail, --verbose)."""
    if not np.isfinite(w.se):
        return "no spread"
    t, t_diff = (float(t_scale(c, w.df)) for c in (c_pass, c_diff))
    return f"t {t:.2f}, {w.df:.1f} df; DIFFERENT when +-{t_diff:.2f} se excludes 0"


def _spread(group: GroupScores, ref: GroupScores, metric: str) -> Spread | None:
    """Pooled per-seed spread of the pair's two metrics (None with < 2 seeds a side or
    no spread at all)."""
    f = SEED_METRICS[metric]
    blocks = [np.stack([f(g.final, g.tasks), f(g.auc, g.tasks)], axis=1) for g in (group, ref)]
    if min(len(b) for b in blocks) < 2:
        return None
    centred = np.concatenate([b - b.mean(axis=0) for b in blocks])
    cov = centred.T @ centred / (len(centred) - 2)
    sd_f, sd_a = float(np.sqrt(cov[0, 0])), float(np.sqrt(cov[1, 1]))
    if not (sd_f > 0 and sd_a > 0):
        return None
    rho = float(np.clip(cov[0, 1] / (sd_f * sd_a), -1.0, 1.0))
    return given_spread(sd_f, sd_a, rho)
