"""Seeds: every env of a run has its own seed; same seed + layout = same records."""

from __future__ import annotations

import numpy as np
import pytest
from cleanba_runs import STANDARD, cached_run, run

from benchenv import MAX_ENVS, MAX_SEED, env_seeds, make_env, mix31
from cleanba.core.config import CommonConfig
from cleanba.core.layout import make_plan
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
def test_env_seeds_depend_only_on_the_global_env_index(processes, actors, threads):
    config = CommonConfig(seed=7, num_envs=32, num_steps=4, total_timesteps=128,
                          actor_device_ids=actors, num_actor_threads=threads)
    # whatever the split over processes, devices and threads: env i gets the same seed
    assert all_env_seeds(config, processes) == env_seeds(7, 0, 32)
    assert len(set(env_seeds(7, 0, 32))) == 32


def test_runs_with_different_seeds_share_no_env_seed():
    # the customary seeds of a study: 20 runs x 128 envs, every env its own stream (with
    # seed + i, run 1's env 2 was run 2's env 1 and runs 1..20 had only 147 distinct seeds)
    seeds = [s for run_seed in range(1, 21) for s in env_seeds(run_seed, 0, 128)]
    assert len(seeds) == 2560
    assert len(set(seeds)) == 2560
    assert all(0 <= s < 2**31 for s in seeds)  # EnvPool's int32 seeds
    # neighbouring (seed, index) pairs land far apart, not on consecutive integers
    assert np.all(np.abs(np.diff(seeds)) > 1)


def unmix31(y: int) -> int:
    """mix31's inverse, step by step (an xor-shift by k >= 16 of a 31-bit word is its own
    inverse; a multiplication by an odd c mod 2**31 is undone by c's inverse)."""
    m = 2**31
    y ^= y >> 16
    y = (y * pow(0x846CA68B, -1, m)) % m
    y ^= y >> 15
    y ^= y >> 30  # x ^ (x >> 15) on 31 bits is undone by y ^ (y >> 15) ^ (y >> 30)
    y = (y * pow(0x7FEB352D, -1, m)) % m
    y ^= y >> 16
    return y


def test_env_seed_derivation_is_injective_over_its_whole_range():
    # mix31 has an inverse (so distinct (seed, index) pairs never share an env seed)
    xs = [*range(4096), *range(2**31 - 4096, 2**31),
          *np.random.default_rng(0).integers(0, 2**31, 20_000).tolist()]
    for x in xs:
        assert unmix31(mix31(x)) == x, x
    assert len({mix31(x) for x in xs}) == len(set(xs))
    assert env_seeds(0, 0, 1) != env_seeds(MAX_SEED, MAX_ENVS - 1, 1)
    assert len(set(env_seeds(MAX_SEED, 0, 64)) | set(env_seeds(0, MAX_ENVS - 64, 64))) == 128
    with pytest.raises(ValueError, match="0..65535"):
        env_seeds(-1, 0, 4)
    with pytest.raises(ValueError, match="0..65535"):
        env_seeds(MAX_SEED + 1, 0, 4)
    with pytest.raises(ValueError, match="outside"):
        env_seeds(1, MAX_ENVS - 2, 4)


def test_different_run_seeds_give_different_streams_in_envpool():
    # run 1's env 2 and run 2's env 1 had the same seed before; now their resets differ
    a = make_env("CartPole-v1", 3, 1)
    b = make_env("CartPole-v1", 3, 2)
    obs_a, _ = a.reset()
    obs_b, _ = b.reset()
    assert not np.array_equal(obs_a[2], obs_b[1])
    assert len({row.tobytes() for row in np.concatenate([obs_a, obs_b])}) == 6
    # and the same (seed, global index) gives the same env in any block split
    c = make_env("CartPole-v1", 2, 1, first_env_index=1)
    obs_c, _ = c.reset()
    np.testing.assert_array_equal(obs_c, obs_a[1:])


@pytest.mark.parametrize("seed", ["-1", "65536", "1.5"])
def test_bad_seed_exits_2_before_anything_is_written(tmp_path, seed):
    d = tmp_path / "run"
    p = run("ppo", d, *STANDARD, "--seed", seed)
    assert p.returncode == 2, p.stderr
    assert "--seed" in p.stderr
    assert not d.exists()


def test_action_keys_of_different_seeds_differ():
    # env i's sampling key at step t is fold_in(fold_in(fold_in(PRNGKey(seed), 1), i), t):
    # threefry hashes of the run seed, so keys of different seeds do not collide
    import jax

    from cleanba.numerics.deterministic import env_sampling_keys

    keys = set()
    for run_seed in range(1, 21):
        action_key = jax.random.fold_in(jax.random.PRNGKey(run_seed), 1)
        for step in (0, 1):
            k = env_sampling_keys(action_key, np.arange(128, dtype=np.int32), step)
            keys |= {tuple(row) for row in np.asarray(jax.random.key_data(k)).tolist()}
    assert len(keys) == 20 * 2 * 128


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
