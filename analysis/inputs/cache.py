"""A per-results-root cache of what the analysis reads from run records, so a command
re-parses only what changed and a warm one reads a few small files.

Where: `<root>/.analysis-cache/` beside the runs of `<root>/<sweep>/runs/<run_id>` (the
store layout, runrecord.paths.results_root_of), or below the folder the user named.

Two layers here (the third, values computed per option set, is analysis.inputs.derived):
- an entry per run, `<root>/.analysis-cache/<sweep>/runs/<run_id>.entry`
  (analysis.inputs.entry_file): the four episode columns scoring reads
  (analysis.inputs.facts.ScoringColumns, each in the smallest dtype that holds it bit for
  bit), the audited update columns, and a JSON header: the run's key, the reader's
  warnings and its facts (episode count, last frame, longest wall time, a digest per
  column for the bitwise check). Written as the harness settles each run, or by the
  first command that misses it (a spawned process pool for many misses, which also reads
  the manifests of runs the index does not know).
- one index per root, `<root>/.analysis-cache/index.json`: every entry's header, so a warm
  command reads one file, not one per run (a `RowFile`, as are the derived layer's
  files). Rebuilt from the entries for runs that are new, changed or gone.
A run comes back as a `CachedRun`: its manifest and facts; its tables are parsed only if
something asks for them (staleness, a notebook). A run this command parsed also holds the
scoring columns it stored (within HELD_COLUMNS_BYTES), so the derived values of a cold
command do not read its new entries back.

Key: an entry (and its index row) is used only while its key matches: the cache format
version, a hash of the manifest file's bytes (status, run id, summary: a re-run, a finish
or an archived attempt rewrites it) and the size and mtime (ns) of episodes.csv and
updates.csv (a repaired torn line or appended rows change the size; mtime alone is not
trusted on NFS, where it is coarse). A deleted run is not found, so nothing of it is read
(and its index row is pruned).

Writes are atomic (temp file in the same folder + os.replace): a reader sees the old file
or the new one, never half of one; two writers of the index lose at most rows, which the
next command rebuilds from the entries. A cache that cannot be written (read-only store)
is skipped silently; deleting the folder or `--no-cache` changes nothing but speed.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import json
import multiprocessing
import os
import zipfile
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import numpy as np

from analysis.inputs import entry_file
from analysis.inputs.facts import (
    AUDIT_COLUMNS,
    ScoringColumns,
    audit_table,
    episode_count,
    last_frame,
    longest_wall_time,
    narrow,
    run_facts,
    scoring_columns,
    scoring_columns_of,
    stored_digest,
    update_layout,
    widen,
)
from runrecord import RecordError, Run, load_run, schema
from runrecord.paths import split_run_folder
from runrecord.reader import Table, read_manifest_bytes, read_table
from runrecord.writer import atomic_write

CACHE_DIR = ".analysis-cache"
DERIVED_DIR = "derived"
"""Below CACHE_DIR: the derived layer's files (analysis.inputs.derived)."""
UNREADABLE = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile)
"""What reading a missing, torn or foreign cache file (an entry, or a derived npz)
raises: a miss, never an error."""
INDEX_FILE = "index.json"
CACHE_VERSION = 5
ENTRY_SUFFIX = ".entry"
POOL_MIN_MISSES = 32
"""Parse misses in a process pool (both cores) from this many on; fewer are not worth
starting workers for."""
HELD_COLUMNS_BYTES = 768 * 2**20
"""A command that parses runs keeps their (narrowed) scoring columns in memory, up to
this many bytes per load_many call, so the derived values computed next do not read the
entries just written back from disk (100,000 runs x 300 episodes: about 720 MB); runs
past it are read back from their entries."""


# ---------------------------------------------------------------- where and which key

def cache_location(run_dir: Path | str,
                   input_root: Path | str | None = None) -> tuple[Path, str] | None:
    """(cache root, the run's path relative to it): its results root when it is laid out
    as <root>/<sweep>/runs/<run_id> (runrecord.paths.split_run_folder), else the folder
    the user named (`input_root`, when the run lies below it). None for a lone run
    folder. String operations, not Path: a command calls this once per run."""
    path = os.path.abspath(run_dir)
    laid_out = split_run_folder(path)
    if laid_out is not None:
        root = laid_out[0]
    elif input_root is not None:
        root = os.path.abspath(input_root)
        if not path.startswith(root.rstrip("/") + "/") or path == root:
            return None
    else:
        return None
    return _path(root), path[len(root):].lstrip("/")


