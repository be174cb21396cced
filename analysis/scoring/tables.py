"""Tables as Markdown, CSV, JSON and LaTeX (booktabs); aggregate scores of groups (per-group
point summaries, stratified bootstrap CIs of median, IQM, mean and optimality gap, and the
probability of improvement between chosen pairs of groups that ran the same tasks); and
the recomputation of the paper's tables."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np

from analysis.errors import AnalysisError
from analysis.inputs.load import PublishedTable, load_published_table, runtimes_twin
from analysis.json_file import write_json
from analysis.scales.normalize import get_normaliser
from analysis.scoring.scores import GroupScores
from analysis.stats.metrics import (
    AGGREGATE_LABELS,
    AGGREGATES,
    Interval,
    interval_estimates,
    probability_of_improvement_pairs,
)

ColumnKind = Literal["value", "text", "number", "count", "estimate"]


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
    """The CSV/JSON column name (and the key of `TableData.keyed`'s rows)."""
    label: str
    """The header text of Markdown and LaTeX."""
    kind: ColumnKind = "text"
    """value: any cell as str() shows it, a float rounded (CSV: repr; NaN: n/a, empty);
    text: str() of a string, None empty; number, count, estimate: typed numbers."""
    digits: int = 3
    """Decimals of numbers and estimates in Markdown and LaTeX (CSV/JSON: full precision)."""
    signed: bool = False
    """Write a + before positive numbers (differences)."""


@dataclass
class TableData:
    """A table: its columns (a bare label is a `value` column of that key) and rows of
    cells in column order; `name` names its files, `title` heads its Markdown file."""

    name: str
    title: str
    header: Sequence[Column | str]
    rows: list[list[Any]]
    columns: tuple[Column, ...] = field(init=False)

    def __post_init__(self) -> None:
        self.columns = tuple(c if isinstance(c, Column) else Column(c, c, "value")
                             for c in self.header)

    @classmethod
    def keyed(cls, columns: Sequence[Column], rows: Iterable[Mapping[str, Any]]) -> TableData:
        """A table (unnamed: printed, not written) of rows keyed by column key (a missing
        key: None)."""
        return cls("table", "", columns, [[r.get(c.key) for c in columns] for r in rows])

    def cells(self) -> list[list[str]]:
        """The rows as Markdown and LaTeX show them (`cell_text`)."""
        return [[cell_text(v, c) for v, c in zip(r, self.columns, strict=True)]
                for r in self.rows]

    def markdown(self) -> str:
        """A Markdown pipe table, each column padded to its widest cell."""
        header, cells = [c.label for c in self.columns], self.cells()
        widths = [max([len(h), *(len(row[i]) for row in cells)]) for i, h in enumerate(header)]
        lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |",
                 "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
        lines += ["| " + " | ".join(x.ljust(w) for x, w in zip(row, widths, strict=True)) + " |"
                  for row in cells]
        return "\n".join(lines) + "\n"

    def latex(self) -> str:
        """A booktabs tabular, ready for `\\input` inside a table environment (the document
        needs `\\usepackage{booktabs}`): text columns left, numbers right, each estimate one
        cell with its interval, cells escaped."""
        align = "".join("l" if c.kind in ("value", "text") else "r" for c in self.columns)

        def line(cells: Sequence[str]) -> str:
            return " & ".join(latex_escape(x) for x in cells) + r" \\"

        return "\n".join([rf"\begin{{tabular}}{{{align}}}", r"\toprule",
                          line([c.label for c in self.columns]), r"\midrule",
                          *(line(r) for r in self.cells()), r"\bottomrule", r"\end{tabular}"]
                         ) + "\n"

    def csv(self, lineterminator: str = "\n") -> str:
        """One header row (column keys; an estimate's bounds as KEY_low, KEY_high), one row
        per table row; numbers as Python writes them (repr: full precision), NaN empty."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator=lineterminator)
        w.writerow(flat_header(self.columns))
        for r in self.rows:
            w.writerow(["" if v is None else v for v in flat_row(r, self.columns)])
        return buf.getvalue()

    def json(self) -> str:
        """A list of row objects with the CSV's keys (NaN as null)."""
        keys = flat_header(self.columns)
        return json.dumps([dict(zip(keys, flat_row(r, self.columns), strict=True))
                           for r in self.rows], indent=2) + "\n"

    def render(self, fmt: str) -> str:
        """The table as text in a --format that prints a table: markdown, latex, csv, json."""
        return {"markdown": self.markdown, "latex": self.latex, "csv": self.csv,
                "json": self.json}[fmt]()

    def write(self, out_dir: Path) -> TableFiles:
        """Write <name>.md, <name>.csv (CRLF line ends, as the csv module writes a file)
        and <name>.tex into out_dir."""
        out_dir.mkdir(parents=True, exist_ok=True)
        files = TableFiles(*(out_dir / f"{self.name}{s}" for s in (".md", ".csv", ".tex")))
        files.markdown.write_text(f"### {self.title}\n\n{self.markdown()}", encoding="utf-8")
        files.csv.write_text(self.csv("\r\n"), encoding="utf-8", newline="")
        files.latex.write_text(self.latex(), encoding="utf-8")
        return files

    def asset(self, files: TableFiles) -> dict[str, Any]:
        """The table as a report lists it: name, title, Markdown, the cells as shown
        (header labels and `cells`, which a page renders) and the paths of its files."""
        return {"name": self.name, "title": self.title, "markdown": self.markdown(),
                "header": [c.label for c in self.columns], "cells": self.cells(),
                "csv": str(files.csv), "latex": str(files.latex)}


class TableFiles(NamedTuple):
    """The files `TableData.write` wrote."""

    markdown: Path
    csv: Path
    latex: Path

    def text(self) -> str:
        """The files in words, for a command's "wrote ..." line."""
        return f"{self.markdown}, {self.csv} and {self.latex}"


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
    if col.kind == "number" or (col.kind == "value" and isinstance(v, float)):
        return _number_text(v, col)
    if col.kind == "count":
        return "n/a" if v is None else str(int(v))
    return "" if v is None and col.kind == "text" else str(v)


def _plain(v: Any) -> Any:
    """A value for CSV/JSON: floats at full precision, NaN as None (empty in CSV)."""
    return None if isinstance(v, float) and math.isnan(v) else v


def flat_row(row: Sequence[Any], columns: Sequence[Column]) -> list[Any]:
    """One row's values under `flat_header`: each estimate split into its value, low and
    high; NaN as None."""
    out: list[Any] = []
    for v, c in zip(row, columns, strict=True):
        if c.kind == "estimate":
            est = v if isinstance(v, Estimate) else Estimate(math.nan if v is None else v)
            out += [_plain(float(x)) for x in (est.value, est.low, est.high)]
        elif c.kind == "number":
            out.append(None if v is None else _plain(float(v)))
        elif c.kind == "count":
            out.append(None if v is None else int(v))
        elif c.kind == "value":
            out.append(_plain(v) if isinstance(v, float) else str(v))
        else:
            out.append(v)
    return out


def flat_header(columns: Sequence[Column]) -> list[str]:
    return [k for c in columns for k in
            ((c.key, f"{c.key}_low", f"{c.key}_high") if c.kind == "estimate" else (c.key,))]


# In text mode `<`, `>` and `|` come out as other glyphs (OT1 encoding): written as commands.
_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                  "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                  "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}",
                  "|": r"\textbar{}", "±": r"$\pm$"}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


