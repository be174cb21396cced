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
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from analysis.errors import AnalysisError
from analysis.metrics import iqm
from analysis.scores import GroupScores
from analysis.tables import ONE_SEED
from runrecord import Run, schema
from runrecord.exits import EXIT_FAILED, EXIT_OK

# Default equivalence margin on Atari, in HNS; other suites have their own default
# (analysis.margins). It is NOT a power guarantee: with a per-seed IQM sd of 0.063 HNS
# (one column of the published tables; others range 0.011 to 0.141) Welch TOST on one
# metric passes truly equivalent groups about 57% of the time at 3 seeds per side; 80%
# needs about 0.20 (`python -m analysis plan-seeds --sd 0.063`, docs/analysis.md).
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


def welch_stats(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised Welch: a (..., n), b (..., m) with n, m >= 2 -> (diff, se, df), each
    of shape (...). The core of every Welch verdict here and of the seed planner's
    simulations (analysis.seedplan), so both run the same arithmetic. se == 0 gives
    df = inf."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    n, m = a.shape[-1], b.shape[-1]
    diff = a.mean(axis=-1) - b.mean(axis=-1)
    sa = a.var(axis=-1, ddof=1) / n
    sb = b.var(axis=-1, ddof=1) / m
    se = np.sqrt(sa + sb)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(se > 0, (sa + sb) ** 2 / (sa**2 / (n - 1) + sb**2 / (m - 1)), np.inf)
    return diff, se, df


def t_quantile(q: float, df: np.ndarray | float) -> np.ndarray:
    """Student t quantile, vectorised; df = inf gives the normal quantile."""
    return np.asarray(stats.t.ppf(q, np.asarray(df, dtype=np.float64)))


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
    if len(a) == 1 or len(b) == 1:
        # No spread estimate on one side: only a perfectly flat comparison is decidable.
        if np.all(a == a[0]) and np.all(b == b[0]) and diff == 0:
            return WelchInterval(diff, 0.0, math.inf, (diff, diff), (diff, diff), len(a),
                                 len(b), float(a.mean()), float(b.mean()))
        nan2 = (math.nan, math.nan)
        return WelchInterval(diff, math.nan, math.nan, nan2, nan2, len(a), len(b),
                             float(a.mean()), float(b.mean()))
    d, se_a, df_a = welch_stats(a, b)
    se, df = float(se_a), float(df_a)
    if se == 0:
        ci90 = ci95 = (diff, diff)
    else:
        t90, t95 = float(t_quantile(0.95, df)), float(t_quantile(0.975, df))
        ci90 = (diff - t90 * se, diff + t90 * se)
        ci95 = (diff - t95 * se, diff + t95 * se)
    return WelchInterval(diff, se, df, ci90, ci95, len(a), len(b), float(a.mean()),
                         float(b.mean()))


def tost_passes(a: np.ndarray, b: np.ndarray, delta: float) -> np.ndarray:
    """Vectorised TOST of one metric: a (..., n), b (..., m), n, m >= 2 -> bool (...):
    the 90% Welch CI of mean(a) - mean(b) lies inside (-delta, +delta). What
    `tost_verdict` calls PASS for that metric; the seed planner simulates with it."""
    diff, se, df = welch_stats(a, b)
    half = t_quantile(0.95, df) * se
    return (-delta < diff - half) & (diff + half < delta)


def tost_required_margin(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The smallest delta at which one metric's TOST passes: max |90% CI endpoint|.
    PASS at delta iff this is < delta (vectorised; the planner's 'smallest delta')."""
    diff, se, df = welch_stats(a, b)
    return np.abs(diff) + t_quantile(0.95, df) * se


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


SeedMetric = Callable[[np.ndarray, Sequence[str]], np.ndarray]
"""Maps a (seeds, tasks) score matrix and its task names to one value per seed. Every
verdict's per-seed value goes through one of these (equivalence, the gate), so another
metric (e.g. a median over a fixed game subset) plugs in by name in SEED_METRICS."""


def iqm_over_tasks(values: np.ndarray, tasks: Sequence[str]) -> np.ndarray:
    """The default SeedMetric: per seed, the IQM over tasks (the value itself for 1 task)."""
    return per_seed_iqm(values)


def atari5_median(values: np.ndarray, tasks: Sequence[str]) -> np.ndarray:
    """SeedMetric: per seed, the Atari-5 estimate of the 57-game median HNS from its five
    games (analysis.atari5; docs/atari5.md). AnalysisError names a missing game."""
    from analysis.atari5 import per_seed_from_normalised

    return per_seed_from_normalised(values, tasks)


SEED_METRICS: dict[str, SeedMetric] = {"iqm": iqm_over_tasks, "atari5-median": atari5_median}
"""Per-seed metrics by CLI name."""


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

def ci_text(ci: tuple[float, float], fewest_seeds: int) -> str:
    """`[-0.036, +0.032]`, or why there is none: "n/a (1 seed)" when a side has one seed
    (no spread to estimate), "n/a" for any other undefined interval; never nan."""
    if any(math.isnan(x) for x in ci):
        return ONE_SEED if fewest_seeds == 1 else "n/a"
    return f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"


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
    margin: str = ""  # how delta was chosen, e.g. "0.16 HNS (Atari default)"
    metric: str = "iqm"  # the per-seed metric (SEED_METRICS name)

    def __post_init__(self) -> None:
        self.reference = self.reference or self.group_b

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.verdict == PASS else EXIT_FAILED

    @property
    def label(self) -> str:
        if self.bitwise.identical:
            return "PASS (bitwise identical)"
        return {PASS: "PASS (equivalent)", DIFFERENT: "DIFFERENT",
                INCONCLUSIVE: "INCONCLUSIVE"}[self.verdict]

    @property
    def metric_label(self) -> str:
        return "IQM" if self.metric == "iqm" else self.metric

    def line(self) -> str:
        f, u = self.final, self.auc
        fewest = min(len(self.seeds_a), len(self.seeds_b))
        return (
            f"equivalence {self.group_a} vs reference {self.group_b}: {self.label}; "
            f"delta {self.margin or f'{self.delta:g}'}; "
            f"final {self.metric_label} diff {f.diff:+.3f} 90% CI {ci_text(f.ci90, fewest)}; "
            f"AUC {self.metric_label} diff {u.diff:+.3f} 90% CI {ci_text(u.ci90, fewest)}; "
            f"{len(self.seeds_a)} vs {len(self.seeds_b)} independent seeds (one run per seed "
            f"and group), {len(self.tasks)} task(s)"
        )

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["label"] = self.label
        d["line"] = self.line()
        return d


def equivalence(a: GroupScores, b: GroupScores, delta: float = DEFAULT_DELTA, *,
                metric: SeedMetric = iqm_over_tasks, metric_name: str = "iqm",
                margin: str = "") -> EquivalenceResult:
    """Welch TOST of group a vs b (the reference) on per-seed `metric` (default: IQM over
    tasks) of final score and of normalised AUC; differences are a - b. A group's rows
    are distinct seeds (one run per seed and env), so the test counts seeds, never
    layout copies. `margin` describes delta in the verdict line (analysis.margins)."""
    if a.tasks != b.tasks:
        raise AnalysisError(
            f"groups {a.group!r} and {b.group!r} cover different tasks: {a.tasks} vs {b.tasks}"
        )
    if a.frame_grid.shape != b.frame_grid.shape or not np.allclose(a.frame_grid, b.frame_grid):
        raise AnalysisError("groups must share one frame grid (build them with scores_by_group)")
    final = welch_interval(metric(a.final, a.tasks), metric(b.final, b.tasks))
    auc = welch_interval(metric(a.auc, a.tasks), metric(b.auc, b.tasks))
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
                             list(a.seeds), list(b.seeds), list(a.tasks), per_game, notes,
                             margin=margin, metric=metric_name)


# ---------------------------------------------------------------- regression gate

WELCH = "Welch (both sides' variances)"
REFERENCE_SIDE = "reference-side variance (1 new seed; assumes equal spread)"
NEW_SIDE = "new-side variance (1 reference seed; assumes equal spread)"
ONE_SAMPLE = "one-sample t (new seeds' variance; published reference number)"


def regression_variance(n_new: int, n_ref: int) -> str:
    """Which variance the gate uses for n_new vs n_ref independent seeds (n_ref 0: a
    published number). Raises AnalysisError (exit 2) when no side has 2 seeds: without a
    spread estimate no bound is sound, and a point bound would pass a true drop of delta
    about half the time.

    With one seed on one side, that side's variance is taken to be the other side's
    (the same code on the same games: equal spread under the null), and
    diff / (s_other * sqrt(1/n_new + 1/n_ref)) is Student t with n_other - 1 df: an exact
    5% false-pass rate at a true drop of delta. Taking the lone side's variance as 0
    (the old rule) passed a true drop of delta 14-31% of the time.
    """
    if n_new < 1:
        raise AnalysisError("regression needs at least one new seed")
    if n_ref == 0:
        if n_new < 2:
            raise AnalysisError(
                "regression against a published number needs >= 2 new seeds (one value has "
                "no spread estimate, so no confidence bound); run more seeds")
        return ONE_SAMPLE
    if n_new < 2 and n_ref < 2:
        raise AnalysisError(
            f"regression needs >= 2 independent seeds on at least one side to estimate the "
            f"spread; got {n_new} new and {n_ref} reference seed(s) (layout copies of one "
            f"seed count once); run more seeds")
    if n_new < 2:
        return REFERENCE_SIDE
    if n_ref < 2:
        return NEW_SIDE
    return WELCH


def regression_lower_bound(new: np.ndarray, reference: np.ndarray | float,
                           confidence: float = 0.95
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised gate: new (..., n), reference (..., m) per-seed values (or a published
    number) -> (diff, lower, se, df), each (...): the one-sided `confidence` lower bound
    of mean(new) - mean(reference), with the variance `regression_variance` names.
    Zero spread gives lower = diff. The regression gate and the seed planner both call it."""
    new = np.asarray(new, dtype=np.float64)
    n = new.shape[-1]
    if np.ndim(reference) == 0:
        regression_variance(n, 0)
        diff = new.mean(axis=-1) - float(reference)  # type: ignore[arg-type]
        se = new.std(axis=-1, ddof=1) / math.sqrt(n)
        df = np.full(diff.shape, n - 1.0)
    else:
        ref = np.asarray(reference, dtype=np.float64)
        m = ref.shape[-1]
        kind = regression_variance(n, m)
        if kind == WELCH:
            diff, se, df = welch_stats(new, ref)
        else:
            other = ref if kind == REFERENCE_SIDE else new
            diff = new.mean(axis=-1) - ref.mean(axis=-1)
            se = other.std(axis=-1, ddof=1) * math.sqrt(1 / n + 1 / m)
            df = np.full(diff.shape, other.shape[-1] - 1.0)
    with np.errstate(invalid="ignore"):
        lower = np.where(se > 0, diff - t_quantile(confidence, df) * se, diff)
    return diff, lower, se, df


@dataclass
class RegressionResult:
    verdict: str  # PASS or REGRESSION
    lower_bound: float  # one-sided lower confidence bound of new - reference
    diff: float  # mean(new) - mean(reference)
    new_mean: float
    reference_mean: float
    delta: float
    confidence: float
    n_new: int  # independent seeds of the new side
    n_reference: int  # independent seeds of the reference; 0 when it is a published number
    notes: list[str] = field(default_factory=list)
    variance: str = ""  # which variance the bound uses (regression_variance)
    df: float = math.nan
    new_seeds: str = ""  # e.g. "3 seeds (12 runs: layout copies averaged per seed)"
    reference_seeds: str = ""
    margin: str = ""  # how delta was chosen (analysis.margins)
    metric: str = "iqm"
    games: list[str] = field(default_factory=list)
    per_game: list[dict[str, Any]] = field(default_factory=list)  # worst first

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.verdict == PASS else EXIT_FAILED

    def line(self) -> str:
        new_seeds = self.new_seeds or f"{self.n_new} seeds"
        ref = (self.reference_seeds or f"{self.n_reference} seeds") if self.n_reference \
            else "published number"
        per_seed = "" if self.metric == "iqm" else f" ({self.metric} per seed)"
        return (
            f"regression{per_seed}: {self.verdict}; new - reference = {self.diff:+.4f}, one-sided "
            f"{self.confidence:.0%} lower bound {self.lower_bound:+.4f} vs -delta "
            f"{-self.delta:+.4f} (delta {self.margin or f'{self.delta:g}'}); new "
            f"{self.new_mean:.4f} ({new_seeds}), reference {self.reference_mean:.4f} ({ref})"
        )

    def game_lines(self, worst: int = 5) -> list[str]:
        """The `worst` games by new - reference (report detail: per game, 3 seeds cannot
        decide; the verdict is on the per-seed metric over all games)."""
        return [f"  {g['task']}: new - reference = {g['diff']:+.4f} (new {g['mean_new']:.4f}, "
                f"reference {g['mean_reference']:.4f}; {g['n_new']} vs {g['n_reference']} "
                f"seeds)" for g in self.per_game[:worst]]

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

    new_scores: one value per INDEPENDENT seed of the new version (reduce layout copies
    first: analysis.replicates.collapse_seed_copies, or use `regression_gate`).
    reference_scores: per-seed values of the reference or one published number.
    Variance: `regression_variance` (Welch; the other side's variance when a side has
    one seed; AnalysisError when neither side has two).
    """
    new = np.asarray(new_scores, dtype=np.float64).ravel()
    if len(new) == 0 or not np.all(np.isfinite(new)):
        raise AnalysisError("regression needs at least one finite new score")
    if not delta >= 0:
        raise AnalysisError(f"delta must be >= 0, got {delta}")
    if not 0.5 <= confidence < 1:
        raise AnalysisError(f"confidence must be in [0.5, 1), got {confidence}")
    if np.ndim(reference_scores) == 0:
        ref: np.ndarray | float = float(reference_scores)  # type: ignore[arg-type]
        ref_mean, n_ref = float(ref), 0
    else:
        ref = np.asarray(reference_scores, dtype=np.float64).ravel()
        if len(ref) == 0 or not np.all(np.isfinite(ref)):
            raise AnalysisError("reference has no (finite) scores")
        ref_mean, n_ref = float(ref.mean()), len(ref)
    variance = regression_variance(len(new), n_ref)
    diff, lower, _, df = regression_lower_bound(new, ref, confidence)
    verdict = PASS if float(lower) > -delta else REGRESSION
    notes = [] if variance in (WELCH, ONE_SAMPLE) else [f"variance: {variance}"]
    return RegressionResult(verdict, float(lower), float(diff), float(new.mean()), ref_mean,
                            float(delta), float(confidence), len(new), n_ref, notes,
                            variance=variance, df=float(df))


def regression_gate(
    new_groups: Sequence[GroupScores],
    reference_groups: Sequence[GroupScores],
    delta: float,
    *,
    confidence: float = 0.95,
    score: str = "final",
    metric: SeedMetric = iqm_over_tasks,
    metric_name: str = "iqm",
    margin: str = "",
) -> RegressionResult:
    """The regression gate on run records: each side's groups (e.g. a system's layouts)
    are reduced to ONE value per independent seed (the mean of its layout copies:
    analysis.replicates.collapse_seed_copies), then `metric` maps each seed's games to
    one number and `regression` bounds the difference.

    score: "final" or "auc". Both sides must cover the same games (AnalysisError naming
    the games each side lacks). The result lists per game new - reference, worst first.
    """
    from analysis.replicates import collapse_seed_copies

    if score not in ("final", "auc"):
        raise AnalysisError(f"score must be 'final' or 'auc', got {score!r}")
    new = collapse_seed_copies(new_groups, "new", attr=score)
    ref = collapse_seed_copies(reference_groups, "reference", attr=score)
    if new.tasks != ref.tasks:
        only_new = sorted(set(new.tasks) - set(ref.tasks))
        only_ref = sorted(set(ref.tasks) - set(new.tasks))
        raise AnalysisError(
            "new and reference cover different games: "
            + "; ".join(x for x in (f"missing in the reference: {only_new}" if only_new else "",
                                    f"missing in the new runs: {only_ref}" if only_ref else "")
                        if x)
            + ". A gate over different games compares nothing; select common games")
    res = regression(metric(new.values, new.tasks), metric(ref.values, ref.tasks), delta,
                     confidence)
    per_game: list[dict[str, Any]] = []
    for j, task in enumerate(new.tasks):
        a, b = new.values[:, j], ref.values[:, j]
        per_game.append({"task": task, "diff": float(a.mean() - b.mean()),
                         "mean_new": float(a.mean()), "mean_reference": float(b.mean()),
                         "n_new": len(a), "n_reference": len(b)})
    per_game.sort(key=lambda g: g["diff"])
    res.new_seeds, res.reference_seeds = new.describe(), ref.describe()
    res.margin, res.metric, res.games, res.per_game = margin, metric_name, list(new.tasks), per_game
    return res


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