@functools.lru_cache(maxsize=64)
def _path(folder: str) -> Path:
    """One Path per cache root, not one per run."""
    return Path(folder)


def cache_file(run_dir: Path | str) -> Path | None:
    """The cache entry of a run folder in the store layout (None for any other)."""
    loc = cache_location(run_dir)
    return None if loc is None else entry_path(*loc)


def entry_path(cache_root: Path, rel: str) -> Path:
    """Where the entry of the run at `rel` below `cache_root` lives."""
    return cache_root / CACHE_DIR / f"{rel}{ENTRY_SUFFIX}"


def _file_state(path: str) -> str:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "-"
    return f"{st.st_size}.{st.st_mtime_ns}"


def run_key(run_dir: Path | str, manifest_bytes: bytes) -> str:
    """Changes whenever the run's content does (see the module docstring)."""
    digest = hashlib.sha1(manifest_bytes).hexdigest()
    return (f"v{CACHE_VERSION}:{digest}:"
            f"{_file_state(os.path.join(run_dir, schema.EPISODES_FILE))}:"
            f"{_file_state(os.path.join(run_dir, schema.UPDATES_FILE))}")


# ---------------------------------------------------------------- a run from the cache

class CachedRun(Run):
    """A run known from the cache: manifest, warnings and facts in memory; the tables
    parsed from its CSVs only when asked for (scoring reads `scoring_columns()`)."""

    def __init__(self, run_dir: Path, manifest: dict[str, Any], header: dict[str, Any],
                 cache_root: Path, cache_rel: str) -> None:
        self.run_dir = run_dir
        self.manifest = manifest
        self.warnings = list(header["warnings"])
        self.facts: dict[str, Any] = header["facts"]
        self.cache_key: str = header["key"]
        self.cache_root = cache_root
        self.cache_rel = cache_rel
        self.held: tuple[np.ndarray, ...] | None = None
        """The narrowed scoring columns of the parse that wrote this run's entry (same
        key, so the same values), when the command that parsed it kept them."""

    def __repr__(self) -> str:
        return f"CachedRun({str(self.run_dir)!r})"

    # Parsed on first use and kept (cached_property): most commands read neither table.
    @functools.cached_property
    def episodes(self) -> Table:  # type: ignore[override]
        return read_table(self.run_dir / schema.EPISODES_FILE, schema.EPISODE_COLUMNS)

    @functools.cached_property
    def updates(self) -> Table:  # type: ignore[override]
        return read_table(self.run_dir / schema.UPDATES_FILE, schema.REQUIRED_UPDATE_COLUMNS)

    def scoring_columns(self) -> ScoringColumns:
        """Held from this command's parse, else from the run's entry while it still
        carries this run's key, else parsed."""
        if self.held is not None:
            return ScoringColumns(*(widen(c) for c in self.held))
        got = read_columns(entry_path(self.cache_root, self.cache_rel), self.cache_key)
        return got if got is not None else scoring_columns_of(self)

    def audit_table(self) -> Table:
        """The updates.csv columns of AUDIT_COLUMNS, from the run's entry while it carries
        this run's key; else parsed."""
        data = _entry_arrays(entry_path(self.cache_root, self.cache_rel), self.cache_key)
        if data is None:
            return self.updates
        cols = {c: widen(data[f"u:{c}"]) for c in AUDIT_COLUMNS if f"u:{c}" in data}
        return Table(cols, int(self.facts["update_rows"]))


# Each fact of a CachedRun from what its entry stored (analysis.inputs.facts answers them
# for any other run), so no reader of a fact asks where the run came from.
audit_table.register(CachedRun, CachedRun.audit_table)
scoring_columns.register(CachedRun, CachedRun.scoring_columns)
episode_count.register(CachedRun, lambda run: int(run.facts["episodes"]))
last_frame.register(CachedRun, lambda run: float(run.facts["last_frame"]))
longest_wall_time.register(CachedRun, lambda run: float(run.facts["wall_max"]))
stored_digest.register(CachedRun, lambda run, table, column:
                       run.facts["digests"].get(f"{table}/{column}"))
