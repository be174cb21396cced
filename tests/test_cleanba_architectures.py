"""Staleness of each architecture, read from the run records (real trainer, CartPole)."""

from __future__ import annotations

import numpy as np
import pytest
from cleanba_runs import (
    STANDARD,
    STANDARD_BATCH,
    STANDARD_UPDATES,
    TINY,
    cached_run,
    check_valid_record,
    run,
    staleness,
)

from runrecord import load_run

UPDATES = 12
BATCH = 4 * 16
# the double-buffered actor (cleanba/core/actor_pipelined.py) keeps the lag rules: both
# halves of a step act with the same params, and a rollout waits for them as the serial does
ACTOR_MODES = pytest.mark.parametrize("actor_mode", ["serial", "double-buffer"])


@ACTOR_MODES
def test_sync_trains_on_the_latest_policy(tmp_path, actor_mode):
    p = run("ppo", tmp_path, *TINY, "--architecture", "sync", "--actor-mode", actor_mode,
            "--total-timesteps", str(BATCH * UPDATES))
    assert p.returncode == 0, p.stderr
    r = check_valid_record(tmp_path, 4, BATCH, UPDATES)
    hi, lo = staleness(tmp_path)
    np.testing.assert_array_equal(hi, 0)
    np.testing.assert_array_equal(lo, 0)
    assert r.updates["policy_changes_mid_rollout"].sum() == 0
    assert r.manifest["architecture"] == "sync"


@ACTOR_MODES
def test_cleanba_is_stale_by_exactly_one_after_the_first_update(actor_mode):
    mode = [] if actor_mode == "serial" else ["--actor-mode", actor_mode]
    run_dir = cached_run("ppo", *STANDARD, *mode)  # cleanba is the default architecture
    r = check_valid_record(run_dir, 4, STANDARD_BATCH, STANDARD_UPDATES)
    assert r.manifest["architecture"] == "cleanba"
    hi, lo = staleness(run_dir)
    np.testing.assert_array_equal(hi, [0] + [1] * (STANDARD_UPDATES - 1))
    np.testing.assert_array_equal(lo, hi)
    assert r.updates["policy_changes_mid_rollout"].sum() == 0
    np.testing.assert_array_equal(r.updates["num_rollouts"], 2)  # one per actor thread


@ACTOR_MODES
def test_async_with_learner_delay_changes_policies_mid_rollout(tmp_path, actor_mode):
    # Longer rollouts than the learner's update, and a learner that sleeps after each update:
    # new params arrive while a rollout is running, and the data's age varies.
    args = ["--num-envs", "4", "--num-steps", "128", "--num-actor-threads", "1",
            "--num-minibatches", "2", "--update-epochs", "1", "--progress-interval-s", "0",
            "--architecture", "async", "--learner-delay-s", "0.05",
            "--total-timesteps", str(4 * 128 * 16), "--actor-mode", actor_mode]
    p = run("ppo", tmp_path, *args)
    assert p.returncode == 0, p.stderr
    r = load_run(tmp_path)
    hi, lo = staleness(tmp_path)
    assert r.updates["policy_changes_mid_rollout"].sum() > 0
    assert len(np.unique(hi)) >= 2  # staleness varies
    assert np.all(lo >= 0) and np.all(lo <= hi)
    changed = r.updates["policy_changes_mid_rollout"] > 0
    assert np.all(
        r.updates["rollout_policy_version_max"][changed]
        > r.updates["rollout_policy_version_min"][changed]
    )
