"""Tables for a paper: a command's result rows as Markdown, LaTeX (booktabs), CSV or JSON.

Pure text functions of one `TableRows` (columns in a declared order, rows as dicts of
values). The row builders (analysis.output.table_rows, analysis.reproduce.section) read
the commands' results, never their printed lines, so every format carries the numbers
the verdict used.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from analysis.scoring.tables import booktabs, pipe_table

ColumnKind = Literal["text", "number", "count", "estimate"]

TABLE_FORMATS = ("markdown", "latex", "csv", "json")
"""The --format values that print a table (the default, console, prints the lines)."""


@dataclass(frozen=True)
class Estimate:
    """A point estimate and its interval: one cell in Markdown and LaTeX, three columns
    (KEY, KEY_low, KEY_high) in CSV and JSON."""

    value: float
    low: float = math.nan
    high: float = math.nan
    missing: str = ""
    """Why there is no interval, shown in its place in Markdown and LaTeX (e.g. "n/a (1
    seed)"); CSV and JSON leave KEY_low and KEY_high empty (null)."""


@dataclass(frozen=True)
class Column:
    key: str
    """The row dicts' key, and the CSV/JSON column name."""
    label: str
    """The header text of Markdown and LaTeX."""
    kind: ColumnKind = "text"
    digits: int = 3
    """Decimals of numbers and estimates in Markdown and LaTeX (CSV/JSON: full precision)."""
    signed: bool = False
    """Write a + before positive numbers (differences)."""


@dataclass(frozen=True)
class TableRows:
    columns: tuple[Column, ...]
    rows: list[dict[str, Any]]


# ---------------------------------------------------------------- cells

def _number_text(v: Any, col: Column) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{float(v):{'+' if col.signed else ''}.{col.digits}f}"


def cell_text(v: Any, col: Column) -> str:
    """A cell as Markdown and LaTeX show it: numbers rounded, an estimate with its
    interval in brackets (`0.512 [0.431, 0.598]`; without one, the value alone)."""
    if col.kind == "estimate":
        est = v if isinstance(v, Estimate) else Estimate(v)
        text = _number_text(est.value, col)
        if math.isnan(est.low) and math.isnan(est.high):
            return f"{text} [{est.missing}]" if est.missing else text
        return f"{text} [{_number_text(est.low, col)}, {_number_text(est.high, col)}]"
    if col.kind == "number":
        return _number_text(v, col)
    if col.kind == "count":
        return "n/a" if v is None else str(int(v))
    return "" if v is None else str(v)


def _plain(v: Any) -> Any:
    """A value for CSV/JSON: floats at full precision, NaN as None (empty in CSV)."""
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def flat_row(row: dict[str, Any], columns: Sequence[Column]) -> dict[str, Any]:
    """One row with each estimate split into KEY, KEY_low and KEY_high."""
    out: dict[str, Any] = {}
    for c in columns:
        v = row.get(c.key)
        if c.kind == "estimate":
            est = v if isinstance(v, Estimate) else Estimate(math.nan if v is None else v)
            out[c.key] = _plain(float(est.value))
            out[f"{c.key}_low"] = _plain(float(est.low))
            out[f"{c.key}_high"] = _plain(float(est.high))
        elif c.kind == "number":
            out[c.key] = None if v is None else _plain(float(v))
        elif c.kind == "count":
            out[c.key] = None if v is None else int(v)
        else:
            out[c.key] = v
    return out


def flat_header(columns: Sequence[Column]) -> list[str]:
    return [k for c in columns for k in
            ((c.key, f"{c.key}_low", f"{c.key}_high") if c.kind == "estimate" else (c.key,))]


# ---------------------------------------------------------------- formats

def to_csv(table: TableRows) -> str:
    """One header row (column keys; an estimate's bounds as KEY_low, KEY_high), one row
    per table row; numbers as Python writes them (repr: full precision), NaN empty."""
    buf = io.StringIO()
    header = flat_header(table.columns)
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for r in table.rows:
        flat = flat_row(r, table.columns)
        w.writerow(["" if flat[k] is None else flat[k] for k in header])
    return buf.getvalue()


def to_json(table: TableRows) -> str:
    """A list of row objects with the CSV's keys (NaN as null)."""
    return json.dumps([flat_row(r, table.columns) for r in table.rows], indent=2) + "\n"


def to_markdown(table: TableRows) -> str:
    return pipe_table([c.label for c in table.columns],
                      [[cell_text(r.get(c.key), c) for c in table.columns] for r in table.rows])


def to_latex(table: TableRows) -> str:
    """A booktabs tabular (`booktabs`): text columns left, numbers right, each estimate
    one cell with its interval."""
    align = "".join("l" if c.kind == "text" else "r" for c in table.columns)
    return booktabs(align, [c.label for c in table.columns],
                    [[cell_text(r.get(c.key), c) for c in table.columns] for r in table.rows])


RENDERERS: dict[str, Callable[[TableRows], str]] = {
    "markdown": to_markdown, "latex": to_latex, "csv": to_csv, "json": to_json}


def render(table: TableRows, fmt: str) -> str:
    """The table as text in one of TABLE_FORMATS."""
    return RENDERERS[fmt](table)
