"""What rliable never checks about a score matrix: that its rows are independent seeds.

rliable bootstraps whatever stands on the first axis. Its users' most common mistake is
to stack episodes (or layout copies of one seed) as runs: the bootstrap then counts them
as independent seeds and the CIs come out far too narrow. These checks refuse what
cannot be scored (NaN, wrong shape) with an AnalysisError and warn (SeedWarning) about
rows that look like something other than seeds.
"""

from __future__ import annotations

import warnings

import numpy as np

from analysis.errors import AnalysisError
from analysis.importers.declare import MAX_SEED_VALUES
from analysis.scoring.tables import FEW_SEEDS
from runrecord.words import counted


class SeedWarning(UserWarning):
    """The rows of a score matrix may not be independent seeds, or too few to trust."""


def check_scores(name: str, scores) -> np.ndarray:
    """scores (runs, tasks, ...) as float64, after refusing what cannot be bootstrapped and
    warning about rows that are not independent seeds. `name` labels the messages."""
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim < 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise AnalysisError(
            f"{name}: scores must be shaped (runs, tasks) or (runs, tasks, points) with at "
            f"least one run and one task; got shape {x.shape}")
    bad = ~np.isfinite(x)
    if bad.any():
        run, task = (int(i) for i in np.argwhere(bad)[0][:2])
        raise AnalysisError(
            f"{name}: {counted(int(bad.sum()), 'score')} {'is' if int(bad.sum()) == 1 else 'are'} NaN or inf (first: run {run}, task "
            f"{task}); every run needs a finite score on every task (drop the run, or the "
            f"task for every algorithm)")
    runs = x.shape[0]
    if runs > MAX_SEED_VALUES:
        warnings.warn(
            f"{name}: {runs} runs per task. Rows look like episodes, not seeds: the bootstrap "
            f"treats every row as an independent run, so episodes stacked as runs give CIs "
            f"far too narrow. Average each seed's episodes first (one row per seed).",
            SeedWarning, stacklevel=3)
    elif runs > 1:
        rows = x.reshape(runs, -1)
        _, first, counts = np.unique(rows, axis=0, return_index=True, return_counts=True)
        if (counts > 1).any():
            dup = int(first[np.argmax(counts > 1)])
            same = [i for i in range(runs) if np.array_equal(rows[i], rows[dup])]
            warnings.warn(
                f"{name}: runs {same} have identical scores on every task: copies of one "
                f"seed (e.g. the same seed on two layouts) are not extra seeds and narrow "
                f"the CIs. Keep one row per seed.", SeedWarning, stacklevel=3)
    if runs <= FEW_SEEDS:
        warnings.warn(
            f"{name}: {counted(runs, 'run')} per task. Percentile bootstrap CIs are too narrow at so "
            f"few seeds (the bootstrap variance is (n-1)/n of the true one; at 3 seeds a "
            f"nominal 5% test fired 14% of the time). For a decision use "
            f"analysis.rly.equivalence or analysis.rly.regression (Welch on per-seed "
            f"values), or run more seeds.", SeedWarning, stacklevel=3)
    return x


def check_same_tasks(name: str, arrays: list[np.ndarray]) -> None:
    """Arrays compared run by run on each task must have the same task axis."""
    shapes = {a.shape[1:] for a in arrays}
    if len(shapes) > 1:
        raise AnalysisError(
            f"{name}: the score matrices must share their tasks (and points): got shapes "
            f"{[a.shape for a in arrays]} (runs may differ, the other axes may not)")
