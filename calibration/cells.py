"""One row of the calibration table: a verdict's rate in one scenario, with its Monte
Carlo standard error and the bound it must keep (nominal + 3 MC SE), or the refusal that
the verdict gave for that case.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from analysis.errors import AnalysisError

FALSE_PASS = "false pass at margin"
FALSE_ALARM = "false alarm at 0"
POWER = "power at margin/2"
MC_SES = 3.0
"""A cell keeps its bound when its rate <= nominal + MC_SES x the MC SE at the nominal."""


@dataclass(frozen=True)
class Cell:
    verdict: str  # e.g. "gate iqm", "equivalence", "reproduce game", "reproduce headline"
    scenario: str  # e.g. "1 vs 3 seeds, sd ratio 2, normal"
    rate: str  # FALSE_PASS, FALSE_ALARM, POWER, or a scenario-specific label
    value: float  # nan when refused
    sims: int
    nominal: float | None = None  # the rate's nominal bound; None: no bound (power)
    refused: str = ""  # the verdict's refusal (AnalysisError text) for this case
    unit: str = ""  # "" for a rate (binomial MC SE); else what `value` counts, e.g. "seeds"
    value_se: float | None = None  # the MC SE of a value that is not a rate
    shown_only: bool = False  # a procedure shown beside a verdict to break its nominal
    # (naive re-testing): its status says whether it does; it never fails the suite
    at_least: bool = False  # the rate must reach `nominal` (power-like): bound is
    # nominal - 3 MC SE and the value must be >= it
    target: bool = False  # a goal for the verdict, shown met or missed, never failing the
    # suite (e.g. PASS >= 80% at 10 seeds: some published columns are too noisy for it)

    @property
    def mc_se(self) -> float:
        if self.value_se is not None:
            return self.value_se
        if math.isnan(self.value):
            return math.nan
        return math.sqrt(max(self.value * (1 - self.value), 1e-12) / self.sims)

    @property
    def bound(self) -> float | None:
        if self.nominal is None:
            return None
        se = math.sqrt(self.nominal * (1 - self.nominal) / self.sims)
        return self.nominal - MC_SES * se if self.at_least else self.nominal + MC_SES * se

    @property
    def within(self) -> bool:
        b = self.bound
        return b is None or (self.value >= b if self.at_least else self.value <= b)

    @property
    def ok(self) -> bool:
        return bool(self.refused) or self.shown_only or self.target or self.within

    def row(self) -> list[str]:
        if self.refused:
            value, status = "refused", "ok (refused: exit 2)"
        elif self.unit:
            value = (f"{self.value:.2f} {self.unit}" if self.mc_se == 0 else
                     f"{self.value:.2f} ± {self.mc_se:.2f} {self.unit}")
            status = "-"
        else:
            value = f"{self.value:.3f} ± {self.mc_se:.3f}"
            b = self.bound
            sign = ">=" if self.at_least else "<="
            if b is not None and self.target:
                status = (f"target met ({sign} {b:.3f})" if self.within
                          else f"target MISSED (not {sign} {b:.3f})")
            elif b is not None and self.shown_only:
                status = (f"over (> {b:.3f}): not a valid design" if self.value > b
                          else f"within (<= {b:.3f})")
            else:
                status = "-" if b is None else (f"ok ({sign} {b:.3f})" if self.ok
                                                else f"OUT (not {sign} {b:.3f})")
        nominal = "-" if self.nominal is None else (
            f"{'>= ' if self.at_least else ''}{self.nominal:.2f}")
        return [self.verdict, self.scenario, self.rate, value, nominal, status]


def rate_cell(verdict: str, scenario: str, rate: str, hits: np.ndarray | np.bool_,
              nominal: float | None = None) -> Cell:
    """The share of True in `hits` (one bool per simulated draw) as a Cell."""
    hits = np.asarray(hits, dtype=bool).ravel()
    return Cell(verdict, scenario, rate, float(hits.mean()), int(hits.size), nominal)


def mean_cell(verdict: str, scenario: str, rate: str, values: np.ndarray, unit: str
              ) -> Cell:
    """The mean of `values` (one per simulated draw, e.g. seeds used) with its MC SE; no
    bound."""
    values = np.asarray(values, dtype=np.float64).ravel()
    se = float(values.std(ddof=1) / math.sqrt(values.size)) if values.size > 1 else 0.0
    return Cell(verdict, scenario, rate, float(values.mean()), int(values.size), unit=unit,
                value_se=se)


def refused_cells(verdict: str, scenario: str, rates: list[tuple[str, float | None]],
                  why: str, sims: int) -> list[Cell]:
    """The cells of a case the verdict refuses (exit 2): one per rate."""
    return [Cell(verdict, scenario, r, math.nan, sims, nominal, why) for r, nominal in rates]


def case_cells(verdict: str, scenario: str, sims: int,
               cases: Sequence[tuple[str, Any, float | None]],
               hits_at: Callable[[str, Any], np.ndarray]) -> list[Cell]:
    """One cell per case (rate, what the case changes, nominal): the share of draws
    `hits_at(rate, change)` marks; a case the verdict refuses (AnalysisError) refuses
    every rate."""
    out = []
    for rate, change, nominal in cases:
        try:
            hits = hits_at(rate, change)
        except AnalysisError as e:
            return refused_cells(verdict, scenario, [(r, n) for r, _, n in cases], str(e),
                                 sims)
        out.append(rate_cell(verdict, scenario, rate, hits, nominal))
    return out


HEADER = ["verdict", "scenario", "rate", "estimate ± MC SE", "nominal", "bound"]


def markdown(cells: list[Cell]) -> str:
    """The table as markdown (docs/analysis.md)."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(c.row()) + " |" for c in cells]
    return "\n".join(lines)
