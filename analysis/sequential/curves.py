"""The regression gate looked at along training time: the design a sweep pre-registers
(`[regression] looks_at`), the plan it fixes for one gate before the candidate's runs
start (its boundaries), and the gate's decision at each look.

Look k < K reads the runs as they stood at its frame count (`truncated`) and decides
REGRESSION when the contrast's repeated upper bound is below 0 (`fails` at the plan's
boundary), else CONTINUE. The boundaries spend `alpha` over the looks' frame fractions by
`spending`, under the looks' joint law: their correlation estimated from the reference's
own curves (the same seeds at every look), or the union bound when the reference has too
few seeds for that (analysis.sequential.spending). The last look (the full budget) is the
fixed gate on the whole records (analysis.verdicts.gate.gate): REGRESSION when the
aggregate's repeated upper bound is below -delta at the plan's last boundary or another
rule of the gate fires (per-game, untrimmed mean, COLLAPSED); PASS when the fixed gate
passes (a late collapse cannot be seen early, and stopping only to fail leaves the PASS
error rate as it is); else UNDECIDED. Every look also runs the fixed gate's checks (one
system and suite per side, the same games and protocol, every selected layout).

With adaptive seeds (harness run --until-decided) the gate's alpha for REGRESSION is
split: TIME_SHARE of it for the looks over training time (the first batch of seeds),
the rest for the looks over seeds (Bonferroni: the two families together keep alpha).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
from scipy import stats

from analysis.errors import AnalysisError, TooFewSeeds
from analysis.inputs.facts import truncated
from analysis.inputs.load import DEFAULT_LAST_N, RunSet
from analysis.scoring.grouping import analyse, layout_names
from analysis.scoring.scores import collapse_seed_copies
from analysis.sequential.design import CONTINUE, CURVE_VERDICT, Look
from analysis.sequential.spending import (
    CANONICAL,
    ESTIMATED,
    QMC_POINTS,
    SPENDING,
    UNION,
    as_correlation,
    boundaries,
    spent_alpha,
    t_scale,
)
from analysis.stats.welch import half_width
from analysis.verdicts.equivalence import PASS, REGRESSION, UNDECIDED
from analysis.verdicts.gate import DEFAULT_GATE_METRIC, chosen_groups, gate, gate_metric
from analysis.verdicts.margins import margin
from analysis.verdicts.regression import AGGREGATE_RULE, RegressionResult, regression_lower_bound
from analysis.verdicts.seed_pairing import SEED_METRICS
from runrecord import Run
from runrecord.words import signed

MAX_CURVE_LOOKS = 12
TIME_SHARE = 0.5
"""With adaptive seeds: the share of the gate's REGRESSION alpha spent along training
time; the looks over seeds spend the rest (their PASS keeps the whole alpha)."""
DEFAULT_SPENDING = "pocock"
"""Pocock: nearly equal boundaries, so a broken learner fails at the first looks; the
final REGRESSION boundary pays for it (PASS does not: it is the fixed gate's)."""


def min_reference_seeds(looks: int) -> int:
    """Reference seeds needed to estimate the K looks' correlation: K + 1 (a full-rank
    sample covariance); with fewer the boundaries come from the union bound."""
    return looks + 1


@dataclass(frozen=True)
class CurveDesign:
    """Looks at `looks_at` fractions of the frame budget (increasing, the last 1.0)."""

    looks_at: tuple[float, ...]
    alpha: float = 0.05
    spending: str = DEFAULT_SPENDING
    correlation: str = ESTIMATED  # "reference", or "union" (never estimate)

    def validate(self) -> None:
        t = self.looks_at
        if not t or any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in t):
            raise AnalysisError(f"looks_at must be a list of numbers, got {list(t)!r}")
        if any(b <= a for a, b in zip(t, t[1:], strict=False)) or t[0] <= 0 or t[-1] != 1:
            raise AnalysisError(f"looks_at must increase within (0, 1] and end at 1 (the "
                                f"full budget: PASS is decided there only), got {list(t)}")
        if len(t) > MAX_CURVE_LOOKS:
            raise AnalysisError(f"looks_at: {len(t)} looks; at most {MAX_CURVE_LOOKS}")
        if not 0 < self.alpha < 0.5:
            raise AnalysisError(f"looks alpha must be in (0, 0.5), got {self.alpha}")
        if self.spending not in SPENDING:
            raise AnalysisError(f"look_spending {self.spending!r}; valid: "
                                f"{', '.join(SPENDING)}")
        if self.correlation not in (ESTIMATED, UNION):
            raise AnalysisError(f"look_correlation {self.correlation!r}; valid: "
                                f"{ESTIMATED}, {UNION}")

    def describe(self) -> str:
        at = ", ".join(f"{x:.0%}" for x in self.looks_at)
        return (f"looks at {at} of the frame budget, {self.spending} spending of alpha "
                f"{self.alpha:g}")


