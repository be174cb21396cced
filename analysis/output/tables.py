"""Tables for a paper: a command's result rows as Markdown, LaTeX (booktabs), CSV or JSON.

Pure text functions of one `TableRows` (columns in a declared order, rows as dicts of
values), and the rows of `aggregate`, `equivalence` and `regression` (`reproduce`'s are in
analysis.reproduce.section, a layer up). The row builders read the commands' results,
never their printed lines, so every format carries the numbers the verdict used.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from analysis.scoring.tables import ONE_SEED, Aggregates, booktabs, pipe_table
from analysis.stats.metrics import AGGREGATE_LABELS
from analysis.verdicts.regression import RegressionResult

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


# ---------------------------------------------------------------- rows of the commands

def aggregate_rows(agg: Aggregates) -> TableRows:
    """One row per group: its seeds and tasks, and each aggregate with its bootstrap CI
    (a group of one seed: the point and "n/a (1 seed)", as the console table shows it;
    no degenerate [point, point] interval)."""
    metrics = list(next(iter(agg.intervals.values()))) if agg.intervals else []
    rows = []
    for g, ivs in agg.intervals.items():
        seeds, tasks = agg.seeds.get(g, (0, 0))
        row: dict[str, Any] = {"group": g, "seeds": seeds, "tasks": tasks}
        for m, iv in ivs.items():
            point = float(iv.point)
            row[m] = (Estimate(point, missing=ONE_SEED) if seeds < 2
                      else Estimate(point, float(iv.low), float(iv.high)))
        rows.append(row)
    return TableRows(aggregate_columns(metrics), rows)


def aggregate_columns(metrics: Sequence[str]) -> tuple[Column, ...]:
    """The aggregate table's columns: group, seeds, tasks, then each metric (a key of
    analysis.stats.metrics.AGGREGATES) with its CI."""
    return (Column("group", "group"), Column("seeds", "seeds", "count"),
            Column("tasks", "tasks", "count"),
            *(Column(m, AGGREGATE_LABELS.get(m, m), "estimate") for m in metrics))


EQUIVALENCE_COLUMNS = (
    Column("group", "group"), Column("reference", "reference"), Column("metric", "metric"),
    Column("mean", "mean", "number"), Column("reference_mean", "reference mean", "number"),
    Column("diff", "difference [90% CI]", "estimate", signed=True),
    Column("delta", "margin", "number"), Column("seeds", "seeds", "count"),
    Column("reference_seeds", "reference seeds", "count"), Column("design", "test"),
    Column("verdict", "verdict"))
BITWISE_COLUMNS = (Column("group", "group"), Column("reference", "reference"),
                    Column("verdict", "bitwise"), Column("determinism", "determinism"))


def equivalence_rows(results: Sequence[Mapping[str, Any]]) -> TableRows:
    """Two rows per verdict (final score and AUC: the TOST tests both), from the verdicts'
    JSON (EquivalenceResult.as_dict, what --json-out writes); a suite column when the
    verdicts name suites. --bitwise-only results: one row per pair."""
    if results and "final" not in results[0]:
        return TableRows(BITWISE_COLUMNS, [
            {"group": r["group_a"], "reference": r["reference"],
             "verdict": "IDENTICAL" if r["identical"] else "NOT IDENTICAL",
             "determinism": r.get("determinism", "")} for r in results])
    rows = []
    for r in results:
        metric = "IQM" if r["metric"] == "iqm" else r["metric"]
        for name in ("final", "auc"):
            w = r[name]
            rows.append({"suite": r.get("suite"), "group": r["group_a"],
                         "reference": r["reference"],
                         "metric": f"{metric} {'final' if name == 'final' else 'AUC'}",
                         "mean": w["mean_a"], "reference_mean": w["mean_b"],
                         "diff": _difference(w, min(len(r["seeds_a"]), len(r["seeds_b"]))),
                         "delta": r["delta"], "seeds": len(r["seeds_a"]),
                         "reference_seeds": len(r["seeds_b"]),
                         "design": "paired" if w.get("paired") else "Welch",
                         "verdict": r["label"]})
    suites = any(row["suite"] for row in rows)
    columns = (Column("suite", "suite"),) * suites + EQUIVALENCE_COLUMNS
    return TableRows(columns, rows)


def _difference(w: Mapping[str, Any], fewest_seeds: int) -> Estimate:
    """A verdict's difference with its 90% CI; none with one seed on a side (its JSON
    holds NaN or null there: no spread to estimate)."""
    lo, hi = (math.nan if x is None else float(x) for x in w["ci90"])
    if fewest_seeds < 2 or math.isnan(lo) or math.isnan(hi):
        return Estimate(w["diff"], missing=ONE_SEED if fewest_seeds < 2 else "n/a")
    return Estimate(w["diff"], lo, hi)


def regression_rows(res: RegressionResult) -> TableRows:
    """One row: the gate's means, new - reference with its one-sided bounds (the lower
    one is what PASS reads, at res.confidence), the margin, the seeds and the verdict."""
    return TableRows(regression_columns(res.confidence), [{
        "subject": res.subject, "metric": res.metric, "new_mean": res.new_mean,
        "reference_mean": res.reference_mean,
        "diff": Estimate(res.diff, res.lower_bound, res.upper_bound), "delta": res.delta,
        # a published number taken as exact has no seeds: n/a, not 0
        "new_seeds": res.n_new, "reference_seeds": res.n_reference or None,
        "verdict": res.verdict}])


def regression_columns(confidence: float) -> tuple[Column, ...]:
    """The gate's columns; the bounds are one-sided at `confidence` (the gate's level)."""
    level = f"{confidence:.0%}"
    return (Column("subject", "subject"), Column("metric", "metric"),
            Column("new_mean", "new", "number", 4),
            Column("reference_mean", "reference", "number", 4),
            Column("diff", f"new - reference [{level} bounds]", "estimate", 4, signed=True),
            Column("delta", "margin", "number", 4),
            Column("new_seeds", "new seeds", "count"),
            Column("reference_seeds", "reference seeds", "count"),
            Column("verdict", "verdict"))
