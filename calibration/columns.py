"""The published tables' own columns as calibration scenarios: per game the mean and the
per-seed spread (sample sd, ddof=1, from the table's ddof=0 std of 3 seeds) on the HNS
scale, for every column of every `mean ± std` table in the paper-data folder (default:
the Cleanba paper's tables the project ships, analysis/data/published/cleanba). These
columns have what the synthetic one lacks: per-game coefficients of variation from 0 to over 100%, games near
or below the random score, negative random scores and published spreads of exactly 0.
Pure NumPy draws; no verdict logic here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from analysis.errors import AnalysisError
from analysis.inputs.load import load_published_table
from analysis.inputs.published_data import CLEANBA_TABLES
from analysis.reproduce.published import PUBLISHED_SEEDS
from analysis.scales.normalize import get_normaliser
from analysis.verdicts.per_game import COLLAPSE_T, LEARNED_MIN


@dataclass(frozen=True)
class Column:
    name: str  # "<table stem>: <column>"
    games: tuple[str, ...]
    mean: np.ndarray  # HNS per game
    sd: np.ndarray  # per-seed sd (ddof=1), HNS per game


def default_paper_data() -> Path | None:
    """The shipped tables' folder (package data), or None where an install left it out."""
    return CLEANBA_TABLES if CLEANBA_TABLES.is_dir() else None


def published_columns(folder: Path) -> list[Column]:
    """Every distinct column of the folder's score tables (runtime tables left out; a
    column repeated in another table counted once), on the HNS scale."""
    tables = sorted(p for p in Path(folder).glob("*.csv") if not p.stem.endswith("_runtimes"))
    if not tables:
        raise AnalysisError(f"{folder}: no published score tables (*.csv)")
    out: list[Column] = []
    seen: set[tuple] = set()
    for path in tables:
        t = load_published_table(path)
        for j, col in enumerate(t.columns):
            mean, std = t.mean[:, j], t.std[:, j]
            keep = ~np.isnan(mean) & ~np.isnan(std)
            games = tuple(g for g, k in zip(t.games, keep, strict=True) if k)
            norms = [get_normaliser(g) for g in games]
            span = np.array([abs(n.high - n.low) for n in norms])
            low = np.array([n.low for n in norms])
            hns = (mean[keep] - low) / span
            sd = std[keep] * math.sqrt(PUBLISHED_SEEDS / (PUBLISHED_SEEDS - 1)) / span
            key = (games, tuple(np.round(hns, 6)))
            if key in seen:
                continue
            seen.add(key)
            out.append(Column(f"{path.stem}: {col}", games, hns, sd))
    return out


def learned_truth(col: Column, learned_min: float = LEARNED_MIN,
                  learned_t: float = COLLAPSE_T) -> np.ndarray:
    """Games the column's agent clearly learned on every seed (true mean above
    `learned_t` per-seed sds and above `learned_min` HNS): the games a collapse is put
    on (a game whose seeds learn only sometimes can sit at random by chance)."""
    return (col.mean > learned_min) & (col.mean > learned_t * col.sd)


def draw_seeds(rng: np.random.Generator, col: Column, sims: int, seeds: int,
               ratio: float = 1.0) -> np.ndarray:
    """(sims, seeds, games) per-seed HNS: normal around the column's means with its
    per-game sd x `ratio` (sd 0 gives every seed the mean)."""
    return col.mean + ratio * col.sd * rng.standard_normal((sims, seeds, col.mean.size))


def collapse_one(rng: np.random.Generator, col: Column, values: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(values with one clearly learned game per draw at the random score, within a
    random agent's noise (HNS sd 0.005), the game index per draw)."""
    learned = np.flatnonzero(learned_truth(col))
    if learned.size == 0:
        raise AnalysisError(f"{col.name}: no clearly learned game to collapse")
    sims = values.shape[0]
    which = learned[rng.integers(0, learned.size, sims)]
    out = values.copy()
    out[np.arange(sims), :, which] = 0.005 * rng.standard_normal((sims, values.shape[1]))
    return out, which
