"""Calibration of the looks over training time (analysis.sequential.curves), on real
curve shapes (calibration.curve_shapes), decided replicate by replicate with
the verdict's own pieces: the look's contrast and fail rule (curves), the plan's
boundaries (curves.plan_boundaries: estimated correlation, canonical or union),
and at the full budget the fixed gate's rules (analysis.verdicts.regression.gate_rules).

Rates: the false-fail rate over all looks (REGRESSION at any look) with no change and at
the margin (the candidate's curve (1 - rho) x the reference's: every look's null at its
boundary), against alpha; by look, the cumulative false-fail rate against the planned
alpha(t) with Clopper-Pearson 95% intervals; for five regressions the detection rate
and the frames to decision (the decided look's share of the budget; 1 when it ran to
the end), hence the frames saved against the fixed budget; and the look statistics'
quantiles at 3, 5 and 10 seeds (QQ: is Student t at Welch's df right?).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from scipy import stats

from analysis.sequential.curves import (
    CurveDesign,
    curve_contrast,
    fails,
    min_reference_seeds,
    plan_boundaries,
)
from analysis.sequential.design import CURVE_VERDICT
from analysis.sequential.spending import CANONICAL, ESTIMATED, UNION, spent_alpha
from analysis.verdicts.equivalence import PASS
from analysis.verdicts.regression import AGGREGATE_RULE, gate_rules
from analysis.verdicts.seed_pairing import iqm_over_tasks
from calibration.cells import Cell, mean_cell, rate_cell
from calibration.curve_shapes import GRID, Shape
from calibration.draws import rng_for

NOMINAL = 0.05
LOOKS = (0.1, 0.2, 0.3, 0.5, 0.7, 1.0)
NO_CHANGE, MARGIN = "no change", "at the margin"
SHIFT, COLLAPSE, SLOWER, ONE_GAME, FAILURES = (
    "early constant shift (delta)", "collapse after 60% of the frames",
    "slower learning, same final score", "one game of five failing",
    "heavy-tailed seed failures (40% of seeds never learn)")
CASES = (SHIFT, COLLAPSE, SLOWER, ONE_GAME, FAILURES)
FAILURE_SHARE = 0.4
SUITE_LEVELS = (0.5, 1.0, 1.5, 2.5, 4.0)
"""Five games for ONE_GAME: the shapes scaled to these levels (x its final mean)."""
QMC_POINTS = 2**14
"""Points of the joint law per estimated plan (one plan per replicate)."""


@dataclass
class ByLook:
    """Cumulative false-fail rate by look for one cell (CP 95% intervals)."""

    scenario: str
    case: str
    method: str
    fractions: list[float]
    alpha_t: list[float]
    rate: list[float]
    low: list[float]
    high: list[float]
    sims: int


@dataclass
class Detection:
    scenario: str
    case: str
    detected: float  # REGRESSION at any look
    passed: float
    frames: float  # mean share of the budget spent (decided look; 1 when run to the end)
    frames_se: float
    sims: int


@dataclass
class CurveCalibration:
    cells: list[Cell] = field(default_factory=list)
    by_look: list[ByLook] = field(default_factory=list)
    detection: list[Detection] = field(default_factory=list)
    qq: dict[int, np.ndarray] = field(default_factory=dict)  # seeds -> z of the look stats
    qq_raw: dict[int, np.ndarray] = field(default_factory=dict)  # seeds -> raw t stats
    shapes: list[str] = field(default_factory=list)


def clopper_pearson(hits: int, n: int, level: float = 0.95) -> tuple[float, float]:
    a = (1 - level) / 2
    low = 0.0 if hits == 0 else float(stats.beta.ppf(a, hits, n - hits + 1))
    high = 1.0 if hits == n else float(stats.beta.ppf(1 - a, hits + 1, n - hits))
    return low, high


def _metric(values: np.ndarray) -> np.ndarray:
    """The gate's per-seed metric (IQM over games) of (..., games) -> (...)."""
    flat = values.reshape(-1, values.shape[-1])
    tasks = [f"game{j}" for j in range(values.shape[-1])]
    return np.asarray(iqm_over_tasks(flat, tasks)).reshape(values.shape[:-1])


