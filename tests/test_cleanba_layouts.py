"""Device layouts (4 CPU devices) and two processes with jax.distributed on localhost."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from cleanba_runs import (
    STANDARD,
    STANDARD_BATCH,
    STANDARD_UPDATES,
    TINY,
    cached_run,
    check_valid_record,
    command,
    free_port,
    run,
    trainer_env,
)

from runrecord import load_run

UPDATES = 6
BATCH = 4 * 16


def test_default_layout_a0_l0():
    r = check_valid_record(cached_run("ppo", *STANDARD), 4, STANDARD_BATCH, STANDARD_UPDATES)
    assert r.manifest["layout"]["name"] == "a0-l0-d1"
    assert r.manifest["layout"]["devices"] == ["cpu"]


@pytest.mark.parametrize(
    "actors,learners,name",
    [
        (["0"], ["1"], "a0-l1-d1"),
        (["0"], ["0", "1"], "a0-l0,1-d1"),
        (["0", "1"], ["2", "3"], "a0,1-l2,3-d1"),
    ],
)
def test_layout_runs_and_writes_a_valid_record(tmp_path, actors, learners, name):
    p = run("ppo", tmp_path, *TINY, "--total-timesteps", str(BATCH * UPDATES),
            "--actor-device-ids", *actors, "--learner-device-ids", *learners, devices=4)
    assert p.returncode == 0, p.stderr
    r = check_valid_record(tmp_path, 4, BATCH, UPDATES)
    layout = r.manifest["layout"]
    assert layout["name"] == name
    assert layout["actor_device_ids"] == [int(a) for a in actors]
    assert layout["learner_device_ids"] == [int(x) for x in learners]
    assert layout["devices"] and layout["num_cpus"] >= 1
    # one rollout per actor thread (one thread per actor device here)
    np.testing.assert_array_equal(r.updates["num_rollouts"], len(actors))
    # the layout never changes the global sizes
    hp = r.manifest["hyperparameters"]
    assert hp["num_envs"] == 4 and hp["derived"]["batch_size"] == BATCH
    assert hp["derived"]["minibatch_size"] == BATCH // 2


def test_two_processes_write_one_consistent_record(tmp_path):
    port = free_port()
    run_dir = tmp_path / "run"
    common = [*TINY, "--total-timesteps", str(BATCH * UPDATES), "--distributed",
              "--coordinator-address", f"localhost:{port}", "--num-processes", "2"]
    procs = [
        subprocess.Popen(
            command("ppo", "cartpole", run_dir, *common, "--process-id", str(i)),
            env=trainer_env(1), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for i in range(2)
    ]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    r = check_valid_record(run_dir, 4, BATCH, UPDATES)
    assert r.manifest["layout"]["name"] == "a0-l0-d2"
    assert r.manifest["layout"]["num_processes"] == 2
    # both processes' actors are in the batch and both processes' envs in episodes.csv
    np.testing.assert_array_equal(r.updates["num_rollouts"], 2)
    envs = set(r.episodes["env_index"].astype(int))
    assert envs & {0, 1} and envs & {2, 3}
    # only process 0 writes: no other record appeared
    assert [p.name for p in tmp_path.iterdir()] == ["run"]
    np.testing.assert_array_equal(load_run(run_dir).updates["rollout_policy_version_min"][1:],
                                  np.arange(1, UPDATES))


def test_the_coordinator_binds_to_its_own_address_unless_told_otherwise():
    from cleanba.core.config import ConfigError
    from cleanba.core.layout import BIND_ENV_VAR, coordinator_bind_address

    # never JAX's default [::]:PORT: the coordinator address itself (loopback stays loopback)
    assert coordinator_bind_address("127.0.0.1:1234", None, {}) == "127.0.0.1:1234"
    assert coordinator_bind_address("node01:1234", None, {}) == "node01:1234"
    # the user asking: the flag first, then JAX's own variable
    assert coordinator_bind_address("node01:1234", "0.0.0.0:1234",
                                     {BIND_ENV_VAR: "10.0.0.5:1234"}) == "0.0.0.0:1234"
    assert coordinator_bind_address("node01:1234", None,
                                    {BIND_ENV_VAR: "10.0.0.5:1234"}) == "10.0.0.5:1234"
    with pytest.raises(ConfigError, match="is not HOST:PORT"):
        coordinator_bind_address("node01:1234", "node01", {})


def test_a_slurm_task_asks_jax_for_its_own_slice_of_the_nodes_gpus():
    """Inside a Slurm step JAX gave every process of a d>1 run the one GPU numbered
    SLURM_LOCALID, however many its layout uses."""
    from cleanba.core.config import CommonConfig, ConfigError
    from cleanba.core.layout import local_device_ids

    two = CommonConfig(actor_device_ids=(0,), learner_device_ids=(0, 1))
    assert local_device_ids(two, {}) is None  # outside Slurm: every device stays visible
    assert local_device_ids(two, {"SLURM_LOCALID": "0"}) == [0, 1]
    assert local_device_ids(two, {"SLURM_LOCALID": "1"}) == [2, 3]
    assert local_device_ids(CommonConfig(), {"SLURM_LOCALID": "3"}) == [3]  # JAX's answer
    assert local_device_ids(two, {"SLURM_LOCALID": "1", "JAX_LOCAL_DEVICE_IDS": "5,6"}) == [5, 6]
    with pytest.raises(ConfigError, match="JAX_LOCAL_DEVICE_IDS='a,b' is not"):
        local_device_ids(two, {"JAX_LOCAL_DEVICE_IDS": "a,b"})


def test_jax_distributed_under_slurm_variables_keeps_the_layouts_gpus():
    """The real jax.distributed.initialize with a Slurm step's variables (a one-process
    group on localhost): the GPUs it makes visible are the task's slice."""
    script = (
        "import jax\n"
        "from cleanba.core.config import CommonConfig\n"
        "from cleanba.core.layout import init_distributed\n"
        "c = CommonConfig(actor_device_ids=(0,), learner_device_ids=(0, 1), distributed=True,"
        f" coordinator_address='127.0.0.1:{free_port()}', num_processes=1, process_id=0)\n"
        "init_distributed(c)\n"
        "print('visible', jax.config.values['jax_cuda_visible_devices'])\n"
        "jax.distributed.shutdown()\n"
    )
    slurm = {"SLURM_JOB_ID": "4242", "SLURM_STEP_NODELIST": "localhost", "SLURM_NTASKS": "2",
             "SLURM_PROCID": "1", "SLURM_LOCALID": "1", "SLURM_NODEID": "0"}
    p = subprocess.run([sys.executable, "-c", script], env=trainer_env(1, **slurm),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "visible 2,3" in p.stdout, p.stdout  # JAX alone: "visible 1"
