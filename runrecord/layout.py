"""Hardware layouts in the paper's notation: `a0-l1,2,3-d1`.

a = actor device ids, l = learner device ids (local to each process), d = number of
processes (jax.distributed). A layout is hardware only: it never changes hyperparameters.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

_LAYOUT_RE = re.compile(r"^a(?P<a>\d+(?:,\d+)*)-l(?P<l>\d+(?:,\d+)*)-d(?P<d>\d+)$")


class LayoutError(ValueError):
    """A layout string that does not parse or makes no sense."""


@dataclass(frozen=True)
class Layout:
    actor_device_ids: tuple[int, ...]
    learner_device_ids: tuple[int, ...]
    num_processes: int = 1

    def __post_init__(self) -> None:
        for kind, ids in (("actor", self.actor_device_ids), ("learner", self.learner_device_ids)):
            if not ids:
                raise LayoutError(f"{kind} device ids are empty; give at least one, e.g. 0")
            if len(set(ids)) != len(ids):
                raise LayoutError(f"{kind} device ids repeat: {list(ids)}")
            if any(i < 0 for i in ids):
                raise LayoutError(f"{kind} device ids must be >= 0, got {list(ids)}")
        if self.num_processes < 1:
            raise LayoutError(f"number of processes must be >= 1, got {self.num_processes}")

    @property
    def name(self) -> str:
        a = ",".join(map(str, self.actor_device_ids))
        l_ = ",".join(map(str, self.learner_device_ids))
        return f"a{a}-l{l_}-d{self.num_processes}"

    @property
    def devices_per_process(self) -> int:
        """How many local devices a process must have for this layout."""
        return max(self.actor_device_ids + self.learner_device_ids) + 1

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "actor_device_ids": list(self.actor_device_ids),
            "learner_device_ids": list(self.learner_device_ids),
            "num_processes": self.num_processes,
        }

    def record_block(self, devices: Sequence[str]) -> dict:
        """The manifest's `layout` block: to_dict, the devices the run found and this
        host's CPU count."""
        return {**self.to_dict(), "devices": list(devices), "num_cpus": os.cpu_count()}


def parse_layout(text: str) -> Layout:
    """Parse `a0-l1,2-d1` (the `-dN` part may be left out: one process)."""
    s = text.strip()
    if re.fullmatch(r"a\d+(?:,\d+)*-l\d+(?:,\d+)*", s):
        s += "-d1"
    m = _LAYOUT_RE.match(s)
    if not m:
        raise LayoutError(
            f"malformed layout {text!r}: expected a<ids>-l<ids>-d<processes>, "
            "e.g. a0-l0-d1, a0-l1,2,3-d1 or a0,1-l2,3-d2"
        )
    return Layout(
        actor_device_ids=tuple(int(x) for x in m["a"].split(",")),
        learner_device_ids=tuple(int(x) for x in m["l"].split(",")),
        num_processes=int(m["d"]),
    )
