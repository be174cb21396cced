"""XLA flags the trainers set for themselves (before JAX creates its CPU backend).

On CPU, jax 0.10's XLA hands convolutions to YNNPACK fusions by default; for the IMPALA
ResNet on this project's 2-core CPU the same gradient step runs ~1.7x faster through XLA's
own (Eigen) convolutions (measured: 2.3 s -> 1.3 s per 256-sample PPO minibatch, with
forward passes ~20% faster too). The flag only concerns the CPU backend, so it is harmless
where the learner runs on a GPU. A user who sets any YNN fusion flag keeps theirs.
"""

from __future__ import annotations

import os
import re

DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"
CPU_CONV_FLAG = "--xla_cpu_experimental_ynn_fusion_type=-individual_convolution"


def with_flag(flags: str, flag: str) -> str:
    """`flags` (an XLA_FLAGS value) with `flag` ("--name=value") added, unless it already
    sets that name (the user's choice wins)."""
    name = flag.split("=", 1)[0].lstrip("-")
    if name in flags:
        return flags
    return f"{flags} {flag}".strip()


def with_device_count(flags: str, count: int) -> str:
    """`flags` (an XLA_FLAGS value) with the number of XLA's virtual CPU devices set to
    `count`, replacing any count it gives (the harness's runs and replays, the determinism
    check: a run's layout decides it, not the caller's environment)."""
    flags = re.sub(rf"{DEVICE_COUNT_FLAG}=\d+", "", flags).strip()
    return f"{flags} {DEVICE_COUNT_FLAG}={count}".strip()


def _apply(flag: str) -> None:
    # XLA reads XLA_FLAGS when the first backend is created: this must run before the
    # first computation. Child processes inherit the variable.
    os.environ["XLA_FLAGS"] = with_flag(os.environ.get("XLA_FLAGS", ""), flag)


def apply_cpu_conv_flag() -> None:
    """Add CPU_CONV_FLAG to this process's XLA_FLAGS. A process started as a cleanba entry
    point does it when it imports `cleanba`; `cleanba.core.runtime.train` for runs started from
    Python; nothing else does, so a process that only imports cleanba (the harness) keeps
    its environment, and its children theirs."""
    _apply(CPU_CONV_FLAG)


GPU_DETERMINISM_FLAG = "--xla_gpu_deterministic_ops=true"


def apply_gpu_determinism_flag() -> None:
    """--deterministic: make XLA's GPU kernels deterministic (scatter and reductions
    without atomics, deterministic autotuning choices). Like `apply_cpu_conv_flag`, it
    takes effect only if set before JAX creates its GPU backend; the trainers call it
    before their first JAX computation. No effect on CPU."""
    _apply(GPU_DETERMINISM_FLAG)


def trainer_xla_flags(flags: str, deterministic: bool) -> str:
    """The XLA_FLAGS a trainer runs under when started with `flags`: what
    `apply_cpu_conv_flag` and (with --deterministic) `apply_gpu_determinism_flag` make of
    them, in that order (a replay predicts its flags with it, harness.certify)."""
    flags = with_flag(flags, CPU_CONV_FLAG)
    return with_flag(flags, GPU_DETERMINISM_FLAG) if deterministic else flags
