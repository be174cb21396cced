"""`pip install ARGS` into a test's own venv the way scripts/setup.sh installs: through uv
with pip's settings (scripts/uv_install.py, several times faster on a machine whose cache
is empty, as CI's), else through pip itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harness_cli import ROOT


def pip_install(python: str | Path, *args: str,
                timeout: float = 1200) -> subprocess.CompletedProcess:
    """Install ARGS into the environment of `python`; the CompletedProcess of the install
    that did it (uv's, or pip's when uv failed or could not be had)."""
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "uv_install.py"), str(python),
                        *args], capture_output=True, text=True, timeout=timeout)
    if r.returncode == 0:
        return r
    return subprocess.run([str(python), "-m", "pip", "install", "-q",
                           "--disable-pip-version-check", *args],
                          capture_output=True, text=True, timeout=timeout)
