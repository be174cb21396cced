"""Aggregate metrics of a (runs x tasks) score matrix, rliable-compatible.

Every function takes `scores` shaped (..., runs, tasks): the last two axes are one
matrix (rows: independent runs/seeds, columns: tasks/games, values: normalised scores)
and any leading axes are a batch (bootstrap replicates, curve points), reduced
independently. So `iqm(x)` of a (runs, tasks) array is a scalar and of a
(reps, runs, tasks) array is (reps,). Definitions (Agarwal et al. 2021, rliable 1.2.0):

- mean: mean over tasks of the per-task mean over runs;
- median: median over tasks of the per-task mean over runs;
- iqm: interquartile mean, scipy.stats.trim_mean(0.25) of all runs x tasks pooled
  (drop the lowest and highest int(0.25 n) values, average the rest);
- optimality_gap: gamma - mean of min(score, gamma), gamma = 1 (human level);
- probability_of_improvement: P(X > Y) per task = Mann-Whitney U / (n_x n_y), ties
  counting 1/2, averaged over tasks.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from analysis.errors import AnalysisError

Metric = Callable[[np.ndarray], np.ndarray]


def _check(scores) -> np.ndarray:
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim < 2:
        raise AnalysisError(f"scores must be shaped (..., runs, tasks), got shape {x.shape}")
    if x.shape[-1] == 0 or x.shape[-2] == 0:
        raise AnalysisError(f"scores matrix is empty (shape {x.shape}): no runs or no tasks")
    return x


def mean(scores) -> np.ndarray:
    """Mean over tasks of per-task mean over runs. (..., runs, tasks) -> (...)."""
    return _check(scores).mean(axis=(-2, -1))


def median(scores) -> np.ndarray:
    """Median over tasks of per-task mean over runs. (..., runs, tasks) -> (...).

    Sorting the short task axis is several times faster than np.median on batches.
    """
    per_task = np.sort(_check(scores).mean(axis=-2), axis=-1)
    n = per_task.shape[-1]
    return 0.5 * (per_task[..., (n - 1) // 2] + per_task[..., n // 2])


def iqm(scores) -> np.ndarray:
    """Interquartile mean of all runs x tasks pooled. (..., runs, tasks) -> (...).

    Same as scipy.stats.trim_mean(pooled, 0.25): with n pooled values, the int(n/4) lowest
    and int(n/4) highest are dropped. (On batches of a few hundred values np.sort is
    faster than np.partition with two kth positions.)
    """
    x = _check(scores)
    pooled = x.reshape(*x.shape[:-2], -1)
    n = pooled.shape[-1]
    cut = int(0.25 * n)
    if cut == 0:
        return pooled.mean(axis=-1)
    return np.sort(pooled, axis=-1)[..., cut : n - cut].mean(axis=-1)


def optimality_gap(scores, gamma: float = 1.0) -> np.ndarray:
    """gamma - mean(min(scores, gamma)): how far below gamma the runs fall on average.

    (..., runs, tasks) -> (...). Lower is better.
    """
    return gamma - np.minimum(_check(scores), gamma).mean(axis=(-2, -1))


AGGREGATES: dict[str, Metric] = {
    "median": median,
    "iqm": iqm,
    "mean": mean,
    "optimality_gap": optimality_gap,
}
AGGREGATE_LABELS = {
    "median": "Median",
    "iqm": "IQM",
    "mean": "Mean",
    "optimality_gap": "Optimality gap",
}


def probability_of_improvement(x, y) -> np.ndarray:
    """P(X > Y): per task Mann-Whitney U / (n_x n_y) with ties 1/2, averaged over tasks.

    x: (..., runs_x, tasks), y: (..., runs_y, tasks) with the same tasks -> (...).
    Compares every run of x with every run of y on each task.
    """
    x = _check(x)
    y = _check(y)
    if x.shape[-1] != y.shape[-1]:
        raise AnalysisError(
            f"probability of improvement needs the same tasks: x has {x.shape[-1]}, "
            f"y has {y.shape[-1]}"
        )
    xe = x[..., :, None, :]
    ye = y[..., None, :, :]
    wins = (xe > ye).mean(axis=(-3, -2)) + 0.5 * (xe == ye).mean(axis=(-3, -2))
    return wins.mean(axis=-1)


def performance_profile(scores, taus) -> np.ndarray:
    """Run-score distribution: share of all runs x tasks with score > tau, for each tau.

    scores (..., runs, tasks), taus (k,) -> (..., k). (rliable's run_score_distribution.)
    """
    x = _check(scores)
    pooled = x.reshape(*x.shape[:-2], -1)
    taus = np.asarray(taus, dtype=np.float64)
    return (pooled[..., None, :] > taus[:, None]).mean(axis=-1)


def average_performance_profile(scores, taus) -> np.ndarray:
    """Share of tasks whose mean score over runs is > tau, for each tau.

    scores (..., runs, tasks), taus (k,) -> (..., k). (rliable's
    average_score_distributions; noisier than `performance_profile`.)
    """
    per_task = _check(scores).mean(axis=-2)
    taus = np.asarray(taus, dtype=np.float64)
    return (per_task[..., None, :] > taus[:, None]).mean(axis=-1)
