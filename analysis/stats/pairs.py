"""Probability of improvement for many pairs of groups at once.

Each replicate resamples every group once (stratified, within each task) and evaluates
P(X > Y) for every requested pair on those same draws, so the resampling cost grows with
the number of groups, not pairs, and pairs whose groups have the same shape are stacked
into one array operation. The cost of the comparisons still grows with the number of
pairs: ask for the pairs you need (analysis.scoring.poi_pairs chooses them).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

from analysis.errors import AnalysisError
from analysis.stats.bootstrap import (
    DEFAULT_MAX_CHUNK_BYTES,
    DEFAULT_REPS,
    Interval,
    _chunk_size,
    _ci,
    _resample,
)
from analysis.stats.metrics import probability_of_improvement

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
    chunk = _chunk_size(per_rep, reps, max_chunk_bytes)
    values: dict[Pair, list[np.ndarray]] = {p: [] for p in pairs}
    done = 0
    while done < reps:
        n = min(chunk, reps - done)
        drawn = {g: _resample(arrays[g], rng, n) for g in names}
        for group_pairs in by_shape.values():
            xs = np.stack([drawn[x] for x, _ in group_pairs])  # (pairs, n, runs_x, tasks)
            ys = np.stack([drawn[y] for _, y in group_pairs])
            for k, p in enumerate(probability_of_improvement(xs, ys)):
                values[group_pairs[k]].append(p)
        done += n
    return {(x, y): _ci(probability_of_improvement(arrays[x], arrays[y]),
                        np.concatenate(values[x, y]), confidence, method)
            for x, y in pairs}