@dataclass(frozen=True)
class Outcome:
    first: np.ndarray  # (sims,) index of the first REGRESSION look, -1 none
    passed: np.ndarray  # (sims,) PASS at the full budget
    z: np.ndarray  # (sims, K) the looks' t statistics carried to N(0, 1) (PIT)
    t: np.ndarray  # (sims, K) raw contrast / se


def decide(new: np.ndarray, ref: np.ndarray, cols: np.ndarray, delta: float,
           boundaries: np.ndarray) -> Outcome:
    """Every replicate's looks: new (sims, n, P, games), ref (sims, m, P, games) on the
    grid; cols: the grid columns of the looks (the last: the full budget); boundaries
    (K,) or (sims, K) on the normal scale."""
    a, b = _metric(new[:, :, cols, :]), _metric(ref[:, :, cols, :])  # (sims, seeds, K)
    big_b = b[:, :, -1]
    k_looks = len(cols)
    c = np.broadcast_to(boundaries, (a.shape[0], k_looks))
    failed = np.zeros((a.shape[0], k_looks), dtype=bool)
    z = np.empty((a.shape[0], k_looks))
    t = np.empty((a.shape[0], k_looks))
    for k in range(k_looks):
        contrast, se, df, _ = curve_contrast(a[:, :, k], b[:, :, k], big_b, delta)
        failed[:, k] = fails(contrast, se, df, c[:, k])
        with np.errstate(divide="ignore", invalid="ignore"):
            t[:, k] = np.where(se > 0, contrast / se, np.nan)
        z[:, k] = stats.norm.ppf(stats.t.cdf(t[:, k], df))
    tasks = [f"game{j}" for j in range(new.shape[-1])]
    verdicts, fired = gate_rules(new[:, :, cols[-1], :], ref[:, :, cols[-1], :], tasks, delta)
    others = np.zeros(a.shape[0], dtype=bool)
    for rule, hits in fired.items():
        if rule != AGGREGATE_RULE:
            others |= np.asarray(hits, dtype=bool)
    failed[:, -1] |= others
    first = np.where(failed.any(axis=1), failed.argmax(axis=1), -1)
    return Outcome(first, (first < 0) & (verdicts == PASS), z, t)


def candidate(case: str, base: np.ndarray, shape_mean: np.ndarray, delta: float,
              rng: np.random.Generator) -> np.ndarray:
    """The candidate's seeds (sims, n, P, games) from draws like the reference's; the
    shape's mean (P, games)."""
    if case == NO_CHANGE:
        return base
    if case == MARGIN:  # (1 - rho) x the reference's mean curve: every look's null
        final = float(_metric(shape_mean[-1:, :])[0])
        rho = min(1.0, delta / final) if final > 0 else 1.0
        return base - rho * shape_mean
    if case == SHIFT:
        return base - delta
    if case == COLLAPSE:  # as the reference up to 60%, down to the random score by 80%
        keep = np.clip(1 - (GRID - 0.6) / 0.2, 0.0, 1.0)
        return base * keep[None, None, :, None]
    if case == SLOWER:  # each seed's own curve at t^2 (from the random score, 0, at t = 0)
        ext = np.concatenate([np.zeros_like(base[:, :, :1, :]), base], axis=2)
        idx = GRID**2 / (GRID[1] - GRID[0])
        lo = np.floor(idx).astype(int)
        hi = np.minimum(lo + 1, len(GRID))
        w = (idx - lo)[None, None, :, None]
        return (1 - w) * ext[:, :, lo, :] + w * ext[:, :, hi, :]
    if case == FAILURES:
        return _failures(base, FAILURE_SHARE, rng)
    if case == ONE_GAME:  # the second-best of five games never learns
        out = base.copy()
        out[..., -2] = 0.0
        return out
    raise ValueError(case)


