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

Their stratified bootstrap CIs, vectorised over replicates: a replicate resamples, for
every task independently, `runs` run indices with replacement (tasks are fixed: rliable's
StratifiedBootstrap). Instead of rliable's Python loop per replicate, we draw index
arrays shaped (chunk, runs, tasks) from `np.random.Generator(PCG64(seed))` and evaluate
the metric on the whole chunk at once along the last two axes. Chunks keep memory
bounded (`max_chunk_bytes` per resampled array); the chunk size depends only on the
input shape and that bound, so the same seed gives the same CIs.

CIs: `percentile` (default, as rliable), `basic` (2 * point - percentiles), `norm`
(point +- normal quantile x the replicates' sd), `bc` (bias
corrected: percentiles moved by z0, the normal quantile of the share of replicates below
the point) and `bca` (bc plus an acceleration, from a jackknife the caller supplies:
analysis.rly.jackknife). At 3 runs per task the percentile bootstrap is too narrow
(bootstrap variance is (n-1)/n of the true one); see docs/analysis.md.

`probability_of_improvement_pairs` resamples every group once per replicate and
evaluates P(X > Y) for every requested pair on those same draws, so the resampling cost
grows with the number of groups, not pairs; pairs whose groups have the same shape are
stacked into one array operation (analysis.verdicts.compare.choose_pairs chooses the
pairs).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special

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


DEFAULT_REPS = 50_000
DEFAULT_MAX_CHUNK_BYTES = 16 * 2**20
METHODS = ("basic", "percentile", "norm", "bc", "bca")
SUITE_METHODS = ("percentile", "basic", "bc")
"""The methods interval_estimates takes: bca needs a jackknife of the metric, which
analysis.rly.get_interval_estimates computes."""


@dataclass(frozen=True)
class Interval:
    """Point estimate and CI of one metric (arrays for curves, floats otherwise)."""

    point: np.ndarray
    low: np.ndarray
    high: np.ndarray

    def as_dict(self) -> dict:
        return {k: np.asarray(getattr(self, k)).tolist() for k in ("point", "low", "high")}


