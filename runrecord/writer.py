"""Writing run records: atomic manifest, append-and-flush CSVs, one final status.

Crash safety: the manifest is replaced atomically (temp file, fsync, rename), so a
reader sees either the old or the new one, never half of one. CSV rows are written one
line at a time and flushed, so a kill -9 loses at most the line being written; the
reader drops such a torn last line. Thread safe: actor threads may log episodes while
the learner logs updates.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import math
import os
import shutil
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from runrecord import schema
from runrecord.paths import portable_manifest


class RecordError(RuntimeError):
    """A run record that cannot be written or read as asked."""


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def atomic_write_json(path: Path, obj: Any) -> None:
    """Replace `path` with `obj` as JSON so that readers never see a partial file."""
    data = json.dumps(obj, indent=2, sort_keys=False, default=_json_default, allow_nan=True)
    atomic_write_text(path, data + "\n")


def atomic_write_text(path: Path, text: str) -> None:
    """Replace `path` with `text` so that readers never see a partial file, and a kill
    leaves the old file or the new one."""
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def atomic_write(path: Path | str, write: Callable[[BinaryIO], Any], *,
                 durable: bool = True) -> None:
    """write(binary file) into a temp file beside `path`, then os.replace it there: a
    reader sees the old file or the new one, never part of one, and a failed write leaves
    no temp file. `durable`: the file and its folder are fsynced first, so that a machine
    crash cannot leave a renamed but empty file (a cache, rebuilt when lost, skips it).
    The file gets the mode open() would give (mkstemp's 0600 would hide a shared results
    root from its other users)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _file_mode())
        with os.fdopen(fd, "wb") as f:
            write(f)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


@functools.cache
def _file_mode() -> int:
    """What open() gives a new file: 0666 less the umask. Read from /proc where Linux
    shows it: learning it by setting and restoring it would change it for every thread
    of the process meanwhile (a trainer's actor threads, a harness's monitor)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    umask = os.umask(0o022)  # elsewhere the only way to read it
    os.umask(umask)
    return 0o666 & ~umask


def write_synced(path: Path, data: bytes) -> None:
    """Write `data` to `path` and fsync it (not atomic: for a file inside a temporary
    folder that is renamed into place as a whole)."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def fsync_dir(path: Path) -> None:
    """fsync a folder, so that a rename or a new file in it is durable (skipped where the
    OS does not let a folder be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _json_default(obj: Any) -> Any:
    # numpy scalars/arrays and paths show up in configs; keep the manifest plain JSON.
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    return str(obj)


def format_value(v: Any) -> str:
    """CSV cell text. Floats use repr so that values round-trip bit-exactly."""
    if v is None:
        return ""
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        v = v.item()  # numpy scalar -> Python scalar
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        return repr(v)
    return str(v)


def error_entry(type_: str, message: str, traceback: str = "", **extra: Any) -> dict[str, Any]:
    """The manifest's `error` entry: {type, message, traceback} (the one place that spells
    its shape), plus `extra` keys (the harness adds exit_codes)."""
    return {"type": type_, "message": message, "traceback": traceback, **extra}


def error_info(exc: BaseException, tail_lines: int = 30) -> dict:
    """The manifest's `error` entry for an exception: type, message, traceback tail."""
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return error_entry(type(exc).__name__, str(exc),
                       "\n".join(tb.rstrip().splitlines()[-tail_lines:]))


def read_manifest_or_none(run_dir: Path | str) -> dict[str, Any] | None:
    """The manifest of a run folder, or None when absent. Tolerant: an unreadable one
    (torn by a disk fault, edited by hand, not a JSON object) also reads as None; it was
    never settled (the writer replaces it atomically), so the run is redone.
    runrecord.reader.read_manifest is the strict reader, for results."""
    data = read_json_or_none(Path(run_dir) / schema.MANIFEST_FILE)
    return data if isinstance(data, dict) else None