@dataclass(frozen=True)
class CurvePlan:
    """One gate's pre-registered looks: boundaries fixed before the candidate runs."""

    looks_at: list[float]
    frames: list[float]  # the frame count of each look
    boundaries: list[float]  # normal scale, one per look (inf: cannot cross there)
    alpha_spent: list[float]  # alpha(t_k)
    method: str  # how the joint law was taken, in words
    n_new: int
    n_reference: int
    delta: float
    rho: float  # the margin's share of the reference's final score
    margins: list[float] = field(default_factory=list)  # delta_j at each look

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["boundaries"] = [c if math.isfinite(c) else None for c in self.boundaries]
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> CurvePlan:
        d = dict(d)
        d["boundaries"] = [math.inf if c is None else float(c) for c in d["boundaries"]]
        return CurvePlan(**d)


def plan_boundaries(design: CurveDesign, reference: np.ndarray, n_new: int, delta: float,
                    correlation: str | None = None, alpha: float | None = None,
                    seed: int = 0, points: int = QMC_POINTS) -> tuple[np.ndarray, str]:
    """(boundaries, method in words) from the reference's per-seed values at every look
    (m, K). correlation: the design's unless given ("canonical" for the calibration).
    The estimate needs min_reference_seeds(K); with fewer the union bound is used."""
    how = correlation or design.correlation
    a = design.alpha if alpha is None else alpha
    t = np.asarray(design.looks_at, dtype=np.float64)
    m = reference.shape[0]
    if how == CANONICAL:
        return boundaries(t, a, design.spending), \
            "canonical sqrt(t_j/t_k) (independent increments)"
    why = ""
    if how == ESTIMATED and m >= min_reference_seeds(len(t)):
        try:
            r = as_correlation(contrast_covariance(reference, n_new, delta))
        except AnalysisError:
            why = " (the reference's seeds do not vary at some look: no correlation to estimate)"
        else:
            return boundaries(t, a, design.spending, r, points, seed), \
                f"correlation estimated from the reference's curves ({m} seeds)"
    elif how == ESTIMATED:
        why = (f" (the reference's {m} seeds cannot estimate the correlation of {len(t)} "
               f"looks: that needs {min_reference_seeds(len(t))})")
    return boundaries(t, a, design.spending, UNION), f"union bound{why}"


def make_plan(design: CurveDesign, reference: np.ndarray, budget_frames: float, n_new: int,
              delta: float, alpha: float | None = None) -> CurvePlan:
    """The plan of one gate: reference (m, K) per-seed values at the looks."""
    design.validate()
    a = design.alpha if alpha is None else alpha
    c, method = plan_boundaries(design, reference, n_new, delta, alpha=a)
    rho = float(margin_share(reference[:, -1], delta))
    return CurvePlan(list(design.looks_at), [t * budget_frames for t in design.looks_at],
                     [float(x) for x in c],
                     [float(x) for x in spent_alpha(design.looks_at, a, design.spending)],
                     method, n_new, int(reference.shape[0]), float(delta), rho,
                     [float(rho * reference[:, k].mean()) for k in range(len(c))])


