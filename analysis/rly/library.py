"""rliable's `library` (get_interval_estimates, create_performance_profile) on our
vectorised stratified bootstrap (analysis.stats.bootstrap).

Same signatures, same outputs (point estimates as `func` returns them; CIs as arrays
(2, ...) with the lower bounds first). What differs, on purpose:
- `random_state` is honoured: None means seed 0 (the same CIs on every call), an int is a
  seed, a RandomState or Generator gives one seed per call. rliable ignores it and draws
  from NumPy's global RNG.
- `func` is evaluated on whole chunks of replicates when it can take a leading batch
  axis (the aggregate functions of analysis.rly.metrics can): it is probed once on a few
  resamples and used batched only if it gives the same numbers as one call per
  replicate; any other `func` is called once per replicate, on the same draws.
- a run's curve stays together: a (runs, tasks, points) matrix is resampled by run within
  each task, the same draw at every point. rliable draws a run per point; the two give
  the same CI at each point, but only ours is right for a `func` that combines points
  (e.g. an AUC).
- the rows are checked to be seeds (analysis.rly.checks).
- methods: 'percentile' and 'basic' (rliable also passes 'bc' and 'bca' to arch).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from analysis.errors import AnalysisError
from analysis.rly.checks import check_same_tasks, check_scores
from analysis.stats.bootstrap import (
    DEFAULT_MAX_CHUNK_BYTES,
    METHODS,
    interval_from_replicates,
    resample_stratified,
)
from analysis.stats.metrics import average_performance_profile, performance_profile

PROBE_REPS = 7
"""Resamples on which a `func` is tried batched against one call per replicate."""


def seed_of(random_state: Any) -> int:
    """The bootstrap seed a `random_state` stands for (module docstring)."""
    if random_state is None:
        return 0
    if isinstance(random_state, bool) or not isinstance(
            random_state, (int, np.integer, np.random.RandomState, np.random.Generator)):
        raise AnalysisError(
            f"random_state must be None, an int seed, a numpy RandomState or a numpy "
            f"Generator; got {type(random_state).__name__}")
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**63 - 1))
    if random_state < 0:
        raise AnalysisError(f"random_state must be >= 0, got {random_state}")
    return int(random_state)


def _draw(arrays: Sequence[np.ndarray], rng: np.random.Generator, n: int,
          task_bootstrap: bool) -> list[np.ndarray]:
    """n resamples of each array, each drawn independently (rliable's
    StratifiedIndependentBootstrap for several arrays)."""
    return [resample_stratified(a, rng, n, task_bootstrap=task_bootstrap) for a in arrays]


def batch_axis(func: Callable[..., Any], arrays: Sequence[np.ndarray]) -> str | None:
    """'first' or 'last' where the batch axis of func's output lies when it is called on
    batched inputs (n, runs, tasks, ...) and agrees with one call per input; None when it
    cannot be called batched."""
    rng = np.random.Generator(np.random.PCG64(2**32 + 7))  # apart from the bootstrap's
    batch = _draw(arrays, rng, PROBE_REPS, False)
    one_by_one = np.stack([np.asarray(func(*[b[i] for b in batch]), dtype=np.float64)
                           for i in range(PROBE_REPS)])
    try:
        with np.errstate(all="ignore"):
            out = np.asarray(func(*batch), dtype=np.float64)
    except Exception:  # noqa: BLE001 - any failure means: not batchable
        return None
    candidates = {"first": out, "last": np.moveaxis(out, -1, 0) if out.ndim else out}
    for where, values in candidates.items():
        if values.shape == one_by_one.shape and np.allclose(
                values, one_by_one, rtol=1e-9, atol=1e-12, equal_nan=True):
            return where
    return None


def bootstrap_values(func: Callable[..., Any], arrays: Sequence[np.ndarray], *, reps: int,
                     seed: int, task_bootstrap: bool = False,
                     max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES) -> np.ndarray:
    """func on `reps` stratified resamples of `arrays` (each resampled independently):
    (reps, *func's output shape)."""
    if reps < 1:
        raise AnalysisError(f"reps must be >= 1, got {reps}")
    where = batch_axis(func, arrays)
    per_rep = sum(a.size for a in arrays) * 24  # resample + indices
    if len(arrays) == 2:  # pairwise comparisons (probability of improvement)
        per_rep += arrays[0].shape[0] * arrays[1].shape[0] * arrays[0].shape[1] * 2
    chunk = int(max(1, min(reps, max_chunk_bytes // max(1, per_rep))))
    rng = np.random.Generator(np.random.PCG64(seed))
    out: list[np.ndarray] = []
    done = 0
    while done < reps:
        n = min(chunk, reps - done)
        batch = _draw(arrays, rng, n, task_bootstrap)
        if where is None:
            values = np.stack([np.asarray(func(*[b[i] for b in batch]), dtype=np.float64)
                               for i in range(n)])
        else:
            values = np.asarray(func(*batch), dtype=np.float64)
            if where == "last" and values.ndim:
                values = np.moveaxis(values, -1, 0)
        out.append(values)
        done += n
    return np.concatenate(out, axis=0)


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
    if method not in METHODS:
        raise AnalysisError(f"unknown CI method {method!r}; valid: {list(METHODS)}")
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
        values = bootstrap_values(func, arrays, reps=reps, seed=seed,
                                  task_bootstrap=task_bootstrap)
        ci = interval_from_replicates(np.asarray(points[key], dtype=np.float64), values,
                                      confidence_interval_size, method)
        # rliable (arch) returns (2, 1) for a scalar func, (2, k) for a vector
        low, high = (np.atleast_1d(v) for v in (ci.low, ci.high))
        intervals[key] = np.stack([low, high])
    return points, intervals


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
    if custom_profile_func is not None:
        profile = custom_profile_func

        def func(scores):
            return profile(scores, tau_list)
    elif use_score_distribution:
        def func(scores):
            return performance_profile(scores, taus)
    else:
        def func(scores):
            return average_performance_profile(scores, taus)

    flat = {key: _pool_trailing(np.asarray(v)) for key, v in score_dict.items()}
    return get_interval_estimates(
        flat if custom_profile_func is None else score_dict, func, method=method,
        task_bootstrap=task_bootstrap, reps=reps,
        confidence_interval_size=confidence_interval_size, random_state=random_state)


def _pool_trailing(x: np.ndarray) -> np.ndarray:
    """(runs, tasks, ...) -> (runs, tasks * ...): every (task, point) cell its own stratum."""
    return x.reshape(x.shape[0], -1) if x.ndim > 2 else x
