"""`reproduce`'s rows as a table (analysis.output.tables): per game against a published
column, or per group against published runs (the equivalence rows)."""

from __future__ import annotations

from analysis.output.table_rows import equivalence_rows
from analysis.output.tables import Column, Estimate, TableRows
from analysis.reproduce.published import ReproduceResult
from analysis.reproduce.runs import RunsComparison

GAME_COLUMNS = (
    Column("game", "game"), Column("published_hns", "published HNS", "number"),
    Column("user_hns", "your HNS", "number"),
    Column("diff", "difference [90% CI]", "estimate", signed=True),
    Column("margin", "margin", "number"), Column("seeds", "your seeds", "count"),
    Column("published_seeds", "published seeds", "count"), Column("verdict", "verdict"))


def published_rows(res: ReproduceResult) -> TableRows:
    """One row per game: both HNS, your - published with its 90% CI (what CONSISTENT
    reads), the game's margin, the seeds and the verdict."""
    return TableRows(GAME_COLUMNS, [
        {"game": g.game, "published_hns": g.published_hns, "user_hns": g.user_hns,
         "diff": Estimate(g.welch.diff, g.welch.ci90[0], g.welch.ci90[1]),
         "margin": g.margin, "seeds": len(g.seeds), "published_seeds": g.published_n,
         "verdict": g.verdict} for g in res.games])


def runs_rows(comp: RunsComparison) -> TableRows:
    """Two rows per group of yours (final score and AUC), as `equivalence` has them."""
    return equivalence_rows([r.as_dict() for r in comp.results])
