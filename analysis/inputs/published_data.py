"""The published tables the project ships (package data, analysis/data/published/; sources
and licences in its README.md): a short name such as `cleanba:main_10CPU` stands for one of
them wherever a published table is read (`--published`, `--table`, a sweep's `[report]
published`, the Python API). A path still works; a name that is not shipped is refused,
listing the valid names.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from analysis.errors import AnalysisError

PUBLISHED_DIR = Path(__file__).resolve().parents[1] / "data" / "published"
"""The shipped published data (analysis/data/published/)."""
CLEANBA_TABLES = PUBLISHED_DIR / "cleanba"
"""The Cleanba paper's `mean ± std` tables and their `_runtimes` twins."""
ATARI5_DATASET = PUBLISHED_DIR / "atari5" / "dataset.csv"
"""Aitchison et al.'s Atari-5 dataset (3,365 published scores of 62 algorithms)."""

SOURCES = {"cleanba": CLEANBA_TABLES}
"""Name prefix -> the folder of that source's tables."""

_NAME = re.compile(r"(?P<source>[a-z][a-z0-9-]*):(?P<stem>[A-Za-z0-9_.-]+)")


def published_table_names() -> list[str]:
    """Every shipped score table by name, e.g. `cleanba:main_10CPU` (the `_runtimes`
    twins are read beside their table, not named)."""
    return sorted(f"{source}:{p.stem}" for source, folder in SOURCES.items()
                  for p in folder.glob("*.csv") if not p.stem.endswith("_runtimes"))


def resolve_published_table(table: str | Path, base: Path | None = None) -> Path:
    """The file of a published table given as a shipped name (`cleanba:main_10CPU`) or a
    path (relative to `base`, default the working directory). AnalysisError naming the
    valid names when it is neither."""
    text = str(table)
    valid = ", ".join(published_table_names())
    m = _NAME.fullmatch(text)
    if m is not None and m["source"] in SOURCES:  # written as a name, not a path
        path = SOURCES[m["source"]] / f"{m['stem'].removesuffix('.csv')}.csv"
        if not path.is_file() or path.stem.endswith("_runtimes"):
            close = difflib.get_close_matches(text, published_table_names(), n=1, cutoff=0.6)
            raise AnalysisError(f"no published table named {text!r}"
                                + (f" (did you mean {close[0]!r}?)" if close else "")
                                + f"; the shipped tables are: {valid} (or give a path to a "
                                "`mean ± std` CSV)")
        return path
    path = Path(table)
    if base is not None and not path.is_absolute():
        path = base / path
    if not path.is_file():
        raise AnalysisError(f"{path}: no such table; give a path to a `mean ± std` CSV or "
                            f"one of the shipped tables by name: {valid}")
    return path
