"""Long tables (CSV, or Parquet with pyarrow) -> run records: one row per episode.

Rows of one (system, layout, task, seed) are one run. An unread column whose text
differs within what would be one run (`agent`, `config`...) would merge runs, so the
import stops naming it until it is mapped or `--ignore-column`ed; unread numeric
columns are listed as ignored.
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
from analysis.importers.build import ImportedRun, episodes_in_order
from analysis.importers.declare import (
    IMPORTED_LAYOUT_PREFIX,
    Declared,
    int_seed,
    require_frames_per_step,
    require_library,
)


@dataclass(frozen=True)
class TableColumns:
    """Which columns hold what. step or frames must be given; the rest may be absent
    (time, length) or replaced by a declared value (task, seed, system, layout). system
    and layout None: the columns named `system` and `layout` when the table has them.
    `ignore`: columns left unread on purpose (the unmapped-column check skips them)."""

    task: str = "task"
    seed: str = "seed"
    episode_return: str = "return"
    step: str | None = None
    frames: str | None = None
    system: str | None = None
    layout: str | None = None
    time: str | None = None
    length: str | None = None
    ignore: tuple[str, ...] = ()


DEFAULT_SYSTEM_COLUMN, DEFAULT_LAYOUT_COLUMN = "system", "layout"
_MISSING = ("", "nan", "NaN", "None")


class _Unmapped:
    """What the unread columns hold, learnt row by row: whether every cell is a number,
    and the first run (by the cells of its key columns) in which a column takes two
    values (kept as an example for the error)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        self.numeric = dict.fromkeys(self.names, True)
        self.first: dict[str, dict[tuple[str, ...], str]] = {c: {} for c in self.names}
        self.split: dict[str, tuple[tuple[str, ...], str, str]] = {}

    def add(self, key: tuple[str, ...], cells: Sequence[str]) -> None:
        for c, cell in zip(self.names, cells, strict=True):
            if self.numeric[c] and cell not in _MISSING:
                try:
                    float(cell)
                except ValueError:
                    self.numeric[c] = False
            if c not in self.split:
                seen = self.first[c].setdefault(key, cell)
                if seen != cell:
                    self.split[c] = (key, seen, cell)
                    self.first[c] = {}  # one example is enough: free the rest


def table_header(path: Path) -> list[str]:
    """The column names of a CSV or Parquet table."""
    if not path.is_file():
        raise AnalysisError(f"{path}: no such table (CSV or Parquet)")
    if path.suffix.lower() in (".parquet", ".pq"):
        require_library("pyarrow", f"Parquet ({path}; or export the table as CSV)")
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    with open(path, newline="", encoding="utf-8") as f:
        header = next(csv.reader(f), None)
    if not header:
        raise AnalysisError(f"{path}: empty CSV (expected a header row)")
    return header


def read_table(path: Path, header: list[str], text: Sequence[str], numbers: Sequence[str],
               key: Sequence[str], unmapped: Sequence[str]
               ) -> tuple[dict[str, list[str]], dict[str, np.ndarray], _Unmapped]:
    """({text column: cells}, {number column: float array}, what the `unmapped` columns
    hold within each run keyed by the cells of `key`) of a CSV or Parquet file (by
    suffix) whose table_header is `header`. Text cells are interned (a task or seed
    repeats on every row of a run) and numbers parsed as they are read, so a table of
    millions of episodes stays small in memory."""
    if path.suffix.lower() in (".parquet", ".pq"):
        return _read_parquet(path, header, text, numbers, key, unmapped)
    watch = _Unmapped([c for c in unmapped if c in header])
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        next(reader)
        tix = {c: header.index(c) for c in text if c in header}
        nix = {c: header.index(c) for c in numbers if c in header}
        kix = [header.index(c) for c in key if c in header]
        uix = [header.index(c) for c in watch.names]
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
            if uix:
                watch.add(tuple(row[j] for j in kix), [row[j] for j in uix])
    return texts, {c: np.array(a, dtype=np.float64) for c, a in nums.items()}, watch


def _read_parquet(path: Path, names: list[str], text: Sequence[str], numbers: Sequence[str],
                  key: Sequence[str], unmapped: Sequence[str]
                  ) -> tuple[dict[str, list[str]], dict[str, np.ndarray], _Unmapped]:
    import pyarrow.parquet as pq  # table_header checked that it is installed

    t = pq.read_table(path)

    def cells(c: str) -> list[str]:
        return ["" if v is None else str(v) for v in t.column(c).to_pylist()]

    texts = {c: cells(c) for c in text if c in names}
    nums = {}
    for c in numbers:
        if c in names:
            try:
                nums[c] = t.column(c).to_numpy(zero_copy_only=False).astype(np.float64)
            except (TypeError, ValueError):
                raise AnalysisError(f"{path}: column {c!r} holds a non-number") from None
    watch = _Unmapped([c for c in unmapped if c in names])
    keys = list(zip(*(cells(c) for c in key if c in names), strict=True)) or [()] * t.num_rows
    columns = [cells(c) for c in watch.names]
    for i, k in enumerate(keys):
        watch.add(k, [col[i] for col in columns])
    return texts, nums, watch


@dataclass(frozen=True)
class _Plan:
    """The columns one import reads, given the table's header and the declarations:
    key columns (what tells runs apart) by role, numbers by role, and the rest."""

    key: dict[str, str]  # role (task, seed, system, layout) -> column
    numbers: list[str]
    unmapped: list[str]  # neither read nor ignored on purpose: checked
    ignored: list[str]  # --ignore-column
    overridden: dict[str, str]  # column -> role (task...) a declaration replaces: checked
    # whatever its type (a seed column --seed replaces tells seeds apart)


