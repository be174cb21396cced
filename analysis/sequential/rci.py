"""Repeated confidence intervals (Jennison & Turnbull 1989; 2000, ch. 9) and the decisions
a look takes from them: vectorised cores that `sweep_looks` and the calibration suite
(calibration.sequential_cells) both decide through.

At look k the repeated interval of a difference is diff +- c_k se, where c_k is the
design's normal-scale boundary at that look carried to Student t at the look's df
(analysis.sequential.spending.t_scale). The boundaries spend alpha over the looks, so
with probability >= 1 - alpha the true difference lies inside the one-sided repeated
bound at EVERY look at once; any rule that stops on these intervals keeps that rate,
whatever else it does (stop early, stop when other verdicts are decided, go on).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from analysis.errors import AnalysisError
from analysis.sequential.spending import t_scale
from analysis.verdicts.equivalence import DIFFERENT, PASS, REGRESSION

CONTINUE = "CONTINUE"
"""Not decided yet: run the next batch."""
UNDECIDED = "UNDECIDED AT CAP"
"""The cap was reached without a decision."""


def different_alpha(metrics: int, alpha: float) -> float:
    """One tail of one metric's DIFFERENT test: the two-sided rate `alpha` (the design's;
    0.05 as the fixed verdict's analysis.verdicts.equivalence.DIFFERENT_ALPHA) over 2
    tails and shared by the metrics (Bonferroni)."""
    return alpha / 2 / metrics


def equivalence_decisions(diff: np.ndarray, se: np.ndarray, df: np.ndarray, delta: float,
                          c_pass: float, c_different: float, last: bool
                          ) -> tuple[np.ndarray, np.ndarray]:
    """One look of sequential equivalence over metrics tested together: diff, se, df of
    shape (metrics, ...) -> (decisions (...), reach (...)).

    PASS: every metric's repeated interval diff +- t(c_pass) se lies inside (-delta,
    delta) (c_pass spends the design's alpha per side: the sequential TOST);
    DIFFERENT: otherwise, a metric's repeated interval at c_different (spending alpha /
    2 / metrics per tail: Bonferroni over the metrics, as the fixed verdict) excludes 0;
    else CONTINUE, or UNDECIDED at the last look. An undefined se (nan) never decides.
    reach: the largest |endpoint| of the PASS intervals (PASS iff reach < delta; nan
    where undefined)."""
    diff, se, df = (np.asarray(x, dtype=np.float64) for x in (diff, se, df))
    undefined = np.isnan(se).any(axis=0)
    with np.errstate(invalid="ignore"):
        half = np.where(se > 0, t_scale(c_pass, df) * se, 0.0)
        half_d = np.where(se > 0, t_scale(c_different, df) * se, 0.0)
        reach = np.where(undefined, np.nan, (np.abs(diff) + half).max(axis=0))
        inside = reach < delta
        excludes = (np.abs(diff) - half_d > 0).any(axis=0)
    out = np.where(inside, PASS, np.where(excludes, DIFFERENT,
                                          UNDECIDED if last else CONTINUE))
    return np.where(undefined, UNDECIDED if last else CONTINUE, out), reach


def gate_decisions(diff: np.ndarray | float, se: np.ndarray | float, df: np.ndarray | float,
                   delta: float, c: float, last: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One look of the sequential gate: diff, se, df of new - reference (...) ->
    (decisions, lower, upper), each (...). PASS when the repeated lower bound diff -
    t(c) se > -delta (non-inferiority, alpha over all looks); REGRESSION when the repeated
    upper bound < -delta (clearly worse than the margin); else CONTINUE, or UNDECIDED at
    the last look. Zero spread gives lower = upper = diff."""
    diff, se, df = (np.asarray(x, dtype=np.float64) for x in (diff, se, df))
    with np.errstate(invalid="ignore"):
        half = np.where(se > 0, t_scale(c, df) * se, 0.0)
    lower, upper = diff - half, diff + half
    out = np.where(lower > -delta, PASS, np.where(upper < -delta, REGRESSION,
                                                  UNDECIDED if last else CONTINUE))
    return np.where(np.isnan(se), UNDECIDED if last else CONTINUE, out), lower, upper


@dataclass(frozen=True)
class Look:
    verdict: str  # "equivalence" | "gate"
    subject: str  # stable key of what is judged, e.g. "CartPole-v1: a0-l1-d1 vs a0-l0-d1"
    look: int  # 1-based index of the look
    seeds: dict[str, int]  # independent seeds per side at this look
    statistic: float  # the test statistic (`text` says which)
    boundary: float  # what it is compared with at this look
    decision: str  # CONTINUE | a verdict word (PASS, DIFFERENT, REGRESSION) | UNDECIDED
    text: str  # one human line for console and report
    needs: str = ""  # at the cap: the planner's estimate of what a decision would need
    fixed_design_seeds: int | None = None  # seeds per growing side of the fixed design
    # of equal power (analysis.verdicts.seedplan, spread seen at this look); None: unknown
    detail: str = ""  # the design's internals behind `text` (t, df, boundaries): --verbose

    @property
    def decided(self) -> bool:
        return self.decision != CONTINUE

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict: an undefined statistic (nan) is null."""
        d = asdict(self)
        for key in ("statistic", "boundary"):
            if not math.isfinite(d[key]):
                d[key] = None
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> Look:
        """The Look `to_json` wrote; AnalysisError naming what is missing or unknown."""
        names = [f.name for f in fields(Look)]
        required = names[:8]
        missing = [k for k in required if k not in d]
        unknown = sorted(set(d) - set(names))
        if missing or unknown:
            raise AnalysisError(f"not a stored look: missing {missing}, unknown {unknown}")
        fixed = d.get("fixed_design_seeds")
        return Look(str(d["verdict"]), str(d["subject"]), int(d["look"]),
                    {str(k): int(v) for k, v in dict(d["seeds"]).items()},
                    _number(d["statistic"]), _number(d["boundary"]), str(d["decision"]),
                    str(d["text"]), str(d.get("needs", "")),
                    None if fixed is None else int(fixed), str(d.get("detail", "")))


def _number(value: Any) -> float:
    return math.nan if value is None else float(value)
