"""rliable's `metrics` on (..., runs, tasks) arrays: each takes any leading batch axes
(bootstrap replicates), so get_interval_estimates evaluates them on whole chunks. On one
(runs, tasks) matrix they return the same numbers as rliable 1.2.0 (a NumPy float).

The definitions are those of analysis.stats.metrics (the ones every verdict and report
of this project uses); these are their rliable names.
"""

from __future__ import annotations

import numpy as np

from analysis.stats import metrics as _m


def _out(value) -> np.ndarray | np.float64:
    value = np.asarray(value, dtype=np.float64)
    return np.float64(value) if value.ndim == 0 else value


def aggregate_mean(scores):
    """Mean over tasks of the per-task mean over runs."""
    return _out(_m.mean(scores))


def aggregate_median(scores):
    """Median over tasks of the per-task mean over runs."""
    return _out(_m.median(scores))


def aggregate_iqm(scores):
    """Interquartile mean (25% trimmed mean) of all runs x tasks pooled."""
    return _out(_m.iqm(scores))


def aggregate_optimality_gap(scores, gamma=1):
    """gamma - mean of min(score, gamma) over all runs x tasks (lower is better)."""
    return _out(_m.optimality_gap(scores, gamma))


def probability_of_improvement(scores_x, scores_y):
    """P(X > Y) per task (Mann-Whitney U / (n_x n_y), ties 1/2), averaged over tasks."""
    return _out(_m.probability_of_improvement(scores_x, scores_y))
