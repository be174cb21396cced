"""Checkpoints and --resume-from in a two-process (--distributed) run.

Process 0 writes each checkpoint; on resume it picks the record's newest usable one and
sends it whole to process 1, which checks it against its own code and stack
(cleanba/core/runtime.py, agree_on_resume). The acceptance case: a --deterministic
CartPole PPO run on 2 processes over loopback, both SIGKILLed while they hold after
update 7 (checkpoints 3 and 6 on disk), resumed, has updates.csv and episodes.csv equal to
an uninterrupted 2-process run's in every column but the wall-clock ones. A torn
checkpoint is skipped for the older one, and when process 1 cannot use the checkpoint
(another stack) both start from update 0, each saying why. Cost: 5 two-process tiny runs.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest
from cleanba_runs import TINY, TrainerProcess, command, free_port
from test_cleanba_checkpoint import assert_same_records, manifest, rows_without_wall_clock

from cleanba.core import checkpoint
from cleanba.core.stopping import HOLD_ENV_VAR
from runrecord import schema

UPDATES = 10
FLAGS = [*TINY, "--deterministic", "--total-timesteps", str(4 * 16 * UPDATES),
         "--checkpoint-every", "3"]
KILLED_AT = 7  # past the checkpoint of update 6


def two_processes(run_dir: Path, *extra: str, env1: dict[str, str] | None = None,
                  **env: str) -> list[TrainerProcess]:
    port = free_port()
    common = [*FLAGS, *extra, "--distributed", "--coordinator-address", f"127.0.0.1:{port}",
              "--num-processes", "2"]
    return [TrainerProcess(command("ppo", "cartpole", run_dir, *common, "--process-id", str(i)),
                           merge_stdout=True, **env, **((env1 or {}) if i == 1 else {}))
            for i in range(2)]


def finish_all(procs: list[TrainerProcess]) -> list[int]:
    return [p.finish(timeout=180) for p in procs]


def resume(run_dir: Path, *extra: str, env1: dict[str, str] | None = None) -> list[TrainerProcess]:
    procs = two_processes(run_dir, *extra, "--resume-from", str(run_dir), env1=env1)
    finish_all(procs)
    return procs


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("ckpt2") / "uninterrupted"
    procs = two_processes(run_dir)
    assert finish_all(procs) == [0, 0], [p.output for p in procs]
    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):  # tests/conftest.py sets one
        # JAX 0.12.1 hangs two processes that read it: a multi-process run turns it off
        for p in procs:
            assert "persistent compilation cache is off in a multi-process run" in p.output
    return run_dir


@pytest.fixture(scope="module")
def killed(tmp_path_factory) -> Path:
    """Both processes SIGKILLed once each says it holds after update KILLED_AT."""
    run_dir = tmp_path_factory.mktemp("ckpt2") / "killed"
    procs = two_processes(run_dir, **{HOLD_ENV_VAR: f"update-{KILLED_AT}"})
    for p in procs:
        p.wait_for(f"holding at update-{KILLED_AT}")
    for p in procs:
        p.proc.send_signal(signal.SIGKILL)
    assert finish_all(procs) == [-signal.SIGKILL] * 2
    return run_dir


@pytest.fixture
def killed_copy(killed: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(killed, copy)
    return copy


def test_two_processes_killed_past_a_checkpoint_resume_bit_for_bit(uninterrupted, killed_copy):
    assert checkpoint.updates_on_disk(killed_copy) == [6, 3]
    assert checkpoint.complete_rows(killed_copy / schema.UPDATES_FILE) == KILLED_AT
    assert manifest(killed_copy)["status"] == schema.RUNNING

    procs = resume(killed_copy)
    assert [p.proc.returncode for p in procs] == [0, 0], [p.output for p in procs]
    assert "[cleanba] resuming from checkpoints/6 (after update 6;" in procs[0].output
    assert_same_records(uninterrupted, killed_copy)
    record = manifest(killed_copy)
    assert record["status"] == schema.COMPLETED
    assert record["summary"]["updates"] == UPDATES
    assert record["summary"]["episodes"] == len(
        rows_without_wall_clock(uninterrupted, schema.EPISODES_FILE))
    assert [r["checkpoint"] for r in record["resumptions"]] == ["checkpoints/6"]
    assert checkpoint.updates_on_disk(killed_copy) == [9, 6]


def test_a_torn_checkpoint_makes_both_processes_take_the_older_one(uninterrupted, killed_copy):
    state = killed_copy / "checkpoints" / "6" / checkpoint.ACTOR_PARAMS_FILE
    state.write_bytes(state.read_bytes()[:100])

    procs = resume(killed_copy)
    assert [p.proc.returncode for p in procs] == [0, 0], [p.output for p in procs]
    assert ("[cleanba] checkpoints/6 not used: torn: actor_params.msgpack does not match the "
            "size and SHA-256 in meta.json") in procs[0].output
    assert "[cleanba] resuming from checkpoints/3 (after update 3;" in procs[0].output
    assert_same_records(uninterrupted, killed_copy)
    assert [r["checkpoint"] for r in manifest(killed_copy)["resumptions"]] == ["checkpoints/3"]


def test_when_one_process_cannot_use_the_checkpoint_both_start_from_update_0(killed_copy):
    # process 1 runs with other XLA flags (the same device count, said twice): another
    # stack, so it refuses the checkpoint process 0 offers
    flags = " ".join(["--xla_force_host_platform_device_count=1"] * 2)
    procs = resume(killed_copy, "--stop-after-updates", "1", env1={"XLA_FLAGS": flags})
    assert [p.proc.returncode for p in procs] == [130, 130], [p.output for p in procs]
    assert "[cleanba] process 1 cannot use checkpoints/6: another stack (xla_flags)" \
        in procs[1].output
    assert ("[cleanba] process [1] cannot use checkpoints/6 (each says why): every "
            "process starts from update 0") in procs[0].output
    record = manifest(killed_copy)
    assert "resumptions" not in record and record["previous_attempt"] == "previous_attempts/1"
    updates = rows_without_wall_clock(killed_copy, schema.UPDATES_FILE)
    assert [int(r["update"]) for r in updates] == [1]


def test_a_packed_checkpoint_comes_back_whole():
    found = checkpoint.Checkpoint(
        Path("/r/checkpoints/6"), 6, 6, 11, 6, 1.5, [0, 1], b"state\x00\xff", b"params",
        "ab" * 16, {"stack": {"xla_flags": ""}})
    assert checkpoint.unpack(checkpoint.pack(found)) == found
