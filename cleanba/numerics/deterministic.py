"""Layout-independent numerics for the deterministic mode of the Cleanba trainers.

Goal: with the same seed and hyperparameters, bit-identical parameters, losses and episode
records on every layout of the same device type (one or two learner devices, one or two
actor devices, one or two processes). Floating-point addition is not associative, so
every result must be computed by the same operations in the same order whatever the
layout. Three rules give that (docs/deterministic.md explains them and what they cost):

1. Fixed shapes. The network only ever sees micro-batches of a fixed size M (a
   hyperparameter, never derived from the layout): inference runs `lax.map` over chunks
   of M envs (`microbatched_apply`), gradients are taken per micro-batch of M samples
   (`microbatch_grads` in one jit, or one jitted call per micro-batch from the host).
   XLA compiles the same computation for the same shape to the same code, so a sample's
   outputs do not depend on how many others share its call, device or process.
2. Fixed reduction order. Micro-batch gradients (and any statistic over a minibatch) are
   added by one pairwise tree over the global micro-batch index (`pairwise_sum`), never by
   psum/pmean, whose order follows the device count. A device that holds an aligned
   power-of-two block of micro-batches adds its block first (a subtree of that tree) and
   only the block sums cross devices (`fixed_order_sum`); otherwise every micro-batch sum
   is gathered. Either way every device ends with the same bits, so replicated parameters
   stay identical.
3. Randomness by global index. The sampling key of env i at step t is
   fold_in(fold_in(run_key, i), t) (`env_sampling_keys`), never a per-thread or per-device
   key.

Elementwise operations (adds, the optimiser's update) are correctly rounded IEEE
operations, so they give the same bits whatever XLA fuses or vectorises; only reductions
and contractions (sums, matmuls, convolutions) depend on shapes and order, and those are
what the rules above pin down.

All functions are pure JAX and work under jit, pmap and shard_map (pass the mapped axis
name as `axis_name`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from cleanba.numerics.losses import categorical_logprob
from cleanba.numerics.parallel import LEARNER_AXIS, per_device_params  # shared with the learner
from cleanba.numerics.parallel import checksum as params_checksum  # one checksum for the project


def _all_gather(x: jax.Array, axis_name: str, *, tiled: bool = False) -> jax.Array:
    """all_gather whose result is typed device-invariant, so shard_map's out_specs=P()
    holds. Public since jax 0.10 (`to="invarying"`); jax 0.12 made the private
    `all_gather_invariant` this module used before underscored."""
    return jax.lax.all_gather(x, axis_name, tiled=tiled, to="invarying")


__all__ = [
    "FixedOrderGradient",
    "PairwiseAccumulator",
    "combine_block_sums",
    "deterministic_grad",
    "env_sampling_keys",
    "fixed_order_masked_mean_std",
    "gradient_path_is_one_program",
    "fixed_order_sum",
    "microbatch_grad",
    "microbatch_grads",
    "microbatched_apply",
    "microbatched_policy_step",
    "num_microbatches",
    "pairwise_sum",
    "per_device_params",
    "params_checksum",
    "sample_actions",
    "split_microbatches",
]

PyTree = Any


# --------------------------------------------------------------------------------------
# shapes


def num_microbatches(num_samples: int, microbatch_size: int) -> int:
    """num_samples // microbatch_size; ValueError unless microbatch_size divides it."""
    if microbatch_size < 1:
        raise ValueError(f"microbatch_size must be >= 1, got {microbatch_size}")
    if num_samples % microbatch_size:
        raise ValueError(
            f"{num_samples} samples cannot be split into micro-batches of {microbatch_size}: "
            f"the micro-batch size must divide the per-call sample count on every layout "
            f"(e.g. a divisor of the envs per actor call and of the samples per learner device)"
        )
    return num_samples // microbatch_size


def split_microbatches(tree: PyTree, microbatch_size: int) -> PyTree:
    """Leaves (n * M, ...) -> (n, M, ...): consecutive samples form a micro-batch."""
    def split(x: jax.Array) -> jax.Array:
        n = num_microbatches(x.shape[0], microbatch_size)
        return x.reshape(n, microbatch_size, *x.shape[1:])

    return jax.tree.map(split, tree)


def _merge_microbatches(tree: PyTree) -> PyTree:
    return jax.tree.map(lambda x: x.reshape(x.shape[0] * x.shape[1], *x.shape[2:]), tree)


