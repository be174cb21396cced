"""What rliable never checks about a score matrix: that its rows are independent seeds.

rliable bootstraps whatever stands on the first axis. Its users' most common mistake is
to stack episodes (or layout copies of one seed) as runs: the bootstrap then counts them
as independent seeds and the CIs come out far too narrow. These checks refuse what
cannot be scored (NaN, wrong shape) with an AnalysisError and warn (SeedWarning) about
rows that look like something other than seeds.

And the project's verdicts on rliable-style score dicts, one call each.

A score dict's rows are seeds. Each verdict reduces a matrix to one value per seed (the
IQM over tasks, as `python -m analysis equivalence` and the regression gate do) and
tests those values with Welch's t, which counts seeds; a bootstrap CI of an aggregate
does not decide anything, and at 3 seeds it is too narrow (docs/analysis.md).
- equivalence: Welch TOST at margin delta: PASS, DIFFERENT or INCONCLUSIVE. On curves
  (runs, tasks, points) both the final point and the AUC (mean over points) must pass,
  as for run records.
- regression: the gate: PASS when the one-sided 95% lower bound of new - reference is
  above -delta, REGRESSION when its upper bound is below -delta, else UNDECIDED.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from analysis.errors import AnalysisError
from analysis.importers.declare import MAX_SEED_VALUES
from analysis.scoring.tables import FEW_SEEDS
from analysis.stats.welch import WelchInterval, welch_interval
from analysis.verdicts.equivalence import ci_text, tost_verdict
from analysis.verdicts.margins import ATARI_DEFAULT_DELTA
from analysis.verdicts.regression import RegressionResult
from analysis.verdicts.regression import regression as regression_verdict
from analysis.verdicts.seed_pairing import iqm_over_tasks
from runrecord.words import counted, signed


class SeedWarning(UserWarning):
    """The rows of a score matrix may not be independent seeds, or too few to trust."""


def check_scores(name: str, scores) -> np.ndarray:
    """scores (runs, tasks, ...) as float64, after refusing what cannot be bootstrapped and
    warning about rows that are not independent seeds. `name` labels the messages."""
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim < 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise AnalysisError(
            f"{name}: scores must be shaped (runs, tasks) or (runs, tasks, points) with at "
            f"least one run and one task; got shape {x.shape}")
    bad = ~np.isfinite(x)
    if bad.any():
        run, task = (int(i) for i in np.argwhere(bad)[0][:2])
        raise AnalysisError(
            f"{name}: {counted(int(bad.sum()), 'score')} {'is' if int(bad.sum()) == 1 else 'are'} NaN or inf (first: run {run}, task "
            f"{task}); every run needs a finite score on every task (drop the run, or the "
            f"task for every algorithm)")
    runs = x.shape[0]
    if runs > MAX_SEED_VALUES:
        warnings.warn(
            f"{name}: {runs} runs per task. Rows look like episodes, not seeds: the bootstrap "
            f"treats every row as an independent run, so episodes stacked as runs give CIs "
            f"far too narrow. Average each seed's episodes first (one row per seed).",
            SeedWarning, stacklevel=3)
    elif runs > 1:
        rows = x.reshape(runs, -1)
        _, first, counts = np.unique(rows, axis=0, return_index=True, return_counts=True)
        if (counts > 1).any():
            dup = int(first[np.argmax(counts > 1)])
            same = [i for i in range(runs) if np.array_equal(rows[i], rows[dup])]
            warnings.warn(
                f"{name}: runs {same} have identical scores on every task: copies of one "
                f"seed (e.g. the same seed on two layouts) are not extra seeds and narrow "
                f"the CIs. Keep one row per seed.", SeedWarning, stacklevel=3)
    if runs <= FEW_SEEDS:
        warnings.warn(
            f"{name}: {counted(runs, 'run')} per task. Percentile bootstrap CIs are too narrow at so "
            f"few seeds (the bootstrap variance is (n-1)/n of the true one; at 3 seeds a "
            f"nominal 5% test fired 14% of the time). For a decision use "
            f"analysis.rly.equivalence or analysis.rly.regression (Welch on per-seed "
            f"values), or run more seeds.", SeedWarning, stacklevel=3)
    return x


def check_same_tasks(name: str, arrays: list[np.ndarray]) -> None:
    """Arrays compared run by run on each task must have the same task axis."""
    shapes = {a.shape[1:] for a in arrays}
    if len(shapes) > 1:
        raise AnalysisError(
            f"{name}: the score matrices must share their tasks (and points): got shapes "
            f"{[a.shape for a in arrays]} (runs may differ, the other axes may not)")


@dataclass(frozen=True)
class Equivalence:
    """Welch TOST of a vs b on per-seed IQM (final point, and AUC for curves)."""

    verdict: str  # PASS, DIFFERENT or INCONCLUSIVE
    a: str
    b: str
    delta: float
    metrics: dict[str, WelchInterval]  # "final" (and "auc" for curves): a - b

    def line(self) -> str:
        parts = [f"{name} IQM diff {signed(w.diff)} 90% CI {ci_text(w.ci90, min(w.n_a, w.n_b))}"
                 for name, w in self.metrics.items()]
        w = next(iter(self.metrics.values()))
        return (f"equivalence {self.a} vs reference {self.b}: {self.verdict}; delta "
                f"{self.delta:g}; {'; '.join(parts)}; {w.n_a} vs {w.n_b} seeds")


def _pair(score_dict: Mapping[str, np.ndarray], a: str, b: str) -> tuple[np.ndarray, np.ndarray]:
    for key in (a, b):
        if key not in score_dict:
            raise AnalysisError(f"no scores for {key!r}; valid: {sorted(score_dict)}")
    x, y = check_scores(a, score_dict[a]), check_scores(b, score_dict[b])
    check_same_tasks(f"{a} vs {b}", [x, y])
    return x, y


def _per_seed(x: np.ndarray) -> dict[str, np.ndarray]:
    """name -> (seeds,) per-seed IQM over tasks: final (and AUC for curves)."""
    if x.ndim == 2:
        return {"final": iqm_over_tasks(x)}
    if x.ndim != 3:
        raise AnalysisError(f"verdicts take (runs, tasks) or (runs, tasks, points), got {x.shape}")
    return {"final": iqm_over_tasks(x[..., -1]), "auc": iqm_over_tasks(x.mean(axis=-1))}


def equivalence(score_dict: Mapping[str, np.ndarray], a: str, b: str,
                delta: float = ATARI_DEFAULT_DELTA) -> Equivalence:
    """Is `a` equivalent to the reference `b` within +-delta (in the scores' units;
    the default 0.16 is the project's Atari HNS margin)?"""
    x, y = _pair(score_dict, a, b)
    sa, sb = _per_seed(x), _per_seed(y)
    metrics = {name: welch_interval(sa[name], sb[name]) for name in sa}
    return Equivalence(tost_verdict(list(metrics.values()), delta), a, b, float(delta),
                       metrics)


def regression(score_dict: Mapping[str, np.ndarray], new: str, reference: str,
               delta: float = ATARI_DEFAULT_DELTA, confidence: float = 0.95) -> RegressionResult:
    """The regression gate of `new` against `reference` on per-seed IQM of the final
    scores (the last point of curves). `.verdict` is PASS, REGRESSION or UNDECIDED;
    `.line()` says why."""
    x, y = _pair(score_dict, new, reference)
    res = regression_verdict(_per_seed(x)["final"], _per_seed(y)["final"], delta, confidence)
    return replace(res, subject=f"{new} vs {reference}")
