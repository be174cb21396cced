"""The regression gate, three outcomes, each on its own evidence:
- PASS: non-inferiority shown: the one-sided lower bound of new - reference (per
  independent seed) is above -delta (and the untrimmed mean's above -MEAN_MARGIN), and
  no rule found a regression;
- REGRESSION: evidence of a failure: the aggregate's one-sided upper bound is below
  -delta (the drop's interval beyond the margin), a game is flagged by the per-game
  rule, a game COLLAPSED, or the untrimmed mean's upper bound is below -MEAN_MARGIN;
- UNDECIDED: neither (the seeds at hand cannot show either; the seed planner says how
  many would: analysis.verdicts.seedplan). Exit EXIT_UNDECIDED, EXIT_FAILED under
  --strict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from analysis.errors import AnalysisError, TooFewSeeds
from analysis.inputs.load import version_hint
from analysis.scoring.scores import GroupScores, collapse_seed_copies
from analysis.stats.welch import paired_stats, t_upper, welch_from_summary, welch_stats
from analysis.verdicts.equivalence import PASS, REGRESSION, UNDECIDED
from analysis.verdicts.per_game import (
    COLLAPSE_LEVEL,
    MEAN_MARGIN,
    RELATIVE_MARGIN,
    collapsed_games,
    mean_relative_bounds,
    per_game_drops,
)
from analysis.verdicts.seed_pairing import SeedMetric, iqm_over_tasks, seed_design
from runrecord.exits import verdict_exit
from runrecord.words import counted, signed

# ---------------------------------------------------------------- regression gate

WELCH = "Welch (both sides' variances; Hsu df when the seed counts differ)"
PAIRED = ("paired by seed (the same seeds on both sides: the bound of the mean per-seed "
          "difference, n - 1 df; analysis.verdicts.seed_pairing)")
REFERENCE_SIDE = ("reference-side variance (1 new seed; equal spread vouched for by "
                  "--assume-equal-spread: the rate holds only then)")
NEW_SIDE = ("new-side variance (1 reference seed; equal spread vouched for by "
            "--assume-equal-spread: the rate holds only then)")
PUBLISHED = "Welch against a published mean ± sd of its seeds (Hsu df)"
ONE_SAMPLE = ("one-sample t (new seeds' variance; the reference number taken as exact, "
              "--reference-exact)")

ONE_SEED_REFUSAL = (
    "a side with one seed has no spread of its own; borrowing the other side's is exact "
    "only at equal spreads (at twice the spread a true drop of delta passes 12-19% of the "
    "time, not 5%). Run >= 2 seeds on each side, or vouch that both sides share one "
    "spread with --assume-equal-spread")
BARE_NUMBER_REFUSAL = (
    "a published reference is itself the mean of a few seeds: taking it as exact passes a "
    "true drop of delta up to 20-30% of the time. Give its spread and seed count "
    "(--reference-sd, --reference-seeds: e.g. the table's '± sd' and 3), or "
    "--reference-exact if the number is a fixed threshold with no noise")


def regression_variance(n_new: int, n_ref: int, *, assume_equal_spread: bool = False,
                        reference_exact: bool = False, paired: bool = False) -> str:
    """Which variance the gate uses for n_new vs n_ref independent seeds (n_ref 0: a
    published number taken as exact). Raises AnalysisError (exit 2) for the cases whose
    error rate the gate cannot keep:
    - no side with 2 seeds (no spread estimate at all);
    - one side with 1 seed, unless `assume_equal_spread` (then that side borrows the
      other's variance: Student t with n_other - 1 df, exact only at equal spreads);
    - a bare published number, unless `reference_exact` (use `published_lower_bound`
      with the number's sd and seed count instead).
    `paired`: the sides ran the same seeds (analysis.verdicts.seed_pairing): PAIRED, from
    2 seeds a side.
    """
    if n_new < 1:
        raise AnalysisError("regression needs at least one new seed")
    if paired:
        if n_new != n_ref or n_new < 2:
            raise TooFewSeeds(f"a paired gate needs the same >= 2 seeds on both sides, "
                                f"got {n_new} new and {n_ref} reference")
        return PAIRED
    if n_ref == 0:
        if n_new < 2:
            raise TooFewSeeds(
                "regression against a published number needs >= 2 new seeds (one value has "
                "no spread estimate, so no confidence bound); run more seeds")
        if not reference_exact:
            raise AnalysisError(BARE_NUMBER_REFUSAL)
        return ONE_SAMPLE
    if n_new < 2 and n_ref < 2:
        raise TooFewSeeds(
            f"regression needs >= 2 independent seeds on at least one side to estimate the "
            f"spread; got {n_new} new and {counted(n_ref, 'reference seed')} (layout copies of one "
            f"seed count once); run more seeds")
    if min(n_new, n_ref) < 2:
        if not assume_equal_spread:
            raise TooFewSeeds(f"{n_new} new vs {counted(n_ref, 'reference seed')}: "
                                + ONE_SEED_REFUSAL)
        return REFERENCE_SIDE if n_new < 2 else NEW_SIDE
    return WELCH


def regression_lower_bound(new: np.ndarray, reference: np.ndarray | float,
                           confidence: float = 0.95, *, assume_equal_spread: bool = False,
                           reference_exact: bool = False, paired: bool = False,
                           variance: str | None = None
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised gate: new (..., n), reference (..., m) per-seed values (or a number
    taken as exact) -> (diff, lower, se, df), each (...): the one-sided `confidence` lower
    bound of mean(new) - mean(reference), with the variance `regression_variance` names
    (which also refuses what the gate cannot decide), unless the caller has it already
    (`variance`). Zero spread gives lower = diff. The regression gate, the seed planner
    and the calibration suite all call it."""
    new = np.asarray(new, dtype=np.float64)
    n = new.shape[-1]
    m = 0 if np.ndim(reference) == 0 else np.shape(reference)[-1]
    kind = variance or regression_variance(n, m, assume_equal_spread=assume_equal_spread,
                                           reference_exact=reference_exact, paired=paired)
    if kind == ONE_SAMPLE:
        diff = new.mean(axis=-1) - float(reference)  # type: ignore[arg-type]
        se = new.std(axis=-1, ddof=1) / math.sqrt(n)
        df = np.full(diff.shape, n - 1.0)
    else:
        ref = np.asarray(reference, dtype=np.float64)
        if kind == PAIRED:  # new[..., s] and ref[..., s] are the same seed
            diff, se, df = paired_stats(new, ref)
        elif kind == WELCH:
            diff, se, df = welch_stats(new, ref)
        else:
            other = ref if kind == REFERENCE_SIDE else new
            diff = new.mean(axis=-1) - ref.mean(axis=-1)
            se = other.std(axis=-1, ddof=1) * math.sqrt(1 / n + 1 / m)
            df = np.full(diff.shape, other.shape[-1] - 1.0)
    return diff, _lower(diff, se, df, confidence), se, df


def _lower(diff: np.ndarray, se: np.ndarray, df: np.ndarray, confidence: float) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.where(se > 0, diff - t_upper(1 - confidence, df) * se, diff)


def published_lower_bound(new: np.ndarray, published_mean: np.ndarray | float,
                          published_sd: np.ndarray | float, published_n: int,
                          confidence: float = 0.95
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised gate against a published mean ± sd (ddof=1) of `published_n` seeds:
    new (..., n) -> (diff, lower, se, df). Welch from the summary (the published mean's
    own noise enters), Hsu df when the seed counts differ (analysis.stats.welch)."""
    new = np.asarray(new, dtype=np.float64)
    n = new.shape[-1]
    if n < 2 or published_n < 2:
        raise AnalysisError(f"regression against a published mean ± sd needs >= 2 seeds on "
                            f"each side; got {n} new and {published_n} published")
    sd = np.asarray(published_sd, dtype=np.float64)
    if np.any(~np.isfinite(sd)) or np.any(sd < 0):
        raise AnalysisError(f"published sd must be finite and >= 0, got {published_sd}")
    diff, se, df = welch_from_summary(new.mean(axis=-1), new.var(axis=-1, ddof=1), n,
                                      np.asarray(published_mean, dtype=np.float64), sd**2,
                                      published_n)
    return diff, _lower(diff, se, df, confidence), se, df


def metric_per_seed(values: np.ndarray, tasks: Sequence[str], metric: SeedMetric
                    ) -> np.ndarray:
    """`metric` of (..., seeds, games) score matrices -> (..., seeds)."""
    values = np.asarray(values, dtype=np.float64)
    flat = metric(values.reshape(-1, values.shape[-1]), tasks)
    return np.asarray(flat, dtype=np.float64).reshape(values.shape[:-1])


AGGREGATE_RULE = "aggregate"
PER_GAME_RULE = "per-game"
MEAN_RULE = "untrimmed mean"
COLLAPSE_RULE = "collapsed"
PER_GAME_MIN_GAMES = 2
"""The per-game rule (analysis.verdicts.per_game) runs beside the aggregate from 2 games."""


def upper_bound(diff: np.ndarray | float, lower: np.ndarray | float) -> np.ndarray:
    """The one-sided upper bound at the lower bound's level (symmetric interval)."""
    return 2 * np.asarray(diff, dtype=np.float64) - np.asarray(lower, dtype=np.float64)


def three_way(passed: np.ndarray | bool, failed: np.ndarray | bool) -> np.ndarray:
    """REGRESSION where `failed`, else PASS where `passed`, else UNDECIDED."""
    return np.where(failed, REGRESSION, np.where(passed, PASS, UNDECIDED))


@dataclass(frozen=True)
class GateEvidence:
    """What the gate's rules saw, each (...) over the leading axes (`gate_evidence`): the
    verdicts, per rule where it found a REGRESSION, the identity, and the rules' numbers a
    verdict line shows (only the rules that apply: `collapsed` (..., games); `flagged`,
    `per_game_p` (NaN: a game the rule cannot test) and `relative` from 3 games on; the
    untrimmed `mean_relative_diff` and `mean_relative_lower` from 2 seeds a side)."""

    verdicts: np.ndarray
    fired: dict[str, np.ndarray]
    identical: np.ndarray  # equal matrices on the same seeds: PASS, nothing fired
    numbers: dict[str, np.ndarray]


def gate_evidence(new: np.ndarray, reference: np.ndarray, tasks: Sequence[str], delta: float,
                  *, confidence: float = 0.95, metric: SeedMetric = iqm_over_tasks,
                  new_metric_shift: float = 0.0, paired: bool = False,
                  assume_equal_spread: bool = False, same_seeds: bool = True) -> GateEvidence:
    """THE gate: vectorised on (..., n, games) and (..., m, games) score matrices; the
    module docstring's three outcomes. `regression_gate` (what the CLI and the harness
    run) and the calibration suite (through `gate_rules`) both decide here, so the
    published error rates are this function's. new_metric_shift: added to the new side's
    per-seed metric (the calibration suite's way to set a true difference of exactly that
    much in the metric's own units). paired: row s of both sides is the same seed (the
    aggregate and untrimmed-mean bounds are then paired t's; the per-game and COLLAPSED
    rules stay as they are). assume_equal_spread: a one-seed side borrows the other
    side's variance (the user vouches; otherwise AnalysisError). same_seeds: the rows are
    the same seeds on both sides, so equal matrices are an identity (PASS, no rule fires).

    A bound that cannot be computed (NaN) never passes: that case is UNDECIDED."""
    a = metric_per_seed(new, tasks, metric) + new_metric_shift
    b = metric_per_seed(reference, tasks, metric)
    diff, lower, _, _ = regression_lower_bound(a, b, confidence, paired=paired,
                                               assume_equal_spread=assume_equal_spread)
    fired: dict[str, np.ndarray] = {AGGREGATE_RULE: np.asarray(upper_bound(diff, lower) < -delta)}
    passed = lower > -delta
    rule_numbers: dict[str, np.ndarray] = {}
    if len(tasks) >= PER_GAME_MIN_GAMES:
        flagged, p, relative = per_game_drops(new, reference)
        rule_numbers.update(flagged=flagged, per_game_p=p, relative=relative)
        fired[PER_GAME_RULE] = np.asarray(flagged.any(axis=-1))
        if min(np.shape(new)[-2], np.shape(reference)[-2]) >= 2:
            m_diff, m_low, m_high = mean_relative_bounds(new, reference, confidence=confidence,
                                                         paired=paired)
            rule_numbers.update(mean_relative_diff=m_diff, mean_relative_lower=m_low)
            fired[MEAN_RULE] = np.asarray(m_high < -MEAN_MARGIN)
            passed = passed & (m_low > -MEAN_MARGIN)
    rule_numbers["collapsed"] = collapsed_games(new, reference)
    fired[COLLAPSE_RULE] = np.asarray(rule_numbers["collapsed"].any(axis=-1))
    failed = np.logical_or.reduce(list(fired.values()))
    same = np.zeros(np.shape(failed), dtype=bool)
    if same_seeds and new_metric_shift == 0.0 and np.shape(new) == np.shape(reference):
        # (...) True where every seed's every score is equal on both sides (the same
        # seeds, row for row): new - reference is exactly 0, and that is the evidence
        same = np.asarray(np.all(np.asarray(new) == np.asarray(reference), axis=(-2, -1)))
        passed, failed = passed | same, failed & ~same
        fired = {rule: f & ~same for rule, f in fired.items()}
        if "flagged" in rule_numbers:
            rule_numbers["flagged"] = rule_numbers["flagged"] & ~same[..., None]
    return GateEvidence(three_way(passed, failed), fired, same, rule_numbers)


def gate_rules(new: np.ndarray, reference: np.ndarray, tasks: Sequence[str], delta: float,
               **options: Any) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """`gate_evidence`'s (verdicts (...), {rule: bool (...) True where that rule found
    evidence of a REGRESSION}): what the calibration suite counts."""
    evidence = gate_evidence(new, reference, tasks, delta, **options)
    return evidence.verdicts, evidence.fired


@dataclass(frozen=True)
class RegressionResult:
    verdict: str  # PASS, REGRESSION or UNDECIDED
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
    se: float = math.nan  # standard error of diff (the bound is diff - t(confidence, df) se)
    new_seeds: str = ""  # e.g. "3 seeds (12 runs: layout copies averaged per seed)"
    reference_seeds: str = ""
    margin: str = ""  # how delta was chosen (analysis.verdicts.margins)
    metric: str = "iqm"
    games: list[str] = field(default_factory=list)
    per_game: list[dict[str, Any]] = field(default_factory=list)  # worst first
    subject: str = ""  # what was gated, e.g. "cleanba-ppo on CartPole-v1 (2 layout(s), ...)"
    rules: list[str] = field(default_factory=list)  # the rules that found a REGRESSION
    flagged_games: list[dict[str, Any]] = field(default_factory=list)  # per-game rule
    mean_relative_diff: float = math.nan  # untrimmed rule: new - reference mean relative
    mean_relative_lower: float = math.nan  # its one-sided lower bound
    collapsed_games: list[str] = field(default_factory=list)
    not_judged: list[str] = field(default_factory=list)  # games no per-game rule tests
    identical: bool = False  # every seed's score equal on both sides (bit-identical)
    undecided: str = ""  # why UNDECIDED, and the seeds that would decide it
    strict: bool = False  # UNDECIDED exits EXIT_FAILED
    design: str = ""  # paired by seed, or Welch and why (analysis.verdicts.seed_pairing)
    unit: str = ""  # the unit of the numbers, e.g. "HNS (...)" (analysis.scales.normalize)

    @property
    def upper_bound(self) -> float:
        return float(upper_bound(self.diff, self.lower_bound))

    @property
    def seed_sd(self) -> float:
        """The per-seed sd the standard error implies, one sd for both sides (nan without
        spread): what the seed planner plans with."""
        if not self.se > 0:
            return math.nan
        return self.se / math.sqrt(1 / self.n_new + 1 / max(self.n_reference, 1))

    @property
    def exit_code(self) -> int:
        return verdict_exit(self.verdict == PASS, self.verdict == REGRESSION, self.strict)

    def line(self) -> str:
        new_seeds = self.new_seeds or counted(self.n_new, "seed")
        ref = (self.reference_seeds or counted(self.n_reference, "seed")) if self.n_reference \
            else "a number taken as exact"
        for_subject = f" for {self.subject}" if self.subject else ""
        if self.identical and self.verdict == PASS:  # the identity first, no interval
            return (f"regression: PASS (bitwise identical){for_subject}: every seed's scores "
                    f"are identical on both sides, so new - reference is exactly 0 (delta "
                    f"{self.margin or f'{self.delta:g}'}); new {new_seeds}, reference {ref}")
        per_seed = "" if self.metric == "iqm" else f" ({self.metric} per seed)"
        fired = f" (rule: {', '.join(self.rules_text())})" if self.rules else ""
        return (
            f"regression{per_seed}: {self.verdict}{fired}{for_subject}; new - reference = "
            f"{signed(self.diff, 4)}, one-sided "
            f"{self.confidence:.0%} bounds [{signed(self.lower_bound, 4)}, {signed(self.upper_bound, 4)}]"
            f" vs -delta {signed(-self.delta, 4)} (delta {self.margin or f'{self.delta:g}'}); new "
            f"{self.new_mean:.4f} ({new_seeds}), reference {self.reference_mean:.4f} ({ref})"
        )

    def detail_lines(self) -> list[str]:
        """The design beside the verdict line (--verbose, JSON, the report's details): how
        the bound was built (paired by seed, or Welch and why) and the numbers' unit."""
        return ([f"design: {self.design}"] if self.design else []) \
            + ([f"numbers in {self.unit}"] if self.unit else [])

    def cells(self) -> dict[str, str]:
        """The verdict table's cells (the report): estimate, CI, margin, seeds."""
        ref = f"{self.n_reference}" if self.n_reference else "a number"
        return {"estimate": signed(self.diff, 4),
                "ci": f"one-sided {self.confidence:.0%}: [{signed(self.lower_bound, 4)}, "
                      f"{signed(self.upper_bound, 4)}]",
                "margin": f"-{self.delta:g}", "seeds": f"{self.n_new} new vs {ref} reference"}

    def rules_text(self) -> list[str]:
        out = []
        for r in self.rules:
            if r == PER_GAME_RULE:
                games = ", ".join(f"{g['task']} {g['relative'] - 1:+.0%}"
                                  for g in self.flagged_games)
                out.append(f"per-game drop > {RELATIVE_MARGIN:.0%} (Holm over games, "
                           f"moderated per-game spread): {games}")
            elif r == MEAN_RULE:
                out.append(f"untrimmed mean relative score {self.mean_relative_diff:+.1%}, "
                           f"its upper bound below -{MEAN_MARGIN:.0%}")
            elif r == COLLAPSE_RULE:
                out.append(f"COLLAPSED (every new seed within {COLLAPSE_LEVEL:.0%} of the "
                           f"random score on a game the reference learned): "
                           f"{', '.join(self.collapsed_games)}")
            else:
                out.append(f"{r} upper bound below -delta (the drop is beyond the margin)")
        return out

    def why_lines(self) -> list[str]:
        """Why the verdict is what it is, beyond the verdict line (UNDECIDED's reason and
        seeds; the games no per-game rule could judge)."""
        out = [f"UNDECIDED: {self.undecided}"] if self.verdict == UNDECIDED else []
        if self.not_judged:
            out.append(f"not judged per game ({len(self.not_judged)}): "
                       + ", ".join(self.not_judged))
        return out

    def game_lines(self, worst: int = 5) -> list[str]:
        """The `worst` games by new - reference (report detail: per game, 3 seeds cannot
        decide; the verdict is on the per-seed metric over all games)."""
        return [f"  {g['task']}: new - reference = {signed(g['diff'], 4)} (new {g['mean_new']:.4f}, "
                f"reference {g['mean_reference']:.4f}; {g['n_new']} vs {g['n_reference']} "
                f"seeds)" for g in self.per_game[:worst]]

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["line"] = self.line()
        d["detail"] = self.detail_lines()
        return d


@dataclass(frozen=True)
class ReferenceSpread:
    """How the gate may treat its inputs where spreads are unknown (the user vouches):
    sd and seeds of a published reference number (its '± sd' and seed count), or
    `exact` (the number is a fixed threshold); `equal_spread`: a one-seed side may
    borrow the other side's variance."""

    sd: float | None = None
    seeds: int | None = None
    exact: bool = False
    equal_spread: bool = False

    def check(self) -> None:
        if (self.sd is None) != (self.seeds is None):
            raise AnalysisError("give both --reference-sd and --reference-seeds (a published "
                                "mean's spread and the seeds behind it)")
        if self.sd is not None and self.exact:
            raise AnalysisError("--reference-exact and --reference-sd contradict each other")


def regression(
    new_scores: Sequence[float] | np.ndarray,
    reference_scores: Sequence[float] | np.ndarray | float,
    delta: float,
    confidence: float = 0.95,
    spread: ReferenceSpread = ReferenceSpread(),
    *,
    paired: bool = False,
) -> RegressionResult:
    """PASS when the one-sided `confidence` lower bound of mean(new) - reference > -delta.

    new_scores: one value per INDEPENDENT seed of the new version (reduce layout copies
    first: analysis.scoring.scores.collapse_seed_copies, or use `regression_gate`).
    reference_scores: per-seed values of the reference, or one published number (with
    `spread.sd` and `spread.seeds`: Welch against its own noise; or `spread.exact`).
    Variance: `regression_variance` (which refuses, exit 2, what the gate cannot decide).
    paired: new_scores[s] and reference_scores[s] are the same seed (the caller decides:
    analysis.verdicts.seed_pairing), the bound is the paired t's.
    """
    spread.check()
    new = np.asarray(new_scores, dtype=np.float64).ravel()
    if len(new) == 0 or not np.all(np.isfinite(new)):
        raise AnalysisError("regression needs at least one finite new score")
    if not delta >= 0:
        raise AnalysisError(f"delta must be >= 0, got {delta}")
    if not 0.5 <= confidence < 1:
        raise AnalysisError(f"confidence must be in [0.5, 1), got {confidence}")
    if np.ndim(reference_scores) == 0 and spread.sd is not None:
        ref_mean, n_ref = float(reference_scores), int(spread.seeds or 0)  # type: ignore[arg-type]
        diff, lower, se, df = published_lower_bound(new, ref_mean, spread.sd, n_ref,
                                                    confidence)
        variance = PUBLISHED
    else:
        if np.ndim(reference_scores) == 0:
            ref: np.ndarray | float = float(reference_scores)  # type: ignore[arg-type]
            ref_mean, n_ref = float(ref), 0
        else:
            ref = np.asarray(reference_scores, dtype=np.float64).ravel()
            if len(ref) == 0 or not np.all(np.isfinite(ref)):
                raise AnalysisError("reference has no (finite) scores")
            ref_mean, n_ref = float(ref.mean()), len(ref)
        variance = regression_variance(len(new), n_ref, assume_equal_spread=spread.equal_spread,
                                       reference_exact=spread.exact, paired=paired)
        diff, lower, se, df = regression_lower_bound(new, ref, confidence, variance=variance)
    upper = float(upper_bound(diff, lower))
    verdict = str(three_way(float(lower) > -delta, upper < -delta))
    notes = [] if variance in (WELCH, PAIRED) else [f"variance: {variance}"]
    if variance == PUBLISHED or (variance == ONE_SAMPLE and np.ndim(reference_scores) == 0):
        notes.append("a published number has no per-game scores: only the aggregate rule "
                     "is tested")
    identical = bool(np.ndim(reference_scores) > 0 and np.all(new == new[0]) and
                     np.all(np.asarray(reference_scores) == new[0]))
    reference_seeds = (f"published mean ± sd {spread.sd:.4g} of {counted(n_ref, 'seed')}"
                       if variance == PUBLISHED else "")
    return RegressionResult(verdict, float(lower), float(diff), float(new.mean()), ref_mean,
                            float(delta), float(confidence), len(new), n_ref, notes,
                            variance=variance, df=float(df), se=float(se),
                            rules=[AGGREGATE_RULE] if verdict == REGRESSION else [],
                            identical=identical, reference_seeds=reference_seeds)


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
            + version_hint(new, reference)
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
    spread: ReferenceSpread = ReferenceSpread(),
    unpaired: bool = False,
) -> RegressionResult:
    """The regression gate on run records: each side's groups (e.g. a system's layouts)
    are reduced to ONE value per independent seed (the mean of its layout copies:
    analysis.scoring.scores.collapse_seed_copies), then `metric` maps each seed's games to
    one number and `regression` bounds the difference (the aggregate rule). Beside it the
    rules of analysis.verdicts.per_game, decided with it by `gate_evidence`; the verdict line
    names the rule(s) that found a regression. `spread`: what the user vouches for
    (ReferenceSpread: equal spreads for a one-seed side).

    score: "final" or "auc". Both sides must cover the same games (AnalysisError naming
    the games each side lacks). The result lists per game new - reference, worst first.
    Paired by seed where the pairing holds (analysis.verdicts.seed_pairing; `unpaired`:
    Welch all the same); the line says which.
    """
    if score not in ("final", "auc"):
        raise AnalysisError(f"score must be 'final' or 'auc', got {score!r}")
    new = collapse_seed_copies(new_groups, "new", attr=score)
    ref = collapse_seed_copies(reference_groups, "reference", attr=score)
    check_same_games(new.tasks, ref.tasks)
    design = seed_design([r for g in new_groups for r in g.runs.values()],
                         [r for g in reference_groups for r in g.runs.values()],
                         new.seeds, ref.seeds, unpaired=unpaired)
    aggregate = regression(metric(new.values, new.tasks), metric(ref.values, ref.tasks),
                           delta, confidence, spread, paired=design.paired)
    same_seeds = list(new.seeds) == list(ref.seeds)
    evidence = gate_evidence(new.values, ref.values, new.tasks, delta, confidence=confidence,
                             metric=metric, paired=design.paired,
                             assume_equal_spread=spread.equal_spread, same_seeds=same_seeds)
    numbers = evidence.numbers  # the rules' own numbers, for the line and the report
    details: dict[str, Any] = {}
    if "flagged" in numbers:
        details["flagged_games"] = [{"task": t, "relative": float(numbers["relative"][j])}
                                    for j, t in enumerate(new.tasks) if numbers["flagged"][j]]
        details["not_judged"] = [f"{t} (the reference did not clearly learn it: mean "
                                 f"{float(ref.values[:, j].mean()):.3g})"
                                 for j, t in enumerate(new.tasks)
                                 if np.isnan(numbers["per_game_p"][j])]
    for name in ("mean_relative_diff", "mean_relative_lower"):
        if name in numbers:
            details[name] = float(numbers[name])
    per_game: list[dict[str, Any]] = []
    for j, task in enumerate(new.tasks):
        a, b = new.values[:, j], ref.values[:, j]
        per_game.append({"task": task, "diff": float(a.mean() - b.mean()),
                         "mean_new": float(a.mean()), "mean_reference": float(b.mean()),
                         "n_new": len(a), "n_reference": len(b)})
    per_game.sort(key=lambda g: g["diff"])
    return replace(aggregate, design=design.text(), verdict=str(evidence.verdicts),
                   rules=[rule for rule, f in evidence.fired.items() if bool(f)],
                   identical=bool(evidence.identical),
                   collapsed_games=[t for t, c in zip(new.tasks, numbers["collapsed"], strict=True) if c],
                   new_seeds=new.describe(), reference_seeds=ref.describe(), margin=margin,
                   metric=metric_name, games=list(new.tasks), per_game=per_game, **details)
