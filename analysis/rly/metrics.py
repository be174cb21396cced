"""rliable's `metrics` on (..., runs, tasks) arrays: each takes any leading batch axes
(bootstrap replicates), so get_interval_estimates evaluates them on whole chunks. On one
(runs, tasks) matrix they return the same numbers as rliable 1.2.0 (a NumPy float).

They are analysis.stats.metrics' definitions (the ones every verdict and report of this
project uses) under their rliable names.
"""

from __future__ import annotations

from analysis.stats import metrics as _m

aggregate_mean = _m.mean
aggregate_median = _m.median
aggregate_iqm = _m.iqm
aggregate_optimality_gap = _m.optimality_gap


def probability_of_improvement(scores_x, scores_y):
    """P(X > Y) per task (Mann-Whitney U / (n_x n_y), ties 1/2), averaged over tasks."""
    return _m.probability_of_improvement(scores_x, scores_y)
