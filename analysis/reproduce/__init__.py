"""Did it reproduce? Your runs against a published table column
(analysis.reproduce.published), against published per-seed runs
(analysis.reproduce.runs), and the report section (analysis.reproduce.section). The
names below are the layer's face: callers import them from analysis.reproduce.
"""

from analysis.reproduce.published import (
    CONSISTENT,
    DEFAULT_ABSOLUTE_MARGIN,
    DEFAULT_RELATIVE_MARGIN,
    HIGHER,
    INCONCLUSIVE,
    LOWER,
    POWER_SIMULATIONS,
    PUBLISHED_SEEDS,
    VERDICTS,
    Aggregate,
    GameResult,
    PublishedColumn,
    ReproduceResult,
    UserScores,
    aggregate,
    budget_against,
    compare_game,
    detectable_shift,
    figure_points,
    game_margin,
    game_verdict,
    match_game,
    power_consistent,
    published_column,
    reproduce,
    user_scores,
    welch_from_summary,
)
from analysis.reproduce.runs import (
    RunsComparison,
    equivalence_power_note,
    reproduce_runs,
)
from analysis.reproduce.section import (
    report_assets,
)

__all__ = [
    "Aggregate",
    "CONSISTENT",
    "DEFAULT_ABSOLUTE_MARGIN",
    "DEFAULT_RELATIVE_MARGIN",
    "GameResult",
    "HIGHER",
    "INCONCLUSIVE",
    "LOWER",
    "POWER_SIMULATIONS",
    "PUBLISHED_SEEDS",
    "PublishedColumn",
    "ReproduceResult",
    "RunsComparison",
    "UserScores",
    "VERDICTS",
    "aggregate",
    "budget_against",
    "compare_game",
    "detectable_shift",
    "equivalence_power_note",
    "figure_points",
    "game_margin",
    "game_verdict",
    "match_game",
    "power_consistent",
    "published_column",
    "report_assets",
    "reproduce",
    "reproduce_runs",
    "user_scores",
    "welch_from_summary",
]