update_layout.register(CachedRun, lambda run: (list(run.facts["update_names"]),
                                               int(run.facts["update_rows"])))


# ---------------------------------------------------------------- one entry per run

Stored = tuple[dict[str, Any], tuple[np.ndarray, ...]]
"""An entry just written: its header and its narrowed scoring columns."""


def write_entry(run: Run, key: str, path: Path) -> Stored:
    """Store what the analysis reads of a parsed run under `key`, atomically; returns
    the entry's header (key, warnings, facts) and the narrowed scoring columns stored."""
    header = {"key": key, "warnings": run.warnings, "facts": run_facts(run)}
    cols = scoring_columns_of(run)
    arrays = {name: narrow(np.asarray(col)) for name, col in cols._asdict().items()}
    held = tuple(arrays[name] for name in ScoringColumns._fields)
    arrays.update({f"u:{c}": narrow(run.updates[c]) for c in AUDIT_COLUMNS
                   if c in run.updates})
    data = entry_file.encode(header, arrays)
    atomic_write(path, lambda f: f.write(data), durable=False)
    return header, held


def read_header(path: Path, key: str) -> dict[str, Any] | None:
    """An entry's header when it exists and carries `key`, else None."""
    try:
        header = entry_file.read_header(path)
    except UNREADABLE:  # absent, or not a complete entry
        return None
    if header.get("key") != key:
        return None
    return {"key": key, "warnings": header["warnings"], "facts": header["facts"]}


def _entry_arrays(path: Path, key: str) -> dict[str, np.ndarray] | None:
    """An entry's arrays when it exists, is complete and carries `key`, else None."""
    try:
        header, data = entry_file.read(path)
    except UNREADABLE:
        return None
    return data if header.get("key") == key else None


def read_columns(path: Path, key: str) -> ScoringColumns | None:
    """An entry's scoring columns when it carries `key`, else None."""
    data = _entry_arrays(path, key)
    return None if data is None else ScoringColumns(*(widen(data[f])
                                                      for f in ScoringColumns._fields))


def refresh_run(run_dir: Path | str) -> bool:
    """Bring one run's entry up to date, parsing it unless its entry is current (the
    harness calls this as each run settles).

    False when the run is outside the store layout. RecordError (unreadable) propagates.
    """
    run_dir = Path(os.path.abspath(run_dir))
    path = cache_file(run_dir)
    if path is None:
        return False
    _settle(run_dir, path)
    return True


Settled = tuple[dict[str, Any], dict[str, Any], tuple[np.ndarray, ...] | None]
"""A run settled from its folder alone: (manifest, entry header (with the run's key), the
narrowed scoring columns when it was parsed and stored just now, else None)."""


def _settle(run_dir: Path, entry: Path) -> Settled | Run:
    """Manifest and key read here; the run's entry when it carries the key, else the run
    parsed and stored. The parsed Run itself when nothing could be stored (it changed
    while read, or the store is read-only). RecordError propagates."""
    manifest, raw = read_manifest_bytes(run_dir)
    key = run_key(run_dir, raw)
    header = read_header(entry, key)
    if header is not None:
        return manifest, header, None
    run = load_run(run_dir, manifest)
    # The key again, with the CSVs' state after the parse: a live run may have grown
    # since `key` was taken. (A manifest rewritten meanwhile changes the next key.)
    if run_key(run_dir, raw) != key:
        return run
    try:
        return (manifest, *write_entry(run, key, entry))
    except OSError:  # a read-only store: parse each time
        return run


# ---------------------------------------------------------------- per-run rows of a root

