"""Where the facts in ../shared are (published tables and scores; read-only, never copied
into the repo). CI clones the project with shared/ beside it; a git worktree of the
project may sit one folder deeper. Tests that need a file skip when it is absent."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_BASES = (REPO.parent / "shared", REPO.parents[1] / "shared")


def shared_path(*parts: str) -> Path:
    """../shared/<parts> (the first candidate base that has it; else the first base)."""
    for base in _BASES:
        if base.joinpath(*parts).exists():
            return base.joinpath(*parts)
    return _BASES[0].joinpath(*parts)


PAPER_DATA = shared_path("paper-data")
PUBLISHED_SCORES = shared_path("published-scores")
