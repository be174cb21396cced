"""The flags of `harness verify` (tyro), apart from the verification itself: `python -m
harness` builds every subcommand's parser at start-up, and harness.certify.verify imports
the whole certificate stack."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import tyro

from runrecord import PROJECT_ROOT


@dataclass
class Verify:
    """Check a certificate: tier 1 (hashes, Merkle root, completeness, every claim
    recomputed) and, with --replay K, tier 2 (K runs drawn with fresh randomness, their
    first --updates N, or --segments S between their checkpoints, re-run with
    --deterministic, every updates.csv column and episode compared bit for bit).
    Exit 0 VERIFIED, 1 MISMATCH, 4 NOT CHECKABLE, 2 bad input."""

    cert: tyro.conf.Positional[Path]
    """The certificate file."""
    records: Path | None = None
    """Folder of the certified run folders; default the path the certificate records."""
    input: tuple[str, ...] = ()
    """NAME=PATH: where a bound input of the claims is here (default: its recorded path)."""
    replay: int = 0
    """Tier 2: replay this many runs, drawn among the deterministic ones."""
    updates: int = 3
    """Tier 2: updates replayed per run (the first N)."""
    segments: str | None = None
    """Tier 2: instead of the first N updates, replay S segments of each drawn run (S, or
    'all'), each from one of its certified checkpoints to the next or to its end; the
    last segment, which sets the final score, always (runs made with --checkpoint-every)."""
    draw_seed: int | None = None
    """Tier 2: repeat a printed draw (default: fresh randomness from the OS)."""
    expect_root: str | None = None
    """The root you were given (a paper, a signature): a different root is a MISMATCH."""
    checkout: tyro.conf.Suppress[Path] = PROJECT_ROOT
    """The checkout whose code replays the runs (tests give a copy; no flag)."""
