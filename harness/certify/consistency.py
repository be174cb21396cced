"""A run record's internal consistency, from its own files (tier 1 of `harness verify`):
what the writers' rules and the env fix between the columns of updates.csv, episodes.csv
and manifest.json. A forged column that its file's hash no longer betrays (the sweep was
certified again) still has to agree with the others.

Pure functions of a manifest and the record's two tables (runrecord.Table); each finding
names the file and the row, rows counted from 1 after the header line. A check applies
only where the record says enough for it, and where the record's writer guarantees the
rule (`Consistency.not_applied` says which did not, and why):

| check | file | applies to |
|---|---|---|
| frames never decrease | updates.csv | every record |
| frames never decrease | episodes.csv | cleanba and imports (their episodes are written in step order; a baseline's actors report theirs as they come) |
| frames = env_steps x frame skip | both | every record but imports (an import's steps are the source's, its frames per step declared on import) |
| an episode is not longer than the steps its env took | episodes.csv | cleanba (its envs step in lockstep: env_steps / num_envs each) and baselines (env_steps, all envs, bounds any one env); not imports (steps as the source logged them) |
| return = length | episodes.csv | CartPole-v1 (reward 1 per step, unclipped) |
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchenv import frames_per_step
from runrecord import schema
from runrecord.reader import Table
from runrecord.words import counted

# Envs whose reward is fixed by the step: a whole episode's return equals its length.
RETURN_IS_LENGTH = ("CartPole-v1",)


@dataclass(frozen=True)
class Finding:
    """One rule broken in one file: its first row and how many rows break it."""

    file: str
    row: int  # first offending data row, 1-based after the header
    text: str
    rows: int = 1

    def line(self) -> str:
        more = f" ({counted(self.rows, 'row')} in all)" if self.rows > 1 else ""
        return f"{self.file} row {self.row}: {self.text}{more}"


@dataclass
class Consistency:
    """What the checks of one record found, and which did not apply (each with why)."""

    findings: list[Finding] = field(default_factory=list)
    not_applied: list[str] = field(default_factory=list)


def decreasing_rows(values: np.ndarray) -> np.ndarray:
    """Indices of the finite values below the finite value before them (NaN cells, which
    the reader makes of empty ones, are passed over)."""
    where = np.flatnonzero(np.isfinite(values))
    v = values[where]
    return where[1:][v[1:] < v[:-1]]


def finite(*columns: np.ndarray) -> np.ndarray:
    """Where every one of `columns` holds a number (the reader makes empty cells NaN): the
    rows a rule between them is checked on."""
    return np.logical_and.reduce([np.isfinite(c) for c in columns])


def numeric(table: Table, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(the column as float64, NaN where a cell is empty or no number; indices of the
    cells that are text, not numbers)."""
    col = table[name]
    if col.dtype != object:
        return col, np.array([], dtype=np.int64)
    values = np.full(len(col), np.nan)
    text = []
    for i, cell in enumerate(col):
        try:
            values[i] = float(cell) if cell != "" else np.nan
        except ValueError:
            text.append(i)
    return values, np.array(text, dtype=np.int64)


def frame_skip(manifest: Mapping[str, Any]) -> int:
    """env_protocol.frame_skip, else the env's own (4 on Atari ids, 1 elsewhere: what
    trainers and adapters write frames with when the protocol names none)."""
    proto = manifest.get("env_protocol") or {}
    skip = proto.get("frame_skip") if isinstance(proto, Mapping) else None
    return int(skip) if skip is not None else frames_per_step(str(manifest.get("env_id", "")))


def is_import(manifest: Mapping[str, Any]) -> bool:
    return bool(manifest.get("imported"))


def is_cleanba(manifest: Mapping[str, Any]) -> bool:
    return str(manifest.get("system", "")).startswith("cleanba-") and not is_import(manifest)


def lockstep_envs(manifest: Mapping[str, Any]) -> int | None:
    """How many envs share env_steps evenly (cleanba: num_envs, all step together); 1 for
    a baseline (env_steps counts all envs' steps, so bounds any one); None for an import
    (its env_steps are whatever the source logged)."""
    if is_import(manifest):
        return None
    if is_cleanba(manifest):
        n = (manifest.get("hyperparameters") or {}).get("num_envs")
        return n if isinstance(n, int) and n > 0 else None
    return 1


def _finding(file: str, rows: np.ndarray, text: Callable[[int], str]) -> list[Finding]:
    if len(rows) == 0:
        return []
    first = int(rows[0])
    return [Finding(file, first + 1, text(first), len(rows))]


