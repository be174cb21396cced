"""Long tables (CSV or Parquet) -> run records: one row per episode, the columns named
by flags.

Rows with the same (system, layout, task, seed) are the episodes of one run: a run is
never split into seeds by its rows. The step column counts logged steps (frames = step x
the declared frames per step); a frames column is taken as frames. Parquet needs
pyarrow (imported here only).
"""

from __future__ import annotations

import csv
import math
from array import array
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from analysis.errors import AnalysisError
from analysis.importers.build import IMPORTED_LAYOUT_PREFIX, ImportedRun, episodes_in_order
from analysis.importers.declare import Declared, require_frames_per_step, require_library


@dataclass(frozen=True)
class TableColumns:
    """Which columns hold what. step or frames must be given; the rest may be absent
    (system, layout, time, length) or replaced by a declared value (task, seed)."""

    task: str = "task"
    seed: str = "seed"
    episode_return: str = "return"
    step: str | None = None
    frames: str | None = None
    system: str | None = None
    layout: str | None = None
    time: str | None = None
    length: str | None = None


def read_table(path: Path, text: Sequence[str], numbers: Sequence[str]
               ) -> tuple[list[str], dict[str, list[str]], dict[str, np.ndarray]]:
    """(every column name, {text column: cells}, {number column: float array}) of a CSV or
    Parquet file (by suffix), for the named columns it has. Text cells are interned (a
    task or seed repeats on every row of a run) and numbers parsed as they are read, so a
    table of millions of episodes stays small in memory."""
    if not path.is_file():
        raise AnalysisError(f"{path}: no such table (CSV or Parquet)")
    if path.suffix.lower() in (".parquet", ".pq"):
        return _read_parquet(path, text, numbers)
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if not header:
            raise AnalysisError(f"{path}: empty CSV (expected a header row)")
        tix = {c: header.index(c) for c in text if c in header}
        nix = {c: header.index(c) for c in numbers if c in header}
        texts: dict[str, list[str]] = {c: [] for c in tix}
        nums: dict[str, array] = {c: array("d") for c in nix}
        seen: dict[str, str] = {}
        for i, row in enumerate(reader):
            if len(row) != len(header):
                raise AnalysisError(f"{path}: row {i + 2} has {len(row)} cells, the header "
                                    f"{len(header)}")
            for c, j in tix.items():
                texts[c].append(seen.setdefault(row[j], row[j]))
            for c, j in nix.items():
                cell = row[j]
                try:
                    nums[c].append(float(cell) if cell not in _MISSING else math.nan)
                except ValueError:
                    raise AnalysisError(f"{path}: row {i + 2}, column {c!r}: {cell!r} is not "
                                        "a number") from None
    return header, texts, {c: np.array(a, dtype=np.float64) for c, a in nums.items()}


_MISSING = ("", "nan", "NaN", "None")


def _read_parquet(path: Path, text: Sequence[str], numbers: Sequence[str]
                  ) -> tuple[list[str], dict[str, list[str]], dict[str, np.ndarray]]:
    require_library("pyarrow", f"Parquet ({path}; or export the table as CSV)")
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    names = list(t.column_names)
    texts = {c: ["" if v is None else str(v) for v in t.column(c).to_pylist()]
             for c in text if c in names}
    nums = {}
    for c in numbers:
        if c in names:
            try:
                nums[c] = t.column(c).to_numpy(zero_copy_only=False).astype(np.float64)
            except (TypeError, ValueError):
                raise AnalysisError(f"{path}: column {c!r} holds a non-number") from None
    return names, texts, nums


def _seed(text: str, path: Path, column: str) -> int:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value.is_integer()):
        raise AnalysisError(f"{path}: seed {text!r} in column {column!r} is not an integer "
                            "(the seed identifies the replicate)")
    return int(value)


def read_table_runs(path: Path | str, declared: Declared, columns: TableColumns) -> list[ImportedRun]:
    """Every (system, layout, task, seed) of the table as one run."""
    path = Path(path)
    if (columns.step is None) == (columns.frames is None):
        raise AnalysisError("name exactly one of --step-column (logged steps; needs "
                            "--frames-per-step) or --frames-column (frames)")
    fps = (require_frames_per_step(declared, "row step") if columns.step
           else declared.frames_per_step or 1.0)
    text_cols = [c for c in (columns.task, columns.seed, columns.system, columns.layout) if c]
    number_cols = [c for c in (columns.episode_return, columns.step, columns.frames,
                               columns.time, columns.length) if c]
    header, cols, nums = read_table(path, text_cols, number_cols)
    need = [c for c in (*number_cols, columns.system, columns.layout) if c]
    if columns.task not in header and declared.task is None:
        need.append(columns.task)
    if columns.seed not in header and declared.seed is None:
        need.append(columns.seed)
    missing = [c for c in need if c not in header]
    if missing:
        raise AnalysisError(f"{path}: no column(s) {missing}; it has {header}. Name them "
                            "with --task-column, --seed-column, --return-column, "
                            "--step-column/--frames-column (or declare --task/--seed)")
    returns = nums[columns.episode_return]
    n = len(returns)
    x = nums[columns.step or columns.frames or ""]
    wall = nums[columns.time] if columns.time else np.full(n, np.nan)
    length = nums[columns.length] if columns.length else None

    def text(col: str | None, default: str | None) -> list[str]:
        return cols[col] if col and col in cols else [default or ""] * n

    tasks = text(columns.task, declared.task) if declared.task is None else [declared.task] * n
    systems = text(columns.system, declared.system or "table")
    layouts = text(columns.layout, declared.layout or f"{IMPORTED_LAYOUT_PREFIX}table")
    seed_cells = (cols[columns.seed] if declared.seed is None else [str(declared.seed)] * n)
    rows: dict[tuple[str, str, str, int], list[int]] = defaultdict(list)
    seeds: dict[str, int] = {}
    for i in range(n):
        cell = seed_cells[i]
        if cell not in seeds:
            seeds[cell] = _seed(cell, path, columns.seed)
        rows[(systems[i], layouts[i], tasks[i], seeds[cell])].append(i)
    runs = []
    for (system, layout, task, seed), idx in rows.items():
        if not task:
            raise AnalysisError(f"{path}: a row has an empty task (column {columns.task!r})")
        ix = np.array(idx)
        steps = x[ix] if columns.step else x[ix] / fps
        runs.append(episodes_in_order(ImportedRun(
            env_id=task, seed=seed, system=system or "table", layout=layout or
            f"{IMPORTED_LAYOUT_PREFIX}table", env_steps=steps, frames=steps * fps,
            episode_return=returns[ix], wall_time_s=wall[ix],
            episode_length=None if length is None else length[ix], sources=[path],
            details={"rows": len(idx)})))
    return runs
