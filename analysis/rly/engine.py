"""The bootstrap under analysis.rly: a rliable `func` evaluated on chunks of stratified
resamples (batched when it can take a leading axis), and the stratified jackknife that
gives bca its acceleration.

The jackknife deletes one run from one task (one stratum) at a time, the standard
delete-one jackknife for stratified samples, with the task's remaining runs reweighted
so that every task keeps its weight. A rliable `func` takes rectangular (runs, tasks)
matrices, so the reweighting is done by repetition: run j deleted from task h of an
(n, tasks) matrix gives an (n (n - 1), tasks) matrix holding each of task h's other runs
n times and every other task's runs n - 1 times. That is exact for any `func` that sees
each task's runs only through their empirical distribution (means, medians,
profiles, probability of improvement); a trimmed mean (IQM) on the repeated matrix trims
at a finer grain than on n - 1 rows, a difference of order 1/n in each jackknife value.
rliable (arch) instead deletes run i from every task at once: n jackknife values for
the whole suite, however many tasks, so its acceleration is far noisier.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from analysis.errors import AnalysisError
from analysis.stats.metrics import DEFAULT_MAX_CHUNK_BYTES, resample_stratified

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
          task_bootstrap: bool, paired: bool = False) -> list[np.ndarray]:
    """n resamples of each array: each drawn independently (rliable's
    StratifiedIndependentBootstrap), or with `paired` the same draws for all
    (StratifiedBootstrap given several arrays of one shape)."""
    if not paired:
        return [resample_stratified(a, rng, n, task_bootstrap=task_bootstrap) for a in arrays]
    runs, tasks = arrays[0].shape[:2]
    idx, columns = draw_indices(rng, n, runs, tasks, task_bootstrap)
    return [gather(a, idx, columns) for a in arrays]


def draw_indices(rng: np.random.Generator, n: int, runs: int, tasks: int,
                 task_bootstrap: bool) -> tuple[np.ndarray, np.ndarray]:
    """Run indices (n, runs, tasks) and task columns ((n, 1, tasks), or arange(tasks)),
    drawn as resample_stratified draws them."""
    dtype = np.uint8 if runs <= 256 else np.int64
    idx = rng.integers(0, runs, size=(n, runs, tasks), dtype=dtype).astype(np.intp)
    if task_bootstrap:
        return idx, rng.integers(0, tasks, size=(n, 1, tasks)).astype(np.intp)
    return idx, np.arange(tasks, dtype=np.intp)


def gather(x: np.ndarray, idx: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """x (runs, tasks, ...) at run indices idx (n, runs, tasks) of task columns: a run's
    trailing block (its curve) stays together."""
    runs, tasks = x.shape[:2]
    flat = np.ascontiguousarray(np.moveaxis(x, 1, 0)).reshape(runs * tasks, -1)
    return np.take(flat, idx + columns * runs, axis=0).reshape(*idx.shape, *x.shape[2:])


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
                     rng: np.random.Generator, task_bootstrap: bool = False,
                     paired: bool = False,
                     max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES) -> np.ndarray:
    """func on `reps` stratified resamples of `arrays` drawn from rng (independently, or
    with `paired` the same draws for all): (reps, *func's output shape)."""
    if reps < 1:
        raise AnalysisError(f"reps must be >= 1, got {reps}")
    where = batch_axis(func, arrays)
    per_rep = sum(a.size for a in arrays) * 24  # resample + indices
    if len(arrays) == 2:  # pairwise comparisons (probability of improvement)
        per_rep += arrays[0].shape[0] * arrays[1].shape[0] * arrays[0].shape[1] * 2
    chunk = int(max(1, min(reps, max_chunk_bytes // max(1, per_rep))))
    out: list[np.ndarray] = []
    done = 0
    while done < reps:
        n = min(chunk, reps - done)
        out.append(_evaluate(func, _draw(arrays, rng, n, task_bootstrap, paired), where))
        done += n
    return np.concatenate(out, axis=0)


def _delete_one(x: np.ndarray, task: int, run: int) -> np.ndarray:
    """x (n, tasks, ...) without `run` on `task`, every task's weight kept (module
    docstring): (n (n - 1), tasks, ...)."""
    n = x.shape[0]
    out = np.repeat(x, n - 1, axis=0)
    out[:, task] = np.repeat(np.delete(x[:, task], run, axis=0), n, axis=0)
    return out


def _evaluate(func: Callable[..., Any], batches: list[np.ndarray], where: str | None,
              ) -> np.ndarray:
    """func on a batch of inputs (each (m, ...)), one output row per input."""
    m = batches[0].shape[0]
    if where is None:
        return np.stack([np.asarray(func(*[b[i] for b in batches]), dtype=np.float64)
                         for i in range(m)])
    values = np.asarray(func(*batches), dtype=np.float64)
    return np.moveaxis(values, -1, 0) if where == "last" and values.ndim else values


def jackknife_acceleration(func: Callable[..., Any], arrays: Sequence[np.ndarray], *,
                           paired: bool = False,
                           max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES) -> np.ndarray:
    """bca's acceleration of func(*arrays), shaped as func's output, from the stratified
    delete-one jackknife (module docstring); the strata are the tasks of every array
    (with `paired`, a run is deleted from all arrays at once, as they are resampled).

    With u the jackknife values' mean minus each value in a stratum of n runs and
    c = (n - 1) / n: a = sum (c u)^3 / (6 (sum (c u)^2)^1.5) over all strata (Davison and
    Hinkley 1997, section 3.2.1; with one stratum, arch's formula). Where func does not
    move with any deletion, a is 0 (arch raises).
    """
    where = batch_axis(func, arrays)
    sums2: Any = 0.0
    sums3: Any = 0.0
    scale = 0.0
    groups = [list(range(len(arrays)))] if paired else [[k] for k in range(len(arrays))]
    for group in groups:
        n, tasks = arrays[group[0]].shape[:2]
        if n < 2:
            raise AnalysisError(f"bca needs at least 2 runs per task for its jackknife; "
                                f"score matrix {group[0]} has {n}")
        per_input = sum(n * (n - 1) * arrays[k][0].size * 8 for k in group) + sum(
            a.nbytes for a in arrays)
        chunk = int(max(1, max_chunk_bytes // per_input))
        cells = [(h, j) for h in range(tasks) for j in range(n)]
        values = []
        for start in range(0, len(cells), chunk):
            part = cells[start:start + chunk]
            batches = [np.stack([_delete_one(a, h, j) for h, j in part]) if i in group else
                       np.broadcast_to(a, (len(part), *a.shape))
                       for i, a in enumerate(arrays)]
            values.append(_evaluate(func, batches, where))
        jk = np.concatenate(values).reshape(tasks, n, *values[0].shape[1:])
        u = (n - 1) / n * (jk.mean(axis=1, keepdims=True) - jk)
        sums2 = sums2 + (u ** 2).sum(axis=(0, 1))
        sums3 = sums3 + (u ** 3).sum(axis=(0, 1))
        scale = max(scale, float(np.abs(jk).max()))
    sums2 = np.asarray(sums2)
    moves = np.sqrt(sums2) > 1e-12 * (1.0 + scale)  # beyond rounding
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(moves, sums3 / (6 * sums2 ** 1.5), 0.0)