ONE_SEED = "n/a (1 seed)"


def interval_estimate(iv: Interval, seeds: int) -> Estimate:
    """An interval as a table cell; from fewer than two seeds the point alone, marked
    ONE_SEED: a bootstrap of one seed resamples that seed alone, so gives no interval."""
    if seeds < 2:
        return Estimate(float(iv.point), missing=ONE_SEED)
    return Estimate(float(iv.point), float(iv.low), float(iv.high))


def ci_text(iv: Interval, seeds: int) -> str:
    """'point [low, high]' to three decimals, or 'point [n/a (1 seed)]' (`interval_estimate`)."""
    return cell_text(interval_estimate(iv, seeds), Column("ci", "CI", "estimate"))


def aggregate_columns(metrics: Sequence[str]) -> tuple[Column, ...]:
    """The aggregate table's columns: group, seeds, tasks, then each metric (a key of
    analysis.stats.metrics.AGGREGATES) with its CI."""
    return (Column("group", "group"), Column("seeds", "seeds", "count"),
            Column("tasks", "tasks", "count"),
            *(Column(m, AGGREGATE_LABELS.get(m, m), "estimate") for m in metrics))


def aggregate_table(results: Mapping[str, Mapping[str, Interval]],
                    seeds: Mapping[str, tuple[int, int]], name: str, title: str) -> TableData:
    """One row per group: its (seeds, tasks) and each metric's `interval_estimate`."""
    metrics = list(next(iter(results.values()))) if results else []
    rows = [[g, *seeds[g], *(interval_estimate(iv[m], seeds[g][0]) for m in metrics)]
            for g, iv in results.items()]
    return TableData(name, title, aggregate_columns(metrics), rows)


