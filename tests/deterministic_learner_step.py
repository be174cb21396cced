"""A PPO learner step built only from cleanba/numerics/deterministic.py, shared by
tests/test_cleanba_deterministic_primitives.py (1, 2, 3, 4 devices in one process) and
run as a script by its cross-process test (2 processes over jax.distributed, gloo):

    python tests/deterministic_learner_step.py PROCESS_ID NUM_PROCESSES PORT NUM_MICROBATCHES

prints one line `RESULT <json>` with the sha256 digests of the step's gradient, params
after the optimiser step and metrics. Not collected by pytest (no test_ prefix).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cleanba.numerics import deterministic as det  # noqa: E402
from cleanba.numerics.losses import ppo_loss_sums  # noqa: E402
from cleanba.numerics.networks import init_params, make_network  # noqa: E402

AXIS = "learners"
NUM_ACTIONS = 6
MICROBATCH = 8
CLIP, ENT, VF = 0.1, 0.01, 0.5


def make_problem(obs_shape: tuple[int, ...], num_microbatches: int, seed: int = 0):
    """(network, params, global minibatch with leaves (num_microbatches, M, ...))."""
    network = make_network(obs_shape, NUM_ACTIONS, channels=(8, 16), hidden=64,
                           mlp_hidden=(64, 64))
    params = init_params(network, obs_shape, jax.random.PRNGKey(seed))
    rng = np.random.default_rng(seed)
    b = num_microbatches * MICROBATCH
    if len(obs_shape) == 3:
        obs = rng.integers(0, 256, size=(b, *obs_shape), dtype=np.uint8)
    else:
        obs = rng.standard_normal((b, *obs_shape)).astype(np.float32)
    batch = {
        "obs": obs,
        "actions": rng.integers(0, NUM_ACTIONS, size=b).astype(np.int32),
        "logprobs": (np.log(1.0 / NUM_ACTIONS) + 0.1 * rng.standard_normal(b)).astype(
            np.float32),
        "advantages": (3.0 * rng.standard_normal(b) + 0.5).astype(np.float32),
        "returns": rng.standard_normal(b).astype(np.float32),
        "mask": (rng.random(b) > 0.1).astype(np.float32),
    }
    return network, params, det.split_microbatches(batch, MICROBATCH)


def make_optimizer(name: str = "adam") -> optax.GradientTransformation:
    if name == "adam":
        return optax.chain(optax.clip_by_global_norm(0.5), optax.adam(2.5e-4, eps=1e-5))
    # IMPALA's: PyTorch-style RMSprop (eps inside the sqrt is optax's eps_in_sqrt default)
    return optax.chain(optax.clip_by_global_norm(40.0),
                       optax.rmsprop(6e-4, decay=0.99, eps=0.01))


def deterministic_step(network, tx, params, opt_state, microbatches, axis_name=None):
    """One PPO minibatch step: fixed-order advantage statistics, micro-batch gradients
    summed in a fixed order, mean over valid samples, optimiser update."""
    mean, std, _ = det.fixed_order_masked_mean_std(
        microbatches["advantages"], microbatches["mask"], axis_name)
    microbatches = {**microbatches,
                    "advantages": (microbatches["advantages"] - mean) / (std + 1e-8)}

    grad_sum, aux = det.deterministic_grad(ppo_loss_fn(network), params, microbatches,
                                           axis_name)
    count = jnp.maximum(aux["count"], 1.0)
    grads = jax.tree.map(lambda g: g / count, grad_sum)
    updates, opt_state = tx.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    metrics = {k: v / count for k, v in aux.items() if k != "count"}
    return grads, params, opt_state, metrics


def pmean_step(network, tx, params, opt_state, local_batch, axis_name):
    """The usual data-parallel step, for contrast: each device's mean loss on its equal
    shard, pmean of the gradients. All samples valid and no advantage normalisation, so
    it is mathematically the same gradient on every layout: only float order differs."""
    from cleanba.numerics.losses import ppo_loss

    def loss_fn(p):
        logits, values = network.apply(p, local_batch["obs"])
        return ppo_loss(logits, local_batch["logprobs"], local_batch["actions"],
                        local_batch["advantages"], values, local_batch["returns"],
                        jnp.ones_like(local_batch["mask"]), CLIP, ENT, VF,
                        normalize_advantages=False)[0]

    # Cast outside the grad: each device its own gradient (else shard_map psums it).
    grads = jax.lax.pmean(jax.grad(loss_fn)(det.per_device_params(params, axis_name)), axis_name)
    updates, opt_state = tx.update(grads, opt_state, params)
    return grads, optax.apply_updates(params, updates), opt_state


def ppo_loss_fn(network):
    def loss_fn(p, mb):
        logits, values = network.apply(p, mb["obs"])
        return ppo_loss_sums(
            logits, mb["logprobs"], mb["actions"], mb["advantages"], values, mb["returns"],
            mb["mask"], CLIP, ENT, VF)

    return loss_fn


def host_loop_step(mesh: Mesh, network, tx, params, opt_state, global_mbs):
    """The host-loop path: one jitted call per micro-batch (each device computing its k-th
    local micro-batch), `PairwiseAccumulator` per device, then `combine_block_sums`."""
    n_local = jax.tree.leaves(global_mbs)[0].shape[0] // mesh.devices.size
    split = P(AXIS)

    def normalise(mbs):
        mean, std, _ = det.fixed_order_masked_mean_std(mbs["advantages"], mbs["mask"], AXIS)
        return {**mbs, "advantages": (mbs["advantages"] - mean) / (std + 1e-8)}

    normalise_fn = jax.jit(jax.shard_map(normalise, mesh=mesh, in_specs=(split,),
                                         out_specs=split))
    loss_fn = ppo_loss_fn(network)

    def grad_k(params, mbs, k):
        mb = jax.tree.map(lambda x: jax.lax.dynamic_index_in_dim(x, k, keepdims=False), mbs)
        grads, aux = det.microbatch_grad(loss_fn, params, mb, AXIS)
        return jax.tree.map(lambda x: x[None], (grads, aux))

    grad_fn = jax.jit(jax.shard_map(grad_k, mesh=mesh, in_specs=(P(), split, P()),
                                    out_specs=split))

    def finish(params, opt_state, block):
        grad_sum, aux = det.combine_block_sums(jax.tree.map(lambda x: x[0], block), n_local,
                                               AXIS)
        count = jnp.maximum(aux["count"], 1.0)
        grads = jax.tree.map(lambda g: g / count, grad_sum)
        updates, opt_state = tx.update(grads, opt_state, params)
        metrics = {k: v / count for k, v in aux.items() if k != "count"}
        return grads, optax.apply_updates(params, updates), opt_state, metrics

    finish_fn = jax.jit(jax.shard_map(finish, mesh=mesh, in_specs=(P(), P(), split),
                                      out_specs=(P(), P(), P(), P())))
    mbs = normalise_fn(global_mbs)
    acc = det.PairwiseAccumulator()
    for k in range(n_local):
        acc.add(grad_fn(params, mbs, np.int32(k)))
    return finish_fn(params, opt_state, acc.result())


def make_mesh(devices) -> Mesh:
    return Mesh(np.array(devices), (AXIS,))


def sharded_step(mesh: Mesh, network, tx, kind: str = "deterministic"):
    """jit(shard_map) of a step: params and opt state replicated, minibatch split on the
    leading (micro-batch) axis, outputs replicated (checked by shard_map)."""
    if kind == "deterministic":
        def per_device(params, opt_state, mbs):
            return deterministic_step(network, tx, params, opt_state, mbs, AXIS)
        out_specs: Any = (P(), P(), P(), P())
    else:
        def per_device(params, opt_state, mbs):
            local = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), mbs)
            return pmean_step(network, tx, params, opt_state, local, AXIS)
        out_specs = (P(), P(), P())
    return jax.jit(jax.shard_map(per_device, mesh=mesh, in_specs=(P(), P(), P(AXIS)),
                                 out_specs=out_specs))


def digest(tree: Any) -> str:
    h = hashlib.sha256()
    for leaf in jax.tree.leaves(jax.device_get(tree)):
        h.update(np.ascontiguousarray(leaf).tobytes())
    return h.hexdigest()


def run_in_process_mesh(mesh: Mesh, obs_shape, num_microbatches: int, kind="deterministic",
                        optimizer: str = "adam"):
    """Build the problem, place this process's share of it on `mesh` and run one step."""
    network, params, mbs = make_problem(obs_shape, num_microbatches)
    tx = make_optimizer(optimizer)
    opt_state = tx.init(params)
    split = NamedSharding(mesh, P(AXIS))
    # This process's devices hold a consecutive block of the global micro-batch axis.
    local_ids = [i for i, d in enumerate(mesh.devices.flat) if d.process_index == jax.process_index()]
    per_device = num_microbatches // mesh.devices.size
    lo, hi = local_ids[0] * per_device, (local_ids[-1] + 1) * per_device
    local = jax.tree.map(lambda x: x[lo:hi], mbs)
    global_mbs = jax.tree.map(lambda x: jax.make_array_from_process_local_data(split, x), local)
    if kind == "host_loop":
        return host_loop_step(mesh, network, tx, params, opt_state, global_mbs)
    step = sharded_step(mesh, network, tx, kind)
    return step(params, opt_state, global_mbs)


def main(argv: list[str]) -> None:
    process_id, num_processes, port, num_microbatches = (int(a) for a in argv[:4])
    obs_shape = tuple(int(d) for d in argv[4].split(",")) if len(argv) > 4 else (16,)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=f"localhost:{port}",
                               num_processes=num_processes, process_id=process_id,
                               initialization_timeout=60)
    devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
    grads, params, _, metrics = run_in_process_mesh(make_mesh(devices), obs_shape,
                                                    num_microbatches)
    local = lambda tree: jax.tree.map(lambda x: x.addressable_shards[0].data, tree)  # noqa: E731
    out = {"process": jax.process_index(), "devices": len(devices),
           "grads": digest(local(grads)), "params": digest(local(params)),
           "metrics": digest(local(metrics))}
    print("RESULT " + json.dumps(out), flush=True)
    jax.distributed.shutdown()


if __name__ == "__main__":
    main(sys.argv[1:])
