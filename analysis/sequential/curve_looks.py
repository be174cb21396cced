"""The regression gate looked at along training time: one gate (a system on a suite),
its pre-registered plan (analysis.sequential.curve_design), and its decision at each look.

Look k < K reads the runs as they stood at its frame count (`truncated`, below) and
decides REGRESSION when the contrast's repeated upper bound is below 0
(curve_design.fails at the plan's boundary), else CONTINUE. The last look (the full
budget) is the fixed gate on the whole records (analysis.verdicts.gate.gate): REGRESSION
when the aggregate's repeated upper bound is below -delta at the plan's last boundary
or another rule of the gate fires (per-game, untrimmed mean, COLLAPSED); PASS when the
fixed gate passes; else UNDECIDED. Every look also runs the fixed gate's checks (one
system and suite per side, the same games and protocol, every selected layout).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from analysis.errors import AnalysisError, TooFewSeeds
from analysis.inputs.facts import episode_x
from analysis.inputs.load import DEFAULT_LAST_N, RunSet
from analysis.scoring.grouping import analyse, layout_names
from analysis.scoring.replicates import collapse_seed_copies
from analysis.scoring.scores import GroupScores
from analysis.sequential.curve_design import (
    CurveDesign,
    CurvePlan,
    curve_contrast,
    fails,
    make_plan,
)
from analysis.sequential.rci import CONTINUE
from analysis.sequential.spending import t_scale
from analysis.verdicts.equivalence import PASS, REGRESSION, UNDECIDED
from analysis.verdicts.gate import DEFAULT_GATE_METRIC, GATE_METRICS, gate
from analysis.verdicts.margins import margin
from analysis.verdicts.regression import AGGREGATE_RULE
from analysis.verdicts.seed_metrics import SEED_METRICS
from runrecord import Run
from runrecord.reader import Table
from runrecord.words import signed

VERDICT = "gate over training time"


@dataclass(frozen=True)
class CurveLook:
    """One look of one gate, as the harness stores and prints it."""

    subject: str  # e.g. "cleanba-ppo CartPole-v1"
    look: int  # 1-based
    looks: int  # how many are planned
    fraction: float  # of the frame budget
    frames: float
    seeds: dict[str, int]
    contrast: float  # m_N - (1 - rho) m_R at this look (>= 0: within the margin)
    upper: float  # its repeated upper bound (REGRESSION when below 0)
    margin: float  # delta_j: how far behind the reference the candidate may be here
    decision: str  # CONTINUE | REGRESSION | PASS | UNDECIDED
    text: str  # the one line printed by default
    fixed_gate: str = ""  # the fixed gate's verdict on the records as they stood
    detail: str = ""  # the design's internals (contrast, t, df, rho): --verbose, JSON

    @property
    def decided(self) -> bool:
        return self.decision != CONTINUE

    def cells(self) -> dict[str, str]:
        """The verdict table's cells (the report), in the reader's difference as
        look_text speaks it: new - reference, its repeated upper bound, the margin."""
        new, ref = self.seeds.get("new", 0), self.seeds.get("reference", 0)
        return {"estimate": signed(self.contrast - self.margin),
                "ci": f"repeated upper bound {signed(self.upper - self.margin)}",
                "margin": f"-{self.margin:.3f} at look {self.look}/{self.looks}",
                "seeds": f"{new} new vs {ref} reference"}

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        for key in ("contrast", "upper", "margin"):
            if not math.isfinite(d[key]):
                d[key] = None
        return d

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> CurveLook:
        names = {f.name for f in fields(CurveLook)}
        if not names.issuperset(d) or not names - {"fixed_gate", "detail"} <= set(d):
            raise AnalysisError(f"not a stored look over training time: {sorted(d)}")
        def number(key: str) -> float:
            return math.nan if d.get(key) is None else float(d[key])

        return CurveLook(str(d["subject"]), int(d["look"]), int(d["looks"]),
                         float(d["fraction"]), float(d["frames"]),
                         {str(k): int(v) for k, v in dict(d["seeds"]).items()},
                         number("contrast"), number("upper"), number("margin"),
                         str(d["decision"]), str(d["text"]), str(d.get("fixed_gate", "")),
                         str(d.get("detail", "")))


@dataclass(frozen=True)
class GateOptions:
    """The gate's own options (analysis.verdicts.gate.gate) for every look."""

    delta: float | None = None
    metric: str = DEFAULT_GATE_METRIC
    layouts: Sequence[str] | None = None
    last_n: int = DEFAULT_LAST_N
    normalisers: Mapping[str, tuple[float, float]] | None = None
    allow_protocol_mismatch: bool = False

    def suite_delta(self, suite: str) -> float:
        return margin(suite, self.delta, self.normalisers).value


