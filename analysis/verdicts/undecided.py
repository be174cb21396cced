"""What an UNDECIDED (gate), NOT SHOWN (`reproduce`) or INCONCLUSIVE (equivalence) verdict
says: why the evidence decides neither way, and how many seeds per side would decide it at the spread seen
(the seed planner's `seeds_needed`, analysis.verdicts.seedplan), and that
`python -m harness run --until-decided` can run them.
"""

from __future__ import annotations

import math

from scipy import stats

from analysis.verdicts.seedplan import (
    Spread,
    equivalence_power,
    gate_power,
    given_spread,
    seeds_needed,
)
from runrecord.words import signed

PLAN_TARGET = 0.8
"""The power the seed counts aim for."""
UNTIL_DECIDED = ("`python -m harness run --until-decided` (or an [adaptive] table in the "
                 "sweep file) adds seeds in batches until the verdict is decided")


def gate_seeds_needed(sd: float, delta: float) -> int | None:
    """Seeds per side for PLAN_TARGET power of the fixed gate (aggregate rule) if the
    true difference is 0, at per-seed sd `sd` (None: more than the planner's cap)."""
    if not sd > 0:
        return None
    spread = given_spread(sd)
    return seeds_needed(lambda n: gate_power(spread, delta, n, sims=4_000), PLAN_TARGET)


def equivalence_seeds_needed(spread: Spread, delta: float) -> int | None:
    """Seeds per side for PLAN_TARGET power of the fixed equivalence TOST (both metrics)
    if the true difference is 0, at `spread` (e.g. `spread_from_analysis` of the runs so
    far); None: more than the planner's cap. What an INCONCLUSIVE equivalence needs."""
    return seeds_needed(lambda n: equivalence_power(spread, delta, n, sims=4_000), PLAN_TARGET)


def gate_undecided(lower: float, upper: float, delta: float, se: float, n_new: int,
                   n_ref: int, mean_lower: float | None = None, mean_margin: float = 0.1
                   ) -> str:
    """The gate's UNDECIDED text: no rule found a regression, and non-inferiority is not
    shown (the aggregate's lower bound, or the untrimmed mean's `mean_lower`, not above
    its margin)."""
    sd = se / math.sqrt(1 / n_new + 1 / max(n_ref, 1)) if se > 0 else math.nan
    need = gate_seeds_needed(sd, delta) if math.isfinite(sd) else None
    seeds = (f"about {need} seeds per side would give {PLAN_TARGET:.0%} power to show "
             f"the aggregate non-inferior if nothing changed" if need is not None else
             "no seed count up to the planner's cap reaches "
             f"{PLAN_TARGET:.0%} power at this spread: widen the margin")
    if lower > -delta and mean_lower is not None:
        why = (f"the aggregate is non-inferior (lower bound {signed(lower, 4)} > -delta "
               f"{signed(-delta, 4)}), but the untrimmed mean relative score's lower bound "
               f"{mean_lower:+.1%} is not above -{mean_margin:.0%} (a drop spread over the "
               f"top games is not ruled out)")
    else:
        why = (f"non-inferiority not shown (lower bound {signed(lower, 4)} <= -delta "
               f"{signed(-delta, 4)})")
    return (f"{why}, and no regression shown (upper bound {signed(upper, 4)} >= -delta; no game "
            f"flagged or collapsed) with {n_new} vs {n_ref} seeds; at the per-seed sd seen "
            f"({sd:.3g}) {seeds} (seed planner); more seeds on both sides also narrow the "
            f"untrimmed mean's bound; {UNTIL_DECIDED}")


def reproduce_seeds_needed(unit_var: float, margin: float, published_n: int,
                           df: float = math.inf) -> int | None:
    """Your seeds for PLAN_TARGET power of the aggregate equivalence (90% CI of the
    weighted mean relative difference inside +-margin) if the true difference is 0:
    its variance is unit_var x (1/n + 1/published_n), the published side fixed."""
    if not unit_var > 0:
        return None
    t = float(stats.t.ppf(0.95, df)) if math.isfinite(df) else float(stats.norm.ppf(0.95))

    def power(n: int) -> float:
        sd = math.sqrt(unit_var * (1 / n + 1 / published_n))
        room = margin - t * sd
        return 0.0 if room <= 0 else float(2 * stats.norm.cdf(room / sd) - 1)

    return seeds_needed(power, PLAN_TARGET)
