"""The cache's third layer: values the analysis computes from each run (final score,
curve on a frame grid, curve on a time grid), consolidated per results root and option
set, so a warm command reads one file per quantity instead of one per run.

A quantity's file, `<root>/.analysis-cache/derived/<name>-<hash of params>.npz`, holds one
row per run: the run's path below the root, its key and the row of values. `params` is
everything the rows share that changes them (window length, the grid's values); the row
key is the run's cache key plus what varies per run (its normaliser's low and high).
So a changed, re-run or archived run (new cache key) or any option that changes what is
computed (new file or new row key) is recomputed, never read stale. Misses are computed
run by run from the run's cache entry (one run's columns in memory at a time) and the
file (an analysis.inputs.cache.RowFile) is rewritten atomically with them.

Format (measured for 10,000 rows of 50 floats, docs/analysis.md): an npz of three arrays
(paths, keys, values) writes in 64 ms and reads into a lookup table in 47 ms; SQLite (a
blob per row) 197 ms / 88 ms; JSON 1.9 s / 1.4 s. The npz is also replaced atomically
with one os.replace, which SQLite's own locking does not promise on NFS.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from analysis.inputs.cache import CACHE_DIR, DERIVED_DIR, CachedRun, RowFile, scoring_columns
from analysis.inputs.facts import ScoringColumns
from runrecord import Run

KEEP_FILES = 256
"""Files kept per root (the most recently used); an option set not used for a while is
recomputed when it comes back."""


@dataclass(frozen=True)
class Quantity:
    """A per-run row of `width` floats: compute(run, columns) -> (width,) array.

    params: what every row shares that changes the values (part of the file name);
    run_params(run): what differs per run and changes its row (part of the row key).
    """

    name: str
    params: str
    width: int
    run_params: Callable[[Run], str]
    compute: Callable[[Run, ScoringColumns], np.ndarray]

    def file(self, root: Path) -> Path:
        digest = hashlib.sha1(self.params.encode()).hexdigest()[:20]
        return root / CACHE_DIR / DERIVED_DIR / f"{self.name}-{digest}.npz"


def run_values(runs: Sequence[Run],
               quantities: Sequence[Quantity | Sequence[Quantity]]) -> list[np.ndarray]:
    """For each quantity a (len(runs), width) array of its rows: from the derived files
    where current, else computed (each run's columns read once for all its misses) and
    stored. A position of `quantities` is one Quantity for every run, or one per run (of
    one width: e.g. the time curve on each run's group's grid), so a command makes one
    pass over its runs. Runs outside any cache (--no-cache, imports) are computed each
    time."""
    per_run = [[q] * len(runs) if isinstance(q, Quantity) else list(q) for q in quantities]
    widths = [q.width if isinstance(q, Quantity) else q[0].width for q in quantities]
    out = [np.empty((len(runs), w)) for w in widths]
    files: dict[tuple[Path, str, str], RowFile] = {}
    for i, run in enumerate(runs):
        # A cached run's root, path and key say where its values are stored and when
        # they are current.
        slot = run if isinstance(run, CachedRun) else None
        todo = []
        for j, column in enumerate(per_run):
            q = column[i]
            if slot is None:
                todo.append(j)
                continue
            where = (slot.cache_root, q.name, q.params)
            if where not in files:
                files[where] = RowFile(slot.cache_root, q.file(slot.cache_root), q.width)
            got = files[where].get(slot.cache_rel, f"{slot.cache_key}|{q.run_params(run)}")
            if got is None:
                todo.append(j)
            else:
                out[j][i] = got
        if not todo:
            continue
        cols = scoring_columns(run)
        for j in todo:
            q = per_run[j][i]
            out[j][i] = q.compute(run, cols)
            if slot is not None:
                files[slot.cache_root, q.name, q.params].put(
                    slot.cache_rel, f"{slot.cache_key}|{q.run_params(run)}", out[j][i].copy())
    for rows in files.values():
        if rows.save():  # keep the KEEP_FILES most recently written files of its folder
            by_age = sorted(rows.path.parent.glob("*.npz"), key=lambda p: p.stat().st_mtime_ns,
                            reverse=True)
            for stale in by_age[KEEP_FILES:]:
                stale.unlink(missing_ok=True)
    return out


def run_records(runs: Sequence[Run], name: str,
                compute: Callable[[Run], dict[str, Any]]) -> list[dict[str, Any]]:
    """compute(run) for each run, a JSON object (e.g. a run's staleness audit): from
    `<root>/.analysis-cache/derived/<name>.json` where the row carries the run's cache key,
    else computed and stored (runs outside any cache: computed each time)."""
    out: list[dict[str, Any]] = []
    files: dict[Path, RowFile] = {}
    for run in runs:
        if not isinstance(run, CachedRun):
            out.append(compute(run))
            continue
        if run.cache_root not in files:
            files[run.cache_root] = RowFile(run.cache_root, run.cache_root / CACHE_DIR
                                            / DERIVED_DIR / f"{name}.json")
        rows = files[run.cache_root]
        got = rows.get(run.cache_rel, run.cache_key)
        if got is None:
            got = compute(run)
            rows.put(run.cache_rel, run.cache_key, got)
        out.append(got)
    for rows in files.values():
        rows.save()
    return out
