"""How well the Atari-5 estimate matches the published Cleanba tables' own medians,
counting each distinct system once: the tables repeat columns (the same system's runs
appear in several tables), so 23 validation columns are fewer independent checks.
Two columns are one system when their per-game means are identical on the games they
share.
"""

from __future__ import annotations

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
    rows, keys = [], []
    for name in tables:
        path = Path(folder) / f"{name}.csv"
        table = load_published_table(path)
        for j, r in enumerate(estimate_published_table(path)):
            rows.append(r)
            keys.append({g: round(float(m), 6) for g, m in zip(table.games, table.mean[:, j],
                                                               strict=True)})
    system_of: list[int] = []
    firsts: list[int] = []
    for i, k in enumerate(keys):
        same = next((s for s, f in enumerate(firsts) if _same(keys[f], k)), None)
        if same is None:
            firsts.append(i)
            same = len(firsts) - 1
        system_of.append(same)
    err = np.array([r["estimate"] / r["median"] - 1 for r in rows])
    inside = np.array([r["low"] <= r["median"] <= r["high"] for r in rows])
    sys_err = np.array([err[f] for f in firsts])
    sys_in = np.array([inside[f] for f in firsts])
    return PublishedCheck(len(rows), len(firsts), float(err.mean()), int((err < 0).sum()),
                          float(sys_err.mean()), int((sys_err < 0).sum()),
                          int(inside.sum()), int(sys_in.sum()))


def _same(a: dict[str, float], b: dict[str, float]) -> bool:
    common = set(a) & set(b)
    return bool(common) and all(a[g] == b[g] for g in common)
