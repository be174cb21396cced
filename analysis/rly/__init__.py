"""A drop-in for rliable 1.2.0 (archived October 2025) on this project's vectorised
stratified bootstrap: `from analysis import rly`.

Either keep a notebook's imports and change the package::

    from analysis.rly import library as rly, metrics, plot_utils

or call everything from one namespace: `rly.get_interval_estimates(...)`,
`rly.aggregate_iqm`, `rly.plot_interval_estimates(...)`. Scores are rliable's dicts:
{algorithm: (runs, tasks)} or, for curves, (runs, tasks, points).

What it adds (docs/from-rliable.md): rows checked to be seeds (SeedWarning for episodes
stacked as runs, copies of a seed, or too few seeds; an error for NaN), the same CIs on
every call (random_state honoured, seed 0 by default), tens of times faster, and the
verdicts one call away: rly.equivalence and rly.regression.
"""

from __future__ import annotations

from analysis.rly import bootstraps, library, metrics, plot_utils
from analysis.rly.checks import Equivalence, SeedWarning, check_scores, equivalence, regression
from analysis.rly.library import (
    StratifiedBootstrap,
    StratifiedIndependentBootstrap,
    create_performance_profile,
    get_interval_estimates,
)
from analysis.rly.metrics import (
    aggregate_iqm,
    aggregate_mean,
    aggregate_median,
    aggregate_optimality_gap,
    probability_of_improvement,
)
from analysis.rly.plot_utils import (
    plot_interval_estimates,
    plot_performance_profiles,
    plot_probability_of_improvement,
    plot_sample_efficiency_curve,
)

__all__ = [
    "Equivalence",
    "SeedWarning",
    "StratifiedBootstrap",
    "StratifiedIndependentBootstrap",
    "aggregate_iqm",
    "aggregate_mean",
    "aggregate_median",
    "aggregate_optimality_gap",
    "bootstraps",
    "check_scores",
    "create_performance_profile",
    "equivalence",
    "get_interval_estimates",
    "library",
    "metrics",
    "plot_interval_estimates",
    "plot_performance_profiles",
    "plot_probability_of_improvement",
    "plot_sample_efficiency_curve",
    "plot_utils",
    "probability_of_improvement",
    "regression",
]
