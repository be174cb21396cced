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
file is rewritten atomically with them; rows of runs that are gone are dropped then.

Format (measured for 10,000 rows of 50 floats, docs/analysis.md): an npz of three arrays
(paths, keys, values) writes in 64 ms and reads into a lookup table in 47 ms; SQLite (a
blob per row) 197 ms / 88 ms; JSON 1.9 s / 1.4 s. The npz is also replaced atomically
with one os.replace, which SQLite's own locking does not promise on NFS.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from analysis.inputs.cache import (
    CACHE_DIR,
    DERIVED_DIR,
    UNREADABLE,
    CachedRun,
    atomic_write,
    scoring_columns,
)
from analysis.inputs.facts import ScoringColumns
from runrecord import Run, schema

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


class _Rows:
    """One derived file of one root, read once: per run (its path below the root) its key
    and value, a row of `width` floats (an npz) or, width None, a JSON object (a .json).
    Rows added for misses are written back by save(), less those of runs that are gone."""

    def __init__(self, path: Path, width: int | None = None) -> None:
        self.path = path
        self.width = width
        self.rows: dict[str, tuple[str, Any]] = {}
        self.changed = False
        self.seen: set[str] = set()  # rows of runs this command loaded: present
        try:
            if width is None:
                self.rows = {rel: (row[0], row[1]) for rel, row in
                             json.loads(path.read_text()).items()
                             if isinstance(row, list) and len(row) == 2}
                return
            with np.load(path, allow_pickle=False) as data:
                paths, keys, values = data["paths"], data["keys"], data["values"]
            if values.shape == (len(paths), width) and len(keys) == len(paths):
                self.rows = dict(zip(paths.tolist(), zip(keys.tolist(), values, strict=True),
                                     strict=True))
        except UNREADABLE:  # absent or incomplete: all misses
            pass

    def get(self, rel: str, key: str) -> Any:
        self.seen.add(rel)
        row = self.rows.get(rel)
        return row[1] if row is not None and row[0] == key else None

    def put(self, rel: str, key: str, value: Any) -> None:
        self.rows[rel] = (key, value)
        self.changed = True

    def save(self, root: Path) -> None:
        if not self.changed:
            return
        kept = {rel: row for rel, row in self.rows.items() if rel in self.seen
                or os.path.exists(os.path.join(root, rel, schema.MANIFEST_FILE))}
        try:
            if self.width is None:
                data = json.dumps({rel: [k, v] for rel, (k, v) in kept.items()}).encode()
                atomic_write(self.path, lambda f: f.write(data))
                return
            paths = np.array(list(kept), dtype=str)
            keys = np.array([k for k, _ in kept.values()], dtype=str)
            values = (np.stack([v for _, v in kept.values()]) if kept
                      else np.empty((0, self.width)))
            atomic_write(self.path, lambda f: np.savez(f, allow_pickle=False, paths=paths,
                                                        keys=keys, values=values))
            _prune(self.path.parent)
        except OSError:  # a read-only store: compute each time
            pass


def _prune(folder: Path) -> None:
    """Keep the KEEP_FILES most recently written files of a derived folder."""
    files = sorted(folder.glob("*.npz"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    for stale in files[KEEP_FILES:]:
        stale.unlink(missing_ok=True)


def cache_slot(run: Run) -> CachedRun | None:
    """The run as the cache holds it (its root, path and key say where its derived values
    are stored and when they are current); None for a run outside any cache."""
    return run if isinstance(run, CachedRun) else None


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
    files: dict[tuple[Path, str, str], _Rows] = {}
    for i, run in enumerate(runs):
        slot = cache_slot(run)
        todo = []
        for j, column in enumerate(per_run):
            q = column[i]
            if slot is None:
                todo.append(j)
                continue
            where = (slot.cache_root, q.name, q.params)
            rows = files.get(where)
            if rows is None:
                rows = files.setdefault(where, _Rows(q.file(slot.cache_root), q.width))
            got = rows.get(slot.cache_rel, f"{slot.cache_key}|{q.run_params(run)}")
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
    for (root, _, _), rows in files.items():
        rows.save(root)
    return out


def run_records(runs: Sequence[Run], name: str,
                compute: Callable[[Run], dict[str, Any]]) -> list[dict[str, Any]]:
    """compute(run) for each run, a JSON object (e.g. a run's staleness audit): from
    `<root>/.analysis-cache/derived/<name>.json` where the row carries the run's cache key,
    else computed and stored (runs outside any cache: computed each time)."""
    out: list[dict[str, Any]] = []
    files: dict[Path, _Rows] = {}
    for run in runs:
        slot = cache_slot(run)
        if slot is None:
            out.append(compute(run))
            continue
        if slot.cache_root not in files:
            files[slot.cache_root] = _Rows(slot.cache_root / CACHE_DIR / DERIVED_DIR
                                           / f"{name}.json")
        rows = files[slot.cache_root]
        got = rows.get(slot.cache_rel, slot.cache_key)
        if got is None:
            got = compute(run)
            rows.put(slot.cache_rel, slot.cache_key, got)
        out.append(got)
    for root, rows in files.items():
        rows.save(root)
    return out
