"""A sweep's ETA from what its own runs measured, run kind by run kind.

A sweep mixes runs of very different cost: a two-process layout takes both cores and is
slower per env step than a one-process one; an Atari run costs more per step than a
CartPole run. One rate for the whole sweep, taken from whichever runs finish first,
overstates or understates the rest many times over (the smoke sweep runs its two-process
layout first: one rate said 27 minutes left of an 11-minute sweep). So each run left is
priced at the seconds per env step measured on finished runs of its own kind (system,
layout, env); where none has finished, of its layout and env (another system's runs), else
of the median kind of its env, else of the sweep's, and the line says it is rough. A run's cost is in core-seconds (its wall time x the cores it holds),
and the cores work in parallel, so the time left is the core-seconds left over the cores.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

ETA_UNKNOWN = "ETA unknown (no run of this sweep has finished yet)"


@dataclass(frozen=True)
class RunKind:
    system: str
    layout: str
    env_id: str


@dataclass(frozen=True)
class FinishedRun:
    """A run that ran here to its end: its env steps and its wall time, start-up and
    compilation included (they are part of what each run left will cost too)."""

    kind: RunKind
    steps: int
    wall_s: float


@dataclass(frozen=True)
class RunLeft:
    """A run not finished: the env steps it has left and the cores it holds."""

    kind: RunKind
    steps_left: float
    cores: int


@dataclass(frozen=True)
class Estimate:
    seconds: float
    runs_left: int
    priced_by_other_kinds: int  # runs left with no finished run of their own kind yet


def _rate(runs: Sequence[FinishedRun]) -> float | None:
    steps = sum(r.steps for r in runs)
    return sum(r.wall_s for r in runs) / steps if steps > 0 else None


def _median_kind_rate(runs: Sequence[FinishedRun]) -> float | None:
    """The median over kinds of each kind's rate: one slow kind (a two-process layout, the
    first to finish) does not set the price of every kind not yet seen."""
    by_kind: dict[RunKind, list[FinishedRun]] = {}
    for r in runs:
        by_kind.setdefault(r.kind, []).append(r)
    rates = [x for x in map(_rate, by_kind.values()) if x is not None]
    return statistics.median(rates) if rates else None


def seconds_per_step(finished: Sequence[FinishedRun], kind: RunKind
                     ) -> tuple[float, bool] | None:
    """(wall seconds per env step of `kind`, whether runs of its own kind measured it): from
    finished runs of that kind; else of its layout and env (another system); else the
    median kind of its env; else the median kind of the sweep; None with no finished run.
    Each fallback is computed only when the one before it has no runs."""
    own = _rate([r for r in finished if r.kind == kind])
    if own is not None:
        return own, True
    fallbacks = (
        lambda: _rate([r for r in finished
                       if (r.kind.layout, r.kind.env_id) == (kind.layout, kind.env_id)]),
        lambda: _median_kind_rate([r for r in finished if r.kind.env_id == kind.env_id]),
        lambda: _median_kind_rate(finished))
    for fallback in fallbacks:
        rate = fallback()
        if rate is not None:
            return rate, False
    return None


def seconds_left(finished: Sequence[FinishedRun], left: Sequence[RunLeft],
                 cores: int) -> Estimate | None:
    """The sweep's wall seconds left: each run left priced at its kind's measured seconds
    per step, in core-seconds, shared by `cores` cores; None before any run has finished.
    Each kind is priced once (a 57-game sweep has hundreds of runs left, few kinds, and the
    live display asks twice a second)."""
    if not finished or cores < 1:
        return None
    prices: dict[RunKind, tuple[float, bool] | None] = {}
    core_seconds, borrowed = 0.0, 0
    for run in left:
        if run.kind not in prices:
            prices[run.kind] = seconds_per_step(finished, run.kind)
        priced = prices[run.kind]
        if priced is None:
            return None
        rate, own = priced
        borrowed += not own
        core_seconds += max(0.0, run.steps_left) * rate * max(1, min(run.cores, cores))
    return Estimate(core_seconds / cores, len(left), borrowed)


def eta_text(estimate: Estimate | None) -> str:
    """The ETA line; it says how rough it is while runs left are priced by other kinds'."""
    if estimate is None:
        return ETA_UNKNOWN
    how = "from this sweep's finished runs of each kind"
    if estimate.priced_by_other_kinds:
        how = (f"rough: {estimate.priced_by_other_kinds} of the {estimate.runs_left} runs "
               "left have no finished run of their system, layout and env yet")
    return f"ETA {fmt_duration(estimate.seconds)} ({how})"


def fmt_duration(s: float) -> str:
    s = max(0, int(s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{sec:02d}s"
