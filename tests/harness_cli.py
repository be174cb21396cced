"""The project root as the tests see it, and `harness(*args)`: the harness CLI run as a
user runs it, from the project root, its output captured."""

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