def _plan(path: Path, header: list[str], declared: Declared, columns: TableColumns) -> _Plan:
    ignore = list(dict.fromkeys(columns.ignore))
    absent = [c for c in ignore if c not in header]
    if absent:
        raise AnalysisError(f"{path}: --ignore-column {', '.join(absent)}: no such column; it "
                            f"has {header}")
    declared_key = {"task": declared.task, "seed": declared.seed, "system": declared.system,
                    "layout": declared.layout}
    named = {"task": columns.task, "seed": columns.seed, "system": columns.system,
             "layout": columns.layout}
    defaults = {"task": columns.task, "seed": columns.seed, "system": DEFAULT_SYSTEM_COLUMN,
                "layout": DEFAULT_LAYOUT_COLUMN}
    key: dict[str, str] = {}
    overridden: dict[str, str] = {}
    for role, col in named.items():
        if col is not None and role in ("system", "layout"):  # named by the flag: required
            if col not in header:
                raise AnalysisError(f"{path}: no {role} column {col!r} (--{role}-column); it "
                                    f"has {header}")
            key[role] = col
            continue
        col = col or defaults[role]
        if declared_key[role] is not None:  # the declaration replaces the column
            if col in header and col not in ignore:
                overridden[col] = role
            continue
        if role in ("task", "seed") and col not in header:
            raise AnalysisError(f"{path}: no {role} column {col!r}; it has {header}. Name it "
                                f"with --{role}-column, or declare --{role}")
        if col in header and (role in ("task", "seed") or col not in ignore):
            key[role] = col
    numbers = [c for c in (columns.episode_return, columns.step, columns.frames,
                           columns.time, columns.length) if c]
    missing = [c for c in numbers if c not in header]
    if missing:
        raise AnalysisError(f"{path}: no column(s) {missing}; it has {header}. Name them "
                            "with --return-column, --step-column/--frames-column, "
                            "--time-column, --length-column")
    both = [c for c in ignore if c in key.values() or c in numbers]
    if both:
        raise AnalysisError(f"{path}: --ignore-column {', '.join(both)} names a column the "
                            "import reads (mapped by a --*-column flag or by its name); "
                            "ignore another column, or map that one elsewhere")
    read = {*key.values(), *numbers}
    unmapped = [c for c in header if c not in read and c not in ignore]
    return _Plan(key, numbers, unmapped, ignore,
                 {c: role for c, role in overridden.items() if c in unmapped})


def _refuse_merged(path: Path, plan: _Plan, watch: _Unmapped) -> list[str]:
    """The unmapped numeric columns (listed as ignored); AnalysisError for a text column
    (or a key-named column a declaration replaced) that differs within one run."""
    for c in watch.names:
        if c in watch.split and (not watch.numeric[c] or c in plan.overridden):
            run_key, a, b = watch.split[c]
            run = ", ".join(f"{col} {v!r}" for col, v in
                            zip(plan.key.values(), run_key, strict=True)) or "the one run"
            role = plan.overridden.get(c)
            map_it = (f"Read it (drop --{role}, which replaces the column)" if role else
                      f"Map it (--system-column {c} or --layout-column {c}; --task-column or "
                      "--seed-column for a task or seed)")
            raise AnalysisError(
                f"{path}: column {c!r} is not mapped, yet its values differ within what "
                f"would be one run ({run}: {a!r} and {b!r}), so runs it tells apart would be "
                f"merged into one. {map_it} or ignore it on purpose (--ignore-column {c}); "
                "nothing was written")
    return [c for c in watch.names if watch.numeric[c] or c not in watch.split]


def read_table_runs(path: Path | str, declared: Declared, columns: TableColumns) -> list[ImportedRun]:
    """Every (system, layout, task, seed) of the table as one run."""
    path = Path(path)
    if (columns.step is None) == (columns.frames is None):
        raise AnalysisError("name exactly one of --step-column (logged steps; needs "
                            "--frames-per-step) or --frames-column (frames)")
    fps = (require_frames_per_step(declared, "row step") if columns.step
           else declared.frames_per_step or 1.0)
    header = table_header(path)
    plan = _plan(path, header, declared, columns)
    key_cols = list(plan.key.values())
    cols, nums, watch = read_table(path, header, key_cols, plan.numbers, key_cols,
                                   plan.unmapped)
    unread = _refuse_merged(path, plan, watch)
    returns = nums[columns.episode_return]
    n = len(returns)
    x = nums[columns.step or columns.frames or ""]
    wall = nums[columns.time] if columns.time else np.full(n, np.nan)
    length = nums[columns.length] if columns.length else None

    def text(role: str, declared_value: str | None, default: str) -> list[str]:
        if role in plan.key:
            return cols[plan.key[role]]
        return [declared_value or default] * n

    tasks = text("task", declared.task, "")
    systems = text("system", declared.system, "table")
    layouts = text("layout", declared.layout, f"{IMPORTED_LAYOUT_PREFIX}table")
    seed_cells = text("seed", None if declared.seed is None else str(declared.seed), "")
    seed_col = plan.key.get("seed", columns.seed)
    used = [*key_cols, *plan.numbers]
    ignored = [*plan.ignored, *unread]
    rows: dict[tuple[str, str, str, int], list[int]] = defaultdict(list)
    seeds: dict[str, int] = {}
    for i in range(n):
        cell = seed_cells[i]
        if cell not in seeds:
            seeds[cell] = int_seed(cell, f"{path}, column {seed_col!r}")
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
            details={"rows": len(idx)}, rows_read=len(idx),
            used=[f"column {c}" for c in used], ignored=[f"column {c}" for c in ignored])))
    return runs
