"""Readers of the baselines' own logs, kept next to each record in native/.

monobeast (torchbeast/core/file_writer.py) writes logs.csv: a first line that is a
commented header, `# _tick,_time,step,total_loss,mean_episode_return,...`, then plain CSV
rows (no second header, also when a restart appends); `mean_episode_return` is `nan`
when no episode ended in the batch.

moolib (examples/common/record.py) writes logs.tsv: a tab-separated header of
`local/...` columns, then one row per log interval, with empty cells for statistics that
had no samples.

Both readers return one dict per row with float values (NaN for `nan` and empty cells).
A torn last line (a crash mid-write) is dropped and reported; any other malformed line
raises NativeLogError naming the file and line.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path


class NativeLogError(ValueError):
    """A native log that does not have the format its baseline writes."""


@dataclass
class NativeLog:
    path: Path
    columns: list[str]
    rows: list[dict[str, float]]
    warnings: list[str] = field(default_factory=list)

    def column(self, name: str) -> list[float]:
        if name not in self.columns:
            raise KeyError(f"{self.path.name} has no column {name!r}; columns: {self.columns}")
        return [r[name] for r in self.rows]


def _to_float(text: str, path: Path, lineno: int, name: str) -> float:
    t = text.strip()
    if t == "":
        return math.nan
    try:
        return float(t)  # also parses "nan", "inf"
    except ValueError:
        raise NativeLogError(
            f"{path}:{lineno}: column {name!r} holds {text!r}, expected a number, nan or empty"
        ) from None


def _parse_rows(
    path: Path, lines: list[str], columns: list[str], first_lineno: int, delimiter: str
) -> tuple[list[dict[str, float]], list[str]]:
    rows: list[dict[str, float]] = []
    warnings: list[str] = []
    for i, line in enumerate(lines):
        lineno = first_lineno + i
        last = i == len(lines) - 1
        if not line.strip():
            continue
        cells = next(csv.reader([line.rstrip("\n")], delimiter=delimiter))
        torn = not line.endswith("\n") or len(cells) != len(columns)
        if torn and last:
            warnings.append(f"{path}:{lineno}: dropped a torn last line ({len(cells)} fields)")
            continue
        if len(cells) != len(columns):
            raise NativeLogError(
                f"{path}:{lineno}: {len(cells)} fields, expected {len(columns)} ({columns})"
            )
        rows.append({c: _to_float(v, path, lineno, c) for c, v in zip(columns, cells, strict=True)})
    return rows, warnings


def read_monobeast_logs(path: Path | str) -> NativeLog:
    """monobeast's logs.csv (commented header line, then rows)."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    if not lines or not lines[0].startswith("#"):
        raise NativeLogError(
            f"{path}:1: expected monobeast's commented header '# _tick,_time,step,...'"
        )
    columns = [c.strip() for c in lines[0].lstrip("#").strip().split(",")]
    for required in ("_tick", "_time", "step"):
        if required not in columns:
            raise NativeLogError(f"{path}:1: header has no {required!r} column: {columns}")
    rows, warnings = _parse_rows(path, lines[1:], columns, 2, ",")
    return NativeLog(path, columns, rows, warnings)


def read_moolib_logs(path: Path | str) -> NativeLog:
    """moolib's logs.tsv (tab-separated header of local/... columns, then rows)."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    if not lines:
        raise NativeLogError(f"{path}: empty file, expected a header of local/... columns")
    columns = next(csv.reader([lines[0].rstrip("\n")], delimiter="\t"))
    if not columns or not all(c.startswith(("local/", "global/")) for c in columns):
        raise NativeLogError(
            f"{path}:1: expected moolib's tab-separated header of 'local/...' columns, got {columns}"
        )
    rows, warnings = _parse_rows(path, lines[1:], columns, 2, "\t")
    return NativeLog(path, columns, rows, warnings)
