"""The segments of a certified run that tier 2 can replay, and which ones a draw takes.

A run made with checkpoints (--checkpoint-every) keeps its newest --checkpoint-keep of
them in its record; the certificate hashes them with every other file. A segment is the
span of updates from one kept checkpoint to the next one, or to the run's last update: a
replay resumes from the segment's checkpoint and re-runs it, so any segment costs what
it holds, not the updates before it. The last segment holds the updates that set the final
score, so every draw takes it; the other S - 1 are drawn with fresh randomness (the same
SHA-256 ranking as the draw of runs). A prefix replay (--updates N) starts at update 0
and needs no checkpoint.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cleanba.core import checkpoint

ALL = "all"


@dataclass(frozen=True)
class Segment:
    """Updates first + 1 to last, replayed from the checkpoint of update `first`."""

    first: int
    last: int

    def text(self) -> str:
        return f"updates {self.first + 1}-{self.last} (from checkpoints/{self.first})"


def run_segments(record_dir: Path, updates: int) -> list[Segment]:
    """The replayable segments of a run of `updates` updates, in order (none without a
    checkpoint in its record)."""
    starts = sorted(u for u in checkpoint.updates_on_disk(record_dir) if 0 < u < updates)
    ends = [*starts[1:], updates]
    return [Segment(a, b) for a, b in zip(starts, ends, strict=True)]


def parse_count(text: str) -> int | None:
    """--segments S: a count >= 1, or 'all' (None). ValueError says what is valid."""
    if text == ALL:
        return None
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"--segments {text!r}: give a count >= 1 or 'all'")
    return int(text)


def pick(segments: Sequence[Segment], count: int | None, seed: int, run_id: str
         ) -> list[Segment]:
    """The last segment and count - 1 others ranked by SHA-256('<seed>:<run>:<first>'),
    in order; count None: all."""
    if count is None or count >= len(segments):
        return list(segments)
    *others, last = segments
    ranked = sorted(others, key=lambda s: hashlib.sha256(
        f"{seed}:{run_id}:{s.first}".encode()).hexdigest())
    return sorted([*ranked[:count - 1], last], key=lambda s: s.first)


def escape_probability(segments: int, drawn: int) -> float:
    """The probability that a forgery confined to one segment other than the last escapes
    a draw of `drawn` of `segments` segments (the last always drawn): (n - s) / (n - 1)."""
    if segments <= 1 or drawn >= segments:
        return 0.0
    return (segments - drawn) / (segments - 1)


def covered_share(picked: Sequence[Segment], updates: int) -> float:
    """The share of a run's updates that the picked segments replay."""
    return sum(s.last - s.first for s in picked) / updates if updates else 0.0
