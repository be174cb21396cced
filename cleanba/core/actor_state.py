"""What an actor thread carries across a checkpoint boundary when its envs restore exactly
(benchenv.EXACT_STATE_BACKENDS): the state of each of its env objects (one, or two in the
double-buffered mode), the observations and done flags each last returned, and the
episode accumulators (return and length so far per env).

The actor snapshots it at the end of rollout C, before handing the rollout to the learner,
so it is there when the learner checkpoints after update C, however far ahead the actor
has run by then (it can be a rollout or two on: queue of one). The action keys need
nothing: an env's key at a step is fold_in(fold_in(key, env), step), no state that moves.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from benchenv import state_bytes

FORMAT = 1


@dataclass
class ThreadSnapshot:
    """One actor thread's carried state at a rollout boundary (module docstring)."""

    envs: list[bytes]  # get_state() of each env object, in env order
    obs: list[np.ndarray]  # each env object's latest observations
    prev_done: list[np.ndarray]
    returns: np.ndarray  # EpisodeTracker's, over all the thread's envs
    lengths: np.ndarray


def pack(snapshots: dict[int, ThreadSnapshot]) -> bytes:
    """Every actor thread's snapshot (keyed by global thread index) as one byte string."""
    arrays: dict[str, np.ndarray] = {}
    parts = {}
    for g, s in sorted(snapshots.items()):
        parts[str(g)] = len(s.envs)
        arrays[f"{g}.returns"], arrays[f"{g}.lengths"] = s.returns, s.lengths
        for j, env in enumerate(s.envs):
            arrays[f"{g}.{j}.env"] = np.frombuffer(env, np.uint8)
            arrays[f"{g}.{j}.obs"] = s.obs[j]
            arrays[f"{g}.{j}.prev_done"] = s.prev_done[j]
    return state_bytes.pack({"format": FORMAT, "threads": parts}, arrays)


def unpack(data: bytes) -> dict[int, ThreadSnapshot]:
    """`pack`'s snapshots back (ValueError on bytes of another kind or format)."""
    meta, arrays = state_bytes.unpack(data)
    if meta.get("format") != FORMAT:
        raise ValueError(f"actor state format {meta.get('format')}, this code reads {FORMAT}")
    out = {}
    for g, count in meta["threads"].items():
        out[int(g)] = ThreadSnapshot(
            [arrays[f"{g}.{j}.env"].tobytes() for j in range(count)],
            [arrays[f"{g}.{j}.obs"] for j in range(count)],
            [arrays[f"{g}.{j}.prev_done"] for j in range(count)],
            arrays[f"{g}.returns"], arrays[f"{g}.lengths"])
    return out


class SnapshotBoard:
    """Where actor threads leave their snapshots of boundary C and the learner takes them
    when it checkpoints after update C (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_update: dict[int, dict[int, ThreadSnapshot]] = {}

    def put(self, update: int, thread: int, snapshot: ThreadSnapshot) -> None:
        with self._lock:
            self._by_update.setdefault(update, {})[thread] = snapshot

    def take(self, update: int) -> dict[int, ThreadSnapshot]:
        """The snapshots of boundary `update`, removed with every older one."""
        with self._lock:
            found = self._by_update.pop(update, {})
            for old in [u for u in self._by_update if u < update]:
                del self._by_update[old]
            return found
