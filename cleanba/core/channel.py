"""Parameters from the learner to the actors: the architecture is all in `ParamChannel`.

Versions: the initial parameters are version 1; update k produces version k + 1. Each
rollout carries the version used at each of its steps, so the records show exactly which
policies generated a batch. How actors get parameters is the architecture:
- sync: before rollout k the actor waits for version k (data always from the newest policy);
- cleanba: a queue of size 1 per actor; the actor skips the get at rollout 2, so rollout 1
  and 2 use version 1 and rollout k >= 3 uses version k - 1: the learner trains on the
  second-latest policy (staleness 1 from update 2 on) while the actor collects the next
  rollout;
- async: the actor reads the newest published version before every env step and never
  waits for it (versions change mid-rollout). Rollouts still pass through the size-1
  rollout queue, so an actor blocks only when the learner has not taken its previous
  rollout yet.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

from cleanba.core.control import WAIT_SLICE_S, Control


class ParamChannel:
    """How actor threads get parameters; the architecture is all in here."""

    def __init__(
        self, architecture: str, num_threads: int, num_updates: int, control: Control
    ) -> None:
        self.architecture = architecture
        self.num_updates = num_updates
        self.control = control
        self._queues: list[queue.Queue] = [queue.Queue(maxsize=1) for _ in range(num_threads)]
        self._cond = threading.Condition()
        self._latest: tuple[int, Any] | None = None

    def publish(self, version: int, params: Any) -> None:
        """Learner side: version `version` (= update + 1) is ready."""
        if self.architecture == "cleanba":
            # Version v is taken by rollout v + 1 (rollout k >= 3 takes version k - 1), so
            # versions after num_updates - 1 have no taker; putting them would block.
            if version == 1 or version + 1 <= self.num_updates:
                for q in self._queues:
                    self.control.put(q, (version, params))
        else:
            with self._cond:
                self._latest = (version, params)
                self._cond.notify_all()

    def for_rollout(self, thread: int, iteration: int,
                    first: bool = False) -> tuple[int, Any] | None:
        """Actor side, before rollout `iteration` (1-based): the (version, params) to use
        from now on, or None to keep the current ones. `first`: the actor's first rollout
        (of a run resumed from a checkpoint, maybe not rollout 1), which has none yet."""
        if self.architecture == "cleanba":
            if iteration == 2 and not first:
                return None  # the queue-of-one trick: overlap rollout 2 with update 1
            return self.control.get(self._queues[thread])
        want = iteration if self.architecture == "sync" else 1
        with self._cond:
            while self._latest is None or self._latest[0] < want:
                self.control.check()
                self._cond.wait(WAIT_SLICE_S)
            return self._latest

    def for_step(self, current_version: int) -> tuple[int, Any] | None:
        """Actor side, before every env step: newer params in async mode, else None."""
        if self.architecture != "async":
            return None
        latest = self._latest  # one atomic read; no waiting
        if latest is not None and latest[0] != current_version:
            return latest
        return None