# --------------------------------------------------------------------------------------
# 1. inference and 2. action sampling


def microbatched_apply(
    apply_fn: Callable[[PyTree, jax.Array], PyTree],
    params: PyTree,
    obs: jax.Array,
    microbatch_size: int,
) -> PyTree:
    """apply_fn(params, obs) computed as `lax.map` over chunks of `microbatch_size` envs.

    obs: (E, ...) with E a multiple of M = microbatch_size. Returns apply_fn's outputs with
    leading axis E, e.g. (logits (E, A), value (E,)). Env e's outputs are bit-identical
    whatever E is (8 envs in one call, two calls of 4, another device of the same type),
    because the network only ever runs on (M, ...) inputs inside the same loop body.
    """
    chunks = split_microbatches(obs, microbatch_size)
    return _merge_microbatches(jax.lax.map(lambda o: apply_fn(params, o), chunks))


def env_sampling_keys(run_key: jax.Array, env_indices: jax.Array, step: jax.Array | int) -> jax.Array:
    """Key of each env at a step: fold_in(fold_in(run_key, global env index), step).

    env_indices: (E,) int, the GLOBAL env indices (0 .. total envs - 1 of the run, over
    all actor threads, devices and processes). step: the env's step counter (the same for
    every env block of the run at the same point of the rollout). Returns (E,) keys of
    run_key's kind (raw uint32 keys give (E, 2)).
    """
    return jax.vmap(lambda i: jax.random.fold_in(jax.random.fold_in(run_key, i), step))(
        env_indices
    )


def sample_actions(
    run_key: jax.Array, logits: jax.Array, env_indices: jax.Array, step: jax.Array | int
) -> jax.Array:
    """Categorical actions (E,) int32 from logits (E, A), one key per env (`env_sampling_keys`).

    Sampling is elementwise per env (Gumbel-max), so env e's action is the same whichever
    other envs share the call.
    """
    keys = env_sampling_keys(run_key, env_indices, step)
    return jax.vmap(jax.random.categorical)(keys, logits).astype(jnp.int32)


