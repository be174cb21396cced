"""A per-results-root cache of parsed run records, so a command re-parses only what changed.

Where: `<root>/.analysis-cache/` beside the runs of `<root>/<sweep>/runs/<run_id>` (the
store layout, runrecord.paths.results_root_of); one file per run mirroring its path,
`<root>/.analysis-cache/<sweep>/runs/<run_id>.npz`. Runs outside that layout are parsed
every time.

What: the run's tables exactly as `runrecord.load_run` returns them (every column, float64
or strings) plus the reader's warnings, so every option (final-score window, curve points,
filters, grouping) computes from the same numbers with or without the cache.

Key: a run's entry is used only while its key matches: the cache format version, a hash of
the manifest's content (status, run id, summary: a re-run, a finish or an archived attempt
rewrites it) and the size and mtime (ns) of episodes.csv and updates.csv (a repaired torn
line or appended rows change the size; mtime alone is not trusted on NFS, where it is
coarse). A deleted run is not found, so its entry is never read (and is pruned on write).

Writes are atomic (temp file in the same folder + os.replace): a reader sees the old file
or the new one, never half of one. A cache that cannot be written (read-only store) is
skipped silently; deleting the folder or `--no-cache` changes nothing but speed.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import tempfile
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from runrecord import RecordError, Run, load_run, schema
from runrecord.ids import canonical_json
from runrecord.paths import results_root_of
from runrecord.reader import Table, read_manifest

CACHE_DIR = ".analysis-cache"
CACHE_VERSION = 2
POOL_MIN_MISSES = 32
"""Parse misses in a process pool (both cores) from this many on; fewer are not worth
starting workers for."""


def cache_file(run_dir: Path | str, input_root: Path | str | None = None) -> Path | None:
    """The cache entry of a run folder: under its results root when it is laid out as
    <root>/<sweep>/runs/<run_id>, else under the folder the user named (`input_root`,
    when the run lies below it). None for a lone run folder."""
    run_dir = Path(os.path.abspath(run_dir))
    root = results_root_of(run_dir)
    if root is None and input_root is not None:
        named = Path(os.path.abspath(input_root))
        root = named if named in run_dir.parents else None
    if root is None:
        return None
    return root / CACHE_DIR / run_dir.relative_to(root).with_suffix(".npz")


def _file_state(path: Path) -> list[int]:
    try:
        st = path.stat()
    except FileNotFoundError:
        return [-1, -1]
    return [st.st_size, st.st_mtime_ns]


def run_key(run_dir: Path, manifest: dict[str, Any]) -> str:
    """Changes whenever the run's content does (see the module docstring)."""
    parts = {
        "version": CACHE_VERSION,
        "manifest": hashlib.sha1(canonical_json(manifest).encode()).hexdigest(),
        "episodes": _file_state(run_dir / schema.EPISODES_FILE),
        "updates": _file_state(run_dir / schema.UPDATES_FILE),
    }
    return json.dumps(parts, sort_keys=True)