# ---------------------------------------------------------------- aggregates

AGGREGATE_REPS = 50_000
"""Bootstrap replicates of the aggregate intervals (the CLI's and the report's default)."""


def summary_table(groups: Mapping[str, GroupScores]) -> TableData:
    """Per group: seeds, tasks, median and IQM of the final score, IQM of the AUC, and
    minutes per run (point estimates, no intervals)."""
    rows = [[g, len(gs.seeds), len(gs.tasks), float(np.median(gs.final.mean(0))),
             float(AGGREGATES["iqm"](gs.final)), float(AGGREGATES["iqm"](gs.auc)),
             runtime_minutes(gs)[0]] for g, gs in groups.items()]
    return TableData("summary", "summary", ["group", "seeds", "tasks", "median final",
                                            "IQM final", "IQM AUC", "minutes/run"], rows)


def runtime_minutes(gs: GroupScores) -> tuple[float, float]:
    """(mean, std) over a group's runs of the training wall time in minutes; NaN (no
    warning) when no run recorded its time (an import of a table without a time column)."""
    minutes = gs.wall_time_s.ravel() / 60
    minutes = minutes[np.isfinite(minutes)]
    return (float(minutes.mean()), float(minutes.std())) if len(minutes) else (math.nan,
                                                                               math.nan)


def aggregate_intervals(
    groups: Mapping[str, GroupScores], *, reps: int = AGGREGATE_REPS, seed: int = 0,
    confidence: float = 0.95, method: str = "percentile",
) -> dict[str, dict[str, Interval]]:
    """group -> metric -> CI of the final normalised scores."""
    return {g: interval_estimates(gs.final, AGGREGATES, reps=reps, seed=seed,
                                  confidence=confidence, method=method)
            for g, gs in groups.items()}


@dataclass
class Aggregates:
    intervals: dict[str, dict[str, Interval]]  # group -> metric -> CI
    table: TableData
    improvement: TableData  # P(X > Y) with CIs; no rows when no two groups share tasks
    seeds: dict[str, tuple[int, int]]  # group -> (independent seeds, tasks)
    which: str = ""  # which P(X > Y) pairs were computed, in words

    def lines(self) -> list[str]:
        # A group's rows are distinct seeds (one run per seed and env), so the bootstrap
        # resamples independent seeds, never layout copies.
        out = [self.table.markdown(), "seeds: a group's independent seeds, which its CIs "
               "resample within each of its tasks"]
        fewest = min((s for s, _ in self.seeds.values()), default=0)
        if 1 < fewest <= FEW_SEEDS:
            out.append(f"note: {fewest} seeds: percentile bootstrap CIs are too narrow at so "
                       "few seeds (the bootstrap variance is (n-1)/n of the true one; at 3 "
                       "seeds a nominal 5% test fired 14% of the time). Read them as "
                       "descriptive; to decide, use `equivalence` or `regression` (t on "
                       "per-seed values), or run more seeds")
        if self.which:
            out.append(f"P(X > Y) computed for {self.which}")
        return out + ([self.improvement.markdown()] if self.improvement.rows else [])

    def write(self, out: Path) -> list[Path]:
        """aggregates.md/.csv/.tex, probability_of_improvement.md/.csv/.tex and
        aggregates.json."""
        paths = [*self.table.write(out), *self.improvement.write(out)]
        return paths + [write_json(out / "aggregates.json", {
            g: {m: iv.as_dict() for m, iv in d.items()} for g, d in self.intervals.items()})]


