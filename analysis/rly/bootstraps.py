"""rliable's bootstrap classes, StratifiedBootstrap and StratifiedIndependentBootstrap,
on this project's draws (analysis.rly.engine) instead of arch's IIDBootstrap.

They keep what a user of rliable's classes touches: `bootstrap(reps)` yielding
`(pos_data, kw_data)` per replicate with `.index` set to the indices that made it,
`pos_data`, `kw_data`, `data`, keyword arrays as attributes, `random_state`, and
`conf_int(func, reps, method, size, tail, extra_kwargs, reuse, ...)` with arch's
defaults. What differs: `random_state` is honoured (None means seed 0), `conf_int`
draws chunks of replicates at once, a run's trailing block (its curve) is resampled
whole, 'bca' takes its acceleration from the stratified jackknife, and 'studentized' and
parametric sampling are refused (docs/from-rliable.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from analysis.errors import AnalysisError
from analysis.rly.engine import (
    bootstrap_values,
    draw_indices,
    jackknife_acceleration,
    seed_of,
)
from analysis.stats.metrics import interval_from_replicates

ALIASES = {"debiased": "bc", "bias-corrected": "bc", "var": "norm", "cov": "norm"}
CONF_INT_METHODS = ("basic", "percentile", "norm", "bc", "bca")


def generator_of(random_state: Any) -> np.random.Generator:
    """The Generator the bootstrap draws from: a Generator as given, anything else (None,
    an int, a RandomState) through seed_of."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    return np.random.Generator(np.random.PCG64(seed_of(random_state)))


def _strata(shape: tuple[int, ...]) -> list[np.ndarray]:
    """rliable's strata indices: (1, tasks, 1, ...), (1, 1, points, ...) and so on."""
    return list(np.ogrid[tuple(slice(n) for n in (0, *shape[1:]))][1:])


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
        self._index: Any = self._identity()

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

    def _identity(self) -> Any:
        raise NotImplementedError

    def _next_index(self) -> Any:
        raise NotImplementedError

    def _resample(self) -> tuple[tuple[np.ndarray, ...], dict[str, np.ndarray]]:
        raise NotImplementedError

    def bootstrap(self, reps: int) -> Iterator[tuple[tuple[np.ndarray, ...],
                                                     dict[str, np.ndarray]]]:
        """One (pos_data, kw_data) resample per replicate; `.index` holds its indices."""
        for _ in range(reps):
            self._index = self._next_index()
            yield self._resample()

    def _call(self, func: Callable[..., Any], extra_kwargs: dict | None) -> Callable[..., Any]:
        """func as a function of the arrays alone, positional ones first."""
        n_pos, keys, extra = len(self._pos), list(self._kw), dict(extra_kwargs or {})

        def on_arrays(*arrays):
            return func(*arrays[:n_pos], **dict(zip(keys, arrays[n_pos:], strict=True)),
                        **extra)
        return on_arrays

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
        if method not in CONF_INT_METHODS:
            raise AnalysisError(f"unknown CI method {method!r}; valid: {list(CONF_INT_METHODS)}")
        if sampling != "nonparametric":
            raise AnalysisError(f"sampling {sampling!r} is not provided; only "
                                f"'nonparametric' (resampling runs)")
        if tail not in ("two", "lower", "upper"):
            raise AnalysisError(f"tail must be 'two', 'lower' or 'upper', got {tail!r}")
        if not 0 < size < 1:
            raise AnalysisError(f"size must be strictly between 0 and 1, got {size}")
        on_arrays = self._call(func, extra_kwargs)
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
        if method == "norm":
            return self._norm(point, values, tails)
        acceleration = (jackknife_acceleration(on_arrays, arrays, paired=self._paired)
                        if method == "bca" else None)
        ci = interval_from_replicates(point, values, size, method,
                                      acceleration=acceleration, tails=tails)
        return np.stack([np.atleast_1d(ci.low), np.atleast_1d(ci.high)])

    @staticmethod
    def _norm(point: np.ndarray, values: np.ndarray, tails: tuple[float, float]) -> np.ndarray:
        """point +- z * the replicates' standard deviation (arch's 'norm')."""
        from scipy import special

        alpha = max(tails)
        sd = values.std(axis=0)
        z = special.ndtri(1 - alpha)
        low = point - z * sd if tails[0] else np.full_like(point, -np.inf)
        high = point + z * sd if tails[1] else np.full_like(point, np.inf)
        return np.stack([low, high])


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
        self._args_shape = self._arrays()[0].shape
        self._num_tasks = self._args_shape[1]
        self._strata_indices = _strata(self._args_shape)

    def _identity(self) -> Any:
        shape = self._arrays()[0].shape
        runs = np.arange(shape[0]).reshape(-1, *([1] * (len(shape) - 1)))
        return (np.broadcast_to(runs, shape), *_strata(shape))

    def _next_index(self) -> Any:
        runs, tasks = self._args_shape[:2]
        idx, columns = draw_indices(self._generator, 1, runs, tasks, self._task_bootstrap)
        trailing = (1,) * (len(self._args_shape) - 2)
        run_idx = np.broadcast_to(idx[0].reshape(runs, tasks, *trailing), self._args_shape)
        task_idx = (columns.reshape(1, tasks, *trailing) if self._task_bootstrap
                    else self._strata_indices[0])
        return (run_idx, task_idx, *self._strata_indices[1:])

    def _resample(self) -> tuple[tuple[np.ndarray, ...], dict[str, np.ndarray]]:
        index = self._index
        return (tuple(a[index] for a in self._pos),
                {k: v[index] for k, v in self._kw.items()})


class StratifiedIndependentBootstrap(_Stratified):
    """rliable's StratifiedIndependentBootstrap: each array (its runs may differ) is
    resampled on its own, runs within each task. `index` is rliable's: ([one index tuple
    per positional array], {key: index tuple}), each tuple as StratifiedBootstrap's."""

    _paired = False

    def _shapes(self) -> tuple[list[tuple[int, ...]], dict[str, tuple[int, ...]]]:
        return [a.shape for a in self._pos], {k: v.shape for k, v in self._kw.items()}

    def _identity(self) -> Any:
        def one(shape):
            runs = np.arange(shape[0]).reshape(-1, *([1] * (len(shape) - 1)))
            return (np.broadcast_to(runs, shape), *_strata(shape))
        pos, kw = self._shapes()
        return [one(s) for s in pos], {k: one(s) for k, s in kw.items()}

    def _one_index(self, shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
        runs, tasks = shape[:2]
        idx, _ = draw_indices(self._generator, 1, runs, tasks, False)
        trailing = (1,) * (len(shape) - 2)
        return (np.broadcast_to(idx[0].reshape(runs, tasks, *trailing), shape),
                *_strata(shape))

    def _next_index(self) -> Any:
        pos, kw = self._shapes()
        return [self._one_index(s) for s in pos], {k: self._one_index(s) for k, s in kw.items()}

    def _resample(self) -> tuple[tuple[np.ndarray, ...], dict[str, np.ndarray]]:
        pos_idx, kw_idx = self._index
        return (tuple(a[i] for a, i in zip(self._pos, pos_idx, strict=True)),
                {k: v[kw_idx[k]] for k, v in self._kw.items()})
