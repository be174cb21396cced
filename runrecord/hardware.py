"""Where a run record belongs in the GPU campaign's store (results/hardware/README.md):
`<device kind>/<stack>/`, both read from the record's own manifest, so a record made on
another device or under another software stack is kept apart from the others. The
campaign's lease and merge (benchmarks/campaign*.py) and the report's "Hardware evidence"
section (harness/hardware.py) name folders with these functions alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any


def slug(text: str) -> str:
    """`NVIDIA H100 80GB HBM3` -> `nvidia-h100-80gb-hbm3` (a folder name)."""
    out = re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-.")
    return out or "unknown"


def kind_folder(device_kinds: list[str] | tuple[str, ...] | set[str]) -> str:
    """The folder of a set of JAX device kinds ('cpu', 'NVIDIA H100 80GB HBM3')."""
    kinds = sorted({str(k) for k in device_kinds})
    return slug(" + ".join(kinds)) if kinds else "unknown"


def stack_folder(python: str, jax: str, jaxlib: str, envpool: str) -> str:
    """`py3.12-jax0.11.2-jaxlib0.11.2-envpool1.2.5` (Python to the minor version: its patch
    level does not change what XLA computes)."""
    minor = ".".join(str(python).split(".")[:2])
    return slug(f"py{minor}-jax{jax}-jaxlib{jaxlib}-envpool{envpool}")


def record_place(manifest: Mapping[str, Any]) -> tuple[str, str]:
    """(device kind folder, stack folder) of a run record, from its own manifest: the
    device kinds of its layout and the versions in its provenance."""
    prov = manifest.get("provenance") or {}
    packages = prov.get("packages") or {}
    devices = (manifest.get("layout") or {}).get("devices") or []
    return kind_folder(devices), stack_folder(
        str(prov.get("python", "?")), str(packages.get("jax", "?")),
        str(packages.get("jaxlib", "?")), str(packages.get("envpool", "?")))