class RowFile:
    """One file of per-run rows of a root, read once: per run (its path below the root)
    its key and a value, used only while the run's key is the row's. JSON (`width` None:
    any JSON value; {"version": CACHE_VERSION, "runs": {rel: [key, value]}}) or an npz of
    three arrays (paths, keys, values: a row of `width` floats). A file that is absent,
    torn or of another layout or version has no rows: every run misses and is rebuilt.
    save() writes when rows changed or runs are gone (not looked up here and without a
    manifest), dropping those."""

    def __init__(self, root: Path, path: Path, width: int | None = None) -> None:
        self.root, self.path, self.width = root, path, width
        self.rows: dict[str, tuple[str, Any]] = {}
        self.older = False  # a JSON file of another cache version
        self.changed = False
        self.seen: set[str] = set()  # rows of runs this command looked up: present
        try:
            if width is None:
                data = json.loads(path.read_text())
                self.older = data.get("version") != CACHE_VERSION
                self.rows = {} if self.older else {
                    rel: (row[0], row[1]) for rel, row in data["runs"].items()
                    if isinstance(row, list) and len(row) == 2}
                return
            with np.load(path, allow_pickle=False) as data:
                paths, keys, values = data["paths"], data["keys"], data["values"]
            if values.shape == (len(paths), width) and len(keys) == len(paths):
                self.rows = dict(zip(paths.tolist(), zip(keys.tolist(), values, strict=True),
                                     strict=True))
        except (*UNREADABLE, TypeError, AttributeError):  # all misses
            pass

    def has(self, rel: str) -> bool:
        """Whether there is a row for `rel` (current or not)."""
        self.seen.add(rel)
        return rel in self.rows

    def get(self, rel: str, key: str) -> Any:
        self.seen.add(rel)
        row = self.rows.get(rel)
        return row[1] if row is not None and row[0] == key else None

    def put(self, rel: str, key: str, value: Any) -> None:
        self.rows[rel] = (key, value)
        self.changed = True

    def save(self) -> bool:
        """Whether the file was written (a read-only store: never; compute each time)."""
        gone = [rel for rel in self.rows if rel not in self.seen
                and not os.path.exists(os.path.join(self.root, rel, schema.MANIFEST_FILE))]
        for rel in gone:
            del self.rows[rel]
        if not (self.changed or gone):
            return False
        try:
            if self.width is None:
                data = json.dumps({"version": CACHE_VERSION,
                                   "runs": {rel: [k, v] for rel, (k, v) in self.rows.items()}})
                atomic_write(self.path, lambda f: f.write(data.encode()), durable=False)
                return True
            paths = np.array(list(self.rows), dtype=str)
            keys = np.array([k for k, _ in self.rows.values()], dtype=str)
            values = (np.stack([v for _, v in self.rows.values()]) if self.rows
                      else np.empty((0, self.width)))
            atomic_write(self.path, lambda f: np.savez(f, allow_pickle=False, paths=paths,
                                                        keys=keys, values=values),
                         durable=False)
            return True
        except OSError:
            return False


def _drop_old_entries(cache_dir: Path) -> None:
    """Delete the per-run npz entries of cache versions before 5, which this version
    never reads (10,000 long runs held ~5 GB in them); the derived files stay (their own
    keys say whether they are current). Once, when the index of an older version is
    replaced."""
    for folder, subdirs, files in os.walk(cache_dir):
        subdirs[:] = [d for d in subdirs if d != DERIVED_DIR]
        for name in files:
            if name.endswith(".npz"):
                try:
                    os.unlink(os.path.join(folder, name))
                except OSError:
                    pass


