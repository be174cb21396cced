"""What the threads of one run share: the prepared run (`Prepared`) and the `Context`."""

from __future__ import annotations

import queue
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax

from cleanba.core.actor_state import SnapshotBoard, ThreadSnapshot
from cleanba.core.algorithm import Algorithm
from cleanba.core.channel import ParamChannel
from cleanba.core.checks import Checked
from cleanba.core.config import CommonConfig, Fault
from cleanba.core.control import Control
from cleanba.core.layout import Plan
from cleanba.core.records import Progress, WandbLogger
from runrecord import RunWriter


@dataclass
class Prepared:
    """A run that passed every check and may start: the checked run and its identity."""

    checked: Checked
    run_id: str
    run_dir: Path
    manifest: dict[str, Any]
    fault: Fault | None
    rollout_obs_on_device: bool | None = None  # CLEANBA_ROLLOUT_OBS (core.config)

    @property
    def plan(self) -> Plan:
        return self.checked.plan

    @property
    def algorithm(self) -> Algorithm:
        return self.checked.algorithm


@dataclass
class Context:
    """What the threads of one run share."""

    config: CommonConfig
    prep: Prepared  # the checked run: plan, algorithm, env protocol, observation spec
    control: Control
    channel: ParamChannel
    rollout_queues: list[queue.Queue]
    action_key: jax.Array
    fault: Fault | None
    progress: Progress
    writer: RunWriter | None  # process 0 only
    wandb: WandbLogger | None
    start_time: float
    actor_forward: Callable[[Any, jax.Array], tuple[jax.Array, jax.Array]] | None = None
    """The forward pass the actors' policy step runs, (params, obs) -> (logits, value);
    None: the algorithm's network. Only benchmarks inject one (cleanba.tools.actor_hook's no-op),
    through make_context; a run never does."""
    rollout_obs_on_device: bool | None = None
    """Where an actor keeps its rollout's observations: on its device (True), in host
    memory reused from rollout to rollout (False), or by its device's platform (None: on
    the device unless it is a CPU; cleanba/core/actor.py, `obs_on_device`). Records are the
    same bits either way; runs leave it None, tests and tools set it."""
    start_update: int = 0
    """0, or the update of the checkpoint the run resumed from (its next rollout is
    start_update + 1)."""
    updates_done: int = 0
    checkpoint_bytes: int = 0
    """Size of the last checkpoint written (cleanba/core/checkpoint.py)."""
    episodes_written: int = 0
    records_digest: str = ""
    """The last updates.csv row's running digest (runrecord.digest); "" before the first."""
    timing: dict[str, list[float]] = field(default_factory=lambda: {"rollout": [], "update": []})
    snapshots: SnapshotBoard = field(default_factory=SnapshotBoard)
    """Exact-state backends: each actor thread's carried state at checkpoint boundaries,
    for the learner's checkpoint (cleanba/core/actor_state.py)."""
    resume_actors: dict[int, ThreadSnapshot] = field(default_factory=dict)
    """Resumed with an exact-state backend: global actor thread -> what it carried at the
    checkpoint (restored before its first rollout); else empty."""
    host_rollout_sets: dict[int, int] = field(default_factory=dict)
    """Global actor thread -> host rollout sets it has allocated so far (its memory)."""

    @property
    def plan(self) -> Plan:
        return self.prep.plan

    @property
    def algorithm(self) -> Algorithm:
        return self.prep.algorithm
