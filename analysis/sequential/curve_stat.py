"""The statistic of a look along training time, on per-seed values (pure NumPy).

At look j (a fraction t_j of the frame budget) each seed of each side has one value, the
gate's per-seed metric at that frame count (analysis.sequential.curve_records). The
gate's margin delta is a drop of the FINAL score; along the curve it shrinks with the
reference's progress, delta_j = delta x m_R(t_j) / m_R(1) (m_R: the reference's mean):
a candidate that learns less than (1 - rho) of what the reference learned by then, rho =
delta / m_R(1), is behind by more than the margin. Early in training both curves are
near the random score and an absolute delta could never be crossed; at the full budget
delta_K = delta, the gate's own.

The contrast C_j = m_N(t_j) - (1 - rho) m_R(t_j) >= 0 is the null hypothesis of look j.
rho is estimated from the same reference seeds, so its noise enters the standard error
(delta method): each reference seed's pseudo-value is (1 - rho) b_s + rho (m_R(t_j) /
m_R(1)) B_s (b: its value at t_j, B: at the full budget), shifted to mean (1 - rho)
m_R(t_j), and the contrast, its se and df are the gate's own Welch statistic
(analysis.verdicts.regression.regression_lower_bound) of the new seeds against these. At
t = 1 the pseudo-values are B_s - delta: the gate's statistic exactly.
"""

from __future__ import annotations

import numpy as np

from analysis.sequential.spending import t_scale
from analysis.verdicts.regression import regression_lower_bound


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