FEW_SEEDS = 3
"""At this many seeds or fewer percentile bootstrap CIs are too narrow (docs/analysis.md):
the aggregate table carries a note, and analysis.rly.checks a SeedWarning."""


def improvement_cells(iv: Interval, n_x: int, n_y: int) -> list[str]:
    """P(X > Y) [CI] (`ci_text`: none with one seed on a side) and in words which group
    the interval favours, or that it cannot tell (with 3 vs 3 seeds a task's P(X > Y)
    takes 10 values and its interval can span 0..1)."""
    if min(n_x, n_y) < 2:
        return [ci_text(iv, 1), "cannot tell: one seed on a side gives no interval"]
    lo, hi, seeds = float(iv.low), float(iv.high), f"({n_x} vs {n_y} seeds per task)"
    return [ci_text(iv, 2), "X tends to score higher (CI above 0.5)" if lo > 0.5
            else "Y tends to score higher (CI below 0.5)" if hi < 0.5
            else f"cannot tell: the CI spans almost all of 0..1 {seeds}"
            if lo <= 0.05 and hi >= 0.95
            else f"no evidence either way: the CI contains 0.5 {seeds}"]


def aggregate_groups(groups: Mapping[str, GroupScores], *, reps: int, seed: int = 0,
                     confidence: float = 0.95, method: str = "percentile",
                     pairs: Sequence[tuple[str, str]] | None = None,
                     which: str = "") -> Aggregates:
    """Bootstrap CIs of every aggregate per group (final normalised scores), and P(X > Y)
    for `pairs` (default: every ordered pair of groups with the same tasks; the CLI
    chooses fewer, analysis.verdicts.compare). `which` says in words which pairs."""
    res = aggregate_intervals(groups, reps=reps, seed=seed, confidence=confidence,
                              method=method)
    seeds = {g: (len(gs.seeds), len(gs.tasks)) for g, gs in groups.items()}
    table = aggregate_table(res, seeds, "aggregates",
                            f"Aggregate final normalised scores, {confidence:.0%} CIs, "
                            f"{reps} reps, seed {seed}")
    if pairs is None:
        pairs = [(x, y) for x, gx in groups.items() for y, gy in groups.items()
                 if x != y and gx.tasks == gy.tasks]
        which = which or f"all {len(pairs)} ordered pairs"
    ivs = probability_of_improvement_pairs({g: gs.final for g, gs in groups.items()}, pairs,
                                           reps=reps, seed=seed, confidence=confidence,
                                           method=method)
    rows = [[x, y, *improvement_cells(iv, len(groups[x].seeds), len(groups[y].seeds))]
            for (x, y), iv in ivs.items()]
    poi = TableData("probability_of_improvement",
                    "P(X > Y) with CIs" + (f": {which}" if which else ""),
                    ["X", "Y", "P(X > Y) [CI]", "what it says"], rows)
    return Aggregates(res, table, poi, seeds, which)


# ---------------------------------------------------------------- paper tables

# What the Cleanba paper's text claims, per table file stem and column prefix.
PAPER_CLAIMS: dict[str, dict[str, dict[str, str]]] = {
    "main_10CPU": {
        "Cleanba IMPALA,": {"median_hns": "~165%"},
        "Monobeast IMPALA,": {"runtime_ratio": "6.8x"},
        "Moolib IMPALA,": {"runtime_ratio": "1.2x"},
    },
    "spec_out": {
        "Monobeast IMPALA,": {"runtime_ratio": "~5x"},
        "Moolib IMPALA,": {"runtime_ratio": "~2x"},
    },
}
REFERENCE_COLUMN_PREFIX = "Cleanba IMPALA,"


