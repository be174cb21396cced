"""A sequential design over seeds: how many seeds each growing side has at each look, the
error rate held over all looks (analysis.sequential.spending), and the decisions a look
takes from its repeated confidence intervals (Jennison & Turnbull 1989; 2000, ch. 9):
vectorised cores that `sweep_looks` and the calibration suite both decide through.

At look k the repeated interval of a difference is diff +- c_k se, where c_k is the
design's normal-scale boundary at that look carried to Student t at the look's df
(`t_scale`). The boundaries spend alpha over the looks, so with probability >= 1 - alpha
the true difference lies inside the one-sided repeated bound at EVERY look at once; any
rule that stops on these intervals keeps that rate, whatever else it does (stop early,
stop when other verdicts are decided, go on).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from functools import lru_cache
from typing import Any

import numpy as np
from scipy import stats

from analysis.errors import AnalysisError
from analysis.sequential.spending import SPENDING, boundaries, spent_alpha, t_scale
from analysis.stats.welch import half_width, welch_stats
from analysis.verdicts.equivalence import PASS, REGRESSION, tost_decisions
from analysis.verdicts.regression import regression_lower_bound
from analysis.verdicts.seedplan import (
    PLAN_SIMS,
    PLAN_TARGET,
    Spread,
    beyond_cap,
    equivalence_draws,
    equivalence_seeds_needed,
    gate_draws,
    gate_seeds_needed,
    given_spread,
    plan_margins,
    seeds_cell,
)
from runrecord.words import counted, signed

MAX_LOOKS = 20
"""More looks than this spend alpha too thinly to be useful (and are likely a typo)."""


@dataclass(frozen=True)
class SequentialDesign:
    """Seeds per growing side: `first_seeds` at look 1, then `batch_seeds` more at each
    look, up to `max_seeds` (the last look is at the cap). `alpha`: the error rate each
    verdict keeps over all looks: one-sided for equivalence's PASS (per side of the
    margin, as the fixed TOST's 90% CI) and the gate's bounds, two-sided for DIFFERENT
    (shared by the two metrics); 0.05 is the fixed verdicts' rate.
    `spending`: the alpha-spending function (analysis.sequential.spending.SPENDING)."""

    first_seeds: int = 3
    batch_seeds: int = 2
    max_seeds: int = 9
    alpha: float = 0.05
    spending: str = "obrien-fleming"

    def validate(self) -> None:
        """AnalysisError saying what is valid when the design is not."""
        for name in ("first_seeds", "batch_seeds", "max_seeds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise AnalysisError(f"sequential design: {name} must be a whole number, "
                                    f"got {value!r}")
        if self.first_seeds < 2:
            raise AnalysisError(f"sequential design: first_seeds must be >= 2 (one seed per "
                                f"side has no spread estimate), got {self.first_seeds}")
        if self.batch_seeds < 1:
            raise AnalysisError(f"sequential design: batch_seeds must be >= 1, got "
                                f"{self.batch_seeds}")
        if self.max_seeds < self.first_seeds:
            raise AnalysisError(f"sequential design: max_seeds ({self.max_seeds}) must be "
                                f">= first_seeds ({self.first_seeds})")
        looks = 1 + -(-(self.max_seeds - self.first_seeds) // self.batch_seeds)
        if looks > MAX_LOOKS:
            raise AnalysisError(f"sequential design: {looks} looks (first_seeds "
                                f"{self.first_seeds}, batch_seeds {self.batch_seeds}, max_seeds "
                                f"{self.max_seeds}); at most {MAX_LOOKS}: use larger batches")
        if not 0 < self.alpha < 0.5:
            raise AnalysisError(f"sequential design: alpha must be in (0, 0.5), got "
                                f"{self.alpha}")
        if self.spending not in SPENDING:
            raise AnalysisError(f"sequential design: unknown spending {self.spending!r}; "
                                f"valid: {', '.join(SPENDING)}")

    def seeds_at_looks(self) -> list[int]:
        """Seeds per growing side at each look, e.g. [3, 5, 7, 9]; the last is the cap."""
        self.validate()
        out = list(range(self.first_seeds, self.max_seeds, self.batch_seeds))
        return out + [self.max_seeds]

    @property
    def looks(self) -> int:
        return len(self.seeds_at_looks())

    def information_fractions(self, fixed_seeds: int | None = None) -> np.ndarray:
        """Information at each look over the information at the cap. The information of
        a difference of means with n and m seeds is 1 / (1/n + 1/m) (in units of the
        per-seed variance, equal spreads): both sides grow (equivalence, fixed_seeds
        None) or the other side stays at `fixed_seeds` (the gate's reference)."""
        n = np.array(self.seeds_at_looks(), dtype=np.float64)
        m = n if fixed_seeds is None else np.full_like(n, float(fixed_seeds))
        info = 1.0 / (1.0 / n + 1.0 / m)
        return info / info[-1]

    def boundaries(self, alpha: float | None = None, fixed_seeds: int | None = None
                   ) -> np.ndarray:
        """Normal-scale one-sided boundaries at every look spending `alpha` (default: the
        design's) over `information_fractions(fixed_seeds)`."""
        fractions = tuple(float(t) for t in self.information_fractions(fixed_seeds))
        return np.array(_boundaries(fractions, self.alpha if alpha is None else alpha,
                                    self.spending))

    def boundary(self, look: int, alpha: float | None = None, fixed_seeds: int | None = None,
                 seeds: tuple[int, int] | None = None) -> float:
        """The normal-scale boundary at look `look` (1-based). `seeds`: the independent
        seeds each side actually has there (a failed run leaves fewer than planned); the
        spending function is then evaluated at the information they carry (Lan & DeMets:
        the earlier looks keep their planned fractions), except at the last look, which
        spends whatever is left. Without `seeds`, the planned schedule's boundary."""
        planned = self.information_fractions(fixed_seeds)
        k = look - 1
        if seeds is None or look >= len(planned):
            return float(self.boundaries(alpha, fixed_seeds)[min(k, len(planned) - 1)])
        cap = self.seeds_at_looks()[-1]
        full = 1.0 / (1.0 / cap + 1.0 / (cap if fixed_seeds is None else fixed_seeds))
        now = (1.0 / (1.0 / seeds[0] + 1.0 / seeds[1])) / full
        floor = planned[k - 1] if k > 0 else 0.0
        now = float(np.clip(now, floor + 1e-6, 1.0 - 1e-6))
        fractions = (*(float(t) for t in planned[:k]), now)
        return _boundaries(fractions, self.alpha if alpha is None else alpha,
                           self.spending)[-1]

    @property
    def different_alpha(self) -> float:
        """One tail of one metric's DIFFERENT test: the two-sided rate `alpha` (0.05 as the
        fixed verdict's analysis.verdicts.equivalence.DIFFERENT_ALPHA) over 2 tails and
        shared by the 2 metrics (Bonferroni)."""
        return self.alpha / 2 / 2

    def describe(self) -> str:
        seeds = self.seeds_at_looks()
        return (f"{counted(len(seeds), 'look')} at {', '.join(map(str, seeds))} seeds per side, "
                f"{self.spending} alpha spending, alpha {self.alpha:g}")


@lru_cache(maxsize=256)
def _boundaries(fractions: tuple[float, ...], alpha: float, spending: str
                ) -> tuple[float, ...]:
    """The canonical law's boundaries (new seeds are independent increments), computed
    once per schedule (a sweep asks at every look)."""
    return tuple(float(c) for c in boundaries(fractions, alpha, spending))


CONTINUE = "CONTINUE"
"""Not decided yet: run the next batch."""
UNDECIDED = "UNDECIDED AT CAP"
"""The cap was reached without a decision."""


def equivalence_decisions(diff: np.ndarray, se: np.ndarray, df: np.ndarray, delta: float,
                          c_pass: float, c_different: float, last: bool
                          ) -> tuple[np.ndarray, np.ndarray]:
    """One look of sequential equivalence over metrics tested together: the one TOST
    decision (tost_decisions) at the tails of the look's normal-scale boundaries: c_pass
    spends the design's alpha per side (the sequential TOST), c_different alpha / 2 /
    metrics per tail (Bonferroni over the metrics, as the fixed verdict); not decided
    is CONTINUE, or UNDECIDED AT CAP at the last look. -> (decisions (...), reach (...))."""
    return tost_decisions(diff, se, df, delta, float(stats.norm.sf(c_pass)),
                          float(stats.norm.sf(c_different)), UNDECIDED if last else CONTINUE)


def gate_decisions(diff: np.ndarray | float, se: np.ndarray | float, df: np.ndarray | float,
                   delta: float, c: float, last: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One look of the sequential gate: diff, se, df of new - reference (...) ->
    (decisions, lower, upper), each (...). PASS when the repeated lower bound diff -
    t(c) se > -delta (non-inferiority, alpha over all looks); REGRESSION when the repeated
    upper bound < -delta (clearly worse than the margin); else CONTINUE, or UNDECIDED at
    the last look. Zero spread gives lower = upper = diff."""
    diff, se, df = (np.asarray(x, dtype=np.float64) for x in (diff, se, df))
    half = half_width(stats.norm.sf(c), se, df)
    lower, upper = diff - half, diff + half
    out = np.where(lower > -delta, PASS, np.where(upper < -delta, REGRESSION,
                                                  UNDECIDED if last else CONTINUE))
    return np.where(np.isnan(se), UNDECIDED if last else CONTINUE, out), lower, upper


CURVE_VERDICT = "gate over training time"
"""The verdict of the gate's looks along training time (analysis.sequential.curves)."""


@dataclass(frozen=True)
class Look:
    """One look of one verdict, as the harness stores, prints and reads it back: over
    seeds (equivalence, gate) or along training time (CURVE_VERDICT)."""

    verdict: str  # "equivalence" | "gate" | CURVE_VERDICT
    subject: str  # stable key of what is judged, e.g. "CartPole-v1: a0-l1-d1 vs a0-l0-d1"
    look: int  # 1-based index of the look
    seeds: dict[str, int]  # independent seeds per side at this look
    statistic: float  # the test statistic (`text` says which; along training time: the
    # repeated upper bound of new - reference)
    boundary: float  # what it is compared with at this look (along training time: -margin)
    decision: str  # CONTINUE | a verdict word (PASS, DIFFERENT, REGRESSION) | UNDECIDED
    text: str  # one human line for console and report
    needs: str = ""  # at the cap: the planner's estimate of what a decision would need
    fixed_design_seeds: int | None = None  # seeds per growing side of the fixed design
    # of equal power (analysis.verdicts.seedplan, spread seen at this look); None: unknown
    detail: str = ""  # the design's internals behind `text` (t, df, boundaries): --verbose
    estimate: float = math.nan  # along training time: new - reference at this look
    looks: int = 0  # along training time: how many looks are planned
    fraction: float = 1.0  # along training time: the look's share of the frame budget
    frames: float = math.nan  # along training time: the look's frame count
    fixed_gate: str = ""  # along training time: the fixed gate's verdict on the records then

    @property
    def decided(self) -> bool:
        return self.decision != CONTINUE

    def cells(self) -> dict[str, str]:
        """The verdict table's cells (the report) of a look along training time."""
        new, ref = self.seeds.get("new", 0), self.seeds.get("reference", 0)
        return {"estimate": signed(self.estimate),
                "ci": f"repeated upper bound {signed(self.statistic)}",
                "margin": f"-{-self.boundary:.3f} at look {self.look}/{self.looks}",
                "seeds": f"{new} new vs {ref} reference"}

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict: an undefined number (nan) is null."""
        d = asdict(self)
        for key in ("statistic", "boundary", "estimate", "frames"):
            if not math.isfinite(d[key]):
                d[key] = None
        return d

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Look:
        """The Look `to_json` wrote, or a look along training time stored with its
        contrast, upper bound and margin (the record a sweep started before this one's
        fields were shared writes; a resumed sweep reads it); AnalysisError naming what
        is missing or unknown."""
        d = dict(d)
        if "verdict" not in d and {"contrast", "upper", "margin"} <= set(d):
            contrast, upper, margin = (number_or_nan(d.pop(k))
                                       for k in ("contrast", "upper", "margin"))
            d |= {"verdict": CURVE_VERDICT, "statistic": upper - margin, "boundary": -margin,
                  "estimate": contrast - margin}
        names = [f.name for f in fields(Look)]
        missing = [k for k in names[:8] if k not in d]
        unknown = sorted(set(d) - set(names))
        if missing or unknown:
            raise AnalysisError(f"not a stored look: missing {missing}, unknown {unknown}")
        read: dict[str, Callable[[Any], Any]] = {
            "look": int, "looks": int, "fraction": float, "statistic": number_or_nan,
            "boundary": number_or_nan, "estimate": number_or_nan, "frames": number_or_nan,
            "fixed_design_seeds": lambda v: None if v is None else int(v),
            "seeds": lambda v: {str(k): int(n) for k, n in dict(v).items()}}
        return Look(**{k: read.get(k, str)(v) for k, v in d.items()})


def number_or_nan(value: Any) -> float:
    return math.nan if value is None else float(value)


MIN_COMPARABLE_POWER = 0.5
"""Below this simulated power of the sequential design at the spread seen, "the fixed
design of equal power" is left out (None): a fixed design that passes as rarely needs
few seeds, which would read as cheaper than a design that cannot pass either."""
PLAN_MAX_SEEDS = 100


def sequential_equivalence_power(design: SequentialDesign, spread: Spread, delta: float,
                                 sims: int = PLAN_SIMS, seed: int = 0) -> float:
    """P(PASS by the cap) of sequential equivalence at a true difference of 0, both
    metrics drawn jointly (the planner's model and draws)."""
    a, b = equivalence_draws(spread, design.max_seeds, sims, seed)
    return float(equivalence_paths(design_boundaries(design), a, b, delta).passed.mean())


def sequential_gate_power(design: SequentialDesign, sd: float, n_ref: int, delta: float,
                          sims: int = PLAN_SIMS, seed: int = 0) -> float:
    """P(PASS by the cap) of the sequential gate when nothing regressed."""
    new, ref = gate_draws(sd, design.max_seeds, n_ref, sims, seed)
    b = design_boundaries(design, fixed_seeds=n_ref)
    return float(gate_paths(b, new, ref, delta).passed.mean())


def equivalence_needs_text(spread: Spread, delta: float, seen: float) -> str:
    """The cap line's estimate for equivalence: seeds per side for PLAN_TARGET power of
    the fixed TOST if the true difference is 0, and at the final-score difference seen."""
    at_zero = equivalence_seeds_needed(spread, delta, max_seeds=PLAN_MAX_SEEDS)
    at_seen = equivalence_seeds_needed(spread, delta, true_diff=abs(seen),
                                       max_seeds=PLAN_MAX_SEEDS) \
        if abs(seen) < delta else None
    return _needs(at_zero, at_seen, seen, delta, f"per-seed sd {spread.sd_group:.3g}",
                  "seeds per side")


def gate_needs_text(spread: Spread, delta: float, n_ref: int, seen: float) -> str:
    """The gate's cap estimate: new seeds against the fixed reference (if the true
    difference is 0, and at the difference seen); when no number of new seeds gets there
    (the reference's own noise dominates), seeds on both sides."""
    sd_text = f"per-seed sd {spread.sd_seed:.3g}"
    at_zero = gate_seeds_needed(spread, delta, n_ref=n_ref, max_seeds=PLAN_MAX_SEEDS)
    where = f"new seeds against the {n_ref} reference seeds"
    ref: int | None = n_ref
    if at_zero is None:
        ref, where = None, ("seeds on BOTH sides (no number of new seeds alone gets there: "
                            "the reference's own noise dominates)")
        at_zero = gate_seeds_needed(spread, delta, max_seeds=PLAN_MAX_SEEDS)
    at_seen = gate_seeds_needed(spread, delta, n_ref=ref, true_diff=seen,
                                max_seeds=PLAN_MAX_SEEDS) \
        if seen > -delta else None
    return _needs(at_zero, at_seen, seen, delta, sd_text, where)


def _count(seeds: int | None, where: str = "") -> str:
    if seeds is None:
        return beyond_cap(PLAN_MAX_SEEDS, where or "seeds")
    return f"about {seeds} {where}".rstrip()


def _needs(at_zero: int | None, at_seen: int | None, seen: float, delta: float,
           sd_text: str, where: str) -> str:
    if abs(seen) < delta or seen > 0:
        seen_text = f"{_count(at_seen)} at the difference seen ({seen:+.3g})"
    else:
        seen_text = (f"at the difference seen ({seen:+.3g}, beyond the margin) no number "
                     "of seeds would pass")
    return (f"the fixed design would need {_count(at_zero, where)} for "
            f"{PLAN_TARGET:.0%} power if the true difference is 0, {seen_text} (seed "
            f"planner, {sd_text})")


def _row(name: str, delta: float, zero: Paths, at_margin: Paths, fixed: int | None) -> str:
    return (f"| {name} | {delta:g} | {zero.passed.mean():.1%} | {zero.seeds.mean():.2f} | "
            f"{seeds_cell(fixed, PLAN_MAX_SEEDS)} | {at_margin.passed.mean():.3f} |")


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
    eq, gate, margins = plan_margins(suite, delta, gate_delta, normalisers)
    m = design.max_seeds if reference_seeds is None else int(reference_seeds)
    a, b = equivalence_draws(spread, design.max_seeds, sims, seed)
    shifted = a.copy()
    shifted[0] += eq.value
    planned = design_boundaries(design)
    zero = equivalence_paths(planned, a, b, eq.value)
    eq_row = _row("equivalence (final + AUC)", eq.value, zero,
                  equivalence_paths(planned, shifted, b, eq.value),
                  equivalence_seeds_needed(spread, eq.value, float(zero.passed.mean()), sims,
                                           max_seeds=PLAN_MAX_SEEDS))
    new, ref = gate_draws(spread.sd_seed, design.max_seeds, m, sims, seed)
    gate_b = design_boundaries(design, fixed_seeds=m)
    g_zero = gate_paths(gate_b, new, ref, gate.value)
    gate_row = _row(f"gate (vs {m} reference seeds)", gate.value, g_zero,
                    gate_paths(gate_b, new - gate.value, ref, gate.value),
                    gate_seeds_needed(given_spread(spread.sd_seed), gate.value,
                                      float(g_zero.passed.mean()), m, sims,
                                      max_seeds=PLAN_MAX_SEEDS))
    # the boundary table: per look seeds, information, alpha spent, the PASS boundary
    # (normal, and as t at the 2(n - 1) df of equal spreads), DIFFERENT's, and the gate's
    t = design.information_fractions()
    spent = spent_alpha(t, design.alpha, design.spending)
    head = ["look", "seeds per side", "information", "alpha spent", "PASS c",
            "as t at 2(n-1) df", "DIFFERENT c", f"gate c (vs {m} reference)"]
    table = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for k, n in enumerate(planned.seeds):
        c = planned.passing[k]
        table.append(f"| {k + 1} | {n} | {t[k]:.2f} | {spent[k]:.4f} | {c:.3f} | "
                     f"{float(t_scale(c, 2 * (n - 1))):.2f} | {planned.different[k]:.3f} | "
                     f"{gate_b.passing[k]:.3f} |")
    head = ["verdict", "delta", "P(PASS) by the cap at 0", "expected seeds per side at 0",
            "fixed design: seeds for the same power", "false pass at the margin"]
    return [f"design: {design.describe()}",
            margins,
            f"spread: {spread.describe()}",
            "\n".join(table), "",
            f"normal per-seed values, {sims} simulations, seed {seed}:",
            "| " + " | ".join(head) + " |", "|" + "---|" * len(head), eq_row, gate_row,
            f"planned in {time.perf_counter() - start:.1f} s"]


@dataclass
class Paths:
    """Per simulated comparison (arrays of shape (sims,))."""

    decision: np.ndarray  # the first decision (a verdict word, or UNDECIDED at the cap)
    seeds: np.ndarray  # seeds per growing side when it stopped
    pass_any_look: np.ndarray  # PASS at some look had it never stopped (what RCIs bound)

    @property
    def passed(self) -> np.ndarray:
        return self.decision == PASS


@dataclass(frozen=True)
class Boundaries:
    """Normal-scale boundaries per look: for PASS (and the gate's REGRESSION), and for
    equivalence's DIFFERENT."""

    seeds: list[int]
    passing: np.ndarray
    different: np.ndarray


def design_boundaries(design: SequentialDesign, fixed_seeds: int | None = None
                      ) -> Boundaries:
    """The design's spending boundaries (the gate's: against `fixed_seeds`)."""
    return Boundaries(design.seeds_at_looks(), design.boundaries(fixed_seeds=fixed_seeds),
                      design.boundaries(design.different_alpha))


def naive_boundaries(design: SequentialDesign) -> Boundaries:
    """The fixed verdicts' critical values at every look (naive re-testing)."""
    seeds = design.seeds_at_looks()
    ones = np.ones(len(seeds))
    return Boundaries(seeds, ones * stats.norm.isf(design.alpha),
                      ones * stats.norm.isf(design.different_alpha))


def _paths(b: Boundaries, sims: int, decide: Callable[[int, int, bool], np.ndarray]
           ) -> Paths:
    """Every draw's first decision over the looks: `decide(look index, seeds per growing
    side, last look)` gives the decisions of all draws at a look."""
    out = Paths(np.full(sims, CONTINUE, dtype=object), np.zeros(sims, dtype=np.int64),
                np.zeros(sims, dtype=bool))
    open_ = np.ones(sims, dtype=bool)
    for k, n in enumerate(b.seeds):
        dec = decide(k, n, k == len(b.seeds) - 1)
        stop = open_ & (dec != CONTINUE)
        out.decision[stop] = dec[stop]
        out.seeds[stop] = n
        out.pass_any_look |= dec == PASS
        open_ &= ~stop
    return out


def equivalence_paths(b: Boundaries, a: np.ndarray, ref: np.ndarray, delta: float) -> Paths:
    """Sequential equivalence of `a` against `ref`, both (metrics, sims, cap seeds)."""
    def decide(k: int, n: int, last: bool) -> np.ndarray:
        per_metric = [welch_stats(a[j, :, :n], ref[j, :, :n]) for j in range(a.shape[0])]
        diff, se, df = (np.stack([s[i] for s in per_metric]) for i in range(3))
        return equivalence_decisions(diff, se, df, delta, float(b.passing[k]),
                                     float(b.different[k]), last)[0]
    return _paths(b, a.shape[1], decide)


def gate_paths(b: Boundaries, new: np.ndarray, ref: np.ndarray, delta: float) -> Paths:
    """The sequential gate of `new` (sims, cap seeds) against a fixed `ref` (sims, m)."""
    def decide(k: int, n: int, last: bool) -> np.ndarray:
        diff, _, se, df = regression_lower_bound(new[:, :n], ref)
        return gate_decisions(diff, se, df, delta, float(b.passing[k]), last)[0]
    return _paths(b, new.shape[0], decide)
