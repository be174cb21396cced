"""Where an actor thread's time goes, phase by phase: when the actor sets a run's speed
bound, this says whether the env, the policy step or a queue holds it.

Each actor thread keeps one `ActorClock`: `lap(phase)` charges the time since the previous
lap to that phase, so the phases of a rollout add up to its wall time, with nothing
counted twice. At the end of a rollout `ActorClock.flush` appends the rollout's seconds per
phase to the run's `Context.timing` lists (`actor_<phase>`), which `cleanba.speed_bound`
reads for the actor alone and for actor and learner together. A lap costs one
`time.perf_counter()` call (~0.1 us), a few per env step.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, MutableMapping, Sequence

# In the order a step meets them.
PHASES = (
    "param_wait",  # waiting for (and copying) new params: the learner's queue
    "policy_dispatch",  # calling the jitted policy step: tracing, argument checks, launch
    "policy_result",  # waiting for its result: the device computing it, the transfer back
    "env_step",  # EnvPool (or ale-py) stepping every env of the thread
    "obs_transfer",  # the observations put on the actor's device (GPU; a no-op on CPU)
    "bookkeeping",  # writing the rollout's arrays, episode tracking, stacking the obs
    "rollout_put",  # waiting for the learner to take the previous rollout (queue of one)
)
TIMING_PREFIX = "actor_"


class ActorClock:
    """One thread's phase clock (module doc); not shared between threads."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.last = time.perf_counter()

    def start(self) -> None:
        """Start a new lap here, charging the time since the last one to nobody."""
        self.last = time.perf_counter()

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.seconds[phase] += now - self.last
        self.last = now

    def flush(self, timing: MutableMapping[str, list[float]]) -> None:
        """Append this rollout's seconds per phase to `timing` and start the next rollout
        at zero. list.append is atomic under the GIL, so threads may share `timing`."""
        for phase, seconds in self.seconds.items():
            timing.setdefault(TIMING_PREFIX + phase, []).append(seconds)
        self.seconds = dict.fromkeys(PHASES, 0.0)


def phase_breakdown(timing: Mapping[str, Sequence[float]], skip: int,
                    steps_per_rollout: int) -> dict[str, dict[str, float]]:
    """Per phase, over the rollouts after the first `skip` entries (compilation, the first
    allocations; with several threads their entries interleave, so skip counts all of
    them): mean milliseconds per env step of one thread, and share of the thread's time."""
    means = {}
    for phase in PHASES:
        kept = list(timing.get(TIMING_PREFIX + phase, ()))[skip:]
        means[phase] = sum(kept) / len(kept) if kept else float("nan")
    total = sum(means.values())
    return {phase: {"ms_per_step": 1e3 * s / steps_per_rollout,
                    "share": s / total if total > 0 else float("nan")}
            for phase, s in means.items()}


def breakdown_text(breakdown: Mapping[str, Mapping[str, float]]) -> str:
    """'env_step 1.20 ms (61%), policy_result 0.40 ms (20%), ...', largest first."""
    ranked = sorted(breakdown.items(), key=lambda kv: -kv[1]["ms_per_step"])
    return ", ".join(f"{phase} {f['ms_per_step']:.3f} ms ({f['share']:.0%})"
                     for phase, f in ranked)