@dataclass
class PaperTableResult:
    table: str
    columns: list[str]
    median_hns_percent: list[float]  # one decimal
    runtime_ratio: list[float]  # mean runtime / mean runtime of the reference; 2 decimals
    reference_column: str | None
    claims: list[dict[str, str]]
    games: int
    notes: list[str] = field(default_factory=list)

    def table_data(self) -> TableData:
        rows = [[c, f"{m:.1f}%", cl.get("median_hns", ""),
                 "n/a" if math.isnan(r) else f"{r:.2f}x", cl.get("runtime_ratio", "")]
                for c, m, r, cl in zip(self.columns, self.median_hns_percent,
                                       self.runtime_ratio, self.claims, strict=True)]
        header = ["column", "median HNS", "paper says", "runtime ratio", "paper says"]
        title = (f"{self.table}: median HNS over {self.games} games (per-game mean of the "
                 f"last 100 episodes over seeds) and mean runtime relative to "
                 f"{self.reference_column or 'n/a'}")
        return TableData(f"paper_{self.table}", title, header, rows)


def reference_column(columns: Sequence[str]) -> int | None:
    """The column runtimes are relative to: the first "Cleanba IMPALA," column, else (a
    table without IMPALA, e.g. sync_or_not_sync) the first Cleanba column that is not a
    "(sync)" variant, so the asynchronous Cleanba design is the reference either way."""
    for j, c in enumerate(columns):
        if c.startswith(REFERENCE_COLUMN_PREFIX):
            return j
    for j, c in enumerate(columns):
        if c.startswith("Cleanba") and "sync" not in c.lower():
            return j
    return None


def median_hns(table: PublishedTable) -> np.ndarray:
    """(columns,) median over games of the HNS of the per-game mean score."""
    hns = np.stack([get_normaliser(g)(table.mean[i]) for i, g in enumerate(table.games)])
    return np.median(hns, axis=0)


def paper_table(path: Path | str) -> PaperTableResult:
    """Recompute a published table: median HNS per column (%, one decimal) and the ratio of
    each column's mean runtime over games to the reference column's (reference_column;
    two decimals)."""
    table = load_published_table(path)
    path = table.path  # a shipped table's name resolved to its file
    stem = Path(path).stem
    med = [round(float(v) * 100, 1) for v in median_hns(table)]
    ratios = [math.nan] * len(table.columns)
    notes: list[str] = []
    ref = reference_column(table.columns)
    twin = runtimes_twin(path)
    if ref is None:
        notes.append(f"no '{REFERENCE_COLUMN_PREFIX}' column and no asynchronous Cleanba "
                     "column: runtime ratios not defined")
    elif not table.columns[ref].startswith(REFERENCE_COLUMN_PREFIX):
        notes.append(f"no '{REFERENCE_COLUMN_PREFIX}' column: runtimes are relative to "
                     f"{table.columns[ref]}")
    if ref is not None and not twin.exists():
        notes.append(f"no runtimes twin {twin.name}: runtime ratios not computed")
    elif ref is not None:
        rt = load_published_table(twin)
        if rt.columns != table.columns or sorted(rt.games) != sorted(table.games):
            raise AnalysisError(f"{twin}: columns or games differ from {path}")
        order = [rt.games.index(g) for g in table.games]
        mean_rt = rt.mean[order].mean(axis=0)
        ratios = [round(float(v / mean_rt[ref]), 2) for v in mean_rt]
    claims_for = PAPER_CLAIMS.get(stem, {})
    claims = [next((v for k, v in claims_for.items() if c.startswith(k)), {})
              for c in table.columns]
    return PaperTableResult(stem, list(table.columns), med, ratios,
                            table.columns[ref] if ref is not None else None, claims,
                            len(table.games), notes)
