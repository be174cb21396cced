"""The report's opening table: one row per verdict (subject, outcome coloured, estimate,
CI, margin, seeds, a link to its details), and the details each row links to (the
verdict's full line and its design lines). The cells come from the verdicts themselves
(analysis: each result's cells(); a verdict without an estimate shows a dash)."""

from __future__ import annotations

import html
from collections.abc import Sequence

from harness.page_style import verdict_class

COLUMNS = ("subject", "outcome", "estimate", "CI", "margin", "seeds", "details")
CELL_KEYS = ("estimate", "ci", "margin", "seeds")
NO_CELL = "–"


def verdict_anchor(index: int) -> str:
    return f"verdict-{index + 1}"


def table_rows(verdicts: Sequence[dict]) -> list[list[str]]:
    """The table's text cells, one row per verdict (the details column is its anchor)."""
    rows = []
    for i, v in enumerate(verdicts):
        cells = v.get("cells") or {}
        rows.append([f"{v.get('kind', '')}: {v.get('subject', '')}", str(v.get("verdict", "")),
                     *(str(cells.get(k) or NO_CELL) for k in CELL_KEYS), verdict_anchor(i)])
    return rows


def verdict_table(verdicts: Sequence[dict]) -> str:
    """The HTML table of table_rows: the outcome coloured by its verdict class."""
    head = "".join(f"<th>{c}</th>" for c in COLUMNS)
    body = []
    for row, v in zip(table_rows(verdicts), verdicts, strict=True):
        subject, outcome, *cells, anchor = (html.escape(x) for x in row)
        cls = verdict_class(str(v.get("verdict", "")))
        body.append(f"<tr><td>{subject}</td><td class='outcome {cls}'>{outcome}</td>"
                    + "".join(f"<td>{c}</td>" for c in cells)
                    + f"<td><a href='#{anchor}'>details</a></td></tr>")
    return (f"<div class='scroll'><table class='verdicts'><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>")


def verdict_details(verdicts: Sequence[dict], lines: Sequence[str]) -> str:
    """Each verdict's full line (`lines`, as the console prints it) under its anchor, with
    its design lines (paired or Welch, t and df, unit) beneath."""
    parts = []
    for i, (v, line) in enumerate(zip(verdicts, lines, strict=True)):
        detail = "".join(f"<li>{html.escape(str(d))}</li>" for d in v.get("detail") or [])
        parts.append(f"<div id='{verdict_anchor(i)}' class='verdict "
                     f"{verdict_class(str(v.get('verdict', '')))}' "
                     f"title='{html.escape(str(v.get('subject', '')))}'>{html.escape(line)}"
                     + (f"<ul class='detail'>{detail}</ul>" if detail else "") + "</div>")
    return "\n".join(parts)
