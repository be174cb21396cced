"""The project's verdicts on rliable-style score dicts, one call each.

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

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from analysis.errors import AnalysisError
from analysis.rly.checks import check_same_tasks, check_scores
from analysis.stats.welch import WelchInterval, welch_interval
from analysis.verdicts.equivalence import ci_text, tost_verdict
from analysis.verdicts.margins import ATARI_DEFAULT_DELTA
from analysis.verdicts.regression import RegressionResult
from analysis.verdicts.regression import regression as regression_verdict
from analysis.verdicts.seed_pairing import iqm_over_tasks
from runrecord.words import signed


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