def microbatched_policy_step(
    apply_fn: Callable[[PyTree, jax.Array], tuple[jax.Array, jax.Array]],
    params: PyTree,
    obs: jax.Array,
    run_key: jax.Array,
    env_indices: jax.Array,
    step: jax.Array | int,
    microbatch_size: int,
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """The actor's deterministic step: (actions, logprobs, logits, values), each (E, ...).

    Inference by `microbatched_apply`, sampling by `sample_actions` with global env
    indices; a drop-in for a plain `apply` + `categorical` policy step.
    """
    logits, values = microbatched_apply(apply_fn, params, obs, microbatch_size)
    actions = sample_actions(run_key, logits, env_indices, step)
    return actions, categorical_logprob(logits, actions), logits, values


# --------------------------------------------------------------------------------------
# fixed-order reductions


def _pairwise_level(x: jax.Array) -> jax.Array:
    n = x.shape[0]
    pairs = x[0 : n - n % 2 : 2] + x[1 : n - n % 2 : 2]
    return jnp.concatenate([pairs, x[n - 1 :]], axis=0) if n % 2 else pairs


def pairwise_sum(stacked: PyTree) -> PyTree:
    """Sum over the leading axis by a fixed pairwise tree; leaves (n, ...) -> (...).

    Each level adds neighbours (0+1, 2+3, ...); an odd element out is carried unchanged to
    the next level. The tree depends only on n, so the bits do too: an aligned block of
    2^k consecutive elements is summed by a subtree, which is what lets devices add their
    own block first (`fixed_order_sum`). Adds are elementwise, so XLA cannot reorder them.
    """
    def tree_sum(x: jax.Array) -> jax.Array:
        if x.shape[0] < 1:
            raise ValueError("pairwise_sum needs at least one element on the leading axis")
        while x.shape[0] > 1:
            x = _pairwise_level(x)
        return x[0]

    return jax.tree.map(tree_sum, stacked)


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def fixed_order_sum(local_stacked: PyTree, axis_name: str | None = None) -> PyTree:
    """`pairwise_sum` over the GLOBAL leading axis, identical on every device and layout.

    local_stacked: leaves (n_local, ...), this device's consecutive block of the global
    sequence (device k of the mapped axis holds elements k * n_local ... (k + 1) * n_local
    - 1, as shard_map/pmap order the axis: process by process, then local device order).
    Without axis_name it is plain `pairwise_sum`. With it, the result is
    pairwise_sum(concatenation of all devices' blocks), the same bits as one device holding
    everything: if n_local is a power of two the block sum is a subtree, so only block
    sums (one per device) are gathered; otherwise all n_local elements are gathered.
    """
    if axis_name is None:
        return pairwise_sum(local_stacked)
    n_local = jax.tree.leaves(local_stacked)[0].shape[0]
    if _is_power_of_two(n_local):
        block = pairwise_sum(local_stacked)
        return pairwise_sum(jax.tree.map(lambda x: _all_gather(x, axis_name), block))
    gathered = jax.tree.map(lambda x: _all_gather(x, axis_name, tiled=True), local_stacked)
    return pairwise_sum(gathered)


# One jitted elementwise add shared by every accumulator: a jit created per accumulator
# would compile again for every minibatch.
_tree_add = jax.jit(lambda a, b: jax.tree.map(jnp.add, a, b))


class PairwiseAccumulator:
    """`pairwise_sum` of a stream of pytrees, holding O(log n) partial sums.

    For the host-loop gradient (one jitted call per micro-batch, see docs): `add` each
    micro-batch gradient in global order, then `result()`. The partial sums are combined
    like a binary counter (two sums of the same size are added as soon as both exist) and
    flushed smallest-first from the right, which is exactly `pairwise_sum`'s tree for
    every n (tests/test_cleanba_deterministic_primitives.py checks this). Works on arrays
    of any sharding: the adds are elementwise, so each device adds its own shard.
    """

    def __init__(self, add: Callable[[PyTree, PyTree], PyTree] | None = None):
        self._add = add or _tree_add
        self._stack: list[tuple[int, PyTree]] = []  # (size, partial sum), sizes decreasing
        self.count = 0

    def add(self, tree: PyTree) -> None:
        size, total = 1, tree
        while self._stack and self._stack[-1][0] == size:
            left_size, left = self._stack.pop()
            size, total = left_size + size, self._add(left, total)
        self._stack.append((size, total))
        self.count += 1

    def result(self) -> PyTree:
        if not self._stack:
            raise ValueError("PairwiseAccumulator.result() before any add()")
        _, total = self._stack[-1]
        for _, left in reversed(self._stack[:-1]):
            total = self._add(left, total)
        return total


# --------------------------------------------------------------------------------------
# 3. gradients


def microbatch_grads(
    loss_fn: Callable[[PyTree, PyTree], tuple[jax.Array, PyTree]],
    params: PyTree,
    microbatches: PyTree,
    axis_name: str | None = None,
) -> tuple[PyTree, PyTree]:
    """Per-micro-batch gradients in one program: `lax.map` of value_and_grad.

    loss_fn(params, microbatch) -> (loss, aux): the micro-batch's SHARE of the minibatch
    loss, i.e. a sum over its samples (see `losses.ppo_loss_sums`), so the minibatch
    gradient is the sum of micro-batch gradients. microbatches: leaves (n, M, ...) (see
    `split_microbatches`). Returns (grads, aux), leaves stacked (n, ...); aux includes
    "loss". Micro-batch k's gradient is bit-identical whatever n is. Inside shard_map or
    pmap pass axis_name: the gradients are then this device's own (see `per_device_params`).
    """
    if axis_name is not None:
        params = per_device_params(params, axis_name)

    def one(mb: PyTree) -> tuple[PyTree, PyTree]:
        (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, mb)
        return grads, {**aux, "loss": loss}

    return jax.lax.map(one, microbatches)


def microbatch_grad(
    loss_fn: Callable[[PyTree, PyTree], tuple[jax.Array, PyTree]],
    params: PyTree,
    microbatch: PyTree,
    axis_name: str | None = None,
) -> tuple[PyTree, PyTree]:
    """Gradient (and aux, with "loss") of ONE micro-batch (leaves (M, ...)): the body of
    the host-loop path, jitted once and called per micro-batch (see docs/deterministic.md).

    Not the same bits as `microbatch_grads`' loop body on every backend (XLA compiles a
    loop body differently; on this CPU the ResNet's gradients differ in the last bits), so
    a run uses one path throughout; each path is layout-independent on its own.
    """
    if axis_name is not None:
        params = per_device_params(params, axis_name)
    (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, microbatch)
    return grads, {**aux, "loss": loss}


def combine_block_sums(block_sum: PyTree, num_local_microbatches: int, axis_name: str) -> PyTree:
    """Finish `fixed_order_sum` from each device's `PairwiseAccumulator` result.

    block_sum: this device's pairwise sum of its num_local_microbatches consecutive
    micro-batch gradients. Only valid when that count is a power of two (the block is
    then a subtree of the global pairwise tree); ValueError otherwise.
    """
    if not _is_power_of_two(num_local_microbatches):
        raise ValueError(
            f"the host-loop gradient needs a power-of-two number of micro-batches per learner "
            f"device, got {num_local_microbatches}; choose the minibatch size, micro-batch "
            f"size and learner device count so that minibatch / (M * devices) is 1, 2, 4, ..."
        )
    return pairwise_sum(jax.tree.map(lambda x: _all_gather(x, axis_name), block_sum))


def deterministic_grad(
    loss_fn: Callable[[PyTree, PyTree], tuple[jax.Array, PyTree]],
    params: PyTree,
    microbatches: PyTree,
    axis_name: str | None = None,
) -> tuple[PyTree, PyTree]:
    """Sum of the minibatch's micro-batch gradients (and aux), layout-independent.

    Each device passes its consecutive block of the minibatch's micro-batches (leaves
    (n_local, M, ...), device k holding global micro-batches k * n_local ...); the result
    is `pairwise_sum` over all micro-batches in global order, the same bits on every
    device and for every number of devices or processes. Divide by the minibatch's sample
    count (or valid-sample count) afterwards for a mean-loss gradient.
    """
    grads, aux = microbatch_grads(loss_fn, params, microbatches, axis_name)
    return fixed_order_sum(grads, axis_name), fixed_order_sum(aux, axis_name)


def fixed_order_masked_mean_std(
    x: jax.Array, mask: jax.Array, axis_name: str | None = None
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(mean, population std, valid count) of x over mask > 0, in a fixed order.

    x, mask: (n_local, M), this device's micro-batches of the minibatch (as for
    `deterministic_grad`). Two passes (mean, then squared deviations), each summed within
    micro-batches and then across them by `fixed_order_sum`, so the statistics (e.g. for
    PPO's advantage normalisation over the minibatch) are the same bits on every layout.
    """
    if x.ndim != 2 or x.shape != mask.shape:
        raise ValueError(f"x and mask must both be (n_local, M), got {x.shape} and {mask.shape}")
    valid = mask > 0
    w = jnp.where(valid, mask, 0.0).astype(x.dtype)
    xv = jnp.where(valid, x, 0.0)

    def total(per_sample: jax.Array) -> jax.Array:
        per_microbatch = pairwise_sum(per_sample.T)  # (n_local,), elementwise adds only
        return fixed_order_sum(per_microbatch, axis_name)

    count = total(w)
    mean = total(xv * w) / jnp.maximum(count, 1.0)
    var = total(jnp.square(xv - mean) * w) / jnp.maximum(count, 1.0)
    return mean, jnp.sqrt(var), count


# --------------------------------------------------------------------------------------
# the trainers' deterministic learner step (host-loop path over the learner mesh)


def gradient_path_is_one_program(obs_shape: tuple[int, ...]) -> bool:
    """The trainers' choice of `FixedOrderGradient` path, from the observations alone (so
    every layout of a run takes the same path): image observations (the IMPALA ResNet) use
    the host loop, vector observations (MLPs) one program."""
    return len(obs_shape) != 3


class FixedOrderGradient:
    """One deterministic gradient step over all learner devices, for the trainers.

    Each learner device holds `groups_per_device` micro-batches of the minibatch (its env
    groups, in global group order; a power of two). The gradient of every micro-batch's
    loss SUM is taken on its device, the device's block is added by the pairwise tree, the
    devices' block sums are joined in the fixed pairwise order (`combine_block_sums`), and
    `finish` turns the summed (grads, aux) into the new state and metrics (identically on
    every device). Same bits for 1, 2, 4, ... learner devices in one or several processes.

    Every program whose result reaches the parameters has the SAME HLO on every layout:
    XLA's CPU emitters mark each reduction `reassoc`, so LLVM may sum in any
    order, and it picks the order per compiled kernel (vectorisation and unrolling depend
    on the instruction set and on everything fused into the kernel). A kernel that also
    computed the layout-dependent index arithmetic of "group k of this device's slice"
    (e.g. IMPALA's bias gradient fused with the gather of the group's mask) could
    therefore sum in another order on 1 than on 2 learner devices. So the step runs as
    separate programs: `select` (exact indexing only: the micro-batch of group k, the
    same shapes on every layout), the gradient of one micro-batch (or, one program, of
    the device's stacked micro-batches), the cross-device join (elementwise adds), and
    `finish` on replicated inputs. Two paths, each layout-independent on its own (their
    bits differ from each other, so a run uses one on every layout):

    - host loop (`one_program=False`): one gradient call per local group k, a
      `PairwiseAccumulator` adds the calls' per-device results; for convolutional networks
      on CPU, where XLA runs convolutions inside a loop ~10x slower;
    - one program (`one_program=True`): `lax.map` over the device's micro-batches and their
      pairwise sum in one call per minibatch; for small networks, where dispatches
      dominate. The loop body starts with an optimisation barrier, so the loop's indexing
      (its trip count is the layout-dependent number of local groups) is never fused into
      the body's kernels.

    select(*args, k) -> micro-batch pytree: runs per device, k a traced int32; args
    follow `in_split` (see `LearnerMesh.map`). Indexing only, no arithmetic on floats.
    microbatch_loss(params, microbatch) -> (loss_sum, aux_sums).
    finish(state, grads_sum, aux_sums) -> (state, metrics).
    """

    def __init__(self, mesh: Any, select: Callable[..., PyTree],
                 microbatch_loss: Callable[[PyTree, PyTree], tuple[jax.Array, PyTree]],
                 in_split: tuple[bool, ...], finish: Callable[..., tuple[Any, PyTree]],
                 groups_per_device: int, one_program: bool = False):
        if not _is_power_of_two(groups_per_device):
            raise ValueError(
                f"each learner device must hold a power-of-two number of env groups, got "
                f"{groups_per_device}")
        self.groups_per_device = groups_per_device
        self.one_program = one_program

        def grad_one(params: PyTree, microbatch: PyTree) -> tuple[PyTree, PyTree]:
            loss_fn = partial(_loss_with_sum, microbatch_loss, microbatch)
            (_, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
            return grads, aux

        def grad_call(state: Any, microbatch: PyTree) -> tuple[PyTree, PyTree]:
            return grad_one(per_device_params(state.params, LEARNER_AXIS), microbatch)

        def select_all(*args: Any) -> tuple[PyTree]:
            ks = jnp.arange(groups_per_device, dtype=jnp.int32)
            return (jax.vmap(lambda k: select(*args, k))(ks),)

        def block_call(state: Any, microbatches: PyTree) -> tuple[PyTree, PyTree]:
            params = per_device_params(state.params, LEARNER_AXIS)
            body = lambda mb: grad_one(params, jax.lax.optimization_barrier(mb))  # noqa: E731
            return pairwise_sum(jax.lax.map(body, microbatches))

        def combine(grads: PyTree, aux: PyTree) -> tuple[PyTree, PyTree]:
            return combine_block_sums((grads, aux), groups_per_device, LEARNER_AXIS)

        if one_program:
            self._select = mesh.map(select_all, in_split, (True,))
            self._grad = mesh.map(block_call, (False, True), (True, True))
        else:
            self._select = mesh.map(lambda *a: (select(*a),), (*in_split, False), (True,))
            self._grad = mesh.map(grad_call, (False, True), (True, True))
            self._index = [mesh.replicate(np.int32(k)) for k in range(groups_per_device)]
        self._combine = mesh.map(combine, (True, True), (False, False))
        self._finish = mesh.map(finish, (False, False, False), (False, False))

    def __call__(self, state: Any, *args: Any) -> tuple[Any, PyTree]:
        if self.one_program:
            (microbatches,) = self._select(*args)
            block = self._grad(state, microbatches)
        else:
            accumulator = PairwiseAccumulator()
            for k in self._index:
                (microbatch,) = self._select(*args, k)
                accumulator.add(self._grad(state, microbatch))
            block = accumulator.result()
        grads, aux = self._combine(*block)
        return self._finish(state, grads, aux)


def _loss_with_sum(microbatch_loss: Callable[[PyTree, PyTree], tuple[jax.Array, PyTree]],
                   microbatch: PyTree, params: PyTree) -> tuple[jax.Array, PyTree]:
    loss, aux = microbatch_loss(params, microbatch)
    return loss, {**aux, "loss_sum": loss}
