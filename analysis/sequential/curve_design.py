"""Looks over training time: the design a sweep pre-registers (`[regression] looks_at`)
and the plan it fixes for one gate before the candidate's runs start (its boundaries).

The gate fails a candidate at the first look whose contrast's repeated upper bound is
below 0 (`fails`, below); the boundaries spend `alpha` over the looks'
frame fractions by `spending`, under the looks' joint law: their correlation estimated
from the reference's own curves (the same seeds at every look), or the union bound when
the reference has too few seeds for that (analysis.sequential.joint_spending). PASS is
the fixed gate's, at the full budget only: a late collapse cannot be seen early, and
stopping only to fail leaves the PASS error rate as it is.

With adaptive seeds (harness run --until-decided) the gate's alpha for REGRESSION is
split: TIME_SHARE of it for the looks over training time (the first batch of seeds),
the rest for the looks over seeds (Bonferroni: the two families together keep alpha).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from analysis.errors import AnalysisError
from analysis.sequential.joint_spending import (
    CANONICAL,
    ESTIMATED,
    UNION,
    as_correlation,
    canonical_correlation,
    joint_boundaries,
)
from analysis.sequential.spending import SPENDING, spent_alpha, t_scale
from analysis.verdicts.regression import regression_lower_bound

MAX_CURVE_LOOKS = 12
TIME_SHARE = 0.5
"""With adaptive seeds: the share of the gate's REGRESSION alpha spent along training
time; the looks over seeds spend the rest (their PASS keeps the whole alpha)."""
DEFAULT_SPENDING = "pocock"
"""Pocock: nearly equal boundaries, so a broken learner fails at the first looks; the
final REGRESSION boundary pays for it (PASS does not: it is the fixed gate's)."""


def min_reference_seeds(looks: int) -> int:
    """Reference seeds needed to estimate the K looks' correlation: K + 1 (a full-rank
    sample covariance); with fewer the boundaries come from the union bound."""
    return looks + 1


@dataclass(frozen=True)
class CurveDesign:
    """Looks at `looks_at` fractions of the frame budget (increasing, the last 1.0)."""

    looks_at: tuple[float, ...]
    alpha: float = 0.05
    spending: str = DEFAULT_SPENDING
    correlation: str = ESTIMATED  # "reference", or "union" (never estimate)

    def validate(self) -> None:
        t = self.looks_at
        if not t or any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in t):
            raise AnalysisError(f"looks_at must be a list of numbers, got {list(t)!r}")
        if any(b <= a for a, b in zip(t, t[1:], strict=False)) or t[0] <= 0 or t[-1] != 1:
            raise AnalysisError(f"looks_at must increase within (0, 1] and end at 1 (the "
                                f"full budget: PASS is decided there only), got {list(t)}")
        if len(t) > MAX_CURVE_LOOKS:
            raise AnalysisError(f"looks_at: {len(t)} looks; at most {MAX_CURVE_LOOKS}")
        if not 0 < self.alpha < 0.5:
            raise AnalysisError(f"looks alpha must be in (0, 0.5), got {self.alpha}")
        if self.spending not in SPENDING:
            raise AnalysisError(f"look_spending {self.spending!r}; valid: "
                                f"{', '.join(SPENDING)}")
        if self.correlation not in (ESTIMATED, UNION):
            raise AnalysisError(f"look_correlation {self.correlation!r}; valid: "
                                f"{ESTIMATED}, {UNION}")

    def describe(self) -> str:
        at = ", ".join(f"{x:.0%}" for x in self.looks_at)
        return (f"looks at {at} of the frame budget, {self.spending} spending of alpha "
                f"{self.alpha:g}")


@dataclass(frozen=True)
class CurvePlan:
    """One gate's pre-registered looks: boundaries fixed before the candidate runs."""

    looks_at: list[float]
    frames: list[float]  # the frame count of each look
    boundaries: list[float]  # normal scale, one per look (inf: cannot cross there)
    alpha_spent: list[float]  # alpha(t_k)
    method: str  # how the joint law was taken, in words
    n_new: int
    n_reference: int
    delta: float
    rho: float  # the margin's share of the reference's final score
    margins: list[float] = field(default_factory=list)  # delta_j at each look

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["boundaries"] = [c if math.isfinite(c) else None for c in self.boundaries]
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> CurvePlan:
        d = dict(d)
        d["boundaries"] = [math.inf if c is None else float(c) for c in d["boundaries"]]
        return CurvePlan(**d)


