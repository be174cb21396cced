"""What decides a run's bits, per run, as a certificate binds it: its device (kind, CPU
signature, device count, usable cores, processes) and its stack (Python, jax, jaxlib, flax,
optax, EnvPool, numpy, CUDA/cuDNN, XLA flags, PRNG implementation, matmul precision); the
same facts of this machine, for a replay; and what differs between the two.

Pure functions over manifests, except `here_facts` (this process's versions and CPU).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from cleanba.core.xla_flags import trainer_xla_flags, with_device_count
from runrecord.provenance import available_cpus, cpu_signature, package_versions

NOT_RECORDED = "not recorded"

PACKAGES = ("jax", "jaxlib", "flax", "optax", "envpool", "numpy")
STACK_KEYS = ("python", *PACKAGES, "cuda", "xla_flags", "prng_impl",
              "default_matmul_precision")
DEVICE_KEYS = ("platform", "device_kind", "cpu", "device_count", "usable_cpus", "processes")
FACT_KEYS = (*DEVICE_KEYS, *STACK_KEYS)
CPU_ONLY = ("cpu", "usable_cpus")
"""On GPUs each device runs its own kernels: the host CPU and its cores do not enter
(docs/deterministic.md); on CPU they do."""

NAMES = {"python": "Python", "jax": "jax", "jaxlib": "jaxlib", "flax": "flax",
         "optax": "optax", "envpool": "EnvPool", "numpy": "numpy", "cuda": "CUDA/cuDNN",
         "xla_flags": "XLA flags", "prng_impl": "PRNG implementation",
         "default_matmul_precision": "default matmul precision", "platform": "platform",
         "device_kind": "device kind", "cpu": "CPU", "device_count": "device count",
         "usable_cpus": "usable CPU cores", "processes": "processes",
         "deterministic": "--deterministic", "deterministic_groups": "deterministic env groups",
         "max_isa": "XLA CPU ISA cap"}


def run_facts(manifest: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(device, stack) of one run from its manifest: NOT_RECORDED for a fact it lacks (a
    baseline has no jax, a record from before the determinism block no XLA flags); a
    block's null stays null (no CUDA on CPU, the backend's default matmul precision)."""
    prov = manifest.get("provenance") or {}
    packages = prov.get("packages") or {}
    block = manifest.get("determinism") or {}

    def from_block(key: str) -> Any:
        return block[key] if key in block else NOT_RECORDED

    stack: dict[str, Any] = {"python": prov.get("python") or NOT_RECORDED}
    for name in PACKAGES:
        stack[name] = packages.get(name) or block.get(name) or NOT_RECORDED
    for key in ("cuda", "xla_flags", "prng_impl", "default_matmul_precision"):
        stack[key] = from_block(key)
    device: dict[str, Any] = {key: from_block(key) for key in DEVICE_KEYS[:-1]}
    device["processes"] = (manifest.get("layout") or {}).get("num_processes") or NOT_RECORDED
    return device, stack


def is_deterministic(manifest: Mapping[str, Any]) -> bool | None:
    """Whether the run was made with --deterministic (None: no determinism block)."""
    block = manifest.get("determinism")
    if not isinstance(block, Mapping):
        return None
    return bool(block.get("deterministic"))


def replay_base_flags(environ_flags: str, device: Mapping[str, Any]) -> str:
    """The XLA_FLAGS a replay starts its trainer with: this environment's, with the
    recorded virtual device count on CPU (as the harness gives its runs)."""
    if device.get("platform") == "cpu" and isinstance(device.get("device_count"), int):
        return with_device_count(environ_flags, device["device_count"])
    return environ_flags


def replay_xla_flags(environ_flags: str, device: Mapping[str, Any], deterministic: bool) -> str:
    """The XLA_FLAGS a replay's trainer will run under: `replay_base_flags` plus the flags
    the trainer sets for itself."""
    return trainer_xla_flags(replay_base_flags(environ_flags, device), deterministic)


def here_facts(device: Mapping[str, Any], deterministic: bool,
               environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """This machine's values of the facts that can be known before a replay starts
    (without starting JAX): versions, CPU signature, cores, and the XLA flags the replay
    would run under. Platform, device kind and PRNG come from the replay's own record."""
    packages = package_versions(PACKAGES)
    return {"python": sys.version.split()[0], **packages, "cpu": cpu_signature(),
            "usable_cpus": len(available_cpus()),
            "xla_flags": replay_xla_flags(environ.get("XLA_FLAGS", ""), device, deterministic)}


def _flag_difference(recorded: str, other: str, where: str) -> str | None:
    a, b = set(str(recorded).split()), set(str(other).split())
    if a == b:
        return None
    parts = []
    if b - a:
        parts.append(f"{' '.join(sorted(b - a))} {where} only")
    if a - b:
        parts.append(f"{' '.join(sorted(a - b))} recorded only")
    return f"XLA flags differ ({'; '.join(parts)})"


def differences(recorded: Mapping[str, Any], other: Mapping[str, Any], *,
                keys: Sequence[str] | None = None, where: str = "here",
                cores_at_least: bool = False) -> list[str]:
    """What differs between a run's recorded facts (its device and stack, or its
    determinism block) and `other` (this machine's, or a replay's block: `where` names
    it), over `keys` (default: the facts `other` has); each as "<name> <recorded>
    (recorded) vs <other> (<where>)", "<name> not recorded", or for XLA flags the flags on
    one side only. On GPUs the host's CPU and cores are not compared. `cores_at_least`:
    `other['usable_cpus']` is what this machine offers, enough when it is at least the
    recorded count (a replay pins itself to that many)."""
    on_gpu = recorded.get("platform") not in ("cpu", NOT_RECORDED)
    out = []
    for key in keys if keys is not None else [k for k in FACT_KEYS if k in other]:
        was, now = recorded.get(key, NOT_RECORDED), other.get(key, NOT_RECORDED)
        if (on_gpu and key in CPU_ONLY) or was == now:
            continue
        name = NAMES.get(key, key)
        if was == NOT_RECORDED:
            out.append(f"{name} {NOT_RECORDED}")
        elif key == "xla_flags":
            diff = _flag_difference(str(was), str(now), where)
            if diff:
                out.append(diff)
        elif key == "usable_cpus" and cores_at_least:
            if not isinstance(now, int) or now < int(was):
                out.append(f"usable CPU cores: {was} recorded, {now} {where}")
        elif str(was) != str(now):
            out.append(f"{name} {was} (recorded) vs {now} ({where})")
    return out
