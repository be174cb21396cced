"""Did it reproduce? Your runs against a published table column
(analysis.reproduce.published), against published per-seed runs, and the report section
(analysis.reproduce.section). The names below are the layer's face: callers import them
from analysis.reproduce.
"""

from analysis.reproduce.judge import (
    CONSISTENT,
    HIGHER,
    LOWER,
    NOT_LEARNED,
    judge,
    power_consistent,
)
from analysis.reproduce.published import (
    PUBLISHED_SEEDS,
    published_column,
    reproduce,
)
from analysis.reproduce.section import (
    imported_runs,
    only_games,
    published_rows,
    report_assets,
    reproduce_runs,
    runs_rows,
    write_published_comparison,
    write_runs_comparison,
)

__all__ = [
    "imported_runs",
    "only_games",
    "write_published_comparison",
    "write_runs_comparison",
    "CONSISTENT",
    "HIGHER",
    "LOWER",
    "PUBLISHED_SEEDS",
    "judge",
    "NOT_LEARNED",
    "power_consistent",
    "published_rows",
    "published_column",
    "report_assets",
    "reproduce",
    "reproduce_runs",
    "runs_rows",
]