def _num(x: float) -> str:
    return f"{x:g}" if np.isfinite(x) and x == int(x) else repr(float(x))


def frames_findings(file: str, table: Table, skip: int | None, monotone: bool,
                    ) -> list[Finding]:
    """The frames column of one file: never decreasing (when `monotone`), and
    env_steps x `skip` (unless None)."""
    steps, _ = numeric(table, "env_steps")
    frames, _ = numeric(table, "frames")
    out: list[Finding] = []
    if monotone:
        out += _finding(file, decreasing_rows(frames), lambda i: (
            f"frames {_num(frames[i])} after {_num(frames[:i][np.isfinite(frames[:i])][-1])} "
            "in the row before: frames never decrease"))
    if skip is not None:
        off = np.flatnonzero(finite(steps, frames) & (frames != steps * skip))
        out += _finding(file, off, lambda i: (
            f"frames {_num(frames[i])} is not env_steps {_num(steps[i])} x frame skip {skip}"))
    return out


def episode_findings(env_id: str, episodes: Table, envs: int | None) -> list[Finding]:
    """Episode lengths against their env's steps (`envs`: lockstep_envs; None: not
    checked), and returns against lengths where the env fixes the relation."""
    file = schema.EPISODES_FILE
    steps, _ = numeric(episodes, "env_steps")
    lengths, _ = numeric(episodes, "episode_length")
    returns, _ = numeric(episodes, "episode_return")
    out: list[Finding] = []
    if envs is not None:
        share = "its env's share" if envs > 1 else "all envs'"
        longer = np.flatnonzero(finite(lengths, steps) & (lengths * envs > steps))
        out += _finding(file, longer, lambda i: (
            f"episode_length {_num(lengths[i])} is longer than the steps its env had taken: "
            f"env_steps {_num(steps[i])} over {counted(envs, 'env')} ({share})"))
    if env_id in RETURN_IS_LENGTH:
        differ = np.flatnonzero(finite(returns, lengths) & (returns != lengths))
        out += _finding(file, differ, lambda i: (
            f"episode_return {_num(returns[i])} is not episode_length {_num(lengths[i])} "
            f"({env_id} gives a reward of 1 per step)"))
    return out


def text_cells(file: str, table: Table) -> list[Finding]:
    """Cells of the checked columns that are text where a number belongs."""
    out: list[Finding] = []
    for name in table.names:
        if name in schema.OPTIONAL_UPDATE_COLUMNS:  # hex text
            continue
        _, rows = numeric(table, name)
        if len(rows):
            cell = table[name][rows[0]]
            out.append(Finding(file, int(rows[0]) + 1, f"{name} {cell!r} is not a number",
                               len(rows)))
    return out


def missing_columns(table: Table, needed: tuple[str, ...]) -> list[str]:
    return [c for c in needed if c not in table]


def check_record(manifest: Mapping[str, Any], episodes: Table, updates: Table,
                 ) -> Consistency:
    """Every consistency check that applies to one record."""
    out = Consistency()
    env_id = str(manifest.get("env_id", ""))
    imported = is_import(manifest)
    skip = None if imported else frame_skip(manifest)
    if imported:
        out.not_applied.append("frames = env_steps x frame skip: an import (its steps are "
                               "the source's, frames per step declared on import)")
    for file, table, in_order in ((schema.UPDATES_FILE, updates, True),
                                  (schema.EPISODES_FILE, episodes,
                                   imported or is_cleanba(manifest))):
        if not len(table):
            continue
        lacking = missing_columns(table, ("env_steps", "frames"))
        if lacking:
            out.not_applied.append(f"{file}'s frames: no {', '.join(lacking)} column")
            continue
        out.findings += text_cells(file, table)
        out.findings += frames_findings(file, table, skip, in_order)
    if not len(episodes):
        return out
    if not (imported or is_cleanba(manifest)):
        out.not_applied.append("episodes.csv frames in order: a baseline's actors report "
                               "episodes as they come, not in step order")
    lacking = missing_columns(episodes, ("env_steps", "episode_return", "episode_length"))
    if lacking:
        out.not_applied.append(f"episode lengths and returns: no {', '.join(lacking)} "
                               "column in episodes.csv")
        return out
    envs = lockstep_envs(manifest)
    if envs is None:
        out.not_applied.append("episode lengths against env steps: "
                               + ("an import (steps as the source logged them)" if imported
                                  else "no num_envs in the hyperparameters"))
    out.findings += episode_findings(env_id, episodes, envs)
    return out
