"""The values each numeric flag of `python -m analysis` and `python -m harness` may take,
checked on the parsed config before a command reads or writes anything.

One table by flag name, not a check in each command: a bad value checked in
the command surfaces deep in it (a traceback from NumPy, or after `harness report` has
rewritten staleness.*), and a new command reusing a name gets the check for free.
tests/test_bad_flag_values.py fails for a new numeric flag until it is listed here (or
among the flags with no bad value there).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass


class FlagValueError(ValueError):
    """A flag's value outside what the flag allows: the message names the flag, the value
    and what is valid."""


@dataclass(frozen=True)
class Bound:
    """Valid values: low <= v (low < v when low_open), v <= high (v < high when high_open)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def holds(self, value: float) -> bool:
        if isinstance(value, float) and math.isnan(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return not (self.high is not None
                    and (value >= self.high if self.high_open else value > self.high))

    def text(self) -> str:
        """What is valid, in words: '>= 1', '> 0', 'between 0 and 1, both excluded'."""
        if self.low is not None and self.high is not None:
            ends = ("both excluded" if self.low_open and self.high_open
                    else "both included" if not (self.low_open or self.high_open)
                    else f"{self.low:g} {'excluded' if self.low_open else 'included'}, "
                         f"{self.high:g} {'excluded' if self.high_open else 'included'}")
            return f"between {self.low:g} and {self.high:g}, {ends}"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        assert self.high is not None
        return f"{'<' if self.high_open else '<='} {self.high:g}"


AT_LEAST_1 = Bound(low=1)
AT_LEAST_0 = Bound(low=0)
POSITIVE = Bound(low=0, low_open=True)
PROBABILITY = Bound(low=0, high=1, low_open=True, high_open=True)

FLAG_BOUNDS: dict[str, Bound] = {
    # counts
    "reps": AT_LEAST_1, "aggregate_reps": AT_LEAST_1, "sims": AT_LEAST_1,
    "last_n": AT_LEAST_1, "points": Bound(low=2), "frames_per_step": POSITIVE,
    "seeds": AT_LEAST_1, "for_seeds": AT_LEAST_1, "first_seeds": Bound(low=2),
    "batch_seeds": AT_LEAST_1, "max_seeds": AT_LEAST_1, "published_seeds": Bound(low=2),
    "reference_seeds": AT_LEAST_1, "worst": AT_LEAST_0, "frames": POSITIVE,
    "orb_frames": POSITIVE, "max_parallel": AT_LEAST_1, "max_attempts": AT_LEAST_1,
    "cpus": AT_LEAST_1, "cpu_devices": AT_LEAST_1, "replay": AT_LEAST_0,
    "updates": AT_LEAST_1,
    # seeds of random generators (NumPy refuses a negative one)
    "seed": AT_LEAST_0, "draw_seed": AT_LEAST_0,
    # margins, spreads and levels
    # delta 0: no drop tolerated, which the gate allows (an equivalence then never passes)
    "delta": AT_LEAST_0, "gate_delta": AT_LEAST_0, "relative_margin": AT_LEAST_0,
    "absolute_margin": AT_LEAST_0, "sd": POSITIVE, "auc_sd": POSITIVE,
    "reference_sd": AT_LEAST_0, "correlation": Bound(low=-1, high=1),
    "confidence": PROBABILITY, "alpha": PROBABILITY,
}
"""{field name: the values its flag --field-name may take}, for every command."""


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def check_value(field: str, value: object) -> None:
    """FlagValueError when `value` (a number, or a tuple of numbers) is outside the flag's
    bound; None and flags without a bound pass."""
    bound = FLAG_BOUNDS.get(field)
    if bound is None or value is None or isinstance(value, bool):
        return
    values = value if isinstance(value, tuple) else (value,)
    for v in values:
        if isinstance(v, int | float) and not bound.holds(v):
            raise FlagValueError(f"{flag_name(field)} {v}: must be {bound.text()}")


def check_flags(config: object, skip: Iterable[str] = ()) -> None:
    """Check every bounded field of a parsed dataclass config (FlagValueError names the
    first bad one)."""
    if not dataclasses.is_dataclass(config):
        return
    for f in dataclasses.fields(config):
        if f.name not in skip:
            check_value(f.name, getattr(config, f.name))
