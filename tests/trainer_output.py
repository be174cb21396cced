"""What a run's trainer printed, read from the run's stdout.log (where the harness keeps it),
for tests that wait until a trainer says it holds at a point before they signal it."""

from __future__ import annotations

from pathlib import Path


def trainer_output(run_dir: Path) -> str:
    """The run's stdout.log so far ("" before the harness has made it)."""
    try:
        return (run_dir / "stdout.log").read_text(errors="replace")
    except OSError:
        return ""


def trainer_said(run_dir: Path, text: str) -> bool:
    return text in trainer_output(run_dir)