def load_many(run_dirs: Sequence[Path], named: Sequence[Path], *,
              use_cache: bool = True) -> list[Run | RecordError]:
    """Each run (or the RecordError reading it raised), in order: a CachedRun where its
    cache is current, else parsed (and stored). Many stale entries are parsed in a
    process pool (both cores) that starts while the rest are still being looked up.
    `named`: per run, the folder the user named that it was found under."""
    out: list[Run | RecordError | None] = []
    indexes: dict[Path, RowFile] = {}
    misses: list[tuple[int, Path, Path, str]] = []
    with _MissParser() as parser:
        for d, named_root in zip(run_dirs, named, strict=True):
            loc = cache_location(d, named_root) if use_cache else None
            if loc is None:
                try:
                    out.append(load_run(d))
                except RecordError as e:
                    out.append(e)
                continue
            root, rel = loc
            index = indexes.get(root) or indexes.setdefault(
                root, RowFile(root, root / CACHE_DIR / INDEX_FILE))
            if index.has(rel):  # known: current while the run's key is the row's
                try:
                    manifest, raw = read_manifest_bytes(d)
                except RecordError as e:
                    out.append(e)
                    continue
                header = index.get(rel, run_key(d, raw))
                if header is not None:
                    out.append(CachedRun(d, manifest, header, root, rel))
                    continue
            # New or changed: its manifest, key and entry are read where it is settled
            # (the pool, for many), not here.
            out.append(None)
            misses.append((len(out) - 1, d, root, rel))
            parser.add(d, entry_path(root, rel))
        # Each miss as a CachedRun from what the pool settled (settled here where it gave
        # None), holding the columns it parsed while HELD_COLUMNS_BYTES allows; a run that
        # could not be stored stays the parsed Run, one that cannot be read its
        # RecordError. Taken as they come, not listed first: columns past the budget are
        # dropped at once, so a cold command on long runs holds about the budget, not
        # every run's.
        budget = HELD_COLUMNS_BYTES
        for (i, d, root, rel), got in zip(misses, parser.results(), strict=True):
            if got is None:
                try:
                    here = _settle(d, entry_path(root, rel))
                except RecordError as e:
                    out[i] = e
                    continue
                if isinstance(here, Run):
                    out[i] = here
                    continue
                got = here
            manifest, header, held = got
            indexes[root].put(rel, header["key"], header)
            cached = CachedRun(d, manifest, header, root, rel)
            size = sum(c.nbytes for c in held) if held is not None else 0
            if held is not None and size <= budget:
                cached.held, budget = held, budget - size
            out[i] = cached
    for index in indexes.values():
        if index.save() and index.older:
            _drop_old_entries(index.root / CACHE_DIR)
    return [r for r in out if r is not None]


def _settle_chunk(chunk: list[tuple[Path, Path]]) -> list[Settled | None]:
    """Pool worker: _settle for each (run folder, entry) of a chunk; None where it stored
    nothing (the caller parses such a run again, and reports a record that cannot be
    read)."""
    out: list[Settled | None] = []
    for run_dir, entry in chunk:
        try:
            got = _settle(run_dir, entry)
        except RecordError:
            got = None
        out.append(None if isinstance(got, Run) else got)
    return out


class _MissParser:
    """Parses and stores the runs whose entries were stale: in a process pool, started
    once POOL_MIN_MISSES are known and fed CHUNK_RUNS at a time while the caller goes on
    looking up the rest (the lookup of 100,000 runs takes ~12 s of one core); fewer
    misses are left to the caller (results() gives None for each). A pool that breaks (a
    worker killed; a script without `if __name__ == "__main__":`, whose spawned workers
    cannot start) leaves its runs to the caller too: slower, never wrong."""

    CHUNK_RUNS = 16

    def __init__(self) -> None:
        self.pending: list[tuple[Path, Path]] = []
        # (runs, their future; None where the pool could not take them)
        self.futures: list[tuple[int, Future[list[Settled | None]] | None]] = []
        self.pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> _MissParser:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)

    def add(self, run_dir: Path, entry: Path) -> None:
        self.pending.append((run_dir, entry))
        # Before the pool starts nothing is submitted: every miss so far is pending.
        if self.pool is None and len(self.pending) >= POOL_MIN_MISSES:
            # spawn, not fork: the calling process may hold JAX's or BLAS's threads (a
            # notebook, the test process), and a forked child of a threaded process can
            # deadlock.
            self.pool = ProcessPoolExecutor(max_workers=os.cpu_count() or 1,
                                            mp_context=multiprocessing.get_context("spawn"))
        if self.pool is not None and len(self.pending) >= self.CHUNK_RUNS:
            self._submit()

    def _submit(self) -> None:
        assert self.pool is not None
        try:
            future: Future[list[Settled | None]] | None = self.pool.submit(
                _settle_chunk, self.pending)
        except BrokenProcessPool:
            future = None
        self.futures.append((len(self.pending), future))
        self.pending = []

    def results(self) -> Iterator[Settled | None]:
        """Each miss settled, in the order added (None: settle it here)."""
        if self.pool is None:
            yield from [None] * len(self.pending)
            return
        if self.pending:
            self._submit()
        # Each future dropped once read: a future holds its result, so a list of them
        # would keep every run's columns (10,000 long runs: 4.7 GB) to the end.
        futures, self.futures = collections.deque(self.futures), []
        while futures:
            runs, future = futures.popleft()
            try:
                got = future.result() if future is not None else [None] * runs
            except BrokenProcessPool:
                got = [None] * runs
            yield from got
