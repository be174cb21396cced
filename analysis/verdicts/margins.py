"""Per-suite default margins (delta) for the equivalence and regression verdicts.

A margin is fixed before looking at the data, in the suite's normalised units:
- Atari: 0.16 HNS (human-normalised score; 1.0 = the human-minus-random gap).
- CartPole-v1: 0.2 normalised (20% of the random (22.1) .. cap (500) range = 95.6 return).
  Chosen from the smoke reference's per-seed spread with `python -m analysis plan-seeds`:
  at 3 seeds per side the gate passes an unchanged system on another CPU with
  probability >= 99% while it passes a true drop of 0.2 at most 5% (docs/analysis.md).
- any other env with a normaliser: 0.2 of its normalised range (low .. high), the same
  rule as CartPole, printed in return units beside the verdict.
A margin the user gives (--delta, a preset's delta) always wins and is printed as given.

The other defaults of the verdicts' flags live here too: this module imports no scipy,
so the CLI reads them at start-up without paying for scipy.stats (~0.5 s).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from analysis.errors import AnalysisError
from analysis.scales.normalize import get_normaliser

ATARI_SUITE = "Atari"
ATARI_DEFAULT_DELTA = 0.16
"""HNS. Not a power guarantee: with a per-seed IQM sd of 0.063 HNS (one column of the
published tables; others range 0.011 to 0.141), TOST on one metric passes truly
equivalent groups 57% of the time at 3 seeds; 80% needs about 0.20 (`python -m analysis
plan-seeds --sd 0.063`; docs/analysis.md)."""
OTHER_DEFAULT_DELTA = 0.2
"""Share of the normalised range (low .. high) of a non-Atari env (CartPole-v1: 95.6 return)."""


@dataclass(frozen=True)
class Margin:
    """A margin delta in normalised units, where it came from and what it means in returns."""

    value: float
    suite: str
    source: str  # "given" or "default"
    return_units: float | None = None  # delta x (high - low) for a single non-Atari env

    def describe(self) -> str:
        """`0.16 HNS (Atari default)`, `0.2 normalised (= 95.6 CartPole-v1 return; default)`
        or `0.1 normalised (given)`."""
        if self.suite == ATARI_SUITE:
            return f"{self.value:g} HNS ({'Atari default' if self.source == 'default' else 'given'})"
        extra = (f"= {self.return_units:.4g} {self.suite} return; "
                 if self.return_units is not None else "")
        return f"{self.value:g} normalised ({extra}{self.source})"


def margin(suite: str, given: float | None = None,
           normalisers: Mapping[str, tuple[float, float]] | None = None) -> Margin:
    """The margin of `suite` ("Atari" or an env id): `given` when not None, else the
    suite's default (module docstring)."""
    if given is not None and not given > 0:
        raise AnalysisError(f"margin delta must be > 0, got {given}")
    if suite == ATARI_SUITE:
        value = ATARI_DEFAULT_DELTA if given is None else float(given)
        return Margin(value, suite, "default" if given is None else "given")
    value = OTHER_DEFAULT_DELTA if given is None else float(given)
    try:
        norm = get_normaliser(suite, normalisers)
        units: float | None = value * (norm.high - norm.low)
    except AnalysisError:
        units = None
    return Margin(value, suite, "default" if given is None else "given", units)


DEFAULT_SEEDS = (3, 5, 10, 20)
"""Seeds per side the seed plan prints power for (analysis.verdicts.seedplan)."""
DEFAULT_SIMS = 20_000
"""Monte Carlo draws per power figure of the seed plan."""
DEFAULT_WORST = 5
"""Games the gate lists as its largest drops (analysis.verdicts.gate)."""
