"""rliable's bootstrap classes, StratifiedBootstrap and StratifiedIndependentBootstrap,
on this project's stratified draws (analysis.stats.metrics.resample_stratified)
instead of arch's IIDBootstrap, and the engine under them: a rliable `func` evaluated on
chunks of resamples (batched when it can take a leading axis), and the stratified
jackknife that gives bca its acceleration. What differs from rliable's classes, and why
the jackknife deletes one run from one task at a time: docs/from-rliable.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from analysis.errors import AnalysisError
from analysis.stats.metrics import (
    DEFAULT_MAX_CHUNK_BYTES,
    METHODS,
    chunk_sizes,
    interval_from_replicates,
    resample_stratified,
)

ALIASES = {"debiased": "bc", "bias-corrected": "bc", "var": "norm", "cov": "norm"}

PROBE_REPS = 7
"""Resamples on which a `func` is tried batched against one call per replicate."""


def seed_of(random_state: Any) -> int:
    """The bootstrap seed a `random_state` stands for: None is 0, an int itself, a
    RandomState or Generator one draw from it."""
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
    (StratifiedBootstrap given several arrays of one shape: resampled as one array)."""
    if not paired:
        return [resample_stratified(a, rng, n, task_bootstrap=task_bootstrap) for a in arrays]
    runs, tasks = arrays[0].shape[:2]
    flat = [a.reshape(runs, tasks, -1) for a in arrays]
    sample = resample_stratified(np.concatenate(flat, axis=2), rng, n,
                                 task_bootstrap=task_bootstrap)
    parts = np.split(sample, np.cumsum([f.shape[2] for f in flat])[:-1], axis=3)
    return [p.reshape(n, runs, tasks, *a.shape[2:]) for p, a in zip(parts, arrays, strict=True)]


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
    return np.concatenate([_evaluate(func, _draw(arrays, rng, n, task_bootstrap, paired), where)
                           for n in chunk_sizes(per_rep, reps, max_chunk_bytes)], axis=0)


def _delete_one(x: np.ndarray, task: int, run: int) -> np.ndarray:
    """x (n, tasks, ...) without `run` on `task`, every task's weight kept by repeating
    the other runs (docs/from-rliable.md): (n (n - 1), tasks, ...)."""
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
    delete-one jackknife (docs/from-rliable.md); the strata are the tasks of every array
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


