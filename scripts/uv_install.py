"""`pip install ARGS` into the environment of PYTHON, done by uv (several times faster than
pip: parallel downloads, no bytecode compiling), with pip's own settings: uv reads neither
pip.conf nor PIP_* variables, so the indexes, find-links, constraints and certificate that
`pip config list` shows are passed on. Picks the highest version across indexes, as pip does.

    python scripts/uv_install.py PYTHON ARGS...     (e.g. .venv/bin/python -e ".[train,dev]")

uv is the one on PATH, or the one beside this interpreter, or else installed there with
pip first. Exit code: uv's (0 installed); 3 when uv cannot be had. Callers fall back to
pip on any non-zero exit (scripts/setup.sh), so a machine where uv does not work still
installs, only slower.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

# pip's setting -> uv's option (each value of a list gets its own option)
OPTIONS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url",
           "find-links": "--find-links", "constraint": "--constraint"}


def pip_settings() -> dict[str, list[str]]:
    """{setting: values} from `pip config list` (files and PIP_* variables; the sections
    pip install reads: global, install and the environment's)."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                         text=True, timeout=60).stdout
    got: dict[str, list[str]] = {}
    for line in out.splitlines():
        key, _, value = line.partition("=")
        section, _, name = key.rpartition(".")
        if section not in ("global", "install", ":env:") or not value:
            continue
        try:  # pip prints repr(value)
            text = str(ast.literal_eval(value))
        except (ValueError, SyntaxError):
            text = value
        values = text.split()
        got.setdefault(name, [])
        got[name] += [v for v in values if v not in got[name]]
    return got


def uv_options(settings: dict[str, list[str]]) -> tuple[list[str], dict[str, str]]:
    opts = ["--index-strategy", "unsafe-best-match"]
    for name, flag in OPTIONS.items():
        for value in settings.get(name, []):
            opts += [flag, value]
    if settings.get("no-index", ["false"])[-1].lower() in ("1", "true", "yes", "on"):
        opts.append("--no-index")
    env = {}
    if settings.get("cert"):
        env["SSL_CERT_FILE"] = settings["cert"][-1]
    return opts, env


def find_uv() -> str | None:
    beside = Path(sys.executable).parent / "uv"
    found = shutil.which("uv") or (str(beside) if beside.exists() else None)
    if found:
        return found
    p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "uv"],
                       capture_output=True, text=True, timeout=600)
    return str(beside) if p.returncode == 0 and beside.exists() else None


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    python, args = argv[0], argv[1:]
    uv = find_uv()
    if uv is None:
        print("uv_install: no uv (not on PATH; pip could not install it)", file=sys.stderr)
        return 3
    opts, env = uv_options(pip_settings())
    cmd = [uv, "pip", "install", "--quiet", "--python", python, *opts, *args]
    return subprocess.run(cmd, env={**os.environ, **env}).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
