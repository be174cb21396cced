"""Checkpoints and --resume-from (cleanba/core/checkpoint.py).

The acceptance case: a --deterministic CartPole PPO run, SIGKILLed while it holds after
update 7 (checkpoints after updates 3 and 6 on disk), resumed, has updates.csv and
episodes.csv identical to an uninterrupted run's in every column but the wall-clock ones.
A torn checkpoint is skipped (the run falls back to the older one and says why), and a
checkpoint of another configuration is refused (the run starts from update 0 and says
why). The same for IMPALA under sync. Cost: 7 tiny trainer runs and 2 short ones, ~80 s
on the 2-core CI box.
"""

from __future__ import annotations

import csv
import json
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from cleanba_runs import TINY, command, run, trainer_env

import benchenv
from cleanba.core import checkpoint
from runrecord import schema

UPDATES = 10
FLAGS = [*TINY, "--deterministic", "--total-timesteps", str(4 * 16 * UPDATES),
         "--checkpoint-every", "3"]
KILLED_AT = 7  # past the checkpoint of update 6
WALL_CLOCK_COLUMNS = {"wall_time_s", "sps", "rollout_queue_get_s", "param_queue_get_s"}


def rows_without_wall_clock(run_dir: Path, name: str) -> list[dict[str, str]]:
    with open(run_dir / name, newline="") as f:
        return [{k: v for k, v in row.items() if k not in WALL_CLOCK_COLUMNS}
                for row in csv.DictReader(f)]


def assert_same_records(a: Path, b: Path) -> None:
    for name in (schema.UPDATES_FILE, schema.EPISODES_FILE):
        rows_a, rows_b = rows_without_wall_clock(a, name), rows_without_wall_clock(b, name)
        assert len(rows_a) == len(rows_b), name
        for i, (x, y) in enumerate(zip(rows_a, rows_b, strict=True)):
            assert x == y, f"{name} row {i + 1}: {x} != {y}"


def manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / schema.MANIFEST_FILE).read_text())


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("ckpt") / "uninterrupted"
    p = run("ppo", run_dir, *FLAGS)
    assert p.returncode == 0, p.stderr
    return run_dir