def _pack_table(prefix: str, table: Table, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """Numeric columns as the rows of one (columns, rows) float64 matrix (few archive
    members: an entry loads in one read), text columns one member each."""
    numeric = [n for n, c in table.columns.items() if c.dtype != object]
    text = [n for n, c in table.columns.items() if c.dtype == object]
    arrays[f"{prefix}numeric"] = (np.stack([table.columns[n] for n in numeric]) if numeric
                                  else np.empty((0, table.num_rows)))
    for name in text:
        arrays[f"{prefix}{name}"] = table.columns[name].astype(str)
    return {"columns": list(table.columns), "numeric": numeric, "rows": table.num_rows}


def _unpack_table(prefix: str, meta: dict[str, Any], data: Any) -> Table:
    matrix = data[f"{prefix}numeric"]
    numeric = {name: matrix[i] for i, name in enumerate(meta["numeric"])}
    cols = {name: numeric[name] if name in numeric else data[f"{prefix}{name}"].astype(object)
            for name in meta["columns"]}
    return Table(cols, int(meta["rows"]))


def write_entry(run: Run, key: str, path: Path) -> None:
    """Store a parsed run under `key`, atomically (temp file + os.replace)."""
    arrays: dict[str, np.ndarray] = {}
    meta = {"key": key, "warnings": run.warnings,
            "episodes": _pack_table("e:", run.episodes, arrays),
            "updates": _pack_table("u:", run.updates, arrays)}
    arrays["meta"] = np.array(json.dumps(meta))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, allow_pickle=False, **arrays)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_entry(run_dir: Path, manifest: dict[str, Any], key: str, path: Path) -> Run | None:
    """The cached run when its entry exists and carries `key`, else None."""
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            if meta.get("key") != key:
                return None
            episodes = _unpack_table("e:", meta["episodes"], data)
            updates = _unpack_table("u:", meta["updates"], data)
    except (OSError, ValueError, KeyError):  # absent, or not a complete entry
        return None
    return Run(run_dir, manifest, episodes, updates, list(meta["warnings"]))


def _store(run_dir: Path, path: Path, key: str) -> Run:
    """Parse a run and store it when nothing changed while it was read."""
    run = load_run(run_dir)
    if run_key(run_dir, read_manifest(run_dir)) == key:  # a live run may have grown
        try:
            write_entry(run, key, path)
        except OSError:  # a read-only store: parse each time
            pass
    return run


def refresh_run(run_dir: Path | str, input_root: Path | str | None = None) -> bool:
    """Parse one run and store it (the harness calls this as each run finishes).

    False when the run is outside the store layout. RecordError (unreadable) propagates.
    """
    run_dir = Path(os.path.abspath(run_dir))
    path = cache_file(run_dir, input_root)
    if path is None:
        return False
    _store(run_dir, path, run_key(run_dir, read_manifest(run_dir)))
    return True


def _refresh_quietly(run_dir: Path, input_root: Path | None) -> None:
    """Pool worker: a record that cannot be read is parsed again (and reported) by the
    caller."""
    try:
        refresh_run(run_dir, input_root)
    except RecordError:
        pass


def _load_one(run_dir: Path, path: Path | None) -> Run:
    if path is None:
        return load_run(run_dir)
    manifest = read_manifest(run_dir)
    key = run_key(run_dir, manifest)
    return read_entry(run_dir, manifest, key, path) or _store(run_dir, path, key)


def load_many(run_dirs: Sequence[Path], input_root: Path | None = None, *,
              use_cache: bool = True) -> list[Run | RecordError]:
    """Each run (or the RecordError reading it raised), in order; from the cache where its
    entry is current. When many entries are stale they are parsed first in a process pool
    (both cores), then read back from the cache."""
    out: list[Run | RecordError | None] = []
    paths = [cache_file(d, input_root) if use_cache else None for d in run_dirs]
    stale = []
    for d, path in zip(run_dirs, paths, strict=True):
        run = None
        if path is not None:
            try:
                manifest = read_manifest(d)
            except RecordError as e:
                out.append(e)
                continue
            run = read_entry(Path(d), manifest, run_key(Path(d), manifest), path)
            if run is None:
                stale.append(d)
        out.append(run)
    if len(stale) >= POOL_MIN_MISSES:
        # spawn, not fork: the calling process may hold JAX's or BLAS's threads (a
        # notebook, the test process), and a forked child of a threaded process can deadlock.
        with ProcessPoolExecutor(max_workers=min(len(stale), os.cpu_count() or 1),
                                 mp_context=multiprocessing.get_context("spawn")) as pool:
            list(pool.map(_refresh_quietly, stale, [input_root] * len(stale), chunksize=16))
    for i, (d, got) in enumerate(zip(run_dirs, out, strict=True)):
        if got is None:
            try:
                out[i] = _load_one(Path(d), paths[i])
            except RecordError as e:
                out[i] = e
    return [r for r in out if r is not None]
