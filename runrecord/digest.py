"""The running digest of a run's records (updates.csv's `records_digest` column).

Row k's digest is SHA-256 over row k - 1's digest, row k's params checksum and the cells
of the episodes that ended in update k (their env_steps within row k - 1's and row k's,
in file order), cut to DIGEST_HEX hex digits. A replay that reproduces a row's digest
therefore reproduces every episode the chain covers up to it, and a certificate that
binds the last row binds the whole chain. The cells are the CSV text as written
(runrecord.writer.format_value), so a check recomputes the chain from the files alone.
A record without the column, or with empty cells (a baseline, an import, a record
written before the column), has no chain; that is no finding.
"""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from runrecord import schema
from runrecord.words import counted
from runrecord.writer import format_value

DIGEST_COLUMN = "records_digest"
DIGEST_HEX = 32
# The episode cells the digest covers: what the code decides, not the machine's clock.
EPISODE_CELLS = ("env_steps", "frames", "env_index", "episode_return", "episode_length")


def next_digest(previous: str, params_checksum: str,
                episodes: Iterable[Sequence[str]]) -> str:
    """Row k's digest from row k - 1's ("" before the first row), row k's params
    checksum and the EPISODE_CELLS text of each episode that ended in update k."""
    h = hashlib.sha256(f"{previous}\n{params_checksum}\n".encode())
    for cells in episodes:
        h.update((",".join(cells) + "\n").encode())
    return h.hexdigest()[:DIGEST_HEX]


def episode_cells(row: Mapping[str, Any]) -> tuple[str, ...]:
    """An episode row's EPISODE_CELLS as the CSV holds them."""
    return tuple(format_value(row[c]) for c in EPISODE_CELLS)


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def chain_break(updates: Sequence[Mapping[str, str]], episodes: Sequence[Mapping[str, str]]
                ) -> tuple[int, str] | None:
    """(row, why) of the first updates.csv row (1-based after the header) whose digest the
    rows before it, its params checksum and its episodes do not give; None where the chain
    holds or the record has none (no column, or the first row's cell empty)."""
    if not updates or not updates[0].get(DIGEST_COLUMN):
        return None
    previous, steps_before, at = "", float("-inf"), 0
    for i, row in enumerate(updates, start=1):
        steps = float(row["env_steps"])
        ended: list[tuple[str, ...]] = []
        while at < len(episodes) and float(episodes[at]["env_steps"]) <= steps:
            if float(episodes[at]["env_steps"]) > steps_before:
                ended.append(tuple(episodes[at][c] for c in EPISODE_CELLS))
            at += 1
        expected = next_digest(previous, row.get("params_checksum") or "", ended)
        if row.get(DIGEST_COLUMN) != expected:
            return i, (f"{DIGEST_COLUMN} {row.get(DIGEST_COLUMN)!r} is not the chain's "
                       f"{expected!r} (over the row before, params_checksum and the "
                       f"{counted(len(ended), 'episode')} that ended in update {row.get('update')})")
        previous, steps_before = expected, steps
    return None


def record_chain_break(run_dir: Path) -> tuple[int, str] | None:
    """chain_break of the record in `run_dir` (its CSVs as text)."""
    return chain_break(_rows(Path(run_dir) / schema.UPDATES_FILE),
                       _rows(Path(run_dir) / schema.EPISODES_FILE))


def last_digest(run_dir: Path) -> str | None:
    """The last updates.csv row's digest: what a certificate binds (None: no chain)."""
    try:
        rows = _rows(Path(run_dir) / schema.UPDATES_FILE)
    except OSError:
        return None
    return (rows[-1].get(DIGEST_COLUMN) or None) if rows else None
