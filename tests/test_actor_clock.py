"""cleanba.core.actor_clock: an actor thread's time by phase, each moment charged once."""

from __future__ import annotations

import math
import time

import pytest

from cleanba.core.actor_clock import (
    PHASES,
    TIMING_PREFIX,
    ActorClock,
    breakdown_text,
    phase_breakdown,
)


def test_laps_add_up_to_the_rollouts_wall_time():
    clock = ActorClock()
    timing: dict[str, list[float]] = {}
    t0 = time.perf_counter()
    clock.start()
    for phase in ("param_wait", "env_step", "env_step", "rollout_put"):
        time.sleep(0.002)
        clock.lap(phase)
    wall = time.perf_counter() - t0
    clock.flush(timing)
    assert set(timing) == {TIMING_PREFIX + p for p in PHASES}
    charged = sum(v[0] for v in timing.values())
    assert 0.008 <= charged <= wall  # every lap counted once, nothing outside the laps
    assert timing["actor_env_step"][0] >= 0.004
    assert timing["actor_policy_dispatch"] == [0.0]
    clock.flush(timing)  # the next rollout starts at zero
    assert all(v[1] == 0.0 for v in timing.values())


def test_breakdown_skips_the_warm_up_and_gives_shares():
    timing = {TIMING_PREFIX + p: [9.0, 9.0] for p in PHASES}  # two warm-up rollouts
    timing["actor_env_step"] += [0.6, 0.8]
    timing["actor_policy_result"] += [0.2, 0.2]
    for p in PHASES:
        if p not in ("env_step", "policy_result"):
            timing[TIMING_PREFIX + p] += [0.0, 0.0]
    b = phase_breakdown(timing, skip=2, steps_per_rollout=100)
    assert b["env_step"]["ms_per_step"] == pytest.approx(7.0)  # 0.7 s / 100 steps
    assert b["env_step"]["share"] == pytest.approx(0.7 / 0.9)
    assert sum(f["share"] for f in b.values()) == pytest.approx(1.0)
    assert breakdown_text(b).startswith("env_step 7.000 ms (78%), policy_result 2.000 ms")


def test_breakdown_of_no_rollouts_is_nan_not_an_error():
    b = phase_breakdown({}, skip=0, steps_per_rollout=16)
    assert all(math.isnan(f["ms_per_step"]) for f in b.values())