def curve_plan(design: CurveDesign, reference_runs: Sequence[Run], budget_frames: float,
               n_new: int, suite: str, options: GateOptions = GateOptions(),
               alpha: float | None = None) -> CurvePlan:
    """The plan of one gate from its reference runs (before the candidate runs):
    AnalysisError (exit 2) when the reference cannot be read at every look."""
    design.validate()
    frames = [t * budget_frames for t in design.looks_at]
    _, values = reference_curves(reference_runs, frames, metric=options.metric,
                                 layouts=options.layouts, last_n=options.last_n,
                                 normalisers=options.normalisers)
    if values.shape[0] < 2:
        raise TooFewSeeds("looks over training time need >= 2 reference seeds (the gate's "
                            "Welch bound)")
    return make_plan(design, values, budget_frames, n_new, options.suite_delta(suite), alpha)


def curve_look(plan: CurvePlan, new_runs: Sequence[Run], reference_runs: Sequence[Run],
               look: int, subject: str, options: GateOptions = GateOptions()) -> CurveLook:
    """Look `look` (1-based) of one gate: new and reference runs of one system and suite;
    the new runs must have reached the look's frames (the caller checks)."""
    k = look - 1
    last = look == len(plan.frames)
    at = None if last else plan.frames[k]
    if not last:
        try:
            _values(new_runs, at, "new runs", options)
        except NoEpisodeYet as e:  # nothing to decide on: the look passes, unspent
            return CurveLook(subject, look, len(plan.frames), plan.looks_at[k],
                             plan.frames[k], {}, math.nan, math.nan, math.nan, CONTINUE,
                             f"{VERDICT} {subject}: look {look}/{len(plan.frames)} at "
                             f"{plan.looks_at[k]:.0%} of the budget: CONTINUE; {e}: "
                             "nothing to decide on (its alpha is not spent)")
    new_now = [truncated(r, at) for r in new_runs]
    ref_now = [truncated(r, at) for r in reference_runs]
    res = gate(new_now, ref_now, delta=plan.delta, metric=options.metric,
               layouts=options.layouts, last_n=options.last_n,
               normalisers=options.normalisers,
               allow_protocol_mismatch=options.allow_protocol_mismatch).result
    a = _values(new_runs, at, "new runs", options)
    b = _values(reference_runs, at, "reference", options)
    big_b = _values(reference_runs, None, "reference", options)
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
    return CurveLook(subject, look, len(plan.frames), plan.looks_at[k], plan.frames[k],
                     {"new": res.n_new, "reference": res.n_reference}, contrast, upper,
                     margin_now, decision,
                     look_text(plan, look, subject, decision, contrast, upper, margin_now,
                               res.n_new, res.n_reference, others, res.verdict),
                     str(res.verdict),
                     look_detail(plan, look, subject, contrast, upper, t, df, margin_now))


def _values(runs: Sequence[Run], frames: float | None, side: str, options: GateOptions
            ) -> np.ndarray:
    return seed_values(runs, frames, side, metric=options.metric, layouts=options.layouts,
                       last_n=options.last_n, normalisers=options.normalisers)[1]


