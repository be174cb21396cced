"""--actor-mode double-buffer (cleanba/core/actor_pipelined.py): each actor thread
steps one half of its envs while the policy runs on the other.

The acceptance case: under --deterministic, a CartPole PPO run with 2 actor threads and a
checkpoint every 3 updates (the envs re-seeded there) has updates.csv and episodes.csv
(every column but the wall-clock ones, params checksums included) identical in both modes
and run to run, with the rollout observations on the host or on the device; the mode is
in the manifest and not in the run id; a double-buffered run SIGKILLed mid-rollout resumes
to the same bits. Cost: 6 tiny trainer runs and one refused one, ~70 s on the 2-core CI
box: both comparisons read one serial run, made once per test session (cached_run).
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
from cleanba_runs import TINY, cached_run, command, run, trainer_env
from test_cleanba_checkpoint import assert_same_records, rows_without_wall_clock

from cleanba.core import checkpoint
from cleanba.core.config import ConfigError
from cleanba.core.layout import make_plan
from cleanba.ppo import PPOConfig
from runrecord import schema
from runrecord.exits import EXIT_BAD_INPUT

UPDATES = 7
# 8 envs over 2 threads: 4 per thread, halves of 2 = one env group of the 4 each
FLAGS = ["--num-envs", "8", "--num-steps", "16", "--num-actor-threads", "2", *TINY[6:],
         "--deterministic",
         "--total-timesteps", str(8 * 16 * UPDATES), "--checkpoint-every", "3"]
DOUBLE_BUFFER = ["--actor-mode", "double-buffer"]


def manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / schema.MANIFEST_FILE).read_text())


def test_double_buffered_records_are_the_serial_bits(tmp_path: Path) -> None:
    runs = {"double-buffer": {}, "double-buffer again": {},
            "double-buffer, obs on device": {"CLEANBA_ROLLOUT_OBS": "device"}}
    dirs = {}
    for name, env in runs.items():
        dirs[name] = tmp_path / name.replace(" ", "_").replace(",", "")
        p = run("ppo", dirs[name], *FLAGS, *DOUBLE_BUFFER, **env)
        assert p.returncode == 0, f"{name}: {p.stderr[-3000:]}"
    serial = cached_run("ppo", *FLAGS)
    assert len(rows_without_wall_clock(serial, schema.EPISODES_FILE)) > 0
    for name, run_dir in dirs.items():
        assert_same_records(serial, run_dir)
        record = manifest(run_dir)
        assert record["hyperparameters"]["actor_mode"] == "double-buffer", name
        assert record["run_id"] == manifest(serial)["run_id"], name  # bookkeeping
    assert manifest(serial)["hyperparameters"]["actor_mode"] == "serial"


def test_a_half_must_hold_whole_env_groups_and_a_thread_even_envs(tmp_path: Path) -> None:
    def plan(**kw):
        return make_plan(PPOConfig(env_id="CartPole-v1", num_steps=16, actor_mode="double-buffer",
                                   total_timesteps=10_000, **kw), 1, 0, 4)

    assert plan(num_envs=8, num_actor_threads=2, deterministic=True).envs_per_thread == 4
    with pytest.raises(ConfigError, match="even number per thread"):
        plan(num_envs=6, num_actor_threads=2)
    # 8 envs in 2 groups of 4 over 2 threads: a half of 2 envs holds half a group
    with pytest.raises(ConfigError, match="whole env groups of 4 envs"):
        plan(num_envs=8, num_actor_threads=2, deterministic=True, deterministic_groups=2)
    p = run("ppo", tmp_path / "run", *FLAGS, *DOUBLE_BUFFER, "--deterministic-groups", "2")
    assert p.returncode == EXIT_BAD_INPUT, p.stderr
    assert "use --deterministic-groups 4 or more, or --actor-mode serial" in p.stderr
    assert not (tmp_path / "run").exists()


def test_a_double_buffered_run_killed_mid_rollout_resumes_to_the_serial_bits(
        tmp_path: Path) -> None:
    """SIGKILL while actor thread 0 holds halfway through rollout 5 (a half's env step in
    flight, the checkpoint of update 3 on disk); resumed in the same mode, the records are
    the uninterrupted serial run's."""
    killed = tmp_path / "killed"
    proc = subprocess.Popen(command("ppo", "cartpole", killed, *FLAGS, *DOUBLE_BUFFER),
                            env=trainer_env(1, CLEANBA_HOLD_AT="rollout-5"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    said = []
    for line in proc.stderr:  # ends at EOF if the trainer exits without holding
        said.append(line)
        if "holding at rollout-5" in line:
            proc.send_signal(signal.SIGKILL)
            break
    assert proc.wait(timeout=60) == -signal.SIGKILL, "".join(said)
    assert checkpoint.updates_on_disk(killed) == [3]
    p = run("ppo", killed, *FLAGS, *DOUBLE_BUFFER, "--resume-from", str(killed))
    assert p.returncode == 0, p.stderr[-3000:]
    assert "[cleanba] resuming from checkpoints/3 (after update 3;" in p.stdout
    assert_same_records(cached_run("ppo", *FLAGS), killed)
    assert manifest(killed)["status"] == schema.COMPLETED
