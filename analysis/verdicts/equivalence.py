"""Verdicts: cross-hardware equivalence (Welch TOST), bitwise identity, regression gate.

Exit codes for scripts (runrecord.exits.EXIT_CODES): 0 PASS, 1 DIFFERENT or REGRESSION,
4 INCONCLUSIVE or the gate's UNDECIDED (runrecord.exits.EXIT_UNDECIDED; 1 under --strict),
2 usage or data error (analysis.errors).

Equivalence of groups A and B (e.g. two layouts) at margin delta, fixed beforehand:
the per-seed value is the IQM over games of the final normalised score (and, separately,
of the normalised AUC) of that seed; with one game it is that game's score. For each of
the two metrics, the mean difference A - B with its t interval: paired by seed (the
per-seed differences, n - 1 df) where the pairing holds (analysis.verdicts.seed_pairing:
same seeds, same system, same env protocol), else Welch's (Welch-Satterthwaite df).
- PASS (equivalent within +-delta): both 90% CIs lie inside (-delta, +delta) (two
  one-sided tests at 5%); "the difference is significant" besides when a metric's CI at
  the level DIFFERENT uses excludes 0;
- DIFFERENT: otherwise, when a metric's two-sided CI at 1 - 0.05 / (number of metrics)
  excludes 0 (Bonferroni: the two metrics share the 5% false-alarm rate; a 95% CI per
  metric said DIFFERENT 7-9% of the time with no true difference);
- INCONCLUSIVE: otherwise.
"Bitwise identical" is reported besides when every paired record matches exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from analysis.errors import AnalysisError
from analysis.inputs.cache import stored_digest, update_layout
from analysis.inputs.facts import EPISODES, UPDATES
from analysis.inputs.load import version_hint
from analysis.scoring.scores import GroupScores
from analysis.scoring.tables import ONE_SEED
from analysis.stats.welch import (
    TOST_TAIL,
    WelchInterval,
    half_width,
    paired_stats,
    welch_interval,
    welch_stats,
)
from analysis.verdicts.margins import ATARI_DEFAULT_DELTA
from analysis.verdicts.seed_pairing import SeedDesign, SeedMetric, iqm_over_tasks, seed_design
from analysis.verdicts.stacks import (
    NOT_EXPECTED,
    StackComparison,
    group_determinism_tier,
    group_stacks,
)
from runrecord import Run, schema
from runrecord.exits import verdict_exit
from runrecord.words import counted, signed

DIFFERENT_ALPHA = 0.05
"""False-DIFFERENT rate at no difference, shared by the metrics tested together."""

PASS = "PASS"
DIFFERENT = "DIFFERENT"
INCONCLUSIVE = "INCONCLUSIVE"
REGRESSION = "REGRESSION"
UNDECIDED = "UNDECIDED"
"""The gate's third outcome: neither non-inferiority nor a regression shown (the
sequential gate's cap says UNDECIDED AT CAP; both exit runrecord.exits.EXIT_UNDECIDED)."""


def tost_decisions(diff: np.ndarray, se: np.ndarray, df: np.ndarray, delta: float,
                   pass_tail: float = TOST_TAIL, different_tail: float | None = None,
                   undecided: str = INCONCLUSIVE) -> tuple[np.ndarray, np.ndarray]:
    """THE equivalence decision over metrics tested together, at one look of a design (a
    fixed design is a design with one look): diff, se, df of shape (metrics, ...) ->
    (decisions (...), reach (...)). `tost_verdict`, `equivalence_decision`, the sequential
    looks (their boundaries' tails: analysis.sequential.design) and the calibration
    package all decide here.

    PASS: every metric's interval diff +- t_upper(pass_tail, df) se lies inside (-delta,
    delta) (intersection-union: no correction needed; the fixed design's is the 90% CI);
    DIFFERENT: otherwise, when a metric's interval at `different_tail` (default
    DIFFERENT_ALPHA over 2 tails and the metrics: Bonferroni) excludes 0; else
    `undecided` (INCONCLUSIVE; a sequential look: CONTINUE, or UNDECIDED AT CAP), always
    where an interval is undefined (se nan). reach: the largest |endpoint| of the PASS
    intervals (PASS iff reach < delta; nan where undefined)."""
    if delta <= 0:
        raise AnalysisError(f"equivalence margin delta must be > 0, got {delta}")
    diff, se, df = (np.asarray(x, dtype=np.float64) for x in (diff, se, df))
    if different_tail is None:
        different_tail = DIFFERENT_ALPHA / 2 / diff.shape[0]
    undefined = np.isnan(se).any(axis=0)
    reach = np.where(undefined, np.nan,
                     (np.abs(diff) + half_width(pass_tail, se, df)).max(axis=0))
    excludes = (np.abs(diff) - half_width(different_tail, se, df) > 0).any(axis=0)
    out = np.where(reach < delta, PASS, np.where(excludes, DIFFERENT, undecided))
    return np.where(undefined, undecided, out), reach


