"""Where and how a run was made: git state, versions, host, command line."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from runrecord.paths import PROJECT_ROOT

DEFAULT_PACKAGES = ("jax", "jaxlib", "flax", "optax", "envpool", "ale-py", "numpy", "tyro")


DISTRIBUTION = "cleanba-bench"
"""This project's distribution name (pyproject.toml): its installed version stands in for a
commit where the code is not a checkout of its own."""


def _git(path: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True,
                          timeout=10, check=True).stdout.strip()


def git_top_level(path: Path) -> str | None:
    """The top level of the git repository `path` is in (None outside any)."""
    try:
        return _git(path, "rev-parse", "--show-toplevel") or None
    except (OSError, subprocess.SubprocessError):
        return None


def is_own_checkout(path: Path) -> bool:
    """Whether `path` is a checkout's top level, not a folder inside another repository."""
    top = git_top_level(path)
    return top is not None and Path(top).resolve() == Path(path).resolve()


def git_state(path: Path = PROJECT_ROOT) -> dict[str, Any]:
    """{'sha': ..., 'dirty': bool} of the git checkout whose top level is `path`.

    Anywhere else, {'sha': None, 'dirty': None, 'checkout': 'not a checkout', 'inside':
    the enclosing repository's top level or None, 'version': the installed distribution's
    version or None}. A project copied without its .git into another repository's folder
    (or installed into a .venv inside one) is not that repository's checkout, yet
    `git -C path rev-parse HEAD` answers with the enclosing repository's commit: the H200
    lease of 2026-12-04 recorded such a foreign sha as ours
    (results/hardware/nvidia-h200/README.md). So a commit is named only when git's top
    level is `path` itself."""
    inside = git_top_level(path)
    if inside is not None and Path(inside).resolve() == Path(path).resolve():
        try:
            dirty = bool(_git(path, "status", "--porcelain", "--untracked-files=no"))
            return {"sha": _git(path, "rev-parse", "HEAD"), "dirty": dirty}
        except (OSError, subprocess.SubprocessError):
            inside = None
    try:
        version: str | None = importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        version = None
    return {"sha": None, "dirty": None, "checkout": "not a checkout", "inside": inside,
            "version": version}


def package_versions(names: Iterable[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for n in names:
        try:
            out[n] = importlib.metadata.version(n)
        except importlib.metadata.PackageNotFoundError:
            out[n] = None
    return out


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# Vector extensions that change which kernels XLA's CPU compiler emits, widest first.
VECTOR_ISAS = ("avx512f", "avx2", "avx", "sse4_2")


def cpu_signature_of(cpuinfo: str) -> str | None:
    """'<vendor> family <f> model <m>: <widest vector ISA>' of the first processor in a
    /proc/cpuinfo text (None when it has none). The model name alone does not tell CPU
    generations apart ('AMD EPYC' is printed for AVX2-only and AVX-512 parts), and XLA
    compiles for the host's vector extensions: runs on two signatures may differ in bits."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor's block is enough
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    if "vendor_id" not in fields:
        return None
    flags = set(fields.get("flags", "").split())
    widest = next((isa for isa in VECTOR_ISAS if isa in flags), "no AVX/SSE4.2")
    return (f"{fields['vendor_id']} family {fields.get('cpu family', '?')} "
            f"model {fields.get('model', '?')}: {widest}")


def cpu_signature() -> str | None:
    """cpu_signature_of this host's /proc/cpuinfo; None where there is none (not Linux)."""
    try:
        return cpu_signature_of(Path("/proc/cpuinfo").read_text())
    except OSError:
        return None


def available_cpus() -> list[int]:
    """The CPUs this process may run on: its affinity (every CPU where the OS has none)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return list(range(os.cpu_count() or 1))


def collect(packages: Iterable[str] = DEFAULT_PACKAGES, **extra: Any) -> dict[str, Any]:
    """The manifest's provenance block. `extra` adds entries (accelerators, baseline commit)."""
    info: dict[str, Any] = {
        "git": git_state(),
        "python": sys.version.split()[0],
        "packages": package_versions(packages),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "num_cpus": os.cpu_count(),
        "command": [sys.executable, *sys.argv],
        "cwd": os.getcwd(),
    }
    info.update(extra)
    return info


def free_port() -> int:
    """A TCP port free on this host now (a localhost jax.distributed coordinator, moolib's
    broker)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
