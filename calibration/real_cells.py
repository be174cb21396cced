"""Calibration on the published tables' own columns (calibration.columns): every
column of the paper's tables, per-seed scores drawn normal around its per-game means
with its per-game spreads, decided by the verdicts' own vectorised cores (the gate's
`gate_rules`, `reproduce`'s `judge` and `headline`).

Rows per column:
- the gate at no change, 3 seeds a side: REGRESSION (target <= 5%), the per-game rule's
  and the COLLAPSED rule's family-wise false flags (bounds: 5% and 1% + 3 MC SE);
- the gate at no change, 10 seeds a side: PASS (target >= 80%);
- the gate with one clearly learned game collapsed, 5 seeds a side: REGRESSION
  (target >= 95%); an improvement (+10% on every game, 3 seeds): REGRESSION (bound 5%);
- `reproduce` faithful, 3 seeds: NOT REPRODUCED (target <= 5%), HIGHER/LOWER and
  COLLAPSED family-wise false flags (bounds); REPRODUCED at 3, 5 and 10 of your seeds
  (target >= 50% at 5); one learned game collapsed: NOT REPRODUCED (target >= 95%).
A target is shown met or missed and never fails the suite (some published columns are
too noisy to reach it at these seed counts: the table says by how much); a bound does.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from analysis.reproduce.judge import (
    COLLAPSED,
    HIGHER,
    LOWER,
    NOT_REPRODUCED,
    REPRODUCED,
    Judgement,
    headline,
)
from analysis.verdicts.equivalence import PASS, REGRESSION
from analysis.verdicts.margins import ATARI_DEFAULT_DELTA
from analysis.verdicts.regression import COLLAPSE_RULE, PER_GAME_RULE, gate_rules
from calibration.cells import Cell, rate_cell
from calibration.columns import (
    PUBLISHED_SEEDS,
    Column,
    collapse_one,
    draw_seeds,
)
from calibration.draws import rng_for
from calibration.reproduce_cells import judge_draws
from runrecord.words import counted

NOMINAL = 0.05
COLLAPSE_NOMINAL = 0.01
GATE = "gate, real column"
REPRODUCE = "reproduce, real column"
IMPROVEMENT = 1.10


def _target(cell: Cell, at_least: bool = False) -> Cell:
    return replace(cell, target=True, at_least=at_least)


def _judge(user: np.ndarray, pub: np.ndarray) -> Judgement:
    """`reproduce`'s verdicts of your draws against published seeds' draws."""
    return judge_draws(user, pub.mean(-2), pub.std(-2, ddof=1))


def gate_column_cells(col: Column, sims: int, seed: int, delta: float = ATARI_DEFAULT_DELTA
                      ) -> list[Cell]:
    rng = rng_for(seed, "real gate", col.name)
    games = list(col.games)
    out: list[Cell] = []
    new, ref = draw_seeds(rng, col, sims, 3), draw_seeds(rng, col, sims, 3)
    verdicts, fired = gate_rules(new, ref, games, delta)
    scen = f"{col.name}; 3 vs 3 seeds"
    out += [_target(rate_cell(GATE, scen, "REGRESSION at no change",
                              verdicts == REGRESSION, NOMINAL)),
            rate_cell(GATE, scen, "UNDECIDED at no change", verdicts != PASS),
            rate_cell(GATE, scen, "per-game rule fires at no change", fired[PER_GAME_RULE],
                      NOMINAL),
            rate_cell(GATE, scen, "COLLAPSED at no change", fired[COLLAPSE_RULE],
                      COLLAPSE_NOMINAL)]
    better, _ = gate_rules(new * IMPROVEMENT, ref, games, delta)
    out.append(rate_cell(GATE, scen, f"REGRESSION, every game x{IMPROVEMENT:g}",
                         better == REGRESSION, NOMINAL))
    new, ref = draw_seeds(rng, col, sims, 10), draw_seeds(rng, col, sims, 10)
    verdicts, _ = gate_rules(new, ref, games, delta)
    out.append(_target(rate_cell(GATE, f"{col.name}; 10 vs 10 seeds", "PASS at no change",
                                 verdicts == PASS, 0.80), at_least=True))
    new, ref = draw_seeds(rng, col, sims, 5), draw_seeds(rng, col, sims, 5)
    broken, _ = collapse_one(rng, col, new)
    verdicts, _ = gate_rules(broken, ref, games, delta)
    out.append(_target(rate_cell(GATE, f"{col.name}; 5 vs 5 seeds",
                                 "REGRESSION, one learned game collapsed",
                                 verdicts == REGRESSION, 0.95), at_least=True))
    return out


def reproduce_column_cells(col: Column, sims: int, seed: int,
                           seeds: tuple[int, ...] = (3, 5, 10)) -> list[Cell]:
    rng = rng_for(seed, "real reproduce", col.name)
    out: list[Cell] = []
    for n in seeds:
        scen = f"{col.name}; {n} seeds vs published 3"
        pub, user = draw_seeds(rng, col, sims, PUBLISHED_SEEDS), draw_seeds(rng, col, sims, n)
        j = _judge(user, pub)
        head = headline(j)
        out.append(_target(rate_cell(REPRODUCE, scen, "REPRODUCED, faithful",
                                     head == REPRODUCED, 0.50 if n == 5 else None),
                           at_least=True))
        if n != 3:
            continue
        out += [_target(rate_cell(REPRODUCE, scen, "NOT REPRODUCED, faithful",
                                  head == NOT_REPRODUCED, NOMINAL)),
                rate_cell(REPRODUCE, scen, "HIGHER/LOWER on any game, faithful",
                          np.isin(j.verdict, (HIGHER, LOWER)).any(-1), NOMINAL),
                rate_cell(REPRODUCE, scen, "COLLAPSED on any game, faithful",
                          (j.verdict == COLLAPSED).any(-1), COLLAPSE_NOMINAL)]
        broken, _ = collapse_one(rng, col, user)
        out.append(_target(rate_cell(REPRODUCE, scen, "NOT REPRODUCED, one game collapsed",
                                     headline(_judge(broken, pub)) == NOT_REPRODUCED, 0.95),
                           at_least=True))
    return out


def real_column_cells(columns: list[Column], sims: int, seed: int) -> list[Cell]:
    """Every column's gate and `reproduce` rows."""
    out: list[Cell] = []
    for col in columns:
        out += gate_column_cells(col, sims, seed)
        out += reproduce_column_cells(col, sims, seed)
    return out


def summary_rows(cells: list[Cell]) -> list[str]:
    """Per rate: the mean over columns and the worst column (the closing numbers)."""
    by_rate: dict[tuple[str, str, str], list[Cell]] = {}
    for c in cells:
        if c.verdict in (GATE, REPRODUCE):
            seeds = c.scenario.split("; ", 1)[1]
            by_rate.setdefault((c.verdict, seeds, c.rate), []).append(c)
    lines = []
    for (verdict, seeds, rate), group in by_rate.items():
        values = np.array([c.value for c in group])
        worst = group[int(np.argmin(values) if group[0].at_least else np.argmax(values))]
        missed = sum(not c.within for c in group if c.nominal is not None)
        kind = "target" if group[0].target else "bound (+ 3 MC SE)"
        goal = "" if group[0].nominal is None else (
            f"; {kind} {'>=' if group[0].at_least else '<='} {group[0].nominal:.2f} missed "
            f"on {missed} of {counted(len(group), 'column')}")
        lines.append(f"{verdict}, {seeds}: {rate}: mean over {len(group)} columns "
                     f"{values.mean():.3f}, worst {worst.value:.3f} ({worst.scenario.split('; ')[0]})"
                     + goal)
    return lines