def look_text(plan: CurvePlan, look: int, subject: str, decision: str, contrast: float,
              upper: float, margin_now: float, n_new: int, n_ref: int,
              others: Sequence[str], fixed: str) -> str:
    """The look's one line: where it is, what it decided, the estimate new - reference
    with its repeated upper bound, the margin there and the seeds. The contrast is
    new - (1 - rho) x reference = (new - reference) + margin, so the line subtracts the
    margin back out to speak in the reader's difference."""
    k = look - 1
    where = (f"look {look}/{len(plan.frames)} at {plan.looks_at[k]:.0%} of the budget "
             f"({plan.frames[k]:,.0f} frames)")
    bound = (f"new - reference {signed(contrast - margin_now)}, repeated upper bound "
             f"{signed(upper - margin_now)}, margin -{margin_now:.3f}; {n_new} new vs {n_ref} "
             f"reference {'seed' if n_ref == 1 else 'seeds'}")
    rules = f"; rule(s) fired: {', '.join(others)}" if others else ""
    tail = ""
    if decision == CONTINUE:
        tail = "; PASS is decided at the full budget only"
    elif decision == REGRESSION and look < len(plan.frames):
        tail = (f"; stopped at {plan.looks_at[k]:.0%} of the budget, "
                f"{1 - plan.looks_at[k]:.0%} of its frames not spent")
    elif look == len(plan.frames):
        tail = f"; the fixed gate at the full budget says {fixed}"
    return f"{VERDICT} {subject}: {where}: {decision}; {bound}{rules}{tail}"


def look_detail(plan: CurvePlan, look: int, subject: str, contrast: float, upper: float,
                t: float, df: float, margin_now: float) -> str:
    """The look's statistic as the design tests it (shown with --verbose)."""
    return (f"  {subject} look {look}: new - (1 - rho) x reference = {signed(contrast, 4)}, repeated upper bound {signed(upper, 4)} (t {t:.2f}, "
            f"{df:.1f} df) vs 0; margin here {margin_now:.4f} (rho {plan.rho:.2f} of the "
            "reference's progress)")


def first_decision(looks: Sequence[CurveLook]) -> CurveLook | None:
    """The first decided look (a later one never overturns it), or None."""
    return next((x for x in sorted(looks, key=lambda x: x.look) if x.decided), None)


def decide_records(design: CurveDesign, new_runs: Sequence[Run],
                   reference_runs: Sequence[Run], budget_frames: float, subject: str,
                   suite: str, options: GateOptions = GateOptions(),
                   alpha: float | None = None) -> tuple[CurvePlan, list[CurveLook]]:
    """Every look of one gate from records that reach the full budget (`harness
    regress` after the fact, the calibration's real-record check): looks in order up to
    the first decision."""
    n_new = len(seed_values(new_runs, None, "new runs", metric=options.metric,
                            layouts=options.layouts, last_n=options.last_n,
                            normalisers=options.normalisers)[0])
    plan = curve_plan(design, reference_runs, budget_frames, n_new, suite, options, alpha)
    out: list[CurveLook] = []
    for look in range(1, len(plan.frames) + 1):
        out.append(curve_look(plan, new_runs, reference_runs, look, subject, options))
        if out[-1].decided:
            break
    return plan, out


