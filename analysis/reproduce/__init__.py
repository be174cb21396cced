"""Did it reproduce? Your runs against a published table column
(analysis.reproduce.published), against published per-seed runs
(analysis.reproduce.runs), and the report section (analysis.reproduce.section). The
names below are the layer's face: callers import them from analysis.reproduce.
"""

from analysis.reproduce.judge import (
    CONSISTENT,
    HIGHER,
    INCONCLUSIVE,
    LOWER,
    NOT_LEARNED,
    judge,
    reproduced,
)
from analysis.reproduce.published import (
    DEFAULT_ABSOLUTE_MARGIN,
    DEFAULT_RELATIVE_MARGIN,
    PUBLISHED_SEEDS,
    VERDICTS,
    Aggregate,
    GameResult,
    PublishedColumn,
    ReproduceResult,
    UserScores,
    aggregate,
    budget_against,
    compare_games,
    match_game,
    published_column,
    reproduce,
    user_scores,
)
from analysis.reproduce.runs import (
    RunsComparison,
    equivalence_power_note,
    imported_runs,
    only_games,
    reproduce_runs,
)
from analysis.reproduce.section import (
    figure_points,
    published_rows,
    report_assets,
    runs_rows,
    write_published_comparison,
    write_runs_comparison,
)
from analysis.reproduce.summary_stats import (
    POWER_SIMULATIONS,
    detectable_shift,
    game_margin,
    game_verdict,
    power_consistent,
    welch_from_summary,
)

__all__ = [
    "imported_runs",
    "only_games",
    "write_published_comparison",
    "write_runs_comparison",
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
    "compare_games",
    "judge",
    "reproduced",
    "NOT_LEARNED",
    "detectable_shift",
    "equivalence_power_note",
    "figure_points",
    "game_margin",
    "game_verdict",
    "match_game",
    "power_consistent",
    "published_rows",
    "published_column",
    "report_assets",
    "reproduce",
    "reproduce_runs",
    "runs_rows",
    "user_scores",
    "welch_from_summary",
]
