"""What the analysis needs of a run's tables, small enough to cache for 10,000s of runs.

Scoring reads four episode columns (`ScoringColumns`); the rest of the analysis reads a
few facts (episode count, last frame, longest wall time) and, for the bitwise check of
equivalence, whether two runs' columns are identical: a digest per column answers that
without the columns. Each fact is a function of any run (`last_frame`, ...).
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any, NamedTuple

import numpy as np

from runrecord import Run, schema
from runrecord.reader import Table

EPISODES = "episodes"
UPDATES = "updates"
AUDIT_COLUMNS = ("update", "learner_version", "rollout_policy_version_min",
                 "rollout_policy_version_max", "num_rollouts", "policy_changes_mid_rollout")
"""The columns of updates.csv that the staleness audit reads (analysis.verdicts.staleness);
the cache keeps them, so the audit of a cached run parses nothing."""


class ScoringColumns(NamedTuple):
    """The episode columns scoring reads, float64, in file order (sums are taken in this
    order, so the same arrays give the same bits).

    x: frames at which each episode ended (env_steps when frames is NaN throughout);
    ret: raw episode return; wall: wall_time_s; steps: env_steps (orders the final window).
    """

    x: np.ndarray
    ret: np.ndarray
    wall: np.ndarray
    steps: np.ndarray


def final_window_mean(returns: np.ndarray, steps: np.ndarray, last_n: int) -> float:
    """The raw final score: mean return of the last `last_n` episodes by env step (a
    stable sort: episodes ending at one step keep their recorded order)."""
    order = np.argsort(steps, kind="stable")
    return float(np.mean(returns[order][-last_n:]))


def episode_x(episodes: Table) -> np.ndarray:
    """Frames at which each episode ended (falls back to env_steps when frames is NaN)."""
    frames = episodes["frames"]
    if np.all(np.isnan(frames)):
        return episodes["env_steps"]
    return frames


def truncated(run: Run, frames: float | None) -> Run:
    """The run as it stood at `frames`: only the episodes that ended by then (None: the
    whole run). A plain Run, never cached (its values are computed, not read)."""
    if frames is None:
        return Run(run.run_dir, run.manifest, run.episodes, run.updates, list(run.warnings))
    keep = episode_x(run.episodes) <= frames
    episodes = Table({c: np.asarray(run.episodes[c])[keep] for c in run.episodes.names},
                     int(keep.sum()))
    return Run(run.run_dir, run.manifest, episodes, run.updates, list(run.warnings))


def scoring_columns_of(run: Run) -> ScoringColumns:
    ep = run.episodes
    return ScoringColumns(episode_x(ep), ep["episode_return"], ep["wall_time_s"],
                          ep["env_steps"])


def narrow(column: np.ndarray) -> np.ndarray:
    """The smallest of int32, float32, float64 that holds every value bit for bit (a
    float64 that round-trips through it to the same 64 bits); text stays text."""
    if column.dtype != np.float64:
        return column.astype(str)
    bits = column.view(np.int64)
    finite = bool(np.isfinite(column).all())
    if finite and (np.abs(column) < 2**31).all():
        as_int = column.astype(np.int32)
        if np.array_equal(as_int.astype(np.float64).view(np.int64), bits):
            return as_int
    with np.errstate(over="ignore"):  # a value past float32's range: kept as float64
        as_f32 = column.astype(np.float32)
    if np.array_equal(as_f32.astype(np.float64).view(np.int64), bits):
        return as_f32
    return column


def widen(stored: np.ndarray) -> np.ndarray:
    """Back to what the reader gives: float64, or object for text."""
    if stored.dtype.kind in "USO":
        return stored.astype(object)
    return stored.astype(np.float64)


def column_digest(column: np.ndarray) -> list[Any]:
    """[kind, length, hash]: two columns of one kind ('f' float, 'o' text) have equal
    digests exactly when analysis.verdicts.equivalence would call them equal (floats:
    equal values, NaN equal to NaN, -0.0 equal to 0.0; text: equal strings)."""
    if column.dtype.kind == "f":
        canonical = np.where(np.isnan(column), np.nan, column + 0.0).astype(np.float64)
        data = canonical.tobytes()
        kind = "f"
    else:
        data = json.dumps([str(v) for v in column]).encode()
        kind = "o"
    return [kind, len(column), hashlib.blake2b(data, digest_size=16).hexdigest()]


def compared_update_columns(updates: Table) -> list[str]:
    """Columns of updates.csv that the bitwise check compares: every loss_* and the
    parameter checksum."""
    return [c for c in updates.names if c.startswith(schema.LOSS_PREFIX)
            or c == "params_checksum"]


# ---------------------------------------------------------------- each fact of a run

# Each read from a parsed run's tables; analysis.inputs.cache registers how a CachedRun
# answers it from what its entry stored, without parsing.

@functools.singledispatch
def longest_wall_time(run: Run) -> float:
    """Longest finite wall time over both tables of a run (NaN when there is none)."""
    times = np.concatenate([run.episodes["wall_time_s"], run.updates["wall_time_s"]])
    times = times[np.isfinite(times)]
    return float(times.max()) if len(times) else float("nan")


@functools.singledispatch
def audit_table(run: Run) -> Table:
    """What the staleness audit reads of updates.csv (its AUDIT_COLUMNS, or all columns)."""
    return run.updates


@functools.singledispatch
def scoring_columns(run: Run) -> ScoringColumns:
    """The columns scoring reads."""
    return scoring_columns_of(run)


@functools.singledispatch
def episode_count(run: Run) -> int:
    """Finished episodes of a run."""
    return len(run.episodes)


@functools.singledispatch
def last_frame(run: Run) -> float:
    """The largest frame count at which an episode of the run ended (NaN when none)."""
    x = episode_x(run.episodes)
    return float(np.nanmax(x)) if not np.isnan(x).all() else float("nan")


@functools.singledispatch
def stored_digest(run: Run, table: str, column: str) -> list[Any] | None:
    """The cached digest of a column (analysis.inputs.facts.column_digest); None for a
    run that was parsed."""
    return None


@functools.singledispatch
def update_layout(run: Run) -> tuple[list[str], int]:
    """(column names, rows) of a run's updates.csv."""
    return run.updates.names, len(run.updates)


def run_facts(run: Run) -> dict[str, Any]:
    """The JSON-able facts of a parsed run that the cache index holds (module docstring)."""
    return {
        "episodes": len(run.episodes),
        "last_frame": last_frame(run),
        "wall_max": longest_wall_time(run),
        "update_names": run.updates.names,
        "update_rows": len(run.updates),
        "digests": {
            **{f"{EPISODES}/{c}": column_digest(run.episodes[c]) for c in run.episodes.names},
            **{f"{UPDATES}/{c}": column_digest(run.updates[c])
               for c in compared_update_columns(run.updates)},
        },
    }