def plan_lines(plan: CurvePlan, subject: str, verbose: bool = False) -> list[str]:
    """The plan as printed before the first look: one line (what is looked at, when,
    the margin and the seeds); `verbose` adds the design's alpha, joint law and
    boundaries."""
    at = ", ".join(f"{t:.0%}" for t in plan.looks_at)
    line = (f"{VERDICT} {subject}: {len(plan.frames)} looks at {at} of the budget; "
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


def truncated(run: Run, frames: float | None) -> Run:
    """The run as it stood at `frames`: only the episodes that ended by then (None: the
    whole run). A plain Run, never cached (its values are computed, not read)."""
    if frames is None:
        return Run(run.run_dir, run.manifest, run.episodes, run.updates, list(run.warnings))
    keep = episode_x(run.episodes) <= frames
    episodes = Table({k: v[keep] for k, v in run.episodes.columns.items()}, int(keep.sum()))
    return Run(run.run_dir, run.manifest, episodes, run.updates, list(run.warnings))


def reached(run: Run, frames: float) -> bool:
    """Whether an episode of the run ended at or after `frames` (its look can be read)."""
    x = episode_x(run.episodes)
    return bool(len(x)) and float(np.nanmax(x)) >= frames


def _chosen(groups: Sequence[GroupScores], layouts: Sequence[str] | None
            ) -> list[GroupScores]:
    """The groups of the selected layouts (all when None), each once."""
    if layouts is None:
        return list(groups)
    by_layout = {lay: gs for gs in groups for lay in layout_names(gs)}
    out: list[GroupScores] = []
    for lay in layouts:
        gs = by_layout.get(lay)
        if gs is not None and all(gs is not g for g in out):
            out.append(gs)
    return out


def seed_values(runs: Sequence[Run], frames: float | None, side: str, *, metric: str,
                layouts: Sequence[str] | None = None, last_n: int = DEFAULT_LAST_N,
                normalisers: Mapping[str, tuple[float, float]] | None = None
                ) -> tuple[list[int], np.ndarray]:
    """(seeds, values (n,)): one side's runs of one system and suite reduced to the gate's
    per-seed `metric` at `frames` (None: the whole runs). AnalysisError when no episode
    ended by then or the runs form no group."""
    if metric not in GATE_METRICS:
        raise AnalysisError(f"regression metric {metric!r}; valid: {', '.join(GATE_METRICS)}")
    score, seed_metric = GATE_METRICS[metric]
    cut = [truncated(r, frames) for r in runs]
    empty = [r.run_id for r in cut if len(r.episodes) == 0]
    if empty:
        at = "" if frames is None else f" by frame {frames:,.0f}"
        raise NoEpisodeYet(f"{side}: no episode ended{at} in run{'s' if len(empty) > 1 else ''} {', '.join(empty)}; "
                           "look later (a larger fraction of the budget)")
    a = analyse(RunSet(included=cut), group_by="layout.name", last_n=last_n,
                normalisers=normalisers, allow_protocol_mismatch=True)
    if len(a.suites) != 1:
        raise AnalysisError(f"{side}: runs form {len(a.suites)} suites; one gate is one suite")
    groups = _chosen(list(a.suites[0].values()), layouts)
    seeds = collapse_seed_copies(groups, side, attr=score)
    values = SEED_METRICS[seed_metric](seeds.values, seeds.tasks)
    return list(seeds.seeds), np.asarray(values, dtype=np.float64)


def reference_curves(runs: Sequence[Run], frames: Sequence[float], *, metric: str,
                     layouts: Sequence[str] | None = None, last_n: int = DEFAULT_LAST_N,
                     normalisers: Mapping[str, tuple[float, float]] | None = None
                     ) -> tuple[list[int], np.ndarray]:
    """(seeds, values (m, K)): the reference's per-seed metric at every look's frames
    (the last look: the whole runs, as the gate reads them)."""
    columns, seeds = [], None
    for k, f in enumerate(frames):
        s, v = seed_values(runs, None if k == len(frames) - 1 else f, "reference",
                           metric=metric, layouts=layouts, last_n=last_n,
                           normalisers=normalisers)
        if seeds is not None and s != seeds:
            raise AnalysisError(f"reference: seeds {s} at look {k + 1}, {seeds} before")
        seeds = s
        columns.append(v)
    assert seeds is not None
    return seeds, np.stack(columns, axis=1)
