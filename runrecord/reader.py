"""Reading run records, tolerating what a crash or a kill leaves behind.

A torn last line (no trailing newline, or the wrong number of fields) is dropped and
reported in `Run.warnings`, never parsed as data. Everything else that is wrong (no
manifest, bad JSON, a missing required column) raises RecordError with the path and
what was expected.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from runrecord import schema
from runrecord.writer import RecordError


@dataclass
class Table:
    """Columns of a CSV as NumPy arrays (float64 where numeric, else str)."""

    columns: dict[str, np.ndarray]
    num_rows: int

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def __contains__(self, name: str) -> bool:
        return name in self.columns

    def __len__(self) -> int:
        return self.num_rows

    @property
    def names(self) -> list[str]:
        return list(self.columns)


@dataclass
class Run:
    run_dir: Path
    manifest: dict[str, Any]
    episodes: Table
    updates: Table
    warnings: list[str] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return str(self.manifest.get("run_id") or self.run_dir.name)

    @property
    def status(self) -> str:
        return str(self.manifest.get("status"))


def read_manifest(run_dir: Path | str) -> dict[str, Any]:
    return read_manifest_bytes(run_dir)[0]


def read_manifest_bytes(run_dir: Path | str) -> tuple[dict[str, Any], bytes]:
    """(the manifest, the file's bytes) of a run folder: one read for a caller that also
    hashes the file (the analysis cache keys runs by it)."""
    path = os.path.join(run_dir, schema.MANIFEST_FILE)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except (FileNotFoundError, NotADirectoryError):
        raise RecordError(f"{path}: no manifest.json (not a run record folder)") from None
    try:
        manifest = json.loads(raw.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RecordError(f"{path}: manifest is not valid JSON ({e})") from e
    if not isinstance(manifest, dict):
        raise RecordError(f"{path}: manifest must be a JSON object")
    version = manifest.get("schema_version")
    if version is None or int(version) > schema.SCHEMA_VERSION:
        raise RecordError(
            f"{path}: schema_version {version!r} is not readable by this version "
            f"(reads 1..{schema.SCHEMA_VERSION})"
        )
    return manifest, raw


def _convert(values: list[str]) -> np.ndarray:
    try:
        return np.array([float(v) if v != "" else np.nan for v in values], dtype=np.float64)
    except ValueError:
        return np.array(values, dtype=object)


def _plain_numeric(lines: list[str]) -> tuple[list[str], dict[str, np.ndarray]] | None:
    """(header, columns) of CSV lines (header first) whose every row has the header's
    width and every field is a number, parsed with float() as _convert does, in one pass
    over all fields (~2x faster than the csv module). None for anything else (an empty
    field, text, a short or long row): the general path below handles it. The caller
    checks first that the text has no quote or carriage return (csv quoting rules)."""
    header = lines[0].split(",")
    body = lines[1:]
    if not body or any(line.count(",") != len(header) - 1 for line in body):
        return None
    try:
        values = np.array(list(map(float, ",".join(body).split(","))), dtype=np.float64)
    except ValueError:
        return None
    matrix = values.reshape(len(body), len(header))
    return header, {name: np.ascontiguousarray(matrix[:, j]) for j, name in enumerate(header)}


def _check_required(path: Path, header: list[str], required: Sequence[str]) -> None:
    missing = [c for c in required if c not in header]
    if missing:
        raise RecordError(f"{path}: missing column(s) {missing}; header is {header}")


def read_table(
    path: Path | str, required: Sequence[str] = (), warnings: list[str] | None = None
) -> Table:
    """Read a record CSV. A missing file is an empty table; a torn last line is dropped."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return Table({c: np.array([], dtype=np.float64) for c in required}, 0)
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = text.split("\n")
    torn = None
    if not text.endswith("\n"):
        torn = lines.pop()  # written without its newline: the process died mid-line
    else:
        lines.pop()  # the empty string after the final newline
    if not lines:
        if warnings is not None:
            warnings.append(f"{path}: header line is torn; file read as empty")
        return Table({c: np.array([], dtype=np.float64) for c in required}, 0)
    plain = _plain_numeric(lines) if '"' not in text and "\r" not in text else None
    if plain is not None:
        header, cols = plain
        _check_required(path, header, required)
        if torn is not None and warnings is not None and torn != "":
            warnings.append(f"{path}: dropped a torn last line {torn[:60]!r}")
        return Table(cols, len(lines) - 1)
    rows = list(csv.reader(io.StringIO("\n".join(lines) + "\n")))
    header = rows[0]
    body = rows[1:]
    _check_required(path, header, required)
    bad = [i for i, r in enumerate(body) if len(r) != len(header)]
    if bad and bad != [len(body) - 1]:
        raise RecordError(
            f"{path}: rows {[i + 2 for i in bad]} have the wrong number of fields "
            f"(expected {len(header)})"
        )
    if bad:
        torn = ",".join(body.pop())
    if torn is not None and warnings is not None and torn != "":
        warnings.append(f"{path}: dropped a torn last line {torn[:60]!r}")
    cols = {name: _convert([r[j] for r in body]) for j, name in enumerate(header)}
    return Table(cols, len(body))


def load_run(run_dir: Path | str, manifest: dict[str, Any] | None = None) -> Run:
    """Manifest plus both tables of one run (`manifest`: the one the caller has just read
    from this folder, e.g. with read_manifest_bytes, so it is not read again)."""
    run_dir = Path(run_dir)
    if manifest is None:
        manifest = read_manifest(run_dir)
    warnings: list[str] = []
    episodes = read_table(run_dir / schema.EPISODES_FILE, schema.EPISODE_COLUMNS, warnings)
    updates = read_table(run_dir / schema.UPDATES_FILE, schema.REQUIRED_UPDATE_COLUMNS, warnings)
    return Run(run_dir, manifest, episodes, updates, warnings)


def find_run_dirs(root: Path | str, skip: Collection[str] = ()) -> Iterator[Path]:
    """Every folder under `root` (or `root` itself) that holds a manifest.json, in path
    order (by path components, as sorted(Path) orders them).

    Folders of earlier attempts (previous_attempts/) are history, not runs, and skipped;
    so are folders named in `skip` (e.g. a cache beside the runs), and symlinked folders
    are not followed.
    """
    root = Path(root)
    if not root.exists():
        raise RecordError(f"{root}: no such folder")
    if (root / schema.MANIFEST_FILE).exists():
        yield root
        return
    pruned = {schema.ATTEMPTS_DIR, *skip}
    found: list[list[str]] = []
    for folder, subdirs, files in os.walk(root):
        subdirs[:] = [d for d in subdirs if d not in pruned]
        if schema.MANIFEST_FILE in files:
            found.append(os.path.relpath(folder, root).split(os.sep))
    # Sorted here, one time, as component lists: the order Path objects sort in, without
    # building and comparing 100,000 Paths.
    for parts in sorted(found):
        yield root.joinpath(*parts)
