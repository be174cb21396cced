"""What an algorithm contributes to the Cleanba architecture (cleanba/core/runtime.py runs it):
its network, initial state, the rollout fields its update reads and the update itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax

from cleanba.core.layout import Plan
from cleanba.numerics.parallel import LearnerMesh

# Everything an actor records per env step (time-major). obs has one extra entry: the
# observation after the last step, for bootstrapping.
ROLLOUT_FIELDS = ("obs", "actions", "logprobs", "logits", "values", "rewards", "dones", "mask")


UpdateFn = Callable[[Any, dict[str, Any], int], tuple[Any, dict[str, Any]]]


@dataclass(frozen=True)
class Algorithm:
    """An algorithm as the architecture sees it.

    network: Flax module, obs -> (logits, value), used by the actors.
    init_state: key -> train state (a pytree with `.params`), identical in every process.
    batch_fields: the rollout fields its update reads (from ROLLOUT_FIELDS).
    metric_columns: loss_*/stat_* keys its update returns (updates.csv columns).
    make_update: LearnerMesh -> update(state, batch, update_index) -> (state, metrics);
      batch holds this process's arrays with a leading learner-device axis, each
      (devices, T, envs per device, ...) (obs: T + 1); metrics are host floats averaged
      over the update's gradient steps.
    derived: sizes it works out (minibatch sizes), recorded in the manifest.
    """

    system: str
    network: Any
    init_state: Callable[[jax.Array], Any]
    batch_fields: tuple[str, ...]
    metric_columns: tuple[str, ...]
    make_update: Callable[[LearnerMesh], UpdateFn]
    derived: dict[str, Any] = field(default_factory=dict)


AlgorithmFactory = Callable[[Any, Plan, tuple[int, ...], int], Algorithm]
