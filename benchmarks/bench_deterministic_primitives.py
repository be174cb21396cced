"""Overhead of the deterministic primitives (cleanba/numerics/deterministic.py) on this machine.

Prints milliseconds per call (median of --repeats after one warm-up call) of
- actor inference, IMPALA ResNet on (4, 84, 84) frames: plain `network.apply` vs
  `microbatched_apply` at several micro-batch sizes;
- one PPO minibatch gradient: plain value_and_grad of `ppo_loss` over the minibatch vs
  `deterministic_grad` (lax.map over micro-batches, one program) vs the host loop (one
  jitted call per micro-batch + `PairwiseAccumulator`).

    python benchmarks/bench_deterministic_primitives.py --num-envs 8 --minibatch 256
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from cleanba.core.xla_flags import apply_cpu_conv_flag
from cleanba.numerics import deterministic as det
from cleanba.numerics.losses import normalized_advantages, ppo_loss, ppo_loss_sums
from cleanba.numerics.networks import init_params, make_network
from runrecord.cli_help import parse_config
from runrecord.words import counted


@dataclass
class BenchConfig:
    num_envs: int = 8
    """envs per actor inference call"""
    inference_microbatches: tuple[int, ...] = (8, 4, 2, 1)
    """micro-batch sizes M to time for inference (each must divide --num-envs)"""
    minibatch: int = 256
    """samples per gradient step"""
    microbatch: int = 32
    """micro-batch size M of the gradient (must divide --minibatch)"""
    repeats: int = 3
    """timed calls per variant (after one warm-up call that also compiles)"""
    skip_scan_grad: bool = False
    """skip the lax.map gradient (slow on CPU: convolutions inside a loop)"""


def time_ms(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """(first call incl. compile, median of `repeats` later calls), milliseconds."""
    t = time.perf_counter()
    jax.block_until_ready(fn())
    first = (time.perf_counter() - t) * 1e3
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        times.append((time.perf_counter() - t) * 1e3)
    return first, statistics.median(times)


def report(name: str, first: float, ms: float, base: float | None) -> None:
    ratio = f"{ms / base:6.2f}x" if base else "   base"
    print(f"  {name:<44} {ms:10.1f} ms  {ratio}   (first call {first / 1e3:6.1f} s)")


def main(cfg: BenchConfig) -> None:
    print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}, "
          f"{counted(jax.device_count(), 'device')}")
    obs_shape, num_actions = (4, 84, 84), 6
    network = make_network(obs_shape, num_actions)
    params = init_params(network, obs_shape, jax.random.PRNGKey(0))
    rng = np.random.default_rng(0)

    print(f"\nactor inference, IMPALA ResNet, {cfg.num_envs} envs:")
    obs = rng.integers(0, 256, size=(cfg.num_envs, *obs_shape), dtype=np.uint8)
    plain_apply = jax.jit(network.apply)
    first, base = time_ms(lambda: plain_apply(params, obs), cfg.repeats)
    report("plain apply", first, base, None)
    for m in cfg.inference_microbatches:
        fn = jax.jit(functools.partial(det.microbatched_apply, network.apply, microbatch_size=m))
        first, ms = time_ms(functools.partial(fn, params, obs), cfg.repeats)
        report(f"microbatched_apply M={m} ({cfg.num_envs // m} chunks)", first, ms, base)

    b, m = cfg.minibatch, cfg.microbatch
    n = det.num_microbatches(b, m)
    print(f"\nPPO gradient, IMPALA ResNet, minibatch {b}, micro-batch {m} ({n} micro-batches):")
    batch: dict[str, np.ndarray] = {
        "obs": rng.integers(0, 256, size=(b, *obs_shape), dtype=np.uint8),
        "actions": rng.integers(0, num_actions, size=b).astype(np.int32),
        "logprobs": np.full(b, -np.log(num_actions), np.float32),
        "advantages": rng.standard_normal(b).astype(np.float32),
        "returns": rng.standard_normal(b).astype(np.float32),
        "mask": np.ones(b, np.float32),
    }
    coefs = {"clip_coef": 0.1, "ent_coef": 0.01, "vf_coef": 0.5}

    def plain_loss(p, mb):
        logits, values = network.apply(p, mb["obs"])
        return ppo_loss(logits, mb["logprobs"], mb["actions"], mb["advantages"], values,
                        mb["returns"], mb["mask"], **coefs)

    plain_grad = jax.jit(jax.value_and_grad(plain_loss, has_aux=True))
    first, base = time_ms(lambda: plain_grad(params, batch), cfg.repeats)
    report("plain value_and_grad(ppo_loss)", first, base, None)

    def micro_loss(p, mb):
        logits, values = network.apply(p, mb["obs"])
        return ppo_loss_sums(logits, mb["logprobs"], mb["actions"],
                                           mb["advantages"], values, mb["returns"],
                                           mb["mask"], **coefs)

    # advantages normalised once over the minibatch, as the deterministic step does
    batch["advantages"] = np.asarray(normalized_advantages(jnp.asarray(batch["advantages"]),
                                                         jnp.asarray(batch["mask"])))
    mbs = det.split_microbatches(batch, m)

    if not cfg.skip_scan_grad:
        scan_grad = jax.jit(lambda p, x: det.deterministic_grad(micro_loss, p, x))
        first, ms = time_ms(lambda: scan_grad(params, mbs), cfg.repeats)
        report("deterministic_grad (lax.map, one program)", first, ms, base)

    one_grad = jax.jit(lambda p, x: det.microbatch_grad(micro_loss, p, x))
    add = jax.jit(lambda a, c: jax.tree.map(jnp.add, a, c))
    mb_list = [jax.tree.map(lambda x, k=k: x[k], mbs) for k in range(n)]

    def host_loop():
        acc = det.PairwiseAccumulator(add)
        for mb in mb_list:
            acc.add(one_grad(params, mb))
        return acc.result()

    first, ms = time_ms(host_loop, cfg.repeats)
    report("host loop (microbatch_grad x n + accumulator)", first, ms, base)


if __name__ == "__main__":
    apply_cpu_conv_flag()  # the trainers' XLA CPU configuration, before JAX's first computation
    main(parse_config(BenchConfig))
