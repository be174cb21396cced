"""Analysis: run records and published tables -> normalised scores, aggregate metrics with
stratified bootstrap CIs, verdicts (equivalence, regression gate, staleness), Atari-5
estimates, reproduction checks and figures.

The names below are the stable Python API (for notebooks; docs/analysis.md has a worked
example): the same functions `python -m analysis` calls. Everything else is internal and
may move. Layers, lowest first (each imports only those before it; tests/test_architecture.py):
errors/json_file, stats, scales, inputs, importers, scoring, atari5, verdicts, output, reproduce,
sequential, cli. The Monte Carlo calibration of the verdicts is its own package above
this one (`python -m calibration`).

The names are resolved on first use (PEP 562), so `import analysis` or
`from analysis.errors import AnalysisError` does not load SciPy and matplotlib.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# ruff: noqa: F401 - the imports below are exported by __all__, which ruff cannot read
if TYPE_CHECKING:  # the same names, for type checkers and editors
    from analysis.atari5 import estimate_analysis, load_model
    from analysis.errors import AnalysisError, TooFewSeeds
    from analysis.importers import import_runs
    from analysis.inputs.load import load_records, select_where
    from analysis.inputs.published_data import published_table_names, resolve_published_table
    from analysis.output.report import build_report_assets, write_curves
    from analysis.reproduce import published_column, reproduce_runs
    from analysis.reproduce import report_assets as reproduce_report_assets
    from analysis.reproduce import reproduce as reproduce_published
    from analysis.scoring.grouping import analyse, labelled_groups
    from analysis.scoring.scores import efficiency_curve
    from analysis.scoring.tables import ONE_SEED, aggregate_groups, summary_table
    from analysis.verdicts.compare import equivalence_verdicts, pair_verdicts
    from analysis.verdicts.equivalence import UNDECIDED
    from analysis.verdicts.gate import DEFAULT_GATE_METRIC, GATE_METRICS, gate, suite_gates
    from analysis.verdicts.seedplan import (
        equivalence_seeds_needed,
        given_spread,
        seed_plan_lines,
        spread_from_analysis,
    )
    from analysis.verdicts.staleness import audit

_API: dict[str, str] = {  # name -> "module" or "module:attribute"
    # runs in: run records and openrlbenchmark exports, filtered by manifest values
    "load_records": "analysis.inputs.load",
    "select_where": "analysis.inputs.load",
    # other tools' runs (TensorBoard, Monitor CSV, W&B, tables) -> run records
    "import_runs": "analysis.importers",
    # scores: suites and groups of (seeds x tasks) normalised score matrices
    "analyse": "analysis.scoring.grouping",
    "labelled_groups": "analysis.scoring.grouping",
    "summary_table": "analysis.scoring.tables",
    "aggregate_groups": "analysis.scoring.tables",
    "efficiency_curve": "analysis.scoring.scores",
    "ONE_SEED": "analysis.scoring.tables",  # what a table or line shows for a 1-seed interval
    # verdicts
    "equivalence_verdicts": "analysis.verdicts.compare",
    "pair_verdicts": "analysis.verdicts.compare",
    "gate": "analysis.verdicts.gate",
    "suite_gates": "analysis.verdicts.gate",
    "GATE_METRICS": "analysis.verdicts.gate",
    "DEFAULT_GATE_METRIC": "analysis.verdicts.gate",
    "UNDECIDED": "analysis.verdicts.equivalence",  # a gate's verdict when no rule decides
    "audit": "analysis.verdicts.staleness",
    "given_spread": "analysis.verdicts.seedplan",
    "spread_from_analysis": "analysis.verdicts.seedplan",
    "seed_plan_lines": "analysis.verdicts.seedplan",
    "equivalence_seeds_needed": "analysis.verdicts.seedplan",
    # Atari-5 and reproduction
    "load_model": "analysis.atari5",
    "estimate_analysis": "analysis.atari5",
    "published_column": "analysis.reproduce",
    # the published tables the project ships: names (cleanba:main_10CPU) -> files
    "published_table_names": "analysis.inputs.published_data",
    "resolve_published_table": "analysis.inputs.published_data",
    # (not "reproduce": that is the subpackage analysis.reproduce)
    "reproduce_published": "analysis.reproduce:reproduce",
    "reproduce_runs": "analysis.reproduce",
    "reproduce_report_assets": "analysis.reproduce:report_assets",
    # files: figures, tables, verdict JSONs
    "write_curves": "analysis.output.report",
    "build_report_assets": "analysis.output.report",
    "AnalysisError": "analysis.errors",
    "TooFewSeeds": "analysis.errors",
}

__all__ = list(_API)  # written once: the keys of _API are the public names


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'analysis' has no attribute {name!r}")
    module, _, attribute = _API[name].partition(":")
    value = getattr(importlib.import_module(module), attribute or name)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
