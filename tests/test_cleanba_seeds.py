"""Seeds: every env of a run has its own seed; same seed + layout = same records."""

from __future__ import annotations

import numpy as np
import pytest
from cleanba_runs import STANDARD, cached_run, run

from cleanba.config import CommonConfig
from cleanba.envs import env_seeds
from cleanba.layout import make_plan
from runrecord import load_run

# STANDARD has two actor threads, so this also covers how threads' rollouts are combined.


def all_env_seeds(config: CommonConfig, num_processes: int) -> list[int]:
    seeds = []
    for p in range(num_processes):
        plan = make_plan(config, num_processes, p, num_local_devices=4)
        for d in range(len(plan.actor_device_ids)):
            for j in range(plan.num_actor_threads):
                first = plan.first_env_index(plan.thread_global_index(d, j))
                seeds += env_seeds(config.seed, first, plan.envs_per_thread)
    return seeds


@pytest.mark.parametrize("processes,actors,threads", [(1, (0,), 1), (1, (0, 1), 2), (2, (0, 1), 4)])
def test_every_env_of_a_run_has_its_own_seed(processes, actors, threads):
    config = CommonConfig(seed=7, num_envs=32, num_steps=4, total_timesteps=128,
                          actor_device_ids=actors, num_actor_threads=threads)
    seeds = all_env_seeds(config, processes)
    # env i of the run gets seed + i, whatever the split: no overlaps, no gaps
    assert seeds == list(range(7, 7 + 32))


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    out = {"a": load_run(cached_run("ppo", *STANDARD))}  # seed 1
    for name, seed in (("b", "1"), ("c", "2")):
        d = tmp_path_factory.mktemp(name)
        p = run("ppo", d, *STANDARD, "--seed", seed)
        assert p.returncode == 0, p.stderr
        out[name] = load_run(d)
    return out


def without_wall_time(table) -> dict[str, np.ndarray]:
    return {k: table[k] for k in table.names if k not in ("wall_time_s", "sps")
            and not k.endswith("_get_s")}


def test_same_seed_and_layout_give_identical_records(records):
    a, b = records["a"], records["b"]
    ea, eb = without_wall_time(a.episodes), without_wall_time(b.episodes)
    assert len(a.episodes) > 10
    for k in ea:
        np.testing.assert_array_equal(ea[k], eb[k], err_msg=k)
    ua, ub = without_wall_time(a.updates), without_wall_time(b.updates)
    for k in ua:
        np.testing.assert_array_equal(ua[k], ub[k], err_msg=k)  # losses bit for bit
    assert a.manifest["run_id"] == b.manifest["run_id"]
    # both actor threads' envs contribute episodes
    assert set(a.episodes["env_index"].astype(int)) == {0, 1, 2, 3}


def test_different_seeds_give_different_records(records):
    a, c = records["a"], records["c"]
    assert a.manifest["run_id"] != c.manifest["run_id"]
    same_length = len(a.episodes) == len(c.episodes)
    assert not (same_length and np.array_equal(a.episodes["episode_return"],
                                               c.episodes["episode_return"]))
    assert not np.array_equal(a.updates["params_checksum"], c.updates["params_checksum"])
