"""Calibration of the gate on a 57-game suite, per gate metric (GATE_METRICS: iqm,
auc, atari5-median): a published-like column (calibration.draws.
synthetic_column) with per-seed noise per game, decided by the gate's own rules
(analysis.verdicts.regression.gate_rules), three outcomes: a PASS at the margin is a
false pass, a REGRESSION at no difference a false alarm (UNDECIDED is neither).

Rates: at the margin (the per-seed metric of the new side lowered by delta after it is
computed, so the true difference is exactly -delta in the metric's own units), at no
difference, at delta / 2, and with some games regressing: the nine highest-scoring
games halved, or three learned games collapsed to the random score (a PASS there is a
missed per-game regression; reported with no nominal bound: it is 1 - power).
"""

from __future__ import annotations

import numpy as np

from analysis.verdicts.equivalence import PASS, REGRESSION, UNDECIDED
from analysis.verdicts.margins import ATARI_DEFAULT_DELTA
from analysis.verdicts.regression import gate_rules
from analysis.verdicts.seed_pairing import SEED_METRICS
from calibration.cells import FALSE_ALARM, FALSE_PASS, POWER, Cell, rate_cell
from calibration.draws import rng_for, suite_games, synthetic_column

NOMINAL = 0.05
TOP_GAMES = 9
COLLAPSED_GAMES = 3
AUC_FRACTION = 0.6
"""The AUC matrix: the final-score matrix x this (a learning curve's area is below its
end); the same test as iqm on other numbers."""

TOP_HALVED = f"pass, top {TOP_GAMES} games halved"
FEW_COLLAPSED = f"pass, {COLLAPSED_GAMES} games collapsed"


def _matrices(rng: np.random.Generator, sims: int, n: int, mean: np.ndarray,
              sd: np.ndarray) -> np.ndarray:
    return mean + sd * rng.standard_normal((sims, n, mean.size))


def suite_gate_cells(sims: int, n_new: int, n_ref: int, seed: int,
                     metrics: tuple[str, ...] = ("iqm", "auc", "atari5-median"),
                     delta: float = ATARI_DEFAULT_DELTA) -> list[Cell]:
    games = suite_games()
    mean, sd = synthetic_column(seed)
    order = np.argsort(mean)
    top = order[-TOP_GAMES:]
    learned = order[len(order) // 2: len(order) // 2 + COLLAPSED_GAMES]
    out: list[Cell] = []
    for name in metrics:
        metric = SEED_METRICS["iqm" if name == "auc" else name]
        scale = AUC_FRACTION if name == "auc" else 1.0
        verdict = f"gate {name} (57 games)"
        scen = f"{n_new} vs {n_ref} seeds"
        rng = rng_for(seed, "suite", name, n_new, n_ref)
        new = scale * _matrices(rng, sims, n_new, mean, sd)
        ref = scale * _matrices(rng, sims, n_ref, mean, sd)
        for rate, shift, nominal in ((FALSE_PASS, -delta, NOMINAL), (FALSE_ALARM, 0.0, None),
                                     (POWER, -delta / 2, None)):
            verdicts, _ = gate_rules(new, ref, games, delta, metric=metric,
                                     new_metric_shift=shift)
            out.append(rate_cell(verdict, scen, rate, verdicts == REGRESSION
                                 if rate == FALSE_ALARM else verdicts == PASS, nominal))
            if rate == FALSE_ALARM:
                out.append(rate_cell(verdict, scen, "UNDECIDED at 0", verdicts == UNDECIDED))
        for label, changed in ((TOP_HALVED, _halved(new, top)),
                               (FEW_COLLAPSED, _collapsed(new, learned))):
            verdicts, _ = gate_rules(changed, ref, games, delta, metric=metric)
            out.append(rate_cell(verdict, scen, label, verdicts == PASS))
            out.append(rate_cell(verdict, scen, label.replace("pass", "REGRESSION"),
                                 verdicts == REGRESSION))
    return out


def _halved(new: np.ndarray, games: np.ndarray) -> np.ndarray:
    out = new.copy()
    out[..., games] *= 0.5
    return out


def _collapsed(new: np.ndarray, games: np.ndarray) -> np.ndarray:
    out = new.copy()
    out[..., games] = 0.0
    return out