def equivalence_stats(a: np.ndarray, b: np.ndarray, paired: bool
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(diff, se, df) (...) of one metric's per-seed values a (..., n) and b (..., m):
    the paired t's where `paired` (row s is the same seed on both sides), else Welch's.
    A one-seed side has no spread estimate, so se and df are nan and the metric never
    passes, even where both sides happen to be equal and flat: only a bitwise identity
    (`equivalence_decision`'s `identical`) passes without a spread."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    with np.errstate(all="ignore"):
        if min(a.shape[-1], b.shape[-1]) < 2:
            diff = a.mean(axis=-1) - b.mean(axis=-1)
            return diff, np.full(diff.shape, np.nan), np.full(diff.shape, np.nan)
        return (paired_stats if paired else welch_stats)(a, b)


@dataclass(frozen=True)
class EquivalenceDecision:
    """A verdict and the statistics it was decided on, so that what is shown is what
    was tested: diff, se, df of shape (2, ...), row 0 the final score, row 1 the AUC."""

    verdict: np.ndarray
    diff: np.ndarray
    se: np.ndarray
    df: np.ndarray


def equivalence_decision(final_a: np.ndarray, final_b: np.ndarray, auc_a: np.ndarray,
                         auc_b: np.ndarray, delta: float, *, paired: bool = False,
                         identical: np.ndarray | bool = False) -> EquivalenceDecision:
    """THE equivalence verdict, vectorised: per-seed final and AUC values of each side
    (..., n) and (..., m) -> verdicts (...) with their statistics. `equivalence` (what the
    CLI, the report, the sequential looks and `reproduce` run) and the calibration suite
    both decide here, so the published error rates are this function's. paired: row s of
    both sides is the same seed (analysis.verdicts.seed_pairing). identical: (...) True
    where the records are bitwise identical; the differences are then exactly 0 and that
    is the evidence (PASS whatever the seeds)."""
    stats = [equivalence_stats(final_a, final_b, paired),
             equivalence_stats(auc_a, auc_b, paired)]
    diff, se, df = (np.stack([s[i] for s in stats]) for i in range(3))
    verdicts = tost_decisions(diff, se, df, delta)[0]
    return EquivalenceDecision(np.where(identical, PASS, verdicts), diff, se, df)


def tost_verdict(intervals: Sequence[WelchInterval], delta: float) -> str:
    """`tost_decisions` of the metrics' Welch intervals (one verdict)."""
    arr = np.array([[w.diff, w.se, w.df] for w in intervals], dtype=np.float64)
    return str(tost_decisions(arr[:, 0], arr[:, 1], arr[:, 2], delta)[0])


# ---------------------------------------------------------------- bitwise identity

@dataclass(frozen=True)
class BitwiseResult:
    identical: bool
    compared_pairs: int
    detail: str


def _same_column(run_a: Run, run_b: Run, table: str, col: str) -> bool:
    """Whether one column of two runs is equal, from the cache's digests when both runs
    have them (same answer: analysis.inputs.facts.column_digest), else from the tables."""
    da, db = stored_digest(run_a, table, col), stored_digest(run_b, table, col)
    if da is not None and db is not None and da[0] == db[0]:
        return bool(da == db)
    x, y = getattr(run_a, table)[col], getattr(run_b, table)[col]
    if x.shape != y.shape:
        return False
    if x.dtype.kind == "f" and y.dtype.kind == "f":
        return bool(np.array_equal(x, y, equal_nan=True))
    return [str(v) for v in x] == [str(v) for v in y]


def records_identical(run_a: Run, run_b: Run) -> str | None:
    """None when the two runs' records match exactly (episodes without wall_time_s; every
    loss_* column and params_checksum of updates); else what differs first."""
    for col in schema.EPISODE_COLUMNS:
        if col == "wall_time_s":
            continue
        if not _same_column(run_a, run_b, EPISODES, col):
            return f"episodes.csv column {col} differs"
    names_a, rows_a = update_layout(run_a)
    names_b, rows_b = update_layout(run_b)
    cols_a = [c for c in names_a if c.startswith(schema.LOSS_PREFIX)]
    cols_b = [c for c in names_b if c.startswith(schema.LOSS_PREFIX)]
    if cols_a != cols_b:
        return f"updates.csv loss columns differ: {cols_a} vs {cols_b}"
    if rows_a != rows_b:
        return f"updates.csv has {rows_a} vs {rows_b} rows"
    for col in [*cols_a, "params_checksum"]:
        if col in names_a and col in names_b and not _same_column(run_a, run_b, UPDATES,
                                                                  col):
            return f"updates.csv column {col} differs"
    return None


def bitwise_identical(a: GroupScores, b: GroupScores) -> BitwiseResult:
    """Whether, for every seed and env, the two groups' records match exactly."""
    if set(a.runs) != set(b.runs):
        only = sorted(set(a.runs) ^ set(b.runs))
        return BitwiseResult(False, 0, f"(seed, env) pairs present in one group only: {only}")
    for cell in sorted(a.runs):
        diff = records_identical(a.runs[cell], b.runs[cell])
        if diff is not None:
            return BitwiseResult(False, len(a.runs),
                                 f"seed {cell[0]} {cell[1]}: {diff}")
    return BitwiseResult(True, len(a.runs), "every paired record is identical")


# ---------------------------------------------------------------- equivalence

def ci_text(ci: tuple[float, float], fewest_seeds: int) -> str:
    """`[-0.036, +0.032]`, or why there is none: "n/a (1 seed)" when a side has one seed
    (no spread to estimate, so never a degenerate [x, x]), "n/a" for any other undefined
    interval; never nan."""
    if fewest_seeds == 1:
        return ONE_SEED
    if any(math.isnan(x) for x in ci):
        return "n/a"
    return f"[{signed(ci[0])}, {signed(ci[1])}]"


DIFFERENT_LEVEL = 1 - DIFFERENT_ALPHA / 2
"""The two-sided CI level of each metric that DIFFERENT (and "significant") reads:
1 - 0.05 / 2 metrics (Bonferroni)."""


def different_ci(w: WelchInterval) -> tuple[float, float]:
    """The DIFFERENT_LEVEL CI of one metric's difference (width 0 at se 0; nan when
    undefined)."""
    if math.isnan(w.se):
        return (math.nan, math.nan)
    # the tail tost_decisions tests at for the 2 metrics, in the same operations
    h = float(half_width(DIFFERENT_ALPHA / 2 / 2, np.asarray(w.se), np.asarray(w.df)))
    return (w.diff - h, w.diff + h)


@dataclass(frozen=True)
class EquivalenceResult:
    verdict: str
    group_a: str
    group_b: str
    delta: float
    final: WelchInterval
    auc: WelchInterval
    bitwise: BitwiseResult
    seeds_a: list[int]
    seeds_b: list[int]
    tasks: list[str]
    per_game: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reference: str = ""  # the group compared against: group_b
    margin: str = ""  # how delta was chosen, e.g. "0.16 HNS (Atari default)"
    metric: str = "iqm"  # the per-seed metric (SEED_METRICS name)
    determinism: str = ""  # the bitwise tier the records allow (verdicts.stacks)
    stacks: StackComparison | None = None  # jax/jaxlib/EnvPool/device kind per side
    design: SeedDesign | None = None  # paired by seed, or Welch and why (seed_pairing)

    def stack_line(self) -> str:
        """Whether both sides ran the same jax, jaxlib, EnvPool and device kind."""
        return self.stacks.line(self.group_a, self.group_b) if self.stacks else ""

    def __post_init__(self) -> None:
        if not self.reference:  # frozen: set once, at construction
            object.__setattr__(self, "reference", self.group_b)

    @property
    def exit_code(self) -> int:
        """0 PASS, 1 DIFFERENT, 4 INCONCLUSIVE (runrecord.exits.verdict_exit)."""
        return verdict_exit(self.verdict == PASS, self.verdict == DIFFERENT)

    @property
    def label(self) -> str:
        if self.bitwise.identical:
            return "PASS (bitwise identical)"
        if self.verdict == PASS:
            significant = "; the difference is significant" if self.significant() else ""
            return f"PASS (equivalent within ±{self.delta:g}{significant})"
        return {DIFFERENT: "DIFFERENT", INCONCLUSIVE: "INCONCLUSIVE"}[self.verdict]

    @property
    def metric_label(self) -> str:
        return "IQM" if self.metric == "iqm" else self.metric

    def metrics(self) -> list[tuple[str, WelchInterval]]:
        """The tested metrics by name: [("IQM final", ...), ("IQM AUC", ...)]."""
        return [(f"{self.metric_label} final", self.final),
                (f"{self.metric_label} AUC", self.auc)]

    def significant(self) -> list[str]:
        """The metrics whose difference is significant: its two-sided CI at
        DIFFERENT_LEVEL (the level DIFFERENT uses) excludes 0."""
        out = []
        for name, w in self.metrics():
            lo, hi = different_ci(w)
            if lo > 0 or hi < 0:
                out.append(name)
        return out

    def seeds_text(self) -> str:
        """`3 seeds on both sides, paired by seed` or `3 vs 3 independent seeds`: the
        seeds and whether they pair; how the interval is built is design_line's."""
        if self.design is not None and self.design.paired:
            return f"{counted(self.design.seeds, 'seed')} on both sides, paired by seed"
        n_b = len(self.seeds_b)
        return f"{len(self.seeds_a)} vs {n_b} independent {'seed' if n_b == 1 else 'seeds'}"

    def design_line(self) -> str:
        """How the intervals were built (--verbose, the report's details): `design: paired
        by seed (...)` or `design: one run per seed and group, Welch (unpaired: why)`."""
        if self.design is not None and self.design.paired:
            return f"design: {self.design.text()}"
        why = f", {self.design.text()}" if self.design is not None else ", Welch"
        return f"design: one run per seed and group{why}"

    def line(self) -> str:
        if self.bitwise.identical:  # the identity is the evidence: the differences are 0
            return (f"equivalence {self.group_a} vs reference {self.group_b}: PASS (bitwise "
                    f"identical): every paired record matches bit for bit, so the "
                    f"difference is exactly 0 on every seed (final and AUC "
                    f"{self.metric_label}); {counted(len(self.seeds_a), 'seed')} on both sides, "
                    f"{counted(len(self.tasks), 'task')}")
        f, u = self.final, self.auc
        fewest = min(len(self.seeds_a), len(self.seeds_b))
        sig = [f"{name} {ci_text(different_ci(w), fewest)}" for name, w in self.metrics()
               if name in self.significant()] if self.verdict == PASS else []
        significant = (f"; significant inside the margin: {DIFFERENT_LEVEL:.1%} CI "
                       f"{', '.join(sig)} exclude{'s' if len(sig) == 1 else ''} 0"
                       if sig else "")
        return (
            f"equivalence {self.group_a} vs reference {self.group_b}: {self.label}; "
            f"delta {self.margin or f'{self.delta:g}'}; "
            f"final {self.metric_label} diff {signed(f.diff)} 90% CI {ci_text(f.ci90, fewest)}; "
            f"AUC {self.metric_label} diff {signed(u.diff)} 90% CI {ci_text(u.ci90, fewest)}"
            f"{significant}; {self.seeds_text()}, {counted(len(self.tasks), 'task')}"
        )

    def cells(self) -> dict[str, str]:
        """The verdict table's cells (the report): estimate, CI, margin, seeds."""
        fewest = min(len(self.seeds_a), len(self.seeds_b))
        return {"estimate": f"final {signed(self.final.diff)}, AUC {signed(self.auc.diff)}",
                "ci": f"90%: final {ci_text(self.final.ci90, fewest)}, "
                      f"AUC {ci_text(self.auc.ci90, fewest)}",
                "margin": f"±{self.delta:g}", "seeds": self.seeds_text()}

    def one_seed_interval(self) -> bool:
        """Whether line() shows an interval as ONE_SEED: a side has one seed, so there is
        no spread to estimate (a bitwise identical line shows no interval)."""
        fewest = min(len(self.seeds_a), len(self.seeds_b))
        return (not self.bitwise.identical and fewest == 1
                and any(math.isnan(x) for w in (self.final, self.auc) for x in w.ci90))

    def determinism_line(self) -> str:
        return determinism_line(self.group_a, self.group_b, self.determinism,
                                self.bitwise.identical)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["label"] = self.label
        d["line"] = self.line()
        d["stacks"] = self.stacks.as_dict() if self.stacks else None
        d["stack_line"] = self.stack_line()
        d["design"] = self.design.as_dict() if self.design else None
        d["design_line"] = self.design_line()
        d["significant"] = self.significant()
        return d


def equivalence(a: GroupScores, b: GroupScores, delta: float = ATARI_DEFAULT_DELTA, *,
                metric: SeedMetric = iqm_over_tasks, metric_name: str = "iqm",
                margin: str = "", unpaired: bool = False) -> EquivalenceResult:
    """TOST of group a vs b (the reference) on per-seed `metric` (default: IQM over
    tasks) of final score and of normalised AUC; differences are a - b. A group's rows
    are distinct seeds (one run per seed and env), so the test counts seeds, never
    layout copies. Paired by seed where the pairing holds (analysis.verdicts.seed_pairing;
    `unpaired`: Welch all the same), else Welch. `margin` describes delta in the verdict
    line (analysis.verdicts.margins)."""
    if a.tasks != b.tasks:
        raise AnalysisError(
            f"groups {a.group!r} and {b.group!r} cover different tasks: {a.tasks} vs {b.tasks}"
            + version_hint(a.tasks, b.tasks))
    if a.frame_grid.shape != b.frame_grid.shape or not np.allclose(a.frame_grid, b.frame_grid):
        raise AnalysisError("groups must share one frame grid (build them with scores_by_group)")
    design = seed_design(list(a.runs.values()), list(b.runs.values()), a.seeds, b.seeds,
                         unpaired=unpaired)
    bitwise = bitwise_identical(a, b)
    # Identical records have the same seeds and scores: paired, their differences are
    # exactly 0, which is what is shown (the verdict is PASS on the identity alone).
    paired = design.paired or bitwise.identical
    # paired: rows in seed order on both sides (GroupScores rows follow its seeds), so
    # that they line up seed by seed; else as they are
    ia, ib = ((np.argsort(g.seeds, kind="stable") if paired else np.arange(len(g.seeds)))
              for g in (a, b))
    final_a, final_b = metric(a.final[ia], a.tasks), metric(b.final[ib], b.tasks)
    auc_a, auc_b = metric(a.auc[ia], a.tasks), metric(b.auc[ib], b.tasks)
    decision = equivalence_decision(final_a, final_b, auc_a, auc_b, delta, paired=paired,
                                    identical=bitwise.identical)
    verdict = str(decision.verdict)
    # the intervals shown: from the statistics the verdict was decided on (paired_stats
    # or welch_stats of the same values)
    final = welch_interval(final_a, final_b, paired=paired)
    auc = welch_interval(auc_a, auc_b, paired=paired)
    notes = []
    # Of identical records the intervals shown have width 0 at 0 and pass, unless a score
    # is NaN: then the numbers shown do not pass and the identity alone decides.
    if bitwise.identical and bool(np.isnan(decision.diff).any()):
        notes.append("records are bitwise identical; verdict set to PASS")
    if min(len(a.seeds), len(b.seeds)) < 2 and not bitwise.identical:
        notes.append("fewer than 2 seeds in a group: no spread estimate, cannot pass")
    per_game = []
    for j, t in enumerate(a.tasks):
        w = welch_interval(a.final[:, j], b.final[:, j])
        per_game.append({"task": t, "mean_a": w.mean_a, "mean_b": w.mean_b, "diff": w.diff,
                         "ci95": list(w.ci95)})
    return EquivalenceResult(verdict, a.group, b.group, float(delta), final, auc, bitwise,
                             list(a.seeds), list(b.seeds), list(a.tasks), per_game, notes,
                             margin=margin, metric=metric_name,
                             determinism=group_determinism_tier(a, b),
                             stacks=group_stacks(a, b), design=design)


def determinism_line(group_a: str, reference: str, tier: str,
                     identical: bool = False) -> str:
    """The line printed under a pair's verdict: the bitwise tier its records allow. Of
    records that are identical although the tier does not promise it, the line says
    both, so that it does not read as a contradiction of "PASS (bitwise identical)"."""
    if identical and tier.startswith(NOT_EXPECTED):
        tier = (f"bitwise identical here, though not guaranteed: "
                f"{tier.removeprefix(NOT_EXPECTED)}")
    return f"determinism of {group_a} and reference {reference}: {tier}"
