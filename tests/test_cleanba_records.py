"""Record details: manifest contents, unit pieces (episode tracking, batch assembly,
parameter channel), wandb offline logging."""

from __future__ import annotations

import queue
import threading

import numpy as np
import pytest
from cleanba_runs import TINY, run
from wandb_offline import check_openrlbenchmark_keys

from cleanba import impala
from cleanba.core.actor import Rollout
from cleanba.core.channel import ParamChannel
from cleanba.core.config import ConfigError, Fault, fault_from_env
from cleanba.core.control import Control, Stopped
from cleanba.core.learner import assemble_batch
from cleanba.core.records import EpisodeTracker
from runrecord import load_run, schema


def test_episode_tracker_sums_raw_rewards_and_skips_reset_steps():
    t = EpisodeTracker(first_env_index=10, num_envs=2)
    f, T = False, True
    # env 0: rewards 4 then 7 (raw Breakout points), done at the 2nd step; env 1 runs on
    assert t.step(np.array([4.0, 1.0]), np.array([f, f]), np.array([1, 1]), 2, 0.1) == []
    done = t.step(np.array([7.0, 1.0]), np.array([T, f]), np.array([1, 1]), 4, 0.2)
    assert [(e.env_index, e.episode_return, e.episode_length, e.env_steps) for e in done] == [
        (10, 11.0, 2, 4)
    ]
    # the reset step (mask 0) belongs to no episode
    t.step(np.array([0.0, 1.0]), np.array([f, f]), np.array([0, 1]), 6, 0.3)
    done = t.step(np.array([1.0, 2.0]), np.array([T, T]), np.array([1, 1]), 8, 0.4)
    assert [(e.env_index, e.episode_return, e.episode_length) for e in done] == [
        (10, 1.0, 1), (11, 5.0, 4)
    ]


def test_assemble_batch_keeps_global_env_order_and_splits_over_devices():
    def rollout(first):
        envs = np.arange(first, first + 2)
        return Rollout(0, 1, {"actions": np.tile(envs, (3, 1))}, np.ones(3), 0.0, [])

    batch = assemble_batch([rollout(0), rollout(2)], ["actions"], num_devices=2)
    assert batch["actions"].shape == (2, 3, 2)  # (devices, T, envs per device)
    np.testing.assert_array_equal(batch["actions"][0, 0], [0, 1])
    np.testing.assert_array_equal(batch["actions"][1, 0], [2, 3])


def run_channel(architecture: str, updates: int) -> list[int]:
    """Versions an actor uses per rollout when the learner publishes as the runtime does."""
    control = Control()
    channel = ParamChannel(architecture, 1, updates, control)
    rollouts: queue.Queue = queue.Queue(maxsize=1)
    used = []

    def actor():
        version = 0
        for k in range(1, updates + 1):
            got = channel.for_rollout(0, k)
            if got is not None:
                version = got[0]
            used.append(version)
            control.put(rollouts, k)

    t = threading.Thread(target=actor)
    channel.publish(1, "params-1")
    t.start()
    for k in range(1, updates + 1):
        control.get(rollouts)
        channel.publish(k + 1, f"params-{k + 1}")
    t.join(10)
    assert not t.is_alive()
    return used


def test_param_channel_versions_per_architecture():
    assert run_channel("sync", 6) == [1, 2, 3, 4, 5, 6]
    assert run_channel("cleanba", 6) == [1, 1, 2, 3, 4, 5]


def test_waits_give_up_when_the_run_stops():
    control = Control()
    q: queue.Queue = queue.Queue(maxsize=1)
    threading.Timer(0.2, control.stop.set).start()
    with pytest.raises(Stopped):
        control.get(q)


def test_fault_hook_parsing():
    assert fault_from_env({}) is None
    assert fault_from_env({"CLEANBA_FAULT": "actor:3"}) == Fault("actor", 3)
    with pytest.raises(ConfigError, match="expected KIND:N"):
        fault_from_env({"CLEANBA_FAULT": "gpu:1"})


def test_manifest_and_wandb_offline(tmp_path):
    p = run("impala", tmp_path, *TINY[:-4], "--num-minibatches", "2", "--progress-interval-s",
            "0", "--total-timesteps", str(4 * 16 * 3), "--track", "--sweep", "smoke")
    assert p.returncode == 0, p.stderr
    r = load_run(tmp_path)
    m = r.manifest
    assert set(schema.MANIFEST_KEYS) <= set(m)
    assert m["system"] == "cleanba-impala" and m["sweep"] == "smoke"
    assert m["status"] == schema.COMPLETED and m["error"] is None
    assert m["hyperparameters"]["learning_rate"] == impala.PRESETS["cartpole"][1].learning_rate
    assert m["hyperparameters"]["num_minibatches"] == 2
    assert m["hyperparameters"]["track"] is True
    assert m["provenance"]["git"]["sha"] is not None
    assert "jax" in m["provenance"]["packages"]
    assert set(schema.SUMMARY_KEYS) <= set(m["summary"])
    assert {"loss_total", "loss_policy", "loss_value", "loss_entropy", "stat_mean_rho"} <= set(
        r.updates.names
    )
    assert all(len(c) == 16 for c in r.updates["params_checksum"])
    offline = list((tmp_path / "wandb").glob("offline-run-*"))
    assert offline, list(tmp_path.iterdir())
    assert list(offline[0].glob("*.wandb"))
    check_openrlbenchmark_keys(offline[0], r)
