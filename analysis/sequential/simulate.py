"""Simulated sequential comparisons, decided look by look by the decision cores
(analysis.sequential.rci): the seed planner's sequential power and the calibration
suite's rows both run through here.

Draws hold every seed up to the cap; look k sees the first n_k seeds of each growing
side, as a sweep that adds seeds in batches does. `naive_boundaries` gives the fixed
design's critical value at every look (the fixed verdict re-applied after each batch),
so naive re-testing is the same procedure with unadjusted boundaries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from analysis.sequential.design import SequentialDesign
from analysis.sequential.rci import (
    CONTINUE,
    different_alpha,
    equivalence_decisions,
    gate_decisions,
)
from analysis.stats.welch import welch_stats
from analysis.verdicts.equivalence import PASS
from analysis.verdicts.regression import regression_lower_bound


@dataclass
class Paths:
    """Per simulated comparison (arrays of shape (sims,))."""

    decision: np.ndarray  # the first decision (a verdict word, or UNDECIDED at the cap)
    seeds: np.ndarray  # seeds per growing side when it stopped
    pass_any_look: np.ndarray  # PASS at some look had it never stopped (what RCIs bound)

    @property
    def passed(self) -> np.ndarray:
        return self.decision == PASS


@dataclass(frozen=True)
class Boundaries:
    """Normal-scale boundaries per look: for PASS (and the gate's REGRESSION), and for
    equivalence's DIFFERENT."""

    seeds: list[int]
    passing: np.ndarray
    different: np.ndarray


def design_boundaries(design: SequentialDesign, fixed_seeds: int | None = None
                      ) -> Boundaries:
    """The design's spending boundaries (the gate's: against `fixed_seeds`)."""
    return Boundaries(design.seeds_at_looks(), design.boundaries(fixed_seeds=fixed_seeds),
                      design.boundaries(different_alpha(2, design.alpha)))


def naive_boundaries(design: SequentialDesign) -> Boundaries:
    """The fixed verdicts' critical values at every look (naive re-testing)."""
    seeds = design.seeds_at_looks()
    ones = np.ones(len(seeds))
    return Boundaries(seeds, ones * stats.norm.isf(design.alpha),
                      ones * stats.norm.isf(different_alpha(2, design.alpha)))


def _record(out: Paths, open_: np.ndarray, dec: np.ndarray, n: int) -> np.ndarray:
    """Write the draws that decide at this look; return the still open ones."""
    stop = open_ & (dec != CONTINUE)
    out.decision[stop] = dec[stop]
    out.seeds[stop] = n
    out.pass_any_look |= dec == PASS
    return open_ & ~stop


def _start(sims: int) -> tuple[Paths, np.ndarray]:
    """Every draw still open (CONTINUE, no seeds spent, no PASS yet)."""
    return (Paths(np.full(sims, CONTINUE, dtype=object), np.zeros(sims, dtype=np.int64),
                  np.zeros(sims, dtype=bool)), np.ones(sims, dtype=bool))


def equivalence_paths(b: Boundaries, a: np.ndarray, ref: np.ndarray, delta: float) -> Paths:
    """Sequential equivalence of `a` against `ref`, both (metrics, sims, cap seeds)."""
    out, open_ = _start(a.shape[1])
    for k, n in enumerate(b.seeds):
        per_metric = [welch_stats(a[j, :, :n], ref[j, :, :n]) for j in range(a.shape[0])]
        diff, se, df = (np.stack([s[i] for s in per_metric]) for i in range(3))
        dec, _ = equivalence_decisions(diff, se, df, delta, float(b.passing[k]),
                                       float(b.different[k]), k == len(b.seeds) - 1)
        open_ = _record(out, open_, dec, n)
    return out


def gate_paths(b: Boundaries, new: np.ndarray, ref: np.ndarray, delta: float) -> Paths:
    """The sequential gate of `new` (sims, cap seeds) against a fixed `ref` (sims, m)."""
    out, open_ = _start(new.shape[0])
    for k, n in enumerate(b.seeds):
        diff, _, se, df = regression_lower_bound(new[:, :n], ref)
        dec, _, _ = gate_decisions(diff, se, df, delta, float(b.passing[k]),
                                   k == len(b.seeds) - 1)
        open_ = _record(out, open_, dec, n)
    return out


def normal_metrics(rng: np.random.Generator, sims: int, seeds: int, sds: Sequence[float],
                   correlation: float) -> np.ndarray:
    """(metrics, sims, seeds) normal per-seed values of one side: metric j has sd sds[j];
    every later metric correlates `correlation` with the first."""
    z = rng.standard_normal((len(sds), sims, seeds))
    rho = float(np.clip(correlation, -1.0, 1.0))
    out = [sds[0] * z[0]]
    out += [sd * (rho * z[0] + np.sqrt(1 - rho * rho) * z[j]) for j, sd in
            enumerate(sds[1:], start=1)]
    return np.stack(out)
