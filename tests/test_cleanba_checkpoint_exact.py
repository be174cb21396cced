"""Checkpoints that hold the envs (the ale-exact backend, benchenv/ale_exact.py): a run
killed after a checkpoint and resumed is the run WITHOUT checkpoints, bit for bit,
including the episodes running at the checkpoint (no re-seeding, no cut episodes), and
its env protocol and run id are that run's.

A --deterministic Breakout PPO run on ale-exact (4 envs x 32 steps, 10 updates,
--checkpoint-every 4), held after update 6 and SIGKILLed, resumed from checkpoints/4;
against the same run without --checkpoint-every. Three tiny Atari runs, ~2-3 minutes on
the 2-core CI box.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import numpy as np
import pytest
from cleanba_runs import TrainerProcess, command, run
from test_cleanba_checkpoint import assert_same_records, rows_without_wall_clock

import benchenv
from cleanba.core import actor_state, checkpoint
from cleanba.core.config import CommonConfig, ConfigError
from runrecord import schema

pytest.importorskip("ale_py")

ENVS, STEPS, UPDATES, EVERY, KILLED_AT = 4, 32, 10, 4, 6
FLAGS = ["--env-id", "Breakout-v5", "--env-backend", "ale-exact", "--num-envs", str(ENVS),
         "--num-steps", str(STEPS), "--num-actor-threads", "1", "--num-minibatches", "2",
         "--update-epochs", "1", "--progress-interval-s", "0", "--deterministic",
         "--total-timesteps", str(ENVS * STEPS * UPDATES)]


def manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / schema.MANIFEST_FILE).read_text())


def test_a_killed_ale_exact_run_resumes_as_the_run_without_checkpoints(tmp_path):
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    p = run("ppo", whole, *FLAGS, preset="atari", timeout=600)
    assert p.returncode == 0, p.stderr

    trainer = TrainerProcess(command("ppo", "atari", killed, *FLAGS, "--checkpoint-every",
                                     str(EVERY)), CLEANBA_HOLD_AT=f"update-{KILLED_AT}")
    trainer.wait_for(f"holding at update-{KILLED_AT}", timeout=600)
    trainer.proc.send_signal(signal.SIGKILL)
    assert trainer.finish() == -signal.SIGKILL
    assert checkpoint.updates_on_disk(killed) == [4]
    saved = killed / checkpoint.CHECKPOINTS_DIR / str(EVERY) / checkpoint.ACTORS_FILE
    carried = actor_state.unpack(saved.read_bytes())
    assert list(carried) == [0] and carried[0].lengths.shape == (ENVS,)

    p = run("ppo", killed, *FLAGS, "--checkpoint-every", str(EVERY), "--resume-from",
            str(killed), preset="atari", timeout=600)
    assert p.returncode == 0, p.stderr
    assert f"[cleanba] resuming from checkpoints/{EVERY} (after update {EVERY};" in p.stdout
    assert_same_records(whole, killed)

    # the same run: no re-seed key in the protocol, the same run id
    a, b = manifest(whole), manifest(killed)
    assert checkpoint.RESEED_PROTOCOL_KEY not in b["env_protocol"]
    assert a["env_protocol"] == b["env_protocol"] and a["run_id"] == b["run_id"]
    # episodes ran across the checkpoint (started before env step EVERY * STEPS, ended
    # after), and each env's were kept whole: what re-seeding would have cut
    boundary = EVERY * STEPS
    spanning = [e for e in rows_without_wall_clock(killed, schema.EPISODES_FILE)
                if int(e["env_steps"]) // ENVS - int(e["episode_length"]) < boundary
                < int(e["env_steps"]) // ENVS]
    assert spanning, "no episode spans the checkpoint: the test proves nothing"


# --- the pieces, without a trainer ----------------------------------------------------------


def test_only_reseeding_backends_put_the_interval_in_the_protocol():
    exact = benchenv.env_protocol("Breakout-v5", backend="ale-exact")
    vector = benchenv.env_protocol("Breakout-v5", backend="ale")
    assert checkpoint.recorded_protocol(exact, 4) == exact
    assert checkpoint.reseed_every(exact, 4) == 0
    assert checkpoint.recorded_protocol(vector, 4)[checkpoint.RESEED_PROTOCOL_KEY] == 4
    assert checkpoint.reseed_every(vector, 4) == 4


def test_actor_snapshots_round_trip_and_the_board_hands_out_one_boundary():
    snap = actor_state.ThreadSnapshot(
        [b"env-a", b"env-b\0"], [np.full((2, 4, 84, 84), 3, np.uint8)] * 2,
        [np.array([True, False])] * 2, np.array([1.5, 0, 2, 7]), np.array([10, 0, 3, 4]))
    back = actor_state.unpack(actor_state.pack({0: snap, 3: snap}))
    assert sorted(back) == [0, 3]
    assert back[3].envs == snap.envs and np.array_equal(back[3].returns, snap.returns)
    assert all(np.array_equal(x, y) for x, y in zip(back[0].obs, snap.obs, strict=True))
    assert back[0].prev_done[0].dtype == bool and back[0].lengths.dtype == snap.lengths.dtype
    board = actor_state.SnapshotBoard()
    for update in (4, 8):
        board.put(update, 0, snap)
    board.put(4, 1, snap)
    assert sorted(board.take(4)) == [0, 1]
    assert board.take(4) == {}  # taken once
    assert list(board.take(8)) == [0]


def test_a_checkpoint_with_actor_state_packs_whole():
    found = checkpoint.Checkpoint(Path("c/4"), 4, 4, 2, 4, 1.0, [0, 1], b"learner", b"params",
                                  "digest", {"k": 1}, b"actors")
    assert checkpoint.unpack(checkpoint.pack(found)) == found


def test_distributed_checkpoints_need_a_reseeding_backend():
    with pytest.raises(ConfigError, match="re-seeds at checkpoints"):
        CommonConfig(env_id="Breakout-v5", env_backend="ale-exact", distributed=True,
                     checkpoint_every=4)