def draw_arms(shape: Shape, rng: np.random.Generator, sims: int, n: int, m: int,
              games: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(new base draws, reference draws, mean) as (sims, seeds, P, games): one game, or
    five games scaled to SUITE_LEVELS of the shape (seeds independent across games)."""
    if not games:
        return (shape.draw(rng, sims, n)[..., None], shape.draw(rng, sims, m)[..., None],
                shape.mean[:, None])
    levels = np.array(SUITE_LEVELS) / shape.mean[-1]
    new = np.stack([lv * shape.draw(rng, sims, n) for lv in levels], axis=-1)
    ref = np.stack([lv * shape.draw(rng, sims, m) for lv in levels], axis=-1)
    return new, ref, shape.mean[:, None] * levels[None, :]


def boundaries_for(method: str, design: CurveDesign, ref_looks: np.ndarray, n: int,
                   delta: float) -> tuple[np.ndarray, str]:
    """(boundaries (K,) or (sims, K), the method used): ref_looks (sims, m, K) per-seed
    metric of each replicate's reference at the looks."""
    if method != ESTIMATED or ref_looks.shape[1] < min_reference_seeds(len(LOOKS)):
        return plan_boundaries(design, ref_looks[0], n, delta, correlation=method)
    rows, hows = [], set()
    for values in ref_looks:
        c, how = plan_boundaries(design, values, n, delta, points=QMC_POINTS)
        rows.append(c)
        hows.add(how.split(" (")[0])
    return np.array(rows), "; ".join(sorted(hows))


@dataclass(frozen=True)
class Setting:
    """One cell of the grid per shape: seeds per side, margin, spending; whether the
    null is also drawn with heavy-tailed seeds and whether the five cases are run."""

    n: int
    m: int
    delta: float
    spending: str = "pocock"
    heavy_null: bool = False
    cases: bool = True


METHOD_LABELS = {ESTIMATED: "estimated correlation", CANONICAL: "canonical sqrt(t_j/t_k)",
                 UNION: "union bound"}


def curve_cells(shapes: Sequence[Shape], sims: int, seed: int, settings: Sequence[Setting],
                methods: Sequence[str] = (ESTIMATED, CANONICAL, UNION),
                qq_seeds: Sequence[int] = (3, 5, 10),
                progress: Callable[[str], None] | None = None) -> CurveCalibration:
    """The cells (module docstring) for every shape x setting: the correlation methods
    compared on the null cases (no change, at the margin, and no change with heavy-tailed
    seeds), the five cases decided with the design's own method (the estimate, the union
    bound below its seeds). One reference draw per setting serves every case (common
    random numbers), so its estimated boundaries are computed once."""
    out = CurveCalibration(shapes=[s.name for s in shapes])
    for shape in shapes:
        cols = shape.at(LOOKS)
        for st in settings:
            design = CurveDesign(LOOKS, spending=st.spending)
            rng = rng_for(seed, "curve", shape.name, st.n, st.m, st.delta, st.spending)
            base, ref, mean = draw_arms(shape, rng, sims, st.n, st.m)
            ref_looks = _metric(ref[:, :, cols, :])
            bounds = {method: boundaries_for(method, design, ref_looks, st.n, st.delta)
                      for method in methods}
            for method in methods:
                for case in (NO_CHANGE, MARGIN):
                    res = decide(candidate(case, base, mean, st.delta, rng), ref, cols,
                                 st.delta, bounds[method][0])
                    _null(out, shape, st, method, bounds[method][1], case, res, sims)
            if st.heavy_null:
                heavy_ref = _failures(ref, HEAVY_SHARE, rng)
                heavy_looks = _metric(heavy_ref[:, :, cols, :])
                for method in (m for m in methods if m != CANONICAL):
                    c, how = boundaries_for(method, design, heavy_looks, st.n, st.delta)
                    res = decide(_failures(base, HEAVY_SHARE, rng), heavy_ref, cols,
                                 st.delta, c)
                    _null(out, shape, st, method, how, HEAVY_NULL, res, sims)
            if st.cases:
                c, how = bounds.get(ESTIMATED) or boundaries_for(ESTIMATED, design,
                                                                 ref_looks, st.n, st.delta)
                for case in CASES:
                    if case == ONE_GAME:
                        base5, ref5, mean5 = draw_arms(shape, rng, sims, st.n, st.m, True)
                        c5, how5 = boundaries_for(ESTIMATED, design,
                                                  _metric(ref5[:, :, cols, :]), st.n,
                                                  st.delta)
                        res = decide(candidate(case, base5, mean5, st.delta, rng), ref5,
                                     cols, st.delta, c5)
                        _case(out, shape, st, how5, case, res, sims)
                        continue
                    res = decide(candidate(case, base, mean, st.delta, rng), ref, cols,
                                 st.delta, c)
                    _case(out, shape, st, how, case, res, sims)
            if progress:
                progress(f"{shape.name}: {st}")
        for n in qq_seeds:
            rng = rng_for(seed, "curve qq", shape.name, n)
            new, ref, mean = draw_arms(shape, rng, sims, n, n)
            delta = 0.3 * float(mean[-1, 0])
            res = decide(candidate(MARGIN, new, mean, delta, rng), ref, cols, delta,
                         np.full(len(cols), np.inf))
            out.qq[n] = np.concatenate([out.qq.get(n, np.empty(0)), res.z.ravel()])
            out.qq_raw[n] = np.concatenate([out.qq_raw.get(n, np.empty(0)), res.t.ravel()])
    return out


HEAVY_SHARE = 0.1
"""No change with heavy tails: on both sides a seed never learns with this chance."""
HEAVY_NULL = "no change, heavy-tailed seeds (10% never learn, both sides)"


def _failures(values: np.ndarray, share: float, rng: np.random.Generator) -> np.ndarray:
    """`values` (sims, seeds, ...) with each seed at the random score (0) by chance `share`."""
    failed = rng.random(values.shape[:2]) < share
    return np.where(failed[:, :, None, None], 0.0, values)


def _scenario(shape: Shape, st: Setting, how: str) -> str:
    return (f"{shape.name}, {st.n} vs {st.m} seeds, delta {st.delta:g}, looks at "
            f"{'/'.join(f'{x:.0%}' for x in LOOKS)}, {st.spending}, {how}")


def _null(out: CurveCalibration, shape: Shape, st: Setting, method: str, how: str,
          case: str, res: Outcome, sims: int) -> None:
    label = METHOD_LABELS[method]
    if method == ESTIMATED and how.startswith("union"):
        label += " (too few reference seeds: union bound)"
    scen = _scenario(shape, st, label)
    cell = rate_cell(CURVE_VERDICT, scen, f"false fail over all looks, {case}", res.first >= 0,
                     NOMINAL)
    out.cells.append(replace(cell, shown_only=True) if method == CANONICAL else cell)
    alpha_t = spent_alpha(LOOKS, NOMINAL, st.spending)
    rates = [float(np.mean((res.first >= 0) & (res.first <= k))) for k in range(len(LOOKS))]
    bands = [clopper_pearson(int(round(r * sims)), sims) for r in rates]
    out.by_look.append(ByLook(scen, case, label, list(LOOKS), [float(x) for x in alpha_t],
                              rates, [b[0] for b in bands], [b[1] for b in bands], sims))


def _case(out: CurveCalibration, shape: Shape, st: Setting, how: str, case: str,
          res: Outcome, sims: int) -> None:
    scen = _scenario(shape, st, how.split(" (")[0])
    frames = np.where(res.first >= 0, np.array(LOOKS)[res.first], 1.0)
    out.cells.append(rate_cell(CURVE_VERDICT, scen, f"detected (REGRESSION), {case}",
                               res.first >= 0))
    out.cells.append(mean_cell(CURVE_VERDICT, scen, f"frames to decision, {case}", frames,
                               "of the budget"))
    se = float(frames.std(ddof=1) / np.sqrt(sims))
    out.detection.append(Detection(scen, case, float(np.mean(res.first >= 0)),
                                   float(np.mean(res.passed)), float(frames.mean()), se,
                                   sims))
