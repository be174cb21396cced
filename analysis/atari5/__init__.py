"""Atari-5 (Aitchison et al. 2023): the 57-game median HNS estimated from five games.

The model (analysis.atari5.model: fit, validation, the stored JSON), the estimates
from runs and published tables (analysis.atari5.estimate), and the refit entry point
(`python -m analysis.atari5.fit`). The names below are the layer's face: callers import
them from analysis.atari5.
"""

from analysis.atari5.estimate import (
    estimate_analysis,
    estimate_from_seeds,
    estimate_groups,
    estimate_lines,
    estimate_published_table,
    estimate_suite,
    per_seed_estimate,
    published_estimates_table,
    report_table,
)
from analysis.atari5.model import (
    ATARI3,
    ATARI5,
    MODEL_FILE,
    PAPER,
    PAPER_MIN_GAMES,
    SUBSETS,
    PublishedScores,
    fit_model,
    fit_report,
    holdout_coverage,
    inverse_transform,
    least_squares,
    load_model,
    out_of_sample,
    read_dataset,
    relative_error_percent,
    training_set,
)

__all__ = [
    "ATARI3",
    "ATARI5",
    "MODEL_FILE",
    "PAPER",
    "PAPER_MIN_GAMES",
    "PublishedScores",
    "SUBSETS",
    "estimate_from_seeds",
    "estimate_analysis",
    "estimate_groups",
    "estimate_lines",
    "estimate_published_table",
    "estimate_suite",
    "fit_model",
    "fit_report",
    "holdout_coverage",
    "inverse_transform",
    "least_squares",
    "load_model",
    "out_of_sample",
    "per_seed_estimate",
    "published_estimates_table",
    "read_dataset",
    "relative_error_percent",
    "report_table",
    "training_set",
]
