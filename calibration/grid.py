"""The calibration grid (full and reduced) and its result."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from analysis.sequential.design import SequentialDesign
from calibration.cells import Cell, markdown
from calibration.columns import default_paper_data, published_columns
from calibration.curve_cells import CurveCalibration, Setting, curve_cells
from calibration.curve_shapes import load_shapes
from calibration.draws import COLLAPSE, NORMAL, T3
from calibration.paired_cells import paired_cells
from calibration.pairs import (
    equivalence_pair_cells,
    gate_pair_cells,
    gate_published_cells,
)
from calibration.real_cells import real_column_cells, summary_rows
from calibration.reproduce_cells import game_cells, headline_cells
from calibration.sequential_cells import (
    WIDE_DELTA_SD,
    sequential_equivalence_cells,
    sequential_gate_cells,
)
from calibration.suite import suite_gate_cells

FULL_SIMS = 20_000
REDUCED_SIMS = 4_000


@dataclass(frozen=True)
class Grid:
    sims: int
    new_seeds: tuple[int, ...]
    reference_seeds: tuple[int, ...]
    ratios: tuple[float, ...]
    tails: tuple[tuple[int, int], ...]  # (n, m) pairs run with t3 and collapsed seeds
    published_new: tuple[int, ...]
    suite_seeds: tuple[tuple[int, int], ...]
    reproduce_seeds: tuple[int, ...]
    headline_sims: int
    sequential: tuple[tuple[str, float, str], ...] = ()  # (spending, sd ratio, noise)
    sequential_references: tuple[int, ...] = ()  # the gate's fixed reference seeds
    sequential_wide: tuple[tuple[str, float], ...] = ()  # (spending, sd ratio): equivalence
    # at WIDE_DELTA_SD, normal noise (the repeated bound's worst case)
    real_sims: int = 0  # draws per published-column cell (calibration.real_cells)
    paired_seeds: tuple[int, ...] = ()  # seeds per side of the paired-by-seed rows
    curve_sims: int = 0  # replicates per cell of the looks over training time
    curve_settings: tuple[Setting, ...] = ()  # per real curve shape (curve_cells)
    curve_shapes: str = ""  # only the shapes whose name contains this ("" all)
    curve_qq: tuple[int, ...] = ()  # seeds per side of the QQ-plot


SEQUENTIAL_DESIGN = SequentialDesign(3, 2, 9)
"""The sequential rows' design (the default: looks at 3, 5, 7, 9 seeds per side)."""


FULL = Grid(FULL_SIMS, (1, 2, 3, 5, 10), (1, 3, 12), (0.5, 1.0, 2.0),
            ((3, 3), (5, 5), (10, 10)), (2, 3, 5, 10), ((3, 3), (5, 5), (10, 10)),
            (1, 2, 3, 5, 10), 4_000,
            tuple((sp, r, d) for sp in ("obrien-fleming", "pocock")
                  for r, d in ((1.0, NORMAL), (2.0, NORMAL), (1.0, T3), (1.0, COLLAPSE))),
            (3, 9),
            tuple((sp, r) for sp in ("obrien-fleming", "pocock") for r in (1.0, 0.5, 2.0)),
            2_000, (3, 5, 10), 2_000,
            (Setting(3, 3, 0.3, heavy_null=True), Setting(5, 5, 0.3),
             Setting(10, 10, 0.3, heavy_null=True), Setting(3, 10, 0.3),
             Setting(10, 10, 0.15), Setting(3, 3, 0.15, cases=False),
             Setting(10, 10, 0.3, "obrien-fleming"),
             Setting(3, 3, 0.3, "obrien-fleming", cases=False)), "", (3, 5, 10))
REDUCED = Grid(REDUCED_SIMS, (1, 2, 3, 10), (1, 3, 12), (0.5, 2.0), ((3, 3),), (3, 10),
               ((3, 3),), (1, 3, 10), 1_000,
               (("obrien-fleming", 1.0, NORMAL), ("obrien-fleming", 1.0, T3),
                ("pocock", 1.0, NORMAL)), (9,), (("obrien-fleming", 1.0),), 300, (3,), 400,
               (Setting(3, 3, 0.3, heavy_null=True), Setting(10, 10, 0.3, cases=False)),
               "cleanba-ppo")


