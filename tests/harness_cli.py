"""The project root as the tests see it, and the harness CLI run as a user runs it, from
the project root, its output captured: `harness(*args)` for any subcommand, and
`run_args` / `harness_run_argv` / `harness_run` for `harness run` on a sweep."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def harness(*args: str, timeout: float = 300, **kw: Any) -> subprocess.CompletedProcess:
    """`python -m harness ARGS` in the project root (kw: subprocess.run's, e.g. env)."""
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, **kw)


def run_args(sweep: Path, root: Path, *extra: str) -> list[str]:
    """`harness run`'s arguments for SWEEP into ROOT, without the live display."""
    return ["run", "--sweep", str(sweep), "--results-root", str(root), "--no-progress", *extra]


def harness_run_argv(sweep: Path, root: Path, *extra: str) -> list[str]:
    """The whole command line of `harness run`, for tests that start it with Popen."""
    return [sys.executable, "-m", "harness", *run_args(sweep, root, *extra)]


def harness_run(sweep: Path, root: Path, *extra: str, timeout: float = 900,
                **kw: Any) -> subprocess.CompletedProcess:
    """`harness run` on SWEEP into ROOT to its end (kw: subprocess.run's, e.g. env)."""
    return harness(*run_args(sweep, root, *extra), timeout=timeout, **kw)