def chunk_sizes(bytes_per_rep: int, reps: int, max_chunk_bytes: int) -> Iterator[int]:
    """Replicates per chunk, summing to `reps`: as many as fit in `max_chunk_bytes`."""
    chunk = int(max(1, min(reps, max_chunk_bytes // max(1, bytes_per_rep))))
    for done in range(0, reps, chunk):
        yield min(chunk, reps - done)


def interval_from_replicates(point, reps_values, confidence: float = 0.95,
                             method: str = "percentile", acceleration=None,
                             tails: tuple[float, float] | None = None) -> Interval:
    """The CI of a point estimate from its bootstrap replicates (reps, ...).

    'norm' is the point plus the normal quantiles times the replicates' standard
    deviation (arch's). `acceleration` (same shape as point) is needed by 'bca' only. `tails`: the two
    nominal tail probabilities (default (1 - confidence) / 2 each); a one-sided interval
    passes 0 for the open side, whose bound is then -inf or +inf.
    """
    if method not in METHODS:
        raise AnalysisError(f"unknown CI method {method!r}; valid: {list(METHODS)}")
    if not 0 < confidence < 1:
        raise AnalysisError(f"confidence must be in (0, 1), got {confidence}")
    alpha = 1.0 - confidence
    lo_tail, hi_tail = (alpha / 2, alpha / 2) if tails is None else tails
    point = np.asarray(point, dtype=np.float64)
    reps_values = np.asarray(reps_values, dtype=np.float64)
    # a 0 tail is an open side: computed at the other side's level (as arch does, so
    # that 'basic' mirrors the right percentile), then replaced by an infinite bound
    probs = np.array([lo_tail or hi_tail, 1 - (hi_tail or lo_tail)])
    if method in ("bc", "bca"):
        if method == "bca" and acceleration is None:
            raise AnalysisError("method 'bca' needs the jackknife acceleration")
        # z0 = Phi^-1(share of replicates below the point), ties counted half (as
        # scipy.stats.bootstrap does) because fractions such as performance profiles put
        # many replicates exactly on the point; arch counts only those strictly below,
        # which moves such intervals up for no reason.
        below = (reps_values < point).mean(axis=0) + 0.5 * (reps_values == point).mean(axis=0)
        if np.any(below <= 0) or np.any(below >= 1):
            raise AnalysisError(
                "bc/bca: every bootstrap replicate lies on one side of the point estimate, "
                "so the bias cannot be corrected (an extreme statistic, or too few runs); "
                "use method='percentile'")
        z0 = np.asarray(special.ndtri(below))
        a = np.zeros_like(z0) if method == "bc" else np.asarray(acceleration, np.float64)
        z = special.ndtri(probs).reshape((2,) + (1,) * z0.ndim)
        adjusted = special.ndtr(z0 + (z0 + z) / (1 - a * (z0 + z)))  # (2, ...)
        flat = reps_values.reshape(reps_values.shape[0], -1)
        q = adjusted.reshape(2, -1)
        bounds = [np.array([np.percentile(flat[:, i], 100 * q[k, i]) for i in range(q.shape[1])])
                  for k in (0, 1)]
        lo, hi = (b.reshape(point.shape) for b in bounds)
    elif method == "norm":
        sd = reps_values.std(axis=0)
        lo, hi = (point + special.ndtri(p) * sd for p in probs)
    else:
        lo, hi = np.percentile(reps_values, 100 * probs, axis=0)
    if method == "basic":
        lo, hi = 2 * point - hi, 2 * point - lo
    lo = np.where(lo_tail == 0, -np.inf, lo)
    hi = np.where(hi_tail == 0, np.inf, hi)
    return Interval(point, np.asarray(lo), np.asarray(hi))


def resample_stratified(x: np.ndarray, rng: np.random.Generator, n: int, *,
                        task_bootstrap: bool = False) -> np.ndarray:
    """n stratified resamples of x (runs, tasks, ...) in x's own layout: (n, runs, tasks, ...).

    A run's whole trailing block (e.g. its curve) is kept together. With `task_bootstrap`
    each replicate also draws its task columns with replacement (rliable's
    task_bootstrap=True), and every drawn column gets its own run draws.
    """
    runs, tasks = x.shape[:2]
    rest = x.shape[2:]
    flat = np.ascontiguousarray(np.moveaxis(x, 1, 0)).reshape(runs * tasks, -1)  # task-major
    dtype = np.uint8 if runs <= 256 else np.int64
    idx = rng.integers(0, runs, size=(n, runs, tasks), dtype=dtype).astype(np.intp)
    if task_bootstrap:
        columns = rng.integers(0, tasks, size=(n, 1, tasks)).astype(np.intp)
    else:
        columns = np.arange(tasks, dtype=np.intp)
    sample = np.take(flat, idx + columns * runs, axis=0)  # (n, runs, tasks, prod(rest))
    return sample.reshape(n, runs, tasks, *rest)


def _resample(scores: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    """`resample_stratified` laid out for the metrics: (runs, tasks) -> (n, runs, tasks);
    (runs, tasks, points) -> (n, points, runs, tasks) (same run draws at every point)."""
    sample = resample_stratified(scores, rng, n)
    return sample if scores.ndim == 2 else np.ascontiguousarray(np.moveaxis(sample, 3, 1))


def replicates(
    scores,
    metrics: Mapping[str, Metric],
    *,
    reps: int = DEFAULT_REPS,
    seed: int = 0,
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
) -> dict[str, np.ndarray]:
    """Bootstrap distribution of each metric: name -> (reps,) or (reps, points).

    scores: (runs, tasks) for aggregates, or (runs, tasks, points) for curves (the same
    resampled runs are used at every point, as rliable does). All metrics share the
    same resamples.
    """
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim not in (2, 3):
        raise AnalysisError(f"scores must be (runs, tasks) or (runs, tasks, points), got {x.shape}")
    if reps < 1:
        raise AnalysisError(f"reps must be >= 1, got {reps}")
    rng = np.random.Generator(np.random.PCG64(seed))
    out: dict[str, list[np.ndarray]] = {name: [] for name in metrics}
    for n in chunk_sizes(x.size * 8 * 2, reps, max_chunk_bytes):  # resample + index array
        sample = _resample(x, rng, n)  # (n, runs, tasks) or (n, points, runs, tasks)
        for name, fn in metrics.items():
            out[name].append(np.asarray(fn(sample)))
    return {name: np.concatenate(v, axis=0) for name, v in out.items()}


def interval_estimates(
    scores,
    metrics: Mapping[str, Metric],
    *,
    reps: int = DEFAULT_REPS,
    seed: int = 0,
    confidence: float = 0.95,
    method: str = "percentile",
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
) -> dict[str, Interval]:
    """Point estimate and stratified-bootstrap CI of each metric.

    scores: (runs, tasks) -> float intervals; (runs, tasks, points) -> (points,) intervals.
    """
    x = np.asarray(scores, dtype=np.float64)
    if method not in SUITE_METHODS:
        raise AnalysisError(f"unknown CI method {method!r}; valid: {list(SUITE_METHODS)} "
                            f"(bca: analysis.rly.get_interval_estimates)")
    if not np.all(np.isfinite(x)):
        raise AnalysisError("scores contain NaN or inf; every run needs a score on every task")
    reps_values = replicates(x, metrics, reps=reps, seed=seed, max_chunk_bytes=max_chunk_bytes)
    point_input = np.moveaxis(x, -1, 0) if x.ndim == 3 else x
    return {
        name: interval_from_replicates(np.asarray(fn(point_input)), reps_values[name],
                                       confidence, method)
        for name, fn in metrics.items()
    }


def probability_of_improvement_ci(
    x,
    y,
    *,
    reps: int = DEFAULT_REPS,
    seed: int = 0,
    confidence: float = 0.95,
    method: str = "percentile",
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
) -> Interval:
    """P(X > Y) with a CI; x and y are resampled independently, each within every task
    (`probability_of_improvement_pairs` of the one pair: the same draws)."""
    return probability_of_improvement_pairs(
        {"x": x, "y": y}, [("x", "y")], reps=reps, seed=seed, confidence=confidence,
        method=method, max_chunk_bytes=max_chunk_bytes)["x", "y"]


Pair = tuple[str, str]


def probability_of_improvement_pairs(
    finals: Mapping[str, np.ndarray],
    pairs: Sequence[Pair],
    *,
    reps: int = DEFAULT_REPS,
    seed: int = 0,
    confidence: float = 0.95,
    method: str = "percentile",
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
) -> dict[Pair, Interval]:
    """P(X > Y) with a CI for each (X, Y) in `pairs`; finals: group -> (runs, tasks).

    The groups of a pair must have the same tasks (columns). The same seed gives the same
    CIs for the same groups and pairs.
    """
    if not pairs:
        return {}
    arrays = {g: np.asarray(finals[g], dtype=np.float64) for pair in pairs for g in pair}
    for x, y in pairs:
        if arrays[x].shape[-1] != arrays[y].shape[-1]:
            raise AnalysisError(f"P({x} > {y}) needs the same tasks: {arrays[x].shape[-1]} "
                                f"vs {arrays[y].shape[-1]}")
    by_shape: dict[tuple, list[Pair]] = defaultdict(list)
    for x, y in pairs:
        by_shape[arrays[x].shape, arrays[y].shape].append((x, y))
    names = sorted(arrays)
    rng = np.random.Generator(np.random.PCG64(seed))
    biggest = max(len(p) * (arrays[p[0][0]].shape[0] * arrays[p[0][1]].shape[0]
                            * arrays[p[0][0]].shape[1]) for p in by_shape.values())
    per_rep = sum(a.size for a in arrays.values()) * 16 + biggest * 2
    values: dict[Pair, list[np.ndarray]] = {p: [] for p in pairs}
    for n in chunk_sizes(per_rep, reps, max_chunk_bytes):
        drawn = {g: _resample(arrays[g], rng, n) for g in names}
        for group_pairs in by_shape.values():
            xs = np.stack([drawn[x] for x, _ in group_pairs])  # (pairs, n, runs_x, tasks)
            ys = np.stack([drawn[y] for _, y in group_pairs])
            for k, p in enumerate(probability_of_improvement(xs, ys)):
                values[group_pairs[k]].append(p)
    return {(x, y): interval_from_replicates(
        probability_of_improvement(arrays[x], arrays[y]), np.concatenate(values[x, y]),
        confidence, method) for x, y in pairs}
