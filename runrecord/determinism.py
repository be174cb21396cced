"""The manifest's `determinism` block: the facts that decide whether two runs can give the
same bits (docs/run-format.md, docs/deterministic.md). Pure: the trainer reads the values
from JAX and its environment (cleanba.core.records.determinism_facts) and passes them here.
"""

from __future__ import annotations

from typing import Any

ISA_CAP_FLAG = "--xla_cpu_max_isa"

# Keys of the block, in the order the manifest and the determinism check show them.
DETERMINISM_KEYS = (
    "deterministic",  # --deterministic on or off
    "deterministic_groups",  # env groups G (null when the mode is off)
    "platform",  # JAX backend: cpu, gpu, tpu
    "device_kind",  # e.g. "cpu", "NVIDIA H100 80GB HBM3"
    "device_count",  # devices of this process (on CPU: virtual host devices)
    "usable_cpus",  # cores this process may run on (its CPU affinity)
    "cpu",  # vendor, family, model and widest vector ISA (runrecord.provenance.cpu_signature)
    "jax",
    "jaxlib",
    "xla_flags",  # XLA_FLAGS in force when the run started ("" when unset)
    "max_isa",  # the instruction-set cap --xla_cpu_max_isa of xla_flags, or null
    "default_matmul_precision",  # jax_default_matmul_precision, null: backend default
    "prng_impl",  # jax's default PRNG and whether threefry is partitionable (later key)
    "cuda",  # CUDA runtime, cuDNN and driver versions on GPUs, else null (later key)
)


def max_isa(xla_flags: str) -> str | None:
    """The value of the last --xla_cpu_max_isa in an XLA_FLAGS string (XLA keeps the last
    one), None when it has none."""
    cap = None
    for flag in xla_flags.split():
        name, _, value = flag.partition("=")
        if name == ISA_CAP_FLAG:
            cap = value
    return cap


def determinism_block(*, deterministic: bool, groups: int | None, platform: str,
                      device_kind: str, device_count: int, usable_cpus: int | None, cpu: str | None,
                      jax_version: str, jaxlib_version: str, xla_flags: str,
                      matmul_precision: str | None, prng_impl: str | None = None,
                      cuda: str | None = None) -> dict[str, Any]:
    """The block as the manifest holds it (keys: DETERMINISM_KEYS). `prng_impl`, e.g.
    "threefry2x32 (partitionable)"; `cuda`, e.g. "runtime 12080, cuDNN 91000" (None off
    GPUs): keys added later, null where a caller does not know them."""
    block = {
        "deterministic": deterministic,
        "deterministic_groups": groups if deterministic else None,
        "platform": platform,
        "device_kind": device_kind,
        "device_count": device_count,
        "usable_cpus": usable_cpus,
        "cpu": cpu,
        "jax": jax_version,
        "jaxlib": jaxlib_version,
        "xla_flags": xla_flags,
        "max_isa": max_isa(xla_flags),
        "default_matmul_precision": matmul_precision,
        "prng_impl": prng_impl,
        "cuda": cuda,
    }
    return block