def margin_share(reference_final: np.ndarray, delta: float) -> np.ndarray:
    """rho = delta / mean of the reference's final values (..., m) -> (...), within [0,
    1]: 1 where the reference learned no more than delta (then an early look fails only a
    candidate below the random score)."""
    mean = np.asarray(reference_final, dtype=np.float64).mean(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.where(mean > delta, delta / np.where(mean > 0, mean, 1.0), 1.0)
    return np.clip(rho, 0.0, 1.0)


def reference_pseudo_values(reference_now: np.ndarray, reference_final: np.ndarray,
                            delta: float) -> np.ndarray:
    """(..., m) per-seed values of the reference whose mean is (1 - rho) m_R(t) and whose
    spread carries the noise of rho (module docstring)."""
    b = np.asarray(reference_now, dtype=np.float64)
    big_b = np.asarray(reference_final, dtype=np.float64)
    rho = margin_share(big_b, delta)[..., None]
    b_mean = b.mean(axis=-1, keepdims=True)
    big_mean = big_b.mean(axis=-1, keepdims=True)
    free = (rho > 0) & (rho < 1)  # a clipped rho does not move with the reference
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.where(free, rho * b_mean / np.where(big_mean != 0, big_mean, 1.0), 0.0)
    centred = (1 - rho) * (b - b_mean) + slope * (big_b - big_mean)
    return centred + (1 - rho) * b_mean


def curve_contrast(new_now: np.ndarray, reference_now: np.ndarray,
                   reference_final: np.ndarray, delta: float
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(contrast, se, df, margin) of one look, vectorised over leading axes: new (..., n),
    reference at this look and at the full budget (..., m). margin = rho x m_R(t): how far
    behind the reference the candidate may be here."""
    pseudo = reference_pseudo_values(reference_now, reference_final, delta)
    contrast, _, se, df = regression_lower_bound(new_now, pseudo)
    rho = margin_share(reference_final, delta)
    return contrast, se, df, rho * np.asarray(reference_now, dtype=np.float64).mean(axis=-1)


def contrast_covariance(reference: np.ndarray, n_new: int, delta: float) -> np.ndarray:
    """(K, K) covariance of the K looks' contrasts, from the reference's per-seed values
    at every look, (m, K) (the last column: the full budget), taking the new seeds to
    vary as the reference's do (the null hypothesis: a candidate like the reference)."""
    b = np.asarray(reference, dtype=np.float64)
    pseudo = reference_pseudo_values(b.T, b[:, -1][None, :], delta).T  # (m, K)
    m = b.shape[0]
    return np.cov(b, rowvar=False, ddof=1) / n_new + np.cov(pseudo, rowvar=False, ddof=1) / m


def fails(contrast: np.ndarray | float, se: np.ndarray | float, df: np.ndarray | float,
          c: np.ndarray | float) -> np.ndarray:
    """FAIL where the repeated upper bound contrast + t(c, df) se is below 0 (zero spread:
    the contrast itself); an undefined se (nan) never fails. c: the look's boundary on
    the normal scale (one per replicate in the calibration)."""
    contrast, se, df = (np.asarray(x, dtype=np.float64) for x in (contrast, se, df))
    return np.where(np.isnan(se), False, contrast + half_width(stats.norm.sf(c), se, df) < 0)


@dataclass(frozen=True)
class GateOptions:
    """The gate's own options (analysis.verdicts.gate.gate) for every look."""

    delta: float | None = None
    metric: str = DEFAULT_GATE_METRIC
    layouts: Sequence[str] | None = None
    last_n: int = DEFAULT_LAST_N
    normalisers: Mapping[str, tuple[float, float]] | None = None
    allow_protocol_mismatch: bool = False

    def gate(self, new: Sequence[Run], reference: Sequence[Run], **others: Any
             ) -> RegressionResult:
        """The gate's result on these options (`others`: gate's other keywords); the
        looks over training time and over seeds (analysis.sequential.looks) both run it."""
        return gate(new, reference, delta=self.delta, metric=self.metric,
                    layouts=self.layouts, last_n=self.last_n, normalisers=self.normalisers,
                    allow_protocol_mismatch=self.allow_protocol_mismatch, **others).result


def curve_plan(design: CurveDesign, reference_runs: Sequence[Run], budget_frames: float,
               n_new: int, suite: str, options: GateOptions = GateOptions(),
               alpha: float | None = None) -> CurvePlan:
    """The plan of one gate from its reference runs (before the candidate runs):
    AnalysisError (exit 2) when the reference cannot be read at every look."""
    design.validate()
    # the reference's per-seed metric at every look's frames (m, K); the last look: the
    # whole runs, as the gate reads them
    columns, seeds = [], None
    for k, t in enumerate(design.looks_at):
        s, v = seed_values(reference_runs, None if k == len(design.looks_at) - 1
                           else t * budget_frames, "reference", options)
        if seeds is not None and s != seeds:
            raise AnalysisError(f"reference: seeds {s} at look {k + 1}, {seeds} before")
        seeds = s
        columns.append(v)
    values = np.stack(columns, axis=1)
    if values.shape[0] < 2:
        raise TooFewSeeds("looks over training time need >= 2 reference seeds (the gate's "
                            "Welch bound)")
    return make_plan(design, values, budget_frames, n_new,
                     margin(suite, options.delta, options.normalisers).value, alpha)


def curve_look(plan: CurvePlan, new_runs: Sequence[Run], reference_runs: Sequence[Run],
               look: int, subject: str, options: GateOptions = GateOptions()) -> Look:
    """Look `look` (1-based) of one gate: new and reference runs of one system and suite;
    the new runs must have reached the look's frames (the caller checks)."""
    k = look - 1
    last = look == len(plan.frames)
    at = None if last else plan.frames[k]
    if not last:
        try:
            seed_values(new_runs, at, "new runs", options)
        except NoEpisodeYet as e:  # nothing to decide on: the look passes, unspent
            return Look(CURVE_VERDICT, subject, look, {}, math.nan, math.nan, CONTINUE,
                        f"{CURVE_VERDICT} {subject}: look {look}/{len(plan.frames)} at "
                        f"{plan.looks_at[k]:.0%} of the budget: CONTINUE; {e}: "
                        "nothing to decide on (its alpha is not spent)",
                        looks=len(plan.frames), fraction=plan.looks_at[k], frames=plan.frames[k])
    new_now = [truncated(r, at) for r in new_runs]
    ref_now = [truncated(r, at) for r in reference_runs]
    res = replace(options, delta=plan.delta).gate(new_now, ref_now)
    a = seed_values(new_runs, at, "new runs", options)[1]
    b = seed_values(reference_runs, at, "reference", options)[1]
    big_b = seed_values(reference_runs, None, "reference", options)[1]
    if not math.isclose(res.diff, float(a.mean() - b.mean()), rel_tol=1e-9, abs_tol=1e-12):
        raise AssertionError(f"the look's per-seed values differ from the gate's: "
                             f"{res.diff} vs {a.mean() - b.mean()}")
    contrast, se, df, margin_now = (float(x) for x in curve_contrast(a, b, big_b, plan.delta))
    c = plan.boundaries[k]
    failed = bool(fails(contrast, se, df, c))
    t = float(t_scale(c, df)) if math.isfinite(df) else c
    upper = contrast + t * se if se > 0 else contrast
    others = [r for r in res.rules if r != AGGREGATE_RULE] if last else []
    if not last:
        decision = REGRESSION if failed else CONTINUE
    elif failed or others:
        decision = REGRESSION
    else:
        decision = PASS if res.verdict == PASS else UNDECIDED
    # The contrast is new - (1 - rho) x reference = (new - reference) + margin: the line
    # subtracts the margin back out to speak in the reader's difference.
    where = (f"look {look}/{len(plan.frames)} at {plan.looks_at[k]:.0%} of the budget "
             f"({plan.frames[k]:,.0f} frames)")
    bound = (f"new - reference {signed(contrast - margin_now)}, repeated upper bound "
             f"{signed(upper - margin_now)}, margin -{margin_now:.3f}; {res.n_new} new vs "
             f"{res.n_reference} reference {'seed' if res.n_reference == 1 else 'seeds'}")
    rules = f"; rule(s) fired: {', '.join(others)}" if others else ""
    tail = ""
    if decision == CONTINUE:
        tail = "; PASS is decided at the full budget only"
    elif decision == REGRESSION and not last:
        tail = (f"; stopped at {plan.looks_at[k]:.0%} of the budget, "
                f"{1 - plan.looks_at[k]:.0%} of its frames not spent")
    elif last:
        tail = f"; the fixed gate at the full budget says {res.verdict}"
    # the detail (--verbose): the look's statistic as the design tests it
    detail = (f"  {subject} look {look}: new - (1 - rho) x reference = {signed(contrast, 4)}, "
              f"repeated upper bound {signed(upper, 4)} (t {t:.2f}, {df:.1f} df) vs 0; "
              f"margin here {margin_now:.4f} (rho {plan.rho:.2f} of the reference's progress)")
    return Look(CURVE_VERDICT, subject, look, {"new": res.n_new, "reference": res.n_reference},
                upper - margin_now, -margin_now, decision,
                f"{CURVE_VERDICT} {subject}: {where}: {decision}; {bound}{rules}{tail}",
                detail=detail, estimate=contrast - margin_now, looks=len(plan.frames),
                fraction=plan.looks_at[k], frames=plan.frames[k], fixed_gate=str(res.verdict))


def first_decision(looks: Sequence[Look]) -> Look | None:
    """The first decided look (a later one never overturns it), or None."""
    return next((x for x in sorted(looks, key=lambda x: x.look) if x.decided), None)


def plan_lines(plan: CurvePlan, subject: str, verbose: bool = False) -> list[str]:
    """The plan as printed before the first look: one line (what is looked at, when,
    the margin and the seeds); `verbose` adds the design's alpha, joint law and
    boundaries."""
    at = ", ".join(f"{t:.0%}" for t in plan.looks_at)
    line = (f"{CURVE_VERDICT} {subject}: {len(plan.frames)} looks at {at} of the budget; "
            f"REGRESSION at the first look that shows new - reference below -{plan.delta:g} "
            f"(the margin, scaled to the reference's progress), PASS at the full budget "
            f"only; {plan.n_new} new vs {plan.n_reference} reference "
            f"{'seed' if plan.n_reference == 1 else 'seeds'}")
    if not verbose:
        return [line]
    cells = ", ".join(f"{t:.0%}: {'never' if not math.isfinite(c) else f'{c:.2f}'}"
                      for t, c in zip(plan.looks_at, plan.boundaries, strict=True))
    return [line,
            f"  alpha spent by the last look {plan.alpha_spent[-1]:g}; joint law: "
            f"{plan.method}",
            f"  boundaries (normal scale, carried to t at each look's df): {cells}"]


class NoEpisodeYet(AnalysisError):
    """A look too early for some run: none of its episodes had ended by then."""


def seed_values(runs: Sequence[Run], frames: float | None, side: str, options: GateOptions
                ) -> tuple[list[int], np.ndarray]:
    """(seeds, values (n,)): one side's runs of one system and suite reduced to the gate's
    per-seed metric (options.metric, on options.layouts) at `frames` (None: the whole
    runs). AnalysisError when no episode ended by then or the runs form no group."""
    score, seed_metric = gate_metric(options.metric)
    cut = [truncated(r, frames) for r in runs]
    empty = [r.run_id for r in cut if len(r.episodes) == 0]
    if empty:
        at = "" if frames is None else f" by frame {frames:,.0f}"
        raise NoEpisodeYet(f"{side}: no episode ended{at} in run{'s' if len(empty) > 1 else ''} {', '.join(empty)}; "
                           "look later (a larger fraction of the budget)")
    a = analyse(RunSet(included=cut), group_by="layout.name", last_n=options.last_n,
                normalisers=options.normalisers, allow_protocol_mismatch=True)
    if len(a.suites) != 1:
        raise AnalysisError(f"{side}: runs form {len(a.suites)} suites; one gate is one suite")
    groups = list(a.suites[0].values())
    if options.layouts is not None:
        groups = chosen_groups({lay: gs for gs in groups for lay in layout_names(gs)},
                               options.layouts)
    seeds = collapse_seed_copies(groups, side, attr=score)
    values = SEED_METRICS[seed_metric](seeds.values, seeds.tasks)
    return list(seeds.seeds), np.asarray(values, dtype=np.float64)
