"""The check behind docs/atari5.md's validation table: the Atari-5 estimate against the
published tables' own medians, each system counted once (tests/test_verdict_calibration.py)."""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from analysis.atari5.estimate import estimate_published_table
from analysis.inputs.load import load_published_table

VALIDATION_TABLES = ("main_10CPU", "spec_out", "cleanrl", "sync_or_not_sync",
                     "ppo_vs_impala_fair", "smootheness_complete")


@dataclass
class PublishedCheck:
    """How well the estimate matches the published tables' own medians, over their columns
    and over distinct systems: the tables repeat columns (one system's runs appear in
    several tables), so the columns are fewer independent checks. Two columns are one
    system when their per-game means are identical on the games they share."""

    columns: int  # validation columns over the tables
    systems: int  # distinct systems among them
    signed_error_columns: float  # mean of estimate / median - 1 over columns
    low_columns: int  # columns whose estimate is below the median
    signed_error_systems: float  # the same over distinct systems
    low_systems: int
    covered_columns: int  # medians inside the 90% model-error interval
    covered_systems: int


def check_published(folder: Path | str, tables: Sequence[str] = VALIDATION_TABLES
                    ) -> PublishedCheck:
    """estimate_published_table over `tables` (CSV files in `folder`), each system once."""
    rows, keys = [], []
    for name in tables:
        path = Path(folder) / f"{name}.csv"
        table = load_published_table(path)
        for j, r in enumerate(estimate_published_table(path)):
            rows.append(r)
            keys.append({g: round(float(m), 6) for g, m in zip(table.games, table.mean[:, j],
                                                               strict=True)})
    firsts: list[int] = []  # the first column of each distinct system
    for i, k in enumerate(keys):
        if not any(_same_system(keys[f], k) for f in firsts):
            firsts.append(i)
    err = np.array([r["estimate"] / r["median"] - 1 for r in rows])
    inside = np.array([r["low"] <= r["median"] <= r["high"] for r in rows])
    return PublishedCheck(len(rows), len(firsts), float(err.mean()), int((err < 0).sum()),
                          float(err[firsts].mean()), int((err[firsts] < 0).sum()),
                          int(inside.sum()), int(inside[firsts].sum()))


def _same_system(a: dict[str, float], b: dict[str, float]) -> bool:
    common = set(a) & set(b)
    return bool(common) and all(a[g] == b[g] for g in common)

