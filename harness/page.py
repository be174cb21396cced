"""The pieces of the report's HTML page: its style sheet and the CSS class of a verdict
line (each class verdict_class makes has its colour in CSS), tables, the opening verdict
table with the details it links to, and each table's CSV and LaTeX files.

The page is self-contained: figures are data: URIs, and a table's files are linked as
data: URIs with a download name (the page opens, and its links work, when mailed or moved
without its folder); the files in tables/ are the same bytes, for scripts and papers that
read them from disk. The verdict table's cells come from the verdicts themselves
(analysis: each result's cells(); a verdict without an estimate shows a dash).
"""

from __future__ import annotations

import base64
import html
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;
max-width:1100px;padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.6em;overflow-wrap:anywhere}h2{font-size:1.25em;border-bottom:1px solid #ddd;
padding-bottom:.2em;margin-top:2em}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.88em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right;vertical-align:top}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
table.kv th{text-align:left;white-space:nowrap}table.kv td{text-align:left;overflow-wrap:anywhere}
figure{margin:1.2em 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.88em;color:#444}
.verdict{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.9em;padding:.3em .5em;
margin:.2em 0;border-left:4px solid #999;background:#fafafa;white-space:pre-wrap;
overflow-wrap:anywhere}
.v-PASS,.v-OK,.v-BITWISE,.v-REPRODUCED{border-color:#2a7}
.v-DIFFERENT,.v-FAIL,.v-REGRESSION,.v-NOTREPRODUCED,.v-ERROR{border-color:#c33}
.v-INCONCLUSIVE,.v-WARN,.v-UNDECIDED,.v-NOTSHOWN{border-color:#d92}
table.verdicts td,table.verdicts th{text-align:left}td.outcome{font-weight:600;border-left-width:4px}
td.v-PASS,td.v-OK,td.v-BITWISE,td.v-REPRODUCED{color:#186;background:#eaf7ef}
td.v-DIFFERENT,td.v-FAIL,td.v-REGRESSION,td.v-NOTREPRODUCED,td.v-ERROR{color:#a22;
background:#fbeaea}
td.v-INCONCLUSIVE,td.v-WARN,td.v-UNDECIDED,td.v-NOTSHOWN{color:#965;background:#fdf3e1}
ul.detail{margin:.2em 0 0 1em;padding-left:1em;color:#555;font-size:.95em}
.muted{color:#666;font-size:.88em}p.table-files{margin-top:-.6em}code{font-size:.92em;overflow-wrap:anywhere}
pre{white-space:pre-wrap;overflow-wrap:anywhere}li{overflow-wrap:anywhere}
"""


def verdict_class(verdict: str) -> str:
    """The CSS class of a verdict ("PASS (bitwise identical)" -> "v-PASS"): its first word,
    or its first two when the first is NOT (NOT REPRODUCED, NOT SHOWN would otherwise
    share NOT's colour); an empty verdict is a warning."""
    words = str(verdict).upper().split() or ["WARN"]
    word = "".join(words[:2]) if words[0] == "NOT" else words[0]
    return "v-" + "".join(ch for ch in word if ch.isalnum())


def table_html(header: list[str], rows: list[list[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows
    )
    c = f' class="{cls}"' if cls else ""
    return (f"<div class='scroll'><table{c}><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table></div>")


def kv_table_html(items: list[tuple[str, str]]) -> str:
    """A two-column key/value table: keys as row headers, no (empty) header row."""
    body = "".join(f"<tr><th scope='row'>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
                   for k, v in items)
    return f"<div class='scroll'><table class='kv'><tbody>{body}</tbody></table></div>"


def png_data_uri(path: str | Path) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f"data:image/png;base64,{data}"


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


TABLES_DIR = "tables"
TABLE_FILES = (("csv", "CSV", "text/csv", ".csv"), ("latex", "LaTeX", "application/x-tex", ".tex"))
"""(asset key, link text, media type, file suffix) of each file a table links."""


def write_table_files(table: dict, report_dir: Path) -> dict[str, Path]:
    """Copy a table asset's CSV and LaTeX files (analysis writes them where its suite's
    assets go) to report_dir/tables/<name>.csv and .tex; return key -> written path. A
    file the asset lacks is left out."""
    out = report_dir / TABLES_DIR
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for key, _, _, suffix in TABLE_FILES:
        if table.get(key) and Path(table[key]).is_file():
            dest = out / f"{table['name']}{suffix}"
            if Path(table[key]).resolve() != dest.resolve():
                shutil.copyfile(table[key], dest)
            written[key] = dest
    return written


def table_links(files: dict[str, Path]) -> str:
    """The line under a table: a download link per file, named as in tables/."""
    links = []
    for key, text, media, _ in TABLE_FILES:
        if key not in files:
            continue
        path = files[key]
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        links.append(f"<a class='table-file' download='{html.escape(path.name)}' "
                     f"href='data:{media};base64,{data}'>{text}</a>")
    if not links:
        return ""
    where = " and ".join(f"{TABLES_DIR}/{p.name}" for p in files.values())
    return (f"<p class='muted table-files'>Download: {' · '.join(links)} (also written beside this "
            f"page as {html.escape(where)}).</p>")
