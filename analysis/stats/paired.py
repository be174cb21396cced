"""The paired t for two sides that ran the same seeds: the interval of the mean of the
per-seed differences a_s - b_s, vectorised over simulated draws like analysis.stats.welch.

Runs of one seed on two layouts (or two versions of one trainer) share the seed's env
streams, initial parameters and action keys, so where their results stay together the
per-seed difference varies far less than either side: the paired se is
sqrt((s_a^2 + s_b^2 - 2 cov) / n) with n - 1 df, where Welch's is sqrt(s_a^2/n + s_b^2/n)
with up to 2n - 2. The pairing is exact at any correlation (the differences of independent
seeds are independent); it gains power when the within-seed correlation is high and
costs some at few seeds when it is near 0 (the df halve): `python -m calibration`
shows both (calibration.paired_cells).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from analysis.errors import AnalysisError
from analysis.stats.welch import WelchInterval, t_interval


def paired_stats(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised paired t: a, b (..., n) aligned by seed, n >= 2 -> (diff, se, df), each
    of shape (...): the mean of a - b, its standard error and n - 1 df. se == 0 gives
    df = inf (the differences are all equal: an interval of width 0), as welch_stats."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape[-1] != b.shape[-1]:
        raise AnalysisError(f"a paired comparison needs the same seeds on both sides, got "
                            f"{a.shape[-1]} and {b.shape[-1]}")
    d = a - b
    n = d.shape[-1]
    diff = d.mean(axis=-1)
    se = d.std(axis=-1, ddof=1) / math.sqrt(n)
    return diff, se, np.where(se > 0, float(n - 1), np.inf)


def paired_interval(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray
                    ) -> WelchInterval:
    """The mean per-seed difference a - b with its paired t CIs (`paired=True`). One seed:
    no spread estimate (nan CIs) unless the difference is exactly 0 (width 0), the same
    rule as analysis.stats.welch.welch_interval."""
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if len(a) == 0 or len(a) != len(b):
        raise AnalysisError(f"a paired comparison needs the same seeds on both sides, got "
                            f"{len(a)} and {len(b)}")
    n = len(a)
    diff = float((a - b).mean())
    if n == 1:
        if diff == 0:
            return WelchInterval(0.0, 0.0, math.inf, (0.0, 0.0), (0.0, 0.0), 1, 1,
                                 float(a[0]), float(b[0]), paired=True)
        nan2 = (math.nan, math.nan)
        return WelchInterval(diff, math.nan, math.nan, nan2, nan2, 1, 1, float(a[0]),
                             float(b[0]), paired=True)
    _, se, df = paired_stats(a, b)
    return t_interval(a, b, diff, float(se), float(df), paired=True)
