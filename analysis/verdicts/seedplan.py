"""The seed planner: how many seeds a verdict needs, by simulating the verdict code itself.

Model: each independent seed's value is normal around its side's mean with the per-seed
sd of the pilot runs (or a given sd); for equivalence the two metrics (IQM of final score
and of AUC) are drawn jointly with their pilot correlation. Every simulated comparison is
decided by the project's own vectorised verdict core (analysis.verdicts: `tost_passes`,
`tost_required_margin`, `regression_lower_bound`), the same arithmetic as the verdicts'.

- equivalence power: P(PASS) at a true difference of 0 = P(both metrics' 90% Welch CIs lie
  inside (-delta, delta)), n seeds per group;
- gate power: P(PASS) at a true difference of 0 = P(one-sided 95% lower bound > -delta),
  n independent seeds per side (layout copies averaged first, as the gate does);
- seeds needed for a target power: the smallest n with simulated power >= target
  (bisection; power grows with n);
- smallest delta at 80% for n seeds: the 80% quantile, over simulated draws, of the margin
  each draw needs to pass (PASS at delta iff that margin < delta), so no search.

Draws are seeded per (verdict, n): `numpy.random.default_rng([seed, n, k])`, so one
command gives the same table every time; a sequential design draws the same way at its
cap (`equivalence_draws`, `gate_draws`), so a fixed plan is its one-look design.

What an UNDECIDED (gate), NOT SHOWN (`reproduce`) or INCONCLUSIVE (equivalence) verdict
says comes from here too: why the evidence decides neither way, how many seeds per side
would decide it at the spread seen, and that `python -m harness run --until-decided` can
run them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from analysis.errors import AnalysisError
from analysis.scoring.grouping import Analysis, manifest_family
from analysis.scoring.scores import collapse_seed_copies
from analysis.stats.welch import TOST_TAIL, t_upper, tost_required_margin
from analysis.verdicts.margins import DEFAULT_SEEDS, DEFAULT_SIMS, Margin, margin
from analysis.verdicts.per_game import MEAN_MARGIN
from analysis.verdicts.regression import RegressionResult, regression_lower_bound
from analysis.verdicts.seed_pairing import iqm_over_tasks
from runrecord.words import counted, signed

TARGETS = (0.8, 0.9)
MAX_SEEDS = 200
_TOST, _GATE = 1, 2


@dataclass(frozen=True)
class Spread:
    """Per-seed spread of the per-seed metric values.

    sd_group: sd of one group's per-seed values (equivalence compares groups);
    sd_seed: sd of a side's per-seed values after layout copies are averaged (the gate);
    sd_auc: the AUC metric's sd (equivalence); correlation: of final and AUC per seed.
    df: degrees of freedom of the estimate (None when given).
    """

    sd_group: float
    sd_seed: float
    sd_auc: float
    correlation: float
    source: str
    df: int | None = None
    df_detail: str = ""  # where df comes from, e.g. ": 2 systems x (3 - 1)"

    def describe(self) -> str:
        text = (f"per-seed sd {self.sd_group:.4g} (final, per group), {self.sd_auc:.4g} (AUC), "
                f"correlation {self.correlation:.2f}; {self.sd_seed:.4g} per seed after "
                f"averaging layout copies (gate); {self.source}")
        if self.df:  # with the one-sided 90% upper confidence bound of sd_seed (chi-square)
            upper = self.sd_seed * math.sqrt(self.df / stats.chi2.ppf(0.1, self.df))
            text += (f"; the gate's sd has {self.df} df (the sum over systems of their "
                     f"seeds - 1{self.df_detail}), 90% upper bound {upper:.4g}")
        return text


def given_spread(sd: float, auc_sd: float | None = None, correlation: float = 0.0) -> Spread:
    """A spread the user states: sd for final score, groups and seeds alike."""
    if not sd > 0:
        raise AnalysisError(f"--sd must be > 0, got {sd}")
    if not -1 <= correlation <= 1:
        raise AnalysisError(f"--correlation must be in [-1, 1], got {correlation}")
    auc = sd if auc_sd is None else auc_sd
    if not auc > 0:
        raise AnalysisError(f"--auc-sd must be > 0, got {auc_sd}")
    return Spread(sd, sd, auc, correlation, "given")


def pooled_spread(blocks: Sequence[np.ndarray]) -> tuple[float, float, float, int]:
    """(sd of column 0, sd of column 1, their correlation, df) pooled within (seeds, 2)
    blocks; the correlation is 0 where a column does not vary."""
    ss = np.zeros((2, 2))
    df = 0
    for x in blocks:
        if len(x) < 2:
            continue
        d = x - x.mean(axis=0)
        ss += d.T @ d
        df += len(x) - 1
    if df == 0:
        raise AnalysisError("the pilot runs have no group with 2 or more seeds: no spread "
                            "estimate (give --sd instead)")
    sd_0, sd_1 = math.sqrt(ss[0, 0] / df), math.sqrt(ss[1, 1] / df)
    rho = ss[0, 1] / df / (sd_0 * sd_1) if sd_0 > 0 and sd_1 > 0 else 0.0
    return sd_0, sd_1, float(np.clip(rho, -1.0, 1.0)), df


def spread_from_analysis(a: Analysis, metric=None) -> Spread:
    """Pooled per-seed spread of pilot runs: within each group (distinct groups only:
    a layout whose per-seed values copy another's adds no information) for equivalence,
    and within each (system, architecture) after averaging layout copies for the gate."""
    metric = metric or iqm_over_tasks
    group_blocks: list[np.ndarray] = []
    seed_blocks: list[np.ndarray] = []
    seen: list[np.ndarray] = []
    n_groups = n_runs = 0
    for suite in a.suites:
        families: dict[tuple, list] = {}
        for gs in suite.values():
            families.setdefault(manifest_family(gs), []).append(gs)
            block = np.stack([metric(gs.final, gs.tasks), metric(gs.auc, gs.tasks)], axis=1)
            n_runs += len(gs.seeds) * len(gs.tasks)
            if any(b.shape == block.shape and np.array_equal(b, block) for b in seen):
                continue
            seen.append(block)
            group_blocks.append(block)
            n_groups += 1
        for groups in families.values():
            fin = collapse_seed_copies(groups, "pilot", attr="final")
            auc = collapse_seed_copies(groups, "pilot", attr="auc")
            seed_blocks.append(np.stack([metric(fin.values, fin.tasks),
                                         metric(auc.values, auc.tasks)], axis=1))
    sd_f, sd_a, rho, _ = pooled_spread(group_blocks)
    sd_s, _, _, df_s = pooled_spread(seed_blocks)
    per_system = sorted(len(b) - 1 for b in seed_blocks)
    detail = (f": {counted(len(per_system), 'system')} x ({per_system[0] + 1} - 1)"
              if len(set(per_system)) == 1 else f": {' + '.join(map(str, per_system))}")
    source = (f"pooled from {counted(n_groups, 'distinct group')} of the pilot runs ({n_runs} runs, "
              f"{counted(len(seed_blocks), 'system')})")
    return Spread(sd_f, sd_s, sd_a, rho, source, df_s, detail)


def normal_metrics(rng: np.random.Generator, sims: int, seeds: int, sds: Sequence[float],
                   correlation: float = 0.0, shift: float = 0.0) -> np.ndarray:
    """(metrics, sims, seeds) normal per-seed values of one side, float64: metric j has
    sd sds[j]; every later metric correlates `correlation` with the first; `shift` moves
    the first (final score) only, so a false-pass check puts the whole difference there.
    Every simulation of a verdict (the seed planner's, the sequential designs') draws
    here, so one spread gives one set of values whichever planner asks."""
    z = rng.standard_normal((len(sds), sims, seeds))
    rho = float(np.clip(correlation, -1.0, 1.0))
    out = [shift + sds[0] * z[0]]
    out += [sd * (rho * z[0] + math.sqrt(1 - rho * rho) * z[j]) for j, sd in
            enumerate(sds[1:], start=1)]
    return np.stack(out)


def equivalence_margins(spread: Spread, n: int, sims: int = DEFAULT_SIMS, seed: int = 0,
                        true_diff: float = 0.0, metrics: int = 2) -> np.ndarray:
    """(sims,) the margin each simulated equivalence test (n vs n seeds) needs to PASS:
    the larger of the two metrics' max |90% CI endpoint| (metrics=1: final only).
    true_diff: the true difference of the final metric (AUC: 0)."""
    final, auc = _tost_margins(spread, n, sims, seed, true_diff)
    return np.maximum(final, auc) if metrics == 2 else final


def _tost_margins(spread: Spread, n: int, sims: int, seed: int, true_diff: float = 0.0
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The final and the AUC metric's margins of `equivalence_margins`, from one draw."""
    (a_f, a_u), (b_f, b_u) = equivalence_draws(spread, n, sims, seed, true_diff)
    return tost_required_margin(a_f, b_f), tost_required_margin(a_u, b_u)


def gate_margins(spread: Spread, n_new: int, n_ref: int | None = None,
                 sims: int = DEFAULT_SIMS, seed: int = 0, true_diff: float = 0.0
                 ) -> np.ndarray:
    """(sims,) the margin each simulated gate (n_new vs n_ref seeds) needs to PASS:
    -(one-sided 95% lower bound of new - reference)."""
    new, ref = gate_draws(spread.sd_seed, n_new, n_new if n_ref is None else n_ref, sims,
                          seed, true_diff)
    _, lower, _, _ = regression_lower_bound(new, ref)
    return -lower


def equivalence_draws(spread: Spread, seeds: int, sims: int, seed: int,
                      true_diff: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """`sims` simulated equivalence comparisons with `seeds` seeds per side: both sides'
    per-seed (final, AUC) values, (2, sims, seeds) each; `true_diff` moves the first
    side's final metric. The one simulation of seeds of every equivalence plan: a
    sequential design's looks read the first seeds of its cap's draws, and a fixed plan
    at n seeds is the design with one look at n, so it draws exactly these."""
    rng = np.random.default_rng([seed, seeds, _TOST])
    sds = (spread.sd_group, spread.sd_auc)
    return (normal_metrics(rng, sims, seeds, sds, spread.correlation, true_diff),
            normal_metrics(rng, sims, seeds, sds, spread.correlation))


def gate_draws(sd: float, n_new: int, n_ref: int, sims: int, seed: int,
               true_diff: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """`sims` simulated gates: new (sims, n_new) and reference (sims, n_ref) per-seed
    values of sd `sd`, the new side moved by `true_diff`. As `equivalence_draws`, the one
    simulation of the fixed plan (n_new seeds) and of a sequential design (its cap)."""
    rng = np.random.default_rng([seed, n_new, n_ref, _GATE])
    return (normal_metrics(rng, sims, n_new, (sd,), shift=true_diff)[0],
            normal_metrics(rng, sims, n_ref, (sd,))[0])


def equivalence_power(spread: Spread, delta: float, n: int, sims: int = DEFAULT_SIMS,
                      seed: int = 0, metrics: int = 2, true_diff: float = 0.0) -> float:
    """P(PASS) of equivalence with n seeds per group at a true difference `true_diff`
    of the final metric (default 0)."""
    return float(np.mean(equivalence_margins(spread, n, sims, seed, true_diff, metrics)
                         < delta))


def gate_power(spread: Spread, delta: float, n: int, sims: int = DEFAULT_SIMS, seed: int = 0,
               n_ref: int | None = None, true_diff: float = 0.0) -> float:
    """P(PASS) of the gate, n new seeds (and n_ref reference seeds, default n), at a true
    difference `true_diff` (default 0: nothing regressed)."""
    return float(np.mean(gate_margins(spread, n, n_ref, sims, seed, true_diff) < delta))


def seeds_needed(power, target: float, start: Sequence[int] = DEFAULT_SEEDS,
                 max_seeds: int = MAX_SEEDS) -> int | None:
    """Smallest n in [2, max_seeds] with power(n) >= target, None if none. Power grows
    with n: the first of `start` (then doubling) that reaches the target brackets it, and
    bisection finds it inside the bracket."""
    lo, hi = 1, None
    for n in sorted(start):
        if power(n) >= target:
            hi = n
            break
        lo = n
    while hi is None:
        n = min(max_seeds, 2 * lo)
        if power(n) >= target:
            hi = n
        elif n >= max_seeds:
            return None
        else:
            lo = n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if power(mid) >= target:
            hi = mid
        else:
            lo = mid
    return max(hi, 2)


def _percent(p: float) -> str:
    """Whole percent, one decimal between 99% and 100% (where a CI gate's pass rate lives)."""
    if 0.999 <= p < 1:
        return ">99.9%"
    return f"{p:.1%}" if 0.99 <= p < 1 else f"{p:.0%}"


def beyond_cap(cap: int = MAX_SEEDS, seeds: str = "seeds") -> str:
    """How every planner's answer says that no seed count up to its cap reaches the
    power asked for (`seeds`: what is counted, e.g. "seeds per side")."""
    return f"more {seeds} than the planner's cap ({cap})"


def seeds_cell(seeds: int | None, cap: int = MAX_SEEDS) -> str:
    """A table's seeds needed: the count, or "> cap" when none up to the planner's cap
    reaches the power."""
    return str(seeds) if seeds is not None else f"> {cap}"


@dataclass
class PlanRow:
    verdict: str
    delta: float
    power: dict[int, float]
    needed: dict[float, int | None]
    smallest_delta: float  # at 80% power for `for_seeds` seeds


@dataclass
class SeedPlan:
    spread: Spread
    seeds: list[int]
    for_seeds: int
    sims: int
    seed: int
    rows: list[PlanRow] = field(default_factory=list)
    seconds: float = 0.0

    def markdown(self) -> str:
        head = (["verdict", "delta"] + [f"power @ {n} seeds" for n in self.seeds]
                + [f"seeds for {t:.0%}" for t in TARGETS]
                + [f"smallest delta @ 80%, {self.for_seeds} seeds"])
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in self.rows:
            cells = ([r.verdict, f"{r.delta:g}"] + [_percent(r.power[n]) for n in self.seeds]
                     + [seeds_cell(r.needed[t]) for t in TARGETS]
                     + [f"{r.smallest_delta:.3g}"])
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def text(self) -> str:
        return (f"spread: {self.spread.describe()}\n"
                f"power = P(PASS) at a true difference of 0, seeds per side; "
                f"{self.sims} simulations per cell, seed {self.seed}\n"
                f"{self.markdown()}\n"
                f"planned in {self.seconds:.2f} s")


def plan(spread: Spread, equivalence_delta: float, gate_delta: float, *,
         seeds: Sequence[int] = DEFAULT_SEEDS, for_seeds: int = 3, sims: int = DEFAULT_SIMS,
         seed: int = 0) -> SeedPlan:
    """Power table for equivalence (both metrics, and final only) and the gate."""
    if sims < 100:
        raise AnalysisError(f"--sims must be >= 100, got {sims}")
    if any(n < 2 for n in seeds) or for_seeds < 2:
        raise AnalysisError("seed counts must be >= 2 (one seed has no spread estimate)")
    if not equivalence_delta > 0 or not gate_delta > 0:
        raise AnalysisError("margins must be > 0")
    start = time.perf_counter()
    out = SeedPlan(spread, list(seeds), for_seeds, sims, seed)
    cache: dict[tuple[str, int], np.ndarray] = {}

    def margins(kind: str, n: int) -> np.ndarray:
        """Simulated margins needed to pass, per (verdict, n), drawn once."""
        if (kind, n) not in cache:
            if kind == "gate":
                cache[kind, n] = gate_margins(spread, n, sims=sims, seed=seed)
            else:  # one draw serves both TOST rows
                final, auc = _tost_margins(spread, n, sims, seed)
                cache["final", n] = final
                cache["both", n] = np.maximum(final, auc)
        return cache[kind, n]

    for name, kind, delta in (("equivalence TOST (final and AUC)", "both", equivalence_delta),
                              ("equivalence TOST (final only)", "final", equivalence_delta),
                              ("regression gate", "gate", gate_delta)):
        def power(n: int, kind=kind, delta=delta) -> float:
            return float(np.mean(margins(kind, n) < delta))

        out.rows.append(PlanRow(
            name, delta, {n: power(n) for n in seeds},
            {t: seeds_needed(power, t, seeds) for t in TARGETS},
            float(np.quantile(margins(kind, for_seeds), 0.8))))
    out.seconds = time.perf_counter() - start
    return out


def seed_plan_lines(spread: Spread, suite: str, *, delta: float | None = None,
                    gate_delta: float | None = None,
                    normalisers: Mapping[str, tuple[float, float]] | None = None,
                    seeds: Sequence[int] = DEFAULT_SEEDS, for_seeds: int = 3,
                    sims: int = DEFAULT_SIMS, seed: int = 0) -> list[str]:
    """The margins (`plan_margins`) and the power table of `plan`, as `python -m analysis
    plan-seeds` prints them."""
    eq, gate, line = plan_margins(suite, delta, gate_delta, normalisers)
    return [line, plan(spread, eq.value, gate.value, seeds=seeds, for_seeds=for_seeds,
                       sims=sims, seed=seed).text()]


def plan_margins(suite: str, delta: float | None, gate_delta: float | None,
                 normalisers: Mapping[str, tuple[float, float]] | None
                 ) -> tuple[Margin, Margin, str]:
    """The equivalence and the gate margin of a plan (the suite's defaults unless given;
    the gate's defaults to `delta`), and the line that names them."""
    eq = margin(suite, delta, normalisers)
    gate = margin(suite, gate_delta if gate_delta is not None else delta, normalisers)
    return eq, gate, f"margins: equivalence {eq.describe()}; regression gate {gate.describe()}"


PLAN_TARGET = 0.8
"""The power the seed counts of an undecided verdict aim for."""
PLAN_SIMS = 4_000
"""Draws per simulated power (a verdict's estimate, not a table: +-1 point is enough)."""
UNTIL_DECIDED = ("`python -m harness run --until-decided` (or an [adaptive] table in the "
                 "sweep file) adds seeds in batches until the verdict is decided")


def equivalence_seeds_needed(spread: Spread, delta: float, target: float = PLAN_TARGET,
                             sims: int = PLAN_SIMS, true_diff: float = 0.0,
                             max_seeds: int = MAX_SEEDS) -> int | None:
    """Seeds per side for `target` power of the fixed equivalence TOST (both metrics)
    when the final metric truly differs by `true_diff`, at `spread` (e.g.
    `spread_from_analysis` of the runs so far); None: more than `max_seeds`."""
    return seeds_needed(lambda n: equivalence_power(spread, delta, n, sims,
                                                    true_diff=true_diff),
                        target, max_seeds=max_seeds)


def gate_seeds_needed(spread: Spread, delta: float, target: float = PLAN_TARGET,
                      n_ref: int | None = None, sims: int = PLAN_SIMS, true_diff: float = 0.0,
                      max_seeds: int = MAX_SEEDS) -> int | None:
    """New seeds the fixed gate (aggregate rule) needs for `target` power against `n_ref`
    reference seeds (None: as many reference seeds as new ones) at a true difference
    `true_diff`; None: more than `max_seeds`."""
    return seeds_needed(lambda n: gate_power(spread, delta, n, sims, n_ref=n_ref,
                                             true_diff=true_diff),
                        target, max_seeds=max_seeds)


def gate_undecided(res: RegressionResult) -> str:
    """The gate's UNDECIDED text: no rule found a regression, and non-inferiority is not
    shown (the aggregate's lower bound, or the untrimmed mean's, not above its margin)."""
    lower, delta, n_new, n_ref = res.lower_bound, res.delta, res.n_new, res.n_reference
    sd = res.seed_sd
    need = gate_seeds_needed(given_spread(sd), delta) if math.isfinite(sd) and sd > 0 else None
    seeds = (f"about {need} seeds per side would give {PLAN_TARGET:.0%} power to show "
             f"the aggregate non-inferior if nothing changed" if need is not None else
             f"{beyond_cap(seeds='seeds per side')} would be needed for "
             f"{PLAN_TARGET:.0%} power at this spread: widen the margin")
    if lower > -delta and not math.isnan(res.mean_relative_lower):
        why = (f"the aggregate is non-inferior (lower bound {signed(lower, 4)} > -delta "
               f"{signed(-delta, 4)}), but the untrimmed mean relative score's lower bound "
               f"{res.mean_relative_lower:+.1%} is not above -{MEAN_MARGIN:.0%} (a drop "
               f"spread over the top games is not ruled out)")
    else:
        why = (f"non-inferiority not shown (lower bound {signed(lower, 4)} <= -delta "
               f"{signed(-delta, 4)})")
    return (f"{why}, and no regression shown (upper bound {signed(res.upper_bound, 4)} >= "
            f"-delta; no game flagged or collapsed) with {n_new} vs {n_ref} seeds; at the "
            f"per-seed sd seen "
            f"({sd:.3g}) {seeds} (seed planner); more seeds on both sides also narrow the "
            f"untrimmed mean's bound; {UNTIL_DECIDED}")


def reproduce_seeds_needed(unit_var: float, margin: float, published_n: int,
                           df: float = math.inf) -> int | None:
    """Your seeds for PLAN_TARGET power of the aggregate equivalence (90% CI of the
    weighted mean relative difference inside +-margin) if the true difference is 0:
    its variance is unit_var x (1/n + 1/published_n), the published side fixed."""
    if not unit_var > 0:
        return None
    t = float(t_upper(TOST_TAIL, df))

    def power(n: int) -> float:
        sd = math.sqrt(unit_var * (1 / n + 1 / published_n))
        room = margin - t * sd
        return 0.0 if room <= 0 else float(2 * stats.norm.cdf(room / sd) - 1)

    return seeds_needed(power, PLAN_TARGET)
