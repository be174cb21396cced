"""The learner's cross-device code, kept in one place.

Learner devices (of every process) form a 1-D mesh with axis `learners`. Batches carry a
leading axis with one entry per learner device (sharded over the mesh); the train state is
replicated. `LearnerMesh.map` runs a per-device function over the mesh (shard_map under jit)
and `learner_value_and_grad` (with `average_over_learners`) is the one cross-device
reduction: each device's own gradient, then a pmean of gradients and metrics. A
deterministic mode (its own issue) can replace that one function with "gather
per-device gradients and reduce them in a fixed order" without touching the algorithms.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

LEARNER_AXIS = "learners"


def average_over_learners(tree: Any) -> Any:
    """Mean of a pytree (gradients, metrics) over all learner devices of all processes."""
    return jax.lax.pmean(tree, axis_name=LEARNER_AXIS)


def per_device_params(params: Any, axis_name: str = LEARNER_AXIS) -> Any:
    """Mark replicated params as per-device ("varying") inside shard_map; call it OUTSIDE
    jax.grad, on the params the gradient is taken with respect to.

    Why: under shard_map (check_vma=True) the gradient with respect to a replicated input
    is SUMMED over the axis by the transpose of its implicit broadcast (a psum, in
    device-count-dependent order); a following pmean then yields the SUM of the devices'
    gradients, L times the mean on L learner devices. Cast first and each device gets its
    own gradient. A no-op for params that are already per-device.
    """

    def cast(x: jax.Array) -> jax.Array:
        axis_type = getattr(jax.typeof(x), "manual_axis_type", None)
        if axis_type is not None and axis_name in axis_type.varying:
            return x
        return jax.lax.pcast(x, axis_name, to="varying")

    return jax.tree.map(cast, params)


def learner_value_and_grad(loss_fn: Callable[[Any], tuple[jax.Array, Any]], params: Any):
    """(gradient, metrics) of `loss_fn(params) -> (loss, metrics)` on this device's data,
    averaged over all learner devices. Call inside `LearnerMesh.map`.
    """
    (_, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(per_device_params(params))
    return average_over_learners(grads), average_over_learners(metrics)


class LearnerMesh:
    """The learner devices of all processes and the shardings of state and batches."""

    def __init__(self, learner_device_ids: Sequence[int]):
        by_process: dict[int, list[jax.Device]] = {}
        for d in jax.devices():
            by_process.setdefault(d.process_index, []).append(d)
        devices: list[jax.Device] = []
        for p in sorted(by_process):
            local = sorted(by_process[p], key=lambda d: d.id)
            devices.extend(local[i] for i in learner_device_ids)
        self.devices = devices
        self.local_devices = [d for d in devices if d.process_index == jax.process_index()]
        self.mesh = Mesh(np.array(devices), (LEARNER_AXIS,))
        self.replicated = NamedSharding(self.mesh, P())
        self.split = NamedSharding(self.mesh, P(LEARNER_AXIS))

    def replicate(self, tree: Any) -> Any:
        """A copy of `tree` on every learner device (every process passes the same tree)."""
        return jax.tree.map(
            lambda x: jax.make_array_from_process_local_data(self.replicated, np.asarray(x)), tree
        )

    def shard(self, tree: Any) -> Any:
        """Host arrays with a leading axis of this process's learner devices -> global
        arrays split over all learner devices."""
        return jax.tree.map(
            lambda x: jax.make_array_from_process_local_data(self.split, np.asarray(x)), tree
        )

    def shard_parts(self, parts: Sequence[jax.Array]) -> jax.Array:
        """This process's rollouts' arrays of one field, (T, envs_i, ...) each, already on
        devices (the actors'), in global env order -> the global array `shard` makes of
        their concatenation along the env axis split evenly over this process's learner
        devices: the same values and sharding, moved device to device and concatenated on
        each learner device (nothing passes through host memory)."""
        starts = np.cumsum([0, *(p.shape[1] for p in parts)])
        per_device = int(starts[-1]) // len(self.local_devices)
        local = []
        for j, device in enumerate(self.local_devices):
            lo, hi = j * per_device, (j + 1) * per_device
            pieces = []
            for part, start, end in zip(parts, starts[:-1], starts[1:], strict=True):
                a, b = max(lo, int(start)), min(hi, int(end))
                if a < b:
                    piece = part if (a, b) == (start, end) else part[:, a - start:b - start]
                    pieces.append(jax.device_put(piece, device))
            whole = pieces[0] if len(pieces) == 1 else jnp.concatenate(pieces, axis=1)
            local.append(whole[None])
        shape = (len(self.devices), *local[0].shape[1:])
        return jax.make_array_from_single_device_arrays(shape, self.split, local)

    def map(self, fn: Callable, in_split: Sequence[bool], out_split: Sequence[bool]) -> Callable:
        """jit(shard_map(fn)) over the learner devices.

        fn runs once per learner device. Arguments marked in `in_split` carry a leading axis
        of learner devices and fn sees its own slice (axis removed); the others (the train
        state, indices) are replicated and fn sees them whole. Outputs marked in `out_split`
        get the leading axis back; the others must be the same on every device (e.g. the
        state after applying averaged gradients, or averaged metrics).
        """

        def per_device(*args):
            local = [
                jax.tree.map(lambda x: x[0], a) if split else a
                for a, split in zip(args, in_split, strict=True)
            ]
            outs = fn(*local)
            return tuple(
                jax.tree.map(lambda x: x[None], o) if split else o
                for o, split in zip(outs, out_split, strict=True)
            )

        spec = {True: P(LEARNER_AXIS), False: P()}
        mapped = jax.shard_map(
            per_device,
            mesh=self.mesh,
            in_specs=tuple(spec[bool(s)] for s in in_split),
            out_specs=tuple(spec[bool(s)] for s in out_split),
        )
        return jax.jit(mapped)


def first_replica(tree: Any) -> Any:
    """This process's copy of a replicated pytree (on its first learner device)."""
    return jax.tree.map(lambda x: x.addressable_shards[0].data, tree)


def mean_of_steps(step_metrics: list[Any]) -> dict[str, float]:
    """Host floats: each metric averaged over an update's gradient steps (each step's
    metrics as returned by a mapped step, replicated over the learner devices)."""
    host = jax.device_get([first_replica(m) for m in step_metrics])
    return {k: float(np.mean([m[k] for m in host])) for k in host[0]}


def checksum(tree: Any) -> str:
    """SHA-256 (16 hex digits) of a pytree's leaves' bytes, in tree order."""
    h = hashlib.sha256()
    for leaf in jax.tree.leaves(jax.device_get(tree)):
        h.update(np.ascontiguousarray(leaf).tobytes())
    return h.hexdigest()[:16]
