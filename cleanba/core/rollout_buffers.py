"""Host memory for an actor thread's rollouts, written again once nothing else refers to it.

Why: a rollout's arrays (466 MB at 128 envs x 128 Breakout steps) were allocated fresh for
every rollout, so the step loop touched new memory page by page, and a first touch is dear
(on the development VM, copying one step's observations into fresh memory took 0.3 ms at 8
envs and 1.5-10 ms at 128 envs, into memory touched before 0.013 and 0.22 ms: up to a tenth
of an env step; docs/performance.md, "Actor side"). The learner lets go of a rollout one or
two updates after it was made; from then on its memory can take a new rollout.

When a set is free: no object but this pool refers to any of its arrays. Every numpy view
refers to the array that owns the memory (a view of a view too), and a jax.Array made from
one keeps it alive (device_put holds the host array while the device array lives, copied or
aliased), so a set that anything may still read is never handed out again. The actor writes
every element of every array in each rollout, so what a learner reads is what a fresh buffer
would have held.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

KEEP = 4  # sets kept per actor thread: writing, queued, held by the learner, one spare

Layout = Mapping[str, tuple[tuple[int, ...], npt.DTypeLike]]  # field -> (shape, dtype)


def _refs(owned: dict[str, np.ndarray], name: str) -> int:
    """References to one owned array, counted the same way at every call (the dict's own
    reference and this call's temporary included)."""
    return sys.getrefcount(owned[name])


class RolloutBuffers:
    """Hands out one set of arrays per rollout (`take`), reusing the memory of a set
    nothing refers to any more; keeps at most `keep` sets (beyond that, fresh ones)."""

    def __init__(self, layout: Layout, keep: int = KEEP):
        if keep < 0:
            raise ValueError(f"keep must be >= 0, got {keep}")
        self.layout = {name: (tuple(shape), np.dtype(dtype)) for name, (shape, dtype) in layout.items()}
        self.keep = keep
        self._sets: list[dict[str, np.ndarray]] = []
        probe = {"probe": np.empty(0)}
        self._own = _refs(probe, "probe")  # the count of an array only a set refers to
        self.allocated = 0  # sets allocated so far (kept or not)

    def _free(self, owned: dict[str, np.ndarray]) -> bool:
        return all(_refs(owned, name) == self._own for name in owned)

    def take(self) -> dict[str, np.ndarray]:
        """Arrays of the layout's shapes and dtypes for one rollout, contents undefined
        (like np.empty): views of a free kept set, else of a new one."""
        owned = next((s for s in self._sets if self._free(s)), None)
        if owned is None:
            owned = {name: np.empty(shape, dtype) for name, (shape, dtype) in self.layout.items()}
            self.allocated += 1
            if len(self._sets) < self.keep:
                self._sets.append(owned)
        return {name: array[...] for name, array in owned.items()}
