"""The regression gate: PASS when the one-sided lower bound of new - reference (per
independent seed) is above -delta; REGRESSION otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from analysis.errors import AnalysisError
from analysis.scoring.replicates import collapse_seed_copies
from analysis.scoring.scores import GroupScores
from analysis.stats.welch import t_quantile, welch_stats
from analysis.verdicts.equivalence import PASS, REGRESSION
from analysis.verdicts.seed_metrics import SeedMetric, iqm_over_tasks
from runrecord.exits import EXIT_FAILED, EXIT_OK

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
    margin: str = ""  # how delta was chosen (analysis.verdicts.margins)
    metric: str = "iqm"
    games: list[str] = field(default_factory=list)
    per_game: list[dict[str, Any]] = field(default_factory=list)  # worst first
    subject: str = ""  # what was gated, e.g. "cleanba-ppo on CartPole-v1 (2 layout(s), ...)"

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.verdict == PASS else EXIT_FAILED

    def line(self) -> str:
        new_seeds = self.new_seeds or f"{self.n_new} seeds"
        ref = (self.reference_seeds or f"{self.n_reference} seeds") if self.n_reference \
            else "published number"
        per_seed = "" if self.metric == "iqm" else f" ({self.metric} per seed)"
        for_subject = f" for {self.subject}" if self.subject else ""
        return (
            f"regression{per_seed}: {self.verdict}{for_subject}; new - reference = "
            f"{self.diff:+.4f}, one-sided "
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
    first: analysis.scoring.replicates.collapse_seed_copies, or use `regression_gate`).
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


def check_same_games(new: Sequence[str], reference: Sequence[str]) -> None:
    """AnalysisError naming the games each side lacks: a gate over different games
    compares nothing."""
    if list(new) != list(reference):
        only_new = sorted(set(new) - set(reference))
        only_ref = sorted(set(reference) - set(new))
        raise AnalysisError(
            "new and reference cover different games: "
            + "; ".join(x for x in (f"missing in the reference: {only_new}" if only_new else "",
                                    f"missing in the new runs: {only_ref}" if only_ref else "")
                        if x)
            + ". A gate over different games compares nothing; select common games")


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
    analysis.scoring.replicates.collapse_seed_copies), then `metric` maps each seed's games to
    one number and `regression` bounds the difference.

    score: "final" or "auc". Both sides must cover the same games (AnalysisError naming
    the games each side lacks). The result lists per game new - reference, worst first.
    """
    if score not in ("final", "auc"):
        raise AnalysisError(f"score must be 'final' or 'auc', got {score!r}")
    new = collapse_seed_copies(new_groups, "new", attr=score)
    ref = collapse_seed_copies(reference_groups, "reference", attr=score)
    check_same_games(new.tasks, ref.tasks)
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
