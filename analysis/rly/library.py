"""rliable's `library` (get_interval_estimates, create_performance_profile) on our
vectorised stratified bootstrap (analysis.rly.bootstraps).

Same signatures, same outputs (point estimates as `func` returns them; CIs as arrays
(2, ...) with the lower bounds first). What differs, on purpose (random_state honoured,
`func` batched when it gives the same numbers, a run's curve resampled whole, the rows
checked to be seeds, bc's ties and bca's stratified jackknife): docs/from-rliable.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Union

import numpy as np

from analysis.errors import AnalysisError
from analysis.rly.bootstraps import (
    StratifiedBootstrap,
    StratifiedIndependentBootstrap,
    seed_of,
)
from analysis.rly.checks import check_same_tasks, check_scores
from analysis.stats.metrics import average_performance_profile, performance_profile

Float = Union[float, np.float32, np.float64]  # noqa: UP007 - rliable's public alias

__all__ = [
    "Float",
    "StratifiedBootstrap",
    "StratifiedIndependentBootstrap",
    "average_score_distributions",
    "create_performance_profile",
    "get_interval_estimates",
    "mean_score_deviation",
    "run_score_deviation",
    "score_distributions",
]

def get_interval_estimates(
    score_dict: Mapping[str, np.ndarray] | Mapping[str, Sequence[np.ndarray]],
    func: Callable[..., np.ndarray],
    method: str = "percentile",
    task_bootstrap: bool = False,
    reps: int = 50000,
    confidence_interval_size: float = 0.95,
    random_state: Any = None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """rliable's get_interval_estimates: for each key, func(scores) and its stratified
    bootstrap CI, shaped (2, ...) (lower bounds, then upper; (2, 1) for a scalar func).

    A value that is a list or tuple of arrays (e.g. the two matrices of a probability of
    improvement) is passed to func as separate arguments, each resampled independently;
    task_bootstrap is then not supported, as in rliable.
    """
    seed = seed_of(random_state)
    points: dict[str, np.ndarray] = {}
    intervals: dict[str, np.ndarray] = {}
    for key, scores in score_dict.items():
        several = isinstance(scores, (list, tuple))
        if several and task_bootstrap:
            raise AnalysisError(f"{key}: task_bootstrap needs one score matrix per key, not "
                                f"{len(scores)}")
        arrays = ([check_scores(f"{key}[{i}]", s) for i, s in enumerate(scores)] if several
                  else [check_scores(str(key), scores)])
        if several:
            check_same_tasks(str(key), arrays)
        points[key] = func(*arrays)
        bs = (StratifiedIndependentBootstrap(*arrays, random_state=seed) if several else
              StratifiedBootstrap(arrays[0], task_bootstrap=task_bootstrap, random_state=seed))
        intervals[key] = bs.conf_int(func, reps=reps, size=confidence_interval_size,
                                     method=method)
    return points, intervals


def run_score_deviation(scores: np.ndarray, tau: Float) -> Float:
    """Share of all runs x tasks scores above tau."""
    return np.mean(np.asarray(scores) > tau)


def mean_score_deviation(scores: np.ndarray, tau: Float) -> Float:
    """Share of per-task mean scores (mean over runs) above tau."""
    return np.mean(np.mean(scores, axis=0) > tau)


score_distributions = np.vectorize(run_score_deviation, excluded=[0])
"""run_score_deviation at each tau of a list: score_distributions(scores, taus)."""
average_score_distributions = np.vectorize(mean_score_deviation, excluded=[0])
"""mean_score_deviation at each tau of a list."""


def create_performance_profile(
    score_dict: Mapping[str, np.ndarray],
    tau_list: Sequence[float] | np.ndarray,
    use_score_distribution: bool = True,
    custom_profile_func: Callable[..., np.ndarray] | None = None,
    method: str = "percentile",
    task_bootstrap: bool = False,
    reps: int = 2000,
    confidence_interval_size: float = 0.95,
    random_state: Any = None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """rliable's create_performance_profile: per key, the share of runs x tasks with a
    score above each tau (use_score_distribution=False: of per-task mean scores) and its
    CIs (2, len(tau_list)). Extra axes after tasks (e.g. points) are pooled with the tasks,
    as rliable does. `random_state` as in get_interval_estimates (rliable has none here)."""
    taus = np.asarray(tau_list, dtype=np.float64)
    if taus.ndim != 1 or taus.size == 0:
        raise AnalysisError(f"tau_list must be a non-empty 1-D list of thresholds, got shape "
                            f"{taus.shape}")
    profile, thresholds = ((custom_profile_func, tau_list) if custom_profile_func is not None
                           else (performance_profile if use_score_distribution
                                 else average_performance_profile, taus))

    def func(scores):
        return profile(scores, thresholds)

    # (runs, tasks, ...) -> (runs, tasks * ...): every (task, point) cell its own stratum
    flat = {key: np.reshape(v, (np.shape(v)[0], -1)) if np.ndim(v) > 2 else np.asarray(v)
            for key, v in score_dict.items()}
    return get_interval_estimates(
        flat if custom_profile_func is None else score_dict, func, method=method,
        task_bootstrap=task_bootstrap, reps=reps,
        confidence_interval_size=confidence_interval_size, random_state=random_state)