def read_json_or_none(path: Path) -> Any:
    """The JSON value in `path`, or None when it is absent or unreadable (torn, edited by
    hand, not UTF-8): for files whose absence a caller reads as "nothing yet"."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # ValueError: JSONDecodeError and UnicodeDecodeError
        return None


def read_json_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSON Lines file, in file order; [] when it is absent. A line
    that does not parse (edited by hand) or is not an object is skipped, and so is what
    follows the last newline (an append cut short by a kill)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return []
    out = []
    for line in text.split("\n")[:-1]:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out


def settle(run_dir: Path | str, manifest: dict[str, Any], status: str,
           error: Mapping[str, Any] | BaseException | None = None,
           summary: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write a run's final state: `manifest` (updated in place and returned) with its
    final status, its finish time (kept when it already has one: a record settled twice
    keeps the first), its error (an exception becomes error_info's entry) and summary;
    one atomic write of run_dir/manifest.json. Every final status goes through here:
    the trainer's writer, the harness settling a run its trainer did not, and a stale
    run marked interrupted."""
    if status not in schema.FINAL_STATUSES:
        raise RecordError(f"final status must be one of {schema.FINAL_STATUSES}, got {status!r}")
    if isinstance(error, BaseException):
        error = error_info(error)
    manifest["status"] = status
    manifest["finished_at"] = manifest.get("finished_at") or utc_now()
    manifest["error"] = None if error is None else dict(error)
    if summary is not None:
        manifest["summary"] = dict(summary)
    atomic_write_json(Path(run_dir) / schema.MANIFEST_FILE, manifest)
    return manifest


class CsvAppender:
    """Append rows to a CSV file with a fixed header, one flushed line per row."""

    def __init__(self, path: Path, columns: Sequence[str], fsync_every_s: float = 5.0):
        self.path = Path(path)
        self.columns = tuple(columns)
        self._lock = threading.Lock()
        self._fsync_every_s = fsync_every_s
        self._last_fsync = time.monotonic()
        new = not self.path.exists() or self.path.stat().st_size == 0
        self._f = open(self.path, "a", encoding="utf-8", newline="")
        if new:
            self._write_line(self.columns)

    def _write_line(self, cells: Iterable[Any]) -> None:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow([format_value(c) for c in cells])
        # One write call per line: a kill can tear only this line, never an earlier one.
        self._f.write(buf.getvalue())
        self._f.flush()
        now = time.monotonic()
        if now - self._last_fsync >= self._fsync_every_s:
            os.fsync(self._f.fileno())
            self._last_fsync = now

    def append(self, row: Mapping[str, Any]) -> None:
        unknown = set(row) - set(self.columns)
        if unknown:
            raise RecordError(
                f"{self.path.name}: unknown columns {sorted(unknown)}; valid: {list(self.columns)}"
            )
        with self._lock:
            self._write_line(row.get(c) for c in self.columns)

    def append_many(self, rows: Iterable[Mapping[str, Any]], chunk_lines: int = 4096) -> None:
        """Append rows, `chunk_lines` per write call (an importer writes 10^5 rows at once);
        a kill still tears at most the last line, which the reader drops."""
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        checked: set[frozenset[str]] = set()
        pending = 0
        with self._lock:
            for row in rows:
                keys = frozenset(row)
                if keys not in checked:
                    unknown = keys - set(self.columns)
                    if unknown:
                        raise RecordError(f"{self.path.name}: unknown columns {sorted(unknown)}; "
                                          f"valid: {list(self.columns)}")
                    checked.add(keys)
                writer.writerow([format_value(row.get(c)) for c in self.columns])
                pending += 1
                if pending == chunk_lines:
                    self._f.write(buf.getvalue())
                    buf.seek(0)
                    buf.truncate()
                    pending = 0
            self._f.write(buf.getvalue())
            self._f.flush()

    def sync(self) -> None:
        with self._lock:
            self._f.flush()
            os.fsync(self._f.fileno())
            self._last_fsync = time.monotonic()

    def close(self) -> None:
        with self._lock:
            if not self._f.closed:
                self._f.flush()
                os.fsync(self._f.fileno())
                self._f.close()


def _archive_previous_attempt(run_dir: Path) -> Path | None:
    """Move an unfinished earlier attempt's files to previous_attempts/<k>/ (kept, not lost)."""
    keep = (schema.ATTEMPTS_DIR, *schema.HARNESS_FILES)
    files = [p for p in run_dir.iterdir() if p.name not in keep]
    if not files:
        return None
    archive_root = run_dir / schema.ATTEMPTS_DIR
    archive_root.mkdir(exist_ok=True)
    k = 1 + max((int(p.name) for p in archive_root.iterdir() if p.name.isdigit()), default=0)
    dest = archive_root / str(k)
    dest.mkdir()
    for p in files:
        shutil.move(str(p), str(dest / p.name))
    return dest