@pytest.fixture(scope="module")
def killed(tmp_path_factory) -> Path:
    """A run SIGKILLed once it says it holds after update KILLED_AT (no sleep: the line
    is the event)."""
    run_dir = tmp_path_factory.mktemp("ckpt") / "killed"
    proc = subprocess.Popen(command("ppo", "cartpole", run_dir, *FLAGS),
                            env=trainer_env(1, CLEANBA_HOLD_AT=f"update-{KILLED_AT}"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    said = []
    for line in proc.stderr:  # ends at EOF if the trainer exits without holding
        said.append(line)
        if f"holding at update-{KILLED_AT}" in line:
            proc.send_signal(signal.SIGKILL)
            break
    assert proc.wait(timeout=60) == -signal.SIGKILL, "".join(said)
    return run_dir


@pytest.fixture
def killed_copy(killed: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(killed, copy)
    return copy


def resume(run_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    return run("ppo", run_dir, *FLAGS, *extra, "--resume-from", str(run_dir))


def test_a_run_killed_past_a_checkpoint_resumes_bit_for_bit(uninterrupted, killed_copy):
    assert checkpoint.updates_on_disk(killed_copy) == [6, 3]
    # the kill came after update 7's rows: the resumed run must cut them, not repeat them
    assert checkpoint.complete_rows(killed_copy / schema.UPDATES_FILE) == KILLED_AT
    assert manifest(killed_copy)["status"] == schema.RUNNING

    p = resume(killed_copy)
    assert p.returncode == 0, p.stderr
    assert "[cleanba] resuming from checkpoints/6 (after update 6;" in p.stdout
    assert_same_records(uninterrupted, killed_copy)
    record = manifest(killed_copy)
    assert record["status"] == schema.COMPLETED
    assert record["summary"]["updates"] == UPDATES
    assert record["summary"]["episodes"] == len(
        rows_without_wall_clock(uninterrupted, schema.EPISODES_FILE))
    assert [r["checkpoint"] for r in record["resumptions"]] == ["checkpoints/6"]
    assert checkpoint.updates_on_disk(killed_copy) == [9, 6]  # --checkpoint-keep 2


def test_a_torn_checkpoint_is_skipped_for_the_older_one(uninterrupted, killed_copy):
    state = killed_copy / "checkpoints" / "6" / checkpoint.LEARNER_STATE_FILE
    state.write_bytes(state.read_bytes()[:1000])

    p = resume(killed_copy)
    assert p.returncode == 0, p.stderr
    assert ("[cleanba] checkpoints/6 not used: torn: learner_state.msgpack does not match the "
            "size and SHA-256 in meta.json") in p.stdout
    assert "[cleanba] resuming from checkpoints/3 (after update 3;" in p.stdout
    assert_same_records(uninterrupted, killed_copy)


def test_a_checkpoint_of_another_configuration_is_refused(uninterrupted, killed_copy):
    # one update of the fresh start is enough to see it start from 0 (the flag is
    # bookkeeping: no part of the fingerprint)
    p = resume(killed_copy, "--learning-rate", "0.002", "--stop-after-updates", "1")
    assert p.returncode == 130, p.stderr
    for update in (6, 3):
        assert (f"[cleanba] checkpoints/{update} not used: another configuration "
                "(--learning-rate)") in p.stdout
    assert "no usable checkpoint, starting from update 0" in p.stdout
    record = manifest(killed_copy)
    assert "resumptions" not in record and record["previous_attempt"] == "previous_attempts/1"
    updates = rows_without_wall_clock(killed_copy, schema.UPDATES_FILE)
    assert [int(r["update"]) for r in updates] == [1]
    # trained with another learning rate from update 1: not the uninterrupted run's loss
    assert updates[0]["loss_total"] != rows_without_wall_clock(
        uninterrupted, schema.UPDATES_FILE)[0]["loss_total"]


def test_impala_under_sync_resumes_bit_for_bit(tmp_path):
    """The other trainer, and the architecture whose actors take the learner's newest
    params (version C + 1 after checkpoint C, not cleanba's C): stopped after update 3
    (--stop-after-updates, bookkeeping), resumed from checkpoint 2."""
    flags = ["--num-envs", "4", "--num-steps", "16", "--num-actor-threads", "1",
             "--num-minibatches", "1", "--progress-interval-s", "0", "--architecture", "sync", "--deterministic", "--total-timesteps", str(4 * 16 * 4),
             "--checkpoint-every", "2"]
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"
    assert run("impala", whole, *flags).returncode == 0
    assert run("impala", stopped, *flags, "--stop-after-updates", "3").returncode == 130
    p = run("impala", stopped, *flags, "--resume-from", str(stopped))
    assert p.returncode == 0, p.stderr
    assert "[cleanba] resuming from checkpoints/2 (after update 2;" in p.stdout
    assert_same_records(whole, stopped)


def test_a_completed_run_is_not_resumed(uninterrupted, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(uninterrupted, copy)
    p = resume(copy)
    assert p.returncode == 2 and "that run is already completed" in p.stderr
    for name in (schema.UPDATES_FILE, schema.EPISODES_FILE):
        assert (copy / name).read_bytes() == (uninterrupted / name).read_bytes()


def test_the_reseeding_is_in_the_env_protocol(uninterrupted):
    protocol = manifest(uninterrupted)["env_protocol"]
    assert protocol[checkpoint.RESEED_PROTOCOL_KEY] == 3
    assert checkpoint.RESEED_PROTOCOL_KEY in benchenv.defining_protocol(protocol)


# --- the pieces, without a trainer ----------------------------------------------------------


def test_only_the_newest_checkpoints_are_kept(tmp_path):
    for update in (3, 6, 9):
        checkpoint.write(tmp_path, update, {"a.bin": bytes([update])}, {"rows": {}}, keep=2)
    (tmp_path / "checkpoints" / ".tmp-12-1").mkdir()  # a write killed before its rename
    assert checkpoint.updates_on_disk(tmp_path) == [9, 6]
    meta = json.loads((tmp_path / "checkpoints" / "9" / "meta.json").read_text())
    assert meta["update"] == 9 and meta["files"]["a.bin"]["bytes"] == 1


def test_a_checkpoint_is_read_only_when_whole_and_matching(tmp_path):
    print_ = {"configuration": {"seed": 1}, "code": {}, "stack": {}}
    files = {checkpoint.LEARNER_STATE_FILE: b"state", checkpoint.ACTOR_PARAMS_FILE: b"params"}
    meta = {"rows": {"updates.csv": 3, "episodes.csv": 5}, "actor_version": 3,
            "wall_time_s": 1.5, "action_key": [1, 2], "fingerprint": print_}
    folder = checkpoint.write(tmp_path, 3, files, meta, keep=2)
    rows = {"updates.csv": 4, "episodes.csv": 5}
    found = checkpoint.read(folder, print_, rows)
    assert (found.update, found.actor_version, found.learner_state) == (3, 3, b"state")
    with pytest.raises(ValueError, match="updates.csv holds 2 rows, fewer than the 3"):
        checkpoint.read(folder, print_, {**rows, "updates.csv": 2})
    with pytest.raises(ValueError, match=r"another configuration \(seed\)"):
        checkpoint.read(folder, {**print_, "configuration": {"seed": 2}}, rows)
    (folder / checkpoint.ACTOR_PARAMS_FILE).unlink()
    with pytest.raises(ValueError, match="torn: actor_params.msgpack missing"):
        checkpoint.read(folder, print_, rows)
    (folder / checkpoint.META_FILE).write_text('{"format": 1, "upd')
    assert checkpoint.newest_usable(tmp_path, print_, rows) == (
        None, ["checkpoints/3 not used: torn: meta.json missing or unreadable (JSONDecodeError)"])


def test_csv_rows_are_cut_back_to_a_checkpoint(tmp_path):
    path = tmp_path / "updates.csv"
    path.write_text("update,x\n1,a\n2,b\n3,c\n4,torn-without-newline")
    assert checkpoint.complete_rows(path) == 3
    checkpoint.truncate_rows(path, 2)
    assert path.read_text() == "update,x\n1,a\n2,b\n"


def test_fingerprint_differences_are_named():
    base = {"configuration": {"seed": 1, "hyperparameters": {"learning_rate": 1e-3}},
            "code": {"git_sha": "a"}, "stack": {"jax": "0.4"}}
    other = {"configuration": {"seed": 1, "hyperparameters": {"learning_rate": 2e-3}},
             "code": {"git_sha": "b"}, "stack": {"jax": "0.4"}}
    assert checkpoint.fingerprint_difference(base, base) == ""
    assert checkpoint.fingerprint_difference(base, other) == (
        "another configuration (--learning-rate); another code (git_sha)")


def test_boundaries_and_env_segments():
    assert [k for k in range(1, 11) if checkpoint.is_boundary(k, 3, 10)] == [3, 6, 9]
    assert not checkpoint.is_boundary(10, 5, 10)  # never after the last update
    assert [checkpoint.env_segment(k, 3) for k in range(1, 8)] == [0, 0, 0, 3, 3, 3, 6]
    assert checkpoint.env_segment(5, 0) == 0


def test_reseeded_envs_get_new_distinct_seeds():
    first = benchenv.env_seeds(1, 0, 64)
    later = benchenv.env_seeds(1, 0, 64, segment=3)
    assert len(set(later)) == 64 and not set(first) & set(later)
    assert benchenv.env_seeds(1, 0, 64, segment=0) == first