def plan_boundaries(design: CurveDesign, reference: np.ndarray, n_new: int, delta: float,
                    correlation: str | None = None, alpha: float | None = None,
                    seed: int = 0, points: int | None = None
                    ) -> tuple[np.ndarray, str]:
    """(boundaries, method in words) from the reference's per-seed values at every look
    (m, K). correlation: the design's unless given ("canonical" for the calibration).
    The estimate needs min_reference_seeds(K); with fewer the union bound is used."""
    how = correlation or design.correlation
    a = design.alpha if alpha is None else alpha
    t = np.asarray(design.looks_at, dtype=np.float64)
    m = reference.shape[0]
    extra = {} if points is None else {"points": points}
    if how == CANONICAL:
        return joint_boundaries(t, a, design.spending, canonical_correlation(t), seed=seed,
                                **extra), "canonical sqrt(t_j/t_k) (independent increments)"
    why = ""
    if how == ESTIMATED and m >= min_reference_seeds(len(t)):
        try:
            r = as_correlation(contrast_covariance(reference, n_new, delta))
        except AnalysisError:
            why = " (the reference's seeds do not vary at some look: no correlation to estimate)"
        else:
            return joint_boundaries(t, a, design.spending, r, seed=seed, **extra), \
                f"correlation estimated from the reference's curves ({m} seeds)"
    elif how == ESTIMATED:
        why = (f" (the reference's {m} seeds cannot estimate the correlation of {len(t)} "
               f"looks: that needs {min_reference_seeds(len(t))})")
    return joint_boundaries(t, a, design.spending, None), f"union bound{why}"


def make_plan(design: CurveDesign, reference: np.ndarray, budget_frames: float, n_new: int,
              delta: float, alpha: float | None = None) -> CurvePlan:
    """The plan of one gate: reference (m, K) per-seed values at the looks."""
    design.validate()
    a = design.alpha if alpha is None else alpha
    c, method = plan_boundaries(design, reference, n_new, delta, alpha=a)
    rho = float(margin_share(reference[:, -1], delta))
    return CurvePlan(list(design.looks_at), [t * budget_frames for t in design.looks_at],
                     [float(x) for x in c],
                     [float(x) for x in spent_alpha(design.looks_at, a, design.spending)],
                     method, n_new, int(reference.shape[0]), float(delta), rho,
                     [float(rho * reference[:, k].mean()) for k in range(len(c))])


def margin_share(reference_final: np.ndarray, delta: float) -> np.ndarray:
    """rho = delta / mean of the reference's final values (..., m) -> (...), within [0,
    1]: 1 where the reference learned no more than delta (then an early look fails only a
    candidate below the random score)."""
    mean = np.asarray(reference_final, dtype=np.float64).mean(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.where(mean > delta, delta / np.where(mean > 0, mean, 1.0), 1.0)
    return np.clip(rho, 0.0, 1.0)


def reference_pseudo_values(reference_now: np.ndarray, reference_final: np.ndarray,
                            delta: float) -> np.ndarray:
    """(..., m) per-seed values of the reference whose mean is (1 - rho) m_R(t) and whose
    spread carries the noise of rho (module docstring)."""
    b = np.asarray(reference_now, dtype=np.float64)
    big_b = np.asarray(reference_final, dtype=np.float64)
    rho = margin_share(big_b, delta)[..., None]
    b_mean = b.mean(axis=-1, keepdims=True)
    big_mean = big_b.mean(axis=-1, keepdims=True)
    free = (rho > 0) & (rho < 1)  # a clipped rho does not move with the reference
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.where(free, rho * b_mean / np.where(big_mean != 0, big_mean, 1.0), 0.0)
    centred = (1 - rho) * (b - b_mean) + slope * (big_b - big_mean)
    return centred + (1 - rho) * b_mean


def curve_contrast(new_now: np.ndarray, reference_now: np.ndarray,
                   reference_final: np.ndarray, delta: float
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(contrast, se, df, margin) of one look, vectorised over leading axes: new (..., n),
    reference at this look and at the full budget (..., m). margin = rho x m_R(t): how far
    behind the reference the candidate may be here."""
    pseudo = reference_pseudo_values(reference_now, reference_final, delta)
    contrast, _, se, df = regression_lower_bound(new_now, pseudo)
    rho = margin_share(reference_final, delta)
    return contrast, se, df, rho * np.asarray(reference_now, dtype=np.float64).mean(axis=-1)


def contrast_covariance(reference: np.ndarray, n_new: int, delta: float) -> np.ndarray:
    """(K, K) covariance of the K looks' contrasts, from the reference's per-seed values
    at every look, (m, K) (the last column: the full budget), taking the new seeds to
    vary as the reference's do (the null hypothesis: a candidate like the reference)."""
    b = np.asarray(reference, dtype=np.float64)
    pseudo = reference_pseudo_values(b.T, b[:, -1][None, :], delta).T  # (m, K)
    m = b.shape[0]
    return np.cov(b, rowvar=False, ddof=1) / n_new + np.cov(pseudo, rowvar=False, ddof=1) / m


def fails(contrast: np.ndarray | float, se: np.ndarray | float, df: np.ndarray | float,
          c: np.ndarray | float) -> np.ndarray:
    """FAIL where the repeated upper bound contrast + t(c, df) se is below 0 (zero spread:
    the contrast itself); an undefined se (nan) never fails. c: the look's boundary on
    the normal scale (one per replicate in the calibration)."""
    contrast, se, df = (np.asarray(x, dtype=np.float64) for x in (contrast, se, df))
    with np.errstate(invalid="ignore"):
        half = np.where(se > 0, t_scale(c, df) * se, 0.0)
        return np.where(np.isnan(se), False, contrast + half < 0)