class RunWriter:
    """Owns one run directory: manifest.json, episodes.csv, updates.csv.

    `manifest` must hold the identity keys (run_id, system, architecture, env_id, seed,
    layout, hyperparameters, env_protocol, provenance); status and times are managed here.
    `extra_update_columns` are the algorithm's loss_/stat_ columns, appended after the
    required ones.
    """

    def __init__(
        self,
        run_dir: Path | str,
        manifest: Mapping[str, Any],
        extra_update_columns: Sequence[str] = (),
        resumed: Mapping[str, Any] | None = None,
    ):
        """resumed: this attempt continues the record in run_dir from a checkpoint (what
        it resumed from, appended to the manifest's `resumptions`): its CSVs are kept,
        already cut to the checkpoint's rows, instead of archived."""
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        old = read_manifest_or_none(self.run_dir)
        if old is not None:
            if old.get("status") == schema.COMPLETED:
                raise RecordError(
                    f"run {self.run_dir} is already completed; refusing to overwrite it "
                    "(delete the folder or choose another --run-dir)"
                )
        self.previous_attempt = (None if resumed is not None
                                 else _archive_previous_attempt(self.run_dir))
        for c in extra_update_columns:
            if not (c.startswith(schema.LOSS_PREFIX) or c.startswith(schema.STAT_PREFIX)):
                raise RecordError(f"extra update column {c!r} must start with 'loss_' or 'stat_'")
        lead = schema.UPDATE_COLUMNS[:-len(schema.TRAILING_UPDATE_COLUMNS)]
        self.update_columns = lead + tuple(extra_update_columns) + schema.TRAILING_UPDATE_COLUMNS
        self._lock = threading.Lock()
        self._finished = False
        self.manifest: dict[str, Any] = {k: None for k in schema.MANIFEST_KEYS}
        # Paths relative to the checkout or results root: no home directory leaks.
        self.manifest.update(portable_manifest(manifest, self.run_dir))
        self.manifest["schema_version"] = schema.SCHEMA_VERSION
        self.manifest["status"] = schema.RUNNING
        self.manifest["started_at"] = utc_now()
        self.manifest["finished_at"] = None
        self.manifest["error"] = None
        if self.previous_attempt is not None:
            self.manifest["previous_attempt"] = str(self.previous_attempt.relative_to(self.run_dir))
        if resumed is not None:
            earlier = (old or {}).get("resumptions") or []
            # The attempt it continues is overwritten: its status and error stay here,
            # where the harness counts attempts and failures (harness.store).
            replaced = ({} if old is None else
                        {"previous_status": old.get("status"), "previous_error": old.get("error")})
            self.manifest["resumptions"] = [*earlier, {**resumed, "at": utc_now(), **replaced}]
        self._write_manifest()
        self.episodes = CsvAppender(self.run_dir / schema.EPISODES_FILE, schema.EPISODE_COLUMNS)
        self.updates = CsvAppender(self.run_dir / schema.UPDATES_FILE, self.update_columns)

    @property
    def finished(self) -> bool:
        return self._finished

    def _write_manifest(self) -> None:
        atomic_write_json(self.run_dir / schema.MANIFEST_FILE, self.manifest)

    def log_episode(self, row: Mapping[str, Any]) -> None:
        self.episodes.append(row)

    def log_update(self, row: Mapping[str, Any]) -> None:
        self.updates.append(row)

    def sync(self) -> None:
        """Make every row written so far durable (fsync both CSVs)."""
        self.episodes.sync()
        self.updates.sync()

    def set(self, **fields: Any) -> None:
        """Update manifest fields mid-run (e.g. devices found after start-up)."""
        with self._lock:
            self.manifest.update(fields)
            self._write_manifest()

    def finish(
        self,
        status: str,
        error: dict | BaseException | None = None,
        summary: Mapping[str, Any] | None = None,
    ) -> None:
        """Close the CSVs and write the final status. Only the first call counts."""
        if status not in schema.FINAL_STATUSES:
            raise RecordError(f"final status must be one of {schema.FINAL_STATUSES}, got {status!r}")
        with self._lock:
            if self._finished:
                return
            self._finished = True
            self.episodes.close()
            self.updates.close()
            settle(self.run_dir, self.manifest, status, error, summary)


def write_skipped(run_dir: Path | str, manifest: Mapping[str, Any], reason: str) -> None:
    """Record a run that could not start (e.g. baseline unavailable): status skipped, no data."""
    w = RunWriter(run_dir, manifest)
    w.finish(schema.SKIPPED, error=error_entry("Skipped", reason))
