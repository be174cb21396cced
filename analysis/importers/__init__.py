"""Runs from other tools as run records: long tables (CSV, Parquet), TensorBoard event
files, Monitor CSVs (SB3, gymnasium), W&B offline runs and W&B history CSV exports
(`python -m analysis import <format>`), and openrlbenchmark's cache (`orb`). Each format's
library (tensorboard, pyarrow, wandb) is imported only by its reader.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from analysis.errors import AnalysisError
from analysis.importers.build import ImportedRun, ImportResult, write_records
from analysis.importers.declare import LENGTH_KEY, RETURN_KEY, STEP_KEY, Declared, declaration
from analysis.importers.folders import read_monitor_runs, read_tensorboard_runs
from analysis.importers.table import TableColumns, read_table_runs
from analysis.importers.wandb_runs import read_wandb_csv_runs, read_wandb_offline_runs

PACKAGES = {"table": ("numpy", "pyarrow"), "tensorboard": ("numpy", "tensorboard"),
            "monitor": ("numpy",), "wandb": ("numpy", "wandb"), "wandb-csv": ("numpy",)}
"""Each format, and the packages whose versions its records' provenance holds."""
FORMATS = tuple(PACKAGES)


def import_runs(fmt: str, src: Path | str, out: Path | str, *,
                protocol: Sequence[str] | str, frames_per_step: float | None = None,
                frames: float | None = None, seed: int | None = None, task: str | None = None,
                system: str | None = None, layout: str | None = None,
                path_pattern: str | None = None, allow_many_seeds: bool = False,
                **options: Any) -> ImportResult:
    """Import every run of `fmt` below `src` as run records under `out` (a sweep folder:
    `out/runs/<run_id>/`); AnalysisError (exit 2, nothing written) for anything refused.
    The declarations are those of the CLI flags of the same names; `options` are the
    format's own (table: columns=TableColumns(...); tensorboard: tag, length_tag; wandb:
    metric, step, config_task, config_seed, config_system; wandb-csv: metric, step, time)."""
    if not Path(src).exists():
        raise AnalysisError(f"{src}: no such file or folder")
    declared = declaration(protocol, frames, source_label=f"{fmt}:{Path(src).name}",
                           frames_per_step=frames_per_step, seed=seed, task=task,
                           system=system, layout=layout, path_pattern=path_pattern,
                           allow_many_seeds=allow_many_seeds)
    if fmt not in PACKAGES:
        raise AnalysisError(f"unknown import format {fmt!r}; valid: {', '.join(FORMATS)}")
    notes: list[str] = []
    reader: dict[str, Any] = {"metric": RETURN_KEY, "step": STEP_KEY, **options}
    if fmt == "table":
        # Any other option: the reader's own TypeError, as for every format.
        cols = options.pop("columns", TableColumns())
        runs = read_table_runs(src, declared, cols, **options)
        reader = {"columns": vars(cols)}
    elif fmt == "tensorboard":
        reader = {"tag": RETURN_KEY, "length_tag": LENGTH_KEY, **options}
        runs = read_tensorboard_runs(src, declared, **reader)
    elif fmt == "monitor":
        runs = read_monitor_runs(src, declared, **options)
        reader = {"columns": ["r", "l", "t"]}
    elif fmt == "wandb":
        runs, notes = read_wandb_offline_runs(src, declared, **reader)
    else:
        runs = read_wandb_csv_runs(src, declared, **reader)
    result = write_records(runs, src, out, fmt=fmt, declared=declared, reader=reader,
                           packages=PACKAGES[fmt])
    result.warnings = notes + result.warnings
    return result


__all__ = ["FORMATS", "Declared", "ImportResult", "ImportedRun", "TableColumns", "import_runs"]