def generator_of(random_state: Any) -> np.random.Generator:
    """The Generator the bootstrap draws from: a Generator as given, anything else (None,
    an int, a RandomState) through seed_of."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    return np.random.Generator(np.random.PCG64(seed_of(random_state)))


def _index(shape: tuple[int, ...], rng: np.random.Generator | None = None,
           task_bootstrap: bool = False) -> tuple[np.ndarray, ...]:
    """rliable's index of one array (runs, tasks, ...): (run indices shaped like it, task
    indices (1, tasks, 1...), the other strata (1, 1, points...)). The identity without
    `rng`; else one replicate, drawn as resample_stratified draws it (it resamples each
    cell's own flat index), the same run index at every point of a run's curve."""
    runs, tasks = shape[:2]
    strata = list(np.ogrid[tuple(slice(n) for n in (0, *shape[1:]))][1:])
    trailing = (1,) * (len(shape) - 2)
    if rng is None:
        return (np.broadcast_to(np.arange(runs).reshape(runs, 1, *trailing), shape), *strata)
    cells = np.arange(runs * tasks).reshape(tasks, runs).T
    drawn = resample_stratified(cells, rng, 1, task_bootstrap=task_bootstrap)[0]
    if task_bootstrap:
        strata[0] = (drawn[0] // runs).reshape(1, tasks, *trailing)
    return (np.broadcast_to((drawn % runs).reshape(runs, tasks, *trailing), shape), *strata)


class _Stratified:
    """What both classes share; `_paired` says whether all arrays take the same draws."""

    _paired = True
    _task_bootstrap = False

    def __init__(self, *args: np.ndarray, random_state: Any = None, **kwargs: np.ndarray):
        if not args and not kwargs:
            raise AnalysisError("give at least one score array")
        self._pos = tuple(np.asarray(a) for a in args)
        self._kw = {k: np.asarray(v) for k, v in kwargs.items()}
        for name, a in [*enumerate(self._pos), *self._kw.items()]:
            if a.ndim < 2:
                raise AnalysisError(f"argument {name}: scores must be shaped (runs, tasks, "
                                    f"...), got shape {a.shape}")
        for key, value in self._kw.items():
            setattr(self, key, value)
        self._generator = generator_of(random_state)
        self._results: np.ndarray | None = None
        self._last: tuple[Any, int] | None = None
        self._index: Any = self._draw_index(None)

    @property
    def pos_data(self) -> tuple[np.ndarray, ...]:
        return self._pos

    @property
    def kw_data(self) -> dict[str, np.ndarray]:
        return self._kw

    @property
    def data(self) -> tuple[tuple[np.ndarray, ...], dict[str, np.ndarray]]:
        return self._pos, self._kw

    @property
    def random_state(self) -> np.random.Generator:
        """The Generator draws come from (set it to an int, a RandomState or a Generator)."""
        return self._generator

    @random_state.setter
    def random_state(self, value: Any) -> None:
        self._generator = generator_of(value)

    @property
    def index(self) -> Any:
        """The indices of the last replicate `bootstrap` yielded (the identity before)."""
        return self._index

    def _arrays(self) -> list[np.ndarray]:
        return [*self._pos, *self._kw.values()]

    def _draw_index(self, rng: np.random.Generator | None) -> Any:
        """One replicate's indices drawn from rng; the identity with rng None."""
        raise NotImplementedError

    def _resample(self) -> tuple[tuple[np.ndarray, ...], dict[str, np.ndarray]]:
        raise NotImplementedError

    def bootstrap(self, reps: int) -> Iterator[tuple[tuple[np.ndarray, ...],
                                                     dict[str, np.ndarray]]]:
        """One (pos_data, kw_data) resample per replicate; `.index` holds its indices."""
        for _ in range(reps):
            self._index = self._draw_index(self._generator)
            yield self._resample()

    def conf_int(self, func: Callable[..., Any], reps: int = 1000, method: str = "basic",
                 size: float = 0.95, tail: str = "two", extra_kwargs: dict | None = None,
                 reuse: bool = False, sampling: str = "nonparametric",
                 std_err_func: Callable[..., Any] | None = None,
                 studentize_reps: int = 1000) -> np.ndarray:
        """arch's conf_int: the CI of func(*pos_data, **kw_data, **extra_kwargs), shaped
        (2, k): lower bounds, then upper. tail 'lower' leaves the upper bound +inf,
        'upper' the lower bound -inf."""
        method = ALIASES.get(method, method)
        if method == "studentized":
            raise AnalysisError("method 'studentized' is not provided (it needs a standard "
                                "error per replicate); use 'bca', 'bc' or 'percentile'")
        if method not in METHODS:
            raise AnalysisError(f"unknown CI method {method!r}; valid: {list(METHODS)}")
        if sampling != "nonparametric":
            raise AnalysisError(f"sampling {sampling!r} is not provided; only "
                                f"'nonparametric' (resampling runs)")
        if tail not in ("two", "lower", "upper"):
            raise AnalysisError(f"tail must be 'two', 'lower' or 'upper', got {tail!r}")
        if not 0 < size < 1:
            raise AnalysisError(f"size must be strictly between 0 and 1, got {size}")
        n_pos, keys, extra = len(self._pos), list(self._kw), dict(extra_kwargs or {})

        def on_arrays(*arrays):  # func as a function of the arrays alone, positional first
            return func(*arrays[:n_pos], **dict(zip(keys, arrays[n_pos:], strict=True)),
                        **extra)
        arrays = [np.asarray(a, dtype=np.float64) for a in self._arrays()]
        point = np.atleast_1d(np.asarray(on_arrays(*arrays), dtype=np.float64))
        if reuse and self._results is not None and self._last == (func, reps):
            values = self._results
        else:
            values = bootstrap_values(on_arrays, arrays, reps=reps, rng=self._generator,
                                      task_bootstrap=self._task_bootstrap,
                                      paired=self._paired)
            self._results, self._last = values, (func, reps)
        values = values.reshape(reps, *point.shape)
        alpha = 1.0 - size
        tails = {"two": (alpha / 2, alpha / 2), "lower": (alpha, 0.0),
                 "upper": (0.0, alpha)}[tail]
        acceleration = (jackknife_acceleration(on_arrays, arrays, paired=self._paired)
                        if method == "bca" else None)
        ci = interval_from_replicates(point, values, size, method,
                                      acceleration=acceleration, tails=tails)
        return np.stack([np.atleast_1d(ci.low), np.atleast_1d(ci.high)])


class StratifiedBootstrap(_Stratified):
    """rliable's StratifiedBootstrap: resamples runs within each task (the arrays, all of
    one shape (runs, tasks, ...), take the same draws); with task_bootstrap each
    replicate also draws its tasks with replacement.

    `index` is rliable's: (run indices shaped like the arrays, task indices (1, tasks,
    1...), the other strata (1, 1, points...)), so `x[bs.index]` is the resample. The run
    index is the same at every point of a run's curve (rliable's differs per point).
    """

    _name = "Stratified Bootstrap"

    def __init__(self, *args: np.ndarray, random_state: Any = None,
                 task_bootstrap: bool = False, **kwargs: np.ndarray):
        super().__init__(*args, random_state=random_state, **kwargs)
        shapes = {a.shape[:2] for a in self._arrays()}
        if len(shapes) > 1:
            raise AnalysisError(f"StratifiedBootstrap resamples all its arrays with the same "
                                f"draws, so they need the same runs and tasks; got "
                                f"{sorted(shapes)} (StratifiedIndependentBootstrap resamples "
                                f"each on its own)")
        self._task_bootstrap = task_bootstrap

    def _draw_index(self, rng: np.random.Generator | None) -> Any:
        return _index(self._arrays()[0].shape, rng, self._task_bootstrap)

    def _resample(self) -> tuple[tuple[np.ndarray, ...], dict[str, np.ndarray]]:
        index = self._index
        return (tuple(a[index] for a in self._pos),
                {k: v[index] for k, v in self._kw.items()})


class StratifiedIndependentBootstrap(_Stratified):
    """rliable's StratifiedIndependentBootstrap: each array (its runs may differ) is
    resampled on its own, runs within each task. `index` is rliable's: ([one index tuple
    per positional array], {key: index tuple}), each tuple as StratifiedBootstrap's."""

    _paired = False

    def _draw_index(self, rng: np.random.Generator | None) -> Any:
        return ([_index(a.shape, rng) for a in self._pos],
                {k: _index(v.shape, rng) for k, v in self._kw.items()})

    def _resample(self) -> tuple[tuple[np.ndarray, ...], dict[str, np.ndarray]]:
        pos_idx, kw_idx = self._index
        return (tuple(a[i] for a, i in zip(self._pos, pos_idx, strict=True)),
                {k: v[kw_idx[k]] for k, v in self._kw.items()})