@dataclass
class Calibration:
    cells: list[Cell]
    grid: Grid
    seed: int
    seconds: float
    notes: list[str] = field(default_factory=list)
    curve: CurveCalibration | None = None  # the looks over training time (their tables)

    @property
    def failures(self) -> list[Cell]:
        return [c for c in self.cells if not c.ok]

    def markdown(self) -> str:
        return markdown(self.cells)

    def summary(self) -> str:
        bad = self.failures
        bounded = sum(c.bound is not None and not c.refused for c in self.cells)
        refused = sum(bool(c.refused) for c in self.cells)
        return (f"calibration: {len(self.cells)} cells ({bounded} with a bound, {refused} "
                f"refused), {len(bad)} out of bound; {self.grid.sims} draws per cell, seed "
                f"{self.seed}, {self.seconds:.0f} s")

    def real_column_summary(self) -> list[str]:
        """The published columns' rates: mean over columns and the worst column."""
        return summary_rows(self.cells) + self.notes


def calibrate(reduced: bool = False, seed: int = 0, paper_data: Path | None = None,
              curve_folders: list[Path] | None = None) -> Calibration:
    """The grid; paper_data: the published tables' folder (None: the shipped Cleanba
    tables; where there are none the real-column rows are left out, and a note says so).
    curve_folders: run records whose learning curves the looks over training time are
    calibrated on (None: the project's CartPole records)."""
    g = REDUCED if reduced else FULL
    t0 = time.perf_counter()
    cells: list[Cell] = []
    notes: list[str] = []
    folder = paper_data or default_paper_data()
    if folder is None:
        notes.append("real-column rows left out: no paper-data folder (give --paper-data)")
    else:
        cells += real_column_cells(published_columns(folder), g.real_sims, seed)
    pair_cases = [*((n, m, r, NORMAL) for n in g.new_seeds for m in g.reference_seeds
                    for r in g.ratios),
                  *((n, m, 1.0, dist) for n, m in g.tails for dist in (T3, COLLAPSE))]
    for n, m, r, dist in pair_cases:  # (seeds per side, sd ratio, noise)
        cells += gate_pair_cells(g.sims, n, m, r, dist, seed)
        cells += equivalence_pair_cells(g.sims, n, m, r, dist, seed)
    for n in g.published_new:
        for r in g.ratios:
            cells += gate_published_cells(g.sims, n, 3, r, seed)
    cells += paired_cells(g.sims, g.paired_seeds, seed)
    for n, m in g.suite_seeds:
        cells += suite_gate_cells(g.headline_sims, n, m, seed)
    for n in g.reproduce_seeds:
        cells += game_cells(g.headline_sims, n, seed)
    for r in (0.5, 2.0):
        cells += game_cells(g.headline_sims, 3, seed, ratio=r)
    for n in g.reproduce_seeds:
        cells += headline_cells(g.headline_sims, n, seed)
    for spending, ratio, dist in g.sequential:
        design = replace(SEQUENTIAL_DESIGN, spending=spending)
        cells += sequential_equivalence_cells(g.sims, design, ratio, dist, seed)
        for m in g.sequential_references:
            cells += sequential_gate_cells(g.sims, design, m, ratio, dist, seed)
    for spending, ratio in g.sequential_wide:
        design = replace(SEQUENTIAL_DESIGN, spending=spending)
        cells += sequential_equivalence_cells(g.sims, design, ratio, NORMAL, seed,
                                              WIDE_DELTA_SD)
    curve = None
    if g.curve_sims:
        shapes = [s for s in load_shapes(curve_folders) if g.curve_shapes in s.name]
        if not shapes:
            notes.append("looks over training time: no curve shape (a system and game with "
                         ">= 4 seeds of run records); give --curves")
        else:
            curve = curve_cells(shapes, g.curve_sims, seed, g.curve_settings,
                                qq_seeds=g.curve_qq)
            cells += curve.cells
    return Calibration(cells, g, seed, time.perf_counter() - t0, notes, curve)
