"""Verdicts: cross-hardware equivalence (Welch TOST), bitwise identity, regression gate.

Exit codes for scripts: 0 pass, 1 fail (DIFFERENT, INCONCLUSIVE, REGRESSION), 2 usage or
data error (analysis.errors).

Equivalence of groups A and B (e.g. two layouts) at margin delta, fixed beforehand:
the per-seed value is the IQM over games of the final normalised score (and, separately,
of the normalised AUC) of that seed; with one game it is that game's score. For each of
the two metrics, Welch's t gives the mean difference A - B with Welch-Satterthwaite df.
- PASS (equivalent): both 90% CIs lie inside (-delta, +delta) (two one-sided tests at 5%);
- DIFFERENT: otherwise, when a 95% CI excludes 0;
- INCONCLUSIVE: otherwise.
"Bitwise identical" is reported besides when every paired record matches exactly.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from analysis.errors import EXIT_FAIL, EXIT_PASS, AnalysisError
from analysis.metrics import iqm
from analysis.scores import GroupScores
from runrecord import Run, schema

# Default equivalence margin in normalised-score units (HNS on Atari). With the per-seed
# IQM sd of ~0.063 HNS seen in the published tables, 0.16 gives 80% power to pass at 3
# seeds (0.11 at 5 seeds, 0.07 at 10); see docs/analysis.md.
DEFAULT_DELTA = 0.16

PASS = "PASS"
DIFFERENT = "DIFFERENT"
INCONCLUSIVE = "INCONCLUSIVE"
REGRESSION = "REGRESSION"


@dataclass
class WelchInterval:
    """Welch difference of means a - b with two-sided CIs."""

    diff: float
    se: float
    df: float
    ci90: tuple[float, float]
    ci95: tuple[float, float]
    n_a: int
    n_b: int
    mean_a: float
    mean_b: float


def welch_interval(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray
                   ) -> WelchInterval:
    """Difference of means with Welch-Satterthwaite df. Zero variance gives a CI of width 0.

    Needs >= 2 values per side unless both sides have zero spread.
    """
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if len(a) == 0 or len(b) == 0:
        raise AnalysisError(f"Welch test needs values on both sides, got {len(a)} and {len(b)}")
    diff = float(a.mean() - b.mean())
    va = float(a.var(ddof=1)) if len(a) > 1 else math.nan
    vb = float(b.var(ddof=1)) if len(b) > 1 else math.nan
    if len(a) == 1 or len(b) == 1:
        # No spread estimate on one side: only a perfectly flat comparison is decidable.
        if (len(a) == 1 or va == 0) and (len(b) == 1 or vb == 0) and np.all(a == a[0]) \
                and np.all(b == b[0]) and diff == 0:
            va = vb = 0.0
        else:
            nan2 = (math.nan, math.nan)
            return WelchInterval(diff, math.nan, math.nan, nan2, nan2, len(a), len(b),
                                 float(a.mean()), float(b.mean()))
    sa, sb = va / len(a), vb / len(b)
    se = math.sqrt(sa + sb)
    if se == 0:
        df = math.inf
        ci90 = ci95 = (diff, diff)
    else:
        denom = (sa**2 / (len(a) - 1) if len(a) > 1 else 0) + (
            sb**2 / (len(b) - 1) if len(b) > 1 else 0)
        df = (sa + sb) ** 2 / denom
        t90, t95 = stats.t.ppf(0.95, df), stats.t.ppf(0.975, df)
        ci90 = (diff - t90 * se, diff + t90 * se)
        ci95 = (diff - t95 * se, diff + t95 * se)
    return WelchInterval(diff, se, df, ci90, ci95, len(a), len(b), float(a.mean()),
                         float(b.mean()))


def tost_verdict(intervals: Sequence[WelchInterval], delta: float) -> str:
    """PASS when every 90% CI is inside (-delta, delta); DIFFERENT when a 95% CI excludes
    0; INCONCLUSIVE otherwise (including undecidable intervals)."""
    if delta <= 0:
        raise AnalysisError(f"equivalence margin delta must be > 0, got {delta}")
    if any(math.isnan(w.ci90[0]) for w in intervals):
        return INCONCLUSIVE
    if all(-delta < w.ci90[0] and w.ci90[1] < delta for w in intervals):
        return PASS
    if any(w.ci95[0] > 0 or w.ci95[1] < 0 for w in intervals):
        return DIFFERENT
    return INCONCLUSIVE


def per_seed_iqm(values: np.ndarray) -> np.ndarray:
    """(seeds, tasks) -> (seeds,): IQM over tasks of each seed (the value itself for 1 task)."""
    values = np.asarray(values, dtype=np.float64)
    return np.array([float(iqm(values[i : i + 1])) for i in range(values.shape[0])])


# ---------------------------------------------------------------- bitwise identity

@dataclass
class BitwiseResult:
    identical: bool
    compared_pairs: int
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _columns_equal(x: np.ndarray, y: np.ndarray) -> bool:
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
        if not _columns_equal(run_a.episodes[col], run_b.episodes[col]):
            return f"episodes.csv column {col} differs"
    cols_a = [c for c in run_a.updates.names if c.startswith(schema.LOSS_PREFIX)]
    cols_b = [c for c in run_b.updates.names if c.startswith(schema.LOSS_PREFIX)]
    if cols_a != cols_b:
        return f"updates.csv loss columns differ: {cols_a} vs {cols_b}"
    if len(run_a.updates) != len(run_b.updates):
        return f"updates.csv has {len(run_a.updates)} vs {len(run_b.updates)} rows"
    for col in [*cols_a, "params_checksum"]:
        if col in run_a.updates and col in run_b.updates and not _columns_equal(
            run_a.updates[col], run_b.updates[col]
        ):
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

@dataclass
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

    def __post_init__(self) -> None:
        self.reference = self.reference or self.group_b

    @property
    def exit_code(self) -> int:
        return EXIT_PASS if self.verdict == PASS else EXIT_FAIL

    @property
    def label(self) -> str:
        if self.bitwise.identical:
            return "PASS (bitwise identical)"
        return {PASS: "PASS (equivalent)", DIFFERENT: "DIFFERENT",
                INCONCLUSIVE: "INCONCLUSIVE"}[self.verdict]

    def line(self) -> str:
        f, u = self.final, self.auc
        return (
            f"equivalence {self.group_a} vs reference {self.group_b}: {self.label}; "
            f"delta {self.delta:g}; "
            f"final IQM diff {f.diff:+.3f} 90% CI [{f.ci90[0]:+.3f}, {f.ci90[1]:+.3f}]; "
            f"AUC IQM diff {u.diff:+.3f} 90% CI [{u.ci90[0]:+.3f}, {u.ci90[1]:+.3f}]; "
            f"seeds {len(self.seeds_a)} vs {len(self.seeds_b)}, {len(self.tasks)} task(s)"
        )

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["label"] = self.label
        d["line"] = self.line()
        return d


def equivalence(a: GroupScores, b: GroupScores, delta: float = DEFAULT_DELTA) -> EquivalenceResult:
    """Welch TOST of group a vs b (the reference) on per-seed IQM of final score and of
    normalised AUC; differences are a - b."""
    if a.tasks != b.tasks:
        raise AnalysisError(
            f"groups {a.group!r} and {b.group!r} cover different tasks: {a.tasks} vs {b.tasks}"
        )
    if a.frame_grid.shape != b.frame_grid.shape or not np.allclose(a.frame_grid, b.frame_grid):
        raise AnalysisError("groups must share one frame grid (build them with scores_by_group)")
    final = welch_interval(per_seed_iqm(a.final), per_seed_iqm(b.final))
    auc = welch_interval(per_seed_iqm(a.auc), per_seed_iqm(b.auc))
    bitwise = bitwise_identical(a, b)
    verdict = tost_verdict([final, auc], delta)
    notes = []
    if bitwise.identical and verdict != PASS:
        notes.append("records are bitwise identical; verdict set to PASS")
        verdict = PASS
    if min(len(a.seeds), len(b.seeds)) < 2 and not bitwise.identical:
        notes.append("fewer than 2 seeds in a group: no spread estimate, cannot pass")
    per_game = []
    for j, t in enumerate(a.tasks):
        w = welch_interval(a.final[:, j], b.final[:, j])
        per_game.append({"task": t, "mean_a": w.mean_a, "mean_b": w.mean_b, "diff": w.diff,
                         "ci95": list(w.ci95)})
    return EquivalenceResult(verdict, a.group, b.group, float(delta), final, auc, bitwise,
                             list(a.seeds), list(b.seeds), list(a.tasks), per_game, notes)


# ---------------------------------------------------------------- regression gate

@dataclass
class RegressionResult:
    verdict: str  # PASS or REGRESSION
    lower_bound: float  # one-sided lower confidence bound of new - reference
    diff: float  # mean(new) - mean(reference)
    new_mean: float
    reference_mean: float
    delta: float
    confidence: float
    n_new: int
    n_reference: int  # 0 when the reference is a published number
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return EXIT_PASS if self.verdict == PASS else EXIT_FAIL

    def line(self) -> str:
        ref = f"{self.n_reference} seeds" if self.n_reference else "published number"
        return (
            f"regression: {self.verdict}; new - reference = {self.diff:+.4f}, one-sided "
            f"{self.confidence:.0%} lower bound {self.lower_bound:+.4f} vs -delta "
            f"{-self.delta:+.4f}; new {self.new_mean:.4f} ({self.n_new} seeds), reference "
            f"{self.reference_mean:.4f} ({ref})"
        )

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["line"] = self.line()
        return d


def regression(
    new_scores: Sequence[float] | np.ndarray,
    reference_scores: Sequence[float] | np.ndarray | float,
    delta: float,
    confidence: float = 0.95,
) -> RegressionResult:
    """PASS when the one-sided `confidence` lower bound of mean(new) - reference > -delta.

    new_scores: per-seed values of the new version (e.g. per-seed IQM of final HNS).
    reference_scores: per-seed values of the reference (Welch bound) or one published
    number (one-sample t bound). With a single new value and a number there is no spread
    estimate: the point difference is used and a note says so.
    """
    new = np.asarray(new_scores, dtype=np.float64).ravel()
    if len(new) == 0 or not np.all(np.isfinite(new)):
        raise AnalysisError("regression needs at least one finite new score")
    if delta < 0:
        raise AnalysisError(f"delta must be >= 0, got {delta}")
    if not 0.5 <= confidence < 1:
        raise AnalysisError(f"confidence must be in [0.5, 1), got {confidence}")
    notes: list[str] = []
    if np.ndim(reference_scores) == 0:
        ref_mean = float(reference_scores)  # type: ignore[arg-type]
        n_ref = 0
        diff = float(new.mean() - ref_mean)
        if len(new) < 2:
            notes.append("one new value and a published reference: no spread, point bound")
            lower = diff
        else:
            se = float(new.std(ddof=1) / math.sqrt(len(new)))
            lower = diff - float(stats.t.ppf(confidence, len(new) - 1)) * se
    else:
        ref = np.asarray(reference_scores, dtype=np.float64).ravel()
        if len(ref) == 0:
            raise AnalysisError("reference has no scores")
        ref_mean, n_ref = float(ref.mean()), len(ref)
        diff = float(new.mean() - ref_mean)
        sa = new.var(ddof=1) / len(new) if len(new) > 1 else 0.0
        sb = ref.var(ddof=1) / len(ref) if len(ref) > 1 else 0.0
        if len(new) < 2 and len(ref) < 2:
            notes.append("one value on each side: no spread, point bound")
        se = math.sqrt(sa + sb)
        if se == 0:
            lower = diff
        else:
            denom = (sa**2 / (len(new) - 1) if len(new) > 1 else 0) + (
                sb**2 / (len(ref) - 1) if len(ref) > 1 else 0)
            df = (sa + sb) ** 2 / denom
            lower = diff - float(stats.t.ppf(confidence, df)) * se
    verdict = PASS if lower > -delta else REGRESSION
    return RegressionResult(verdict, float(lower), diff, float(new.mean()), ref_mean,
                            float(delta), float(confidence), len(new), n_ref, notes)


def write_json(path: Path, obj: dict[str, Any]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(_clean(obj), indent=2, allow_nan=False)
    path.write_text(text + "\n", encoding="utf-8")
    return path


def _clean(o: Any) -> Any:
    """Plain JSON: NumPy values to Python, NaN/inf to null, tuples to lists."""
    if hasattr(o, "tolist"):
        o = o.tolist()
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, (str, int, float, bool)) or o is None:
        return o
    return str(o)
