"""Each report table's CSV and LaTeX files: written beside the page, in tables/, and
linked under the table.

The links carry the file itself (a data: URI with a download name), not a path: the page
stays self-contained (it opens, and its links work, when mailed or moved without its
folder); the files in tables/ are the same bytes, for scripts and papers that read them
from disk.
"""

from __future__ import annotations

import base64
import html
import shutil
from pathlib import Path

TABLES_DIR = "tables"
TABLE_FILES = (("csv", "CSV", "text/csv"), ("latex", "LaTeX", "application/x-tex"))
"""(asset key, link text, media type) of each file a table links."""


def _suffix(key: str) -> str:
    return ".tex" if key == "latex" else f".{key}"


def write_table_files(table: dict, report_dir: Path) -> dict[str, Path]:
    """Copy a table asset's CSV and LaTeX files (analysis writes them where its suite's
    assets go) to report_dir/tables/<name>.csv and .tex; return key -> written path. A
    file the asset lacks is left out."""
    out = report_dir / TABLES_DIR
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for key, _, _ in TABLE_FILES:
        if table.get(key) and Path(table[key]).is_file():
            dest = out / f"{table['name']}{_suffix(key)}"
            if Path(table[key]).resolve() != dest.resolve():
                shutil.copyfile(table[key], dest)
            written[key] = dest
    return written


def table_links(files: dict[str, Path]) -> str:
    """The line under a table: a download link per file, named as in tables/."""
    links = []
    for key, text, media in TABLE_FILES:
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
