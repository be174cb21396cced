"""Tables as Markdown, CSV and LaTeX (booktabs), and the recomputation of the paper's tables."""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from analysis.errors import AnalysisError
from analysis.inputs.load import PublishedTable, load_published_table, runtimes_twin
from analysis.scales.normalize import get_normaliser
from analysis.stats.metrics import AGGREGATE_LABELS, Interval


@dataclass
class TableData:
    """A table: header and rows of cells (strings for Markdown, raw values for CSV)."""

    name: str
    title: str
    header: list[str]
    rows: list[list[Any]]

    def cells(self) -> list[list[str]]:
        """The rows as the Markdown (and the LaTeX of analysis.output.tables) shows them."""
        return [[_fmt(c) for c in r] for r in self.rows]

    def markdown(self) -> str:
        return pipe_table(self.header, self.cells())

    def latex(self) -> str:
        """A booktabs tabular of the cells as the Markdown shows them (`booktabs`)."""
        return booktabs("l" * len(self.header), self.header, self.cells())

    def write(self, out_dir: Path) -> TableFiles:
        """Write <name>.md, <name>.csv and <name>.tex into out_dir."""
        out_dir.mkdir(parents=True, exist_ok=True)
        md = out_dir / f"{self.name}.md"
        md.write_text(f"### {self.title}\n\n{self.markdown()}", encoding="utf-8")
        path = out_dir / f"{self.name}.csv"
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(self.header)
            for r in self.rows:
                w.writerow([_csv(c) for c in r])
        tex = out_dir / f"{self.name}.tex"
        tex.write_text(self.latex(), encoding="utf-8")
        return TableFiles(md, path, tex)


class TableFiles(NamedTuple):
    """The files `TableData.write` wrote."""

    markdown: Path
    csv: Path
    latex: Path

    def text(self) -> str:
        """The files in words, for a command's "wrote ..." line."""
        return f"{self.markdown}, {self.csv} and {self.latex}"


# In text mode `<`, `>` and `|` come out as other glyphs (OT1 encoding): written as commands.
_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                  "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                  "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}",
                  "|": r"\textbar{}", "±": r"$\pm$"}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def pipe_table(header: Sequence[str], cells: Sequence[Sequence[str]]) -> str:
    """A Markdown pipe table, each column padded to its widest cell."""
    widths = [max([len(h), *(len(row[i]) for row in cells)]) for i, h in enumerate(header)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |",
             "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += ["| " + " | ".join(x.ljust(w) for x, w in zip(row, widths, strict=True)) + " |"
              for row in cells]
    return "\n".join(lines) + "\n"


def booktabs(align: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A booktabs tabular, ready for `\\input` inside a table environment (the document
    needs `\\usepackage{booktabs}`): one column per `align` letter, cells escaped."""

    def line(cells: Sequence[str]) -> str:
        return " & ".join(latex_escape(x) for x in cells) + r" \\"

    return "\n".join([rf"\begin{{tabular}}{{{align}}}", r"\toprule", line(header), r"\midrule",
                      *(line(r) for r in rows), r"\bottomrule", r"\end{tabular}"]) + "\n"


def _fmt(c: Any) -> str:
    if isinstance(c, float):
        return "n/a" if math.isnan(c) else f"{c:.3f}"
    return str(c)


def _csv(c: Any) -> str:
    if isinstance(c, float):
        return "" if math.isnan(c) else repr(c)
    return str(c)


def ci_text(iv: Interval, scale: float = 1.0, digits: int = 3) -> str:
    p, lo, hi = (float(v) * scale for v in (iv.point, iv.low, iv.high))
    return f"{p:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


ONE_SEED = "n/a (1 seed)"


def aggregate_table(results: dict[str, dict[str, Interval]], name: str = "aggregates",
                    title: str = "Aggregate normalised scores (95% bootstrap CIs)",
                    seeds: Mapping[str, int] | None = None) -> TableData:
    """Rows: groups; columns: each metric 'point [low, high]'. A group of one seed (per
    `seeds`) shows 'point [n/a (1 seed)]': resampling one seed gives no interval."""
    metrics = list(next(iter(results.values()))) if results else []
    header = ["group", *(AGGREGATE_LABELS.get(m, m) for m in metrics)]
    rows = []
    for g, iv in results.items():
        if seeds is not None and seeds.get(g, 2) < 2:
            rows.append([g, *(f"{float(iv[m].point):.3f} [{ONE_SEED}]" for m in metrics)])
        else:
            rows.append([g, *(ci_text(iv[m]) for m in metrics)])
    return TableData(name, title, header, rows)


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
        rows = []
        for c, m, r, cl in zip(self.columns, self.median_hns_percent, self.runtime_ratio,
                               self.claims, strict=True):
            rows.append([c, f"{m:.1f}%", cl.get("median_hns", ""),
                         "n/a" if math.isnan(r) else f"{r:.2f}x", cl.get("runtime_ratio", "")])
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
    claims = []
    for c in table.columns:
        claims.append(next((v for k, v in claims_for.items() if c.startswith(k)), {}))
    return PaperTableResult(stem, list(table.columns), med, ratios,
                            table.columns[ref] if ref is not None else None, claims,
                            len(table.games), notes)
