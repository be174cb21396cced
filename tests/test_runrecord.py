"""The run-record format: write, read back, survive torn lines, refuse to clobber results."""

import json
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from runrecord import (
    LayoutError,
    RecordError,
    RunWriter,
    find_run_dirs,
    load_run,
    parse_layout,
    run_id,
    schema,
)


def _manifest(**kw):
    m = {"run_id": "abc", "system": "cleanba-ppo", "architecture": "cleanba",
         "env_id": "CartPole-v1", "seed": 1}
    m.update(kw)
    return m


def test_round_trip_and_status(tmp_path):
    w = RunWriter(tmp_path / "r", _manifest(), extra_update_columns=["loss_total"])
    assert json.loads((tmp_path / "r/manifest.json").read_text())["status"] == "running"
    w.log_episode({"env_steps": 10, "frames": 10, "wall_time_s": 0.5, "env_index": 3,
                   "episode_return": 0.1 + 0.2, "episode_length": 10})
    w.log_update({"update": 1, "env_steps": 16, "learner_version": 2, "loss_total": np.float32(1.5)})
    w.finish("completed", summary={"env_steps": 16})
    run = load_run(tmp_path / "r")
    assert run.status == "completed" and run.manifest["summary"] == {"env_steps": 16}
    assert run.manifest["schema_version"] == schema.SCHEMA_VERSION
    # repr formatting makes floats round-trip bit-exactly
    assert run.episodes["episode_return"][0] == 0.1 + 0.2
    assert run.updates["loss_total"][0] == 1.5
    assert np.isnan(run.updates["sps"][0])  # not given -> empty cell -> nan
    assert run.updates.names.index("loss_total") < run.updates.names.index("rollout_queue_get_s")


def test_torn_last_line_is_dropped_and_reported(tmp_path):
    w = RunWriter(tmp_path / "r", _manifest())
    for i in range(3):
        w.log_episode({"env_steps": i, "frames": i, "wall_time_s": i, "env_index": 0,
                       "episode_return": float(i), "episode_length": 1})
    w.episodes._f.write("4,4,4.0,0,12")  # a kill -9 mid-line
    w.episodes._f.flush()
    run = load_run(tmp_path / "r")
    assert len(run.episodes) == 3
    assert list(run.episodes["episode_return"]) == [0.0, 1.0, 2.0]
    assert any("torn" in m for m in run.warnings)


def test_torn_line_with_newline_but_wrong_field_count(tmp_path):
    w = RunWriter(tmp_path / "r", _manifest())
    w.log_episode({"env_steps": 1, "frames": 1, "wall_time_s": 1, "env_index": 0,
                   "episode_return": 1.0, "episode_length": 1})
    w.episodes._f.write("2,2\n")
    w.episodes._f.flush()
    run = load_run(tmp_path / "r")
    assert len(run.episodes) == 1 and run.warnings


def test_missing_column_is_a_clear_error(tmp_path):
    d = tmp_path / "r"
    RunWriter(d, _manifest()).finish("completed")
    (d / "episodes.csv").write_text("env_steps,frames\n1,1\n")
    with pytest.raises(RecordError, match="missing column.*episode_return"):
        load_run(d)


def test_completed_run_is_never_overwritten_and_failed_attempt_is_kept(tmp_path):
    d = tmp_path / "r"
    w = RunWriter(d, _manifest())
    w.log_episode({"env_steps": 1, "frames": 1, "wall_time_s": 1, "env_index": 0,
                   "episode_return": 7.0, "episode_length": 1})
    w.finish("failed", error=ValueError("boom"))
    m = json.loads((d / "manifest.json").read_text())
    assert m["error"]["type"] == "ValueError" and "boom" in m["error"]["message"]
    w2 = RunWriter(d, _manifest())  # retry: the failed attempt is archived, not deleted
    assert (d / "previous_attempts/1/episodes.csv").read_text().count("\n") == 2
    assert len(load_run(d).episodes) == 0
    w2.finish("completed")
    with pytest.raises(RecordError, match="already completed"):
        RunWriter(d, _manifest())
    assert [p.name for p in find_run_dirs(tmp_path)] == ["r"]


def test_finish_only_once_and_valid_status(tmp_path):
    w = RunWriter(tmp_path / "r", _manifest())
    with pytest.raises(RecordError, match="final status"):
        w.finish("done")
    w.finish("interrupted")
    w.finish("completed")
    assert load_run(tmp_path / "r").status == "interrupted"


def test_concurrent_appends_never_interleave(tmp_path):
    w = RunWriter(tmp_path / "r", _manifest())

    def worker(k):
        for i in range(200):
            w.log_episode({"env_steps": i, "frames": i, "wall_time_s": 0.0, "env_index": k,
                           "episode_return": float(k), "episode_length": i})

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    w.finish("completed")
    run = load_run(tmp_path / "r")
    assert len(run.episodes) == 800 and not run.warnings
    assert np.all(run.episodes["env_index"] == run.episodes["episode_return"])


def test_unknown_column_rejected(tmp_path):
    w = RunWriter(tmp_path / "r", _manifest())
    with pytest.raises(RecordError, match="unknown columns"):
        w.log_update({"update": 1, "bogus": 2})
    with pytest.raises(RecordError, match="must start with"):
        RunWriter(tmp_path / "r2", _manifest(), extra_update_columns=["policy_loss"])


@pytest.mark.parametrize(
    "text,actor,learner,procs",
    [("a0-l0-d1", (0,), (0,), 1), ("a0-l1,2,3-d1", (0,), (1, 2, 3), 1),
     ("a0,1-l2,3-d2", (0, 1), (2, 3), 2), ("a0-l1", (0,), (1,), 1)],
)
def test_parse_layout(text, actor, learner, procs):
    lay = parse_layout(text)
    assert (lay.actor_device_ids, lay.learner_device_ids, lay.num_processes) == (actor, learner, procs)
    assert parse_layout(lay.name) == lay


@pytest.mark.parametrize("bad", ["a0-l-d1", "l0-a0-d1", "a0-l0-d0", "a0,0-l1-d1", "x"])
def test_bad_layouts(bad):
    with pytest.raises(LayoutError):
        parse_layout(bad)


def test_run_id_stable_and_sensitive():
    a = run_id({"system": "cleanba-ppo", "seed": 1, "hp": {"lr": 1e-3, "n": 2}})
    assert a == run_id({"hp": {"n": 2, "lr": 1e-3}, "seed": 1, "system": "cleanba-ppo"})
    assert a != run_id({"system": "cleanba-ppo", "seed": 2, "hp": {"lr": 1e-3, "n": 2}})
    assert len(a) == 12


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="Linux's /proc shows the umask")
def test_an_atomic_write_gives_the_file_the_umasks_mode_without_changing_the_umask(
        tmp_path, monkeypatch):
    """The file gets what open() would give (mkstemp's 0600 would hide a shared results
    root from its other users), and learning the umask does not set it, even for an
    instant: every other thread of the process would create its files under the wrong one."""
    from runrecord import writer

    previous = os.umask(0o027)
    try:
        writer._file_mode.cache_clear()

        def no_umask(mask):
            raise AssertionError("the umask was set")

        monkeypatch.setattr(writer.os, "umask", no_umask)
        writer.atomic_write_text(tmp_path / "a.json", "{}")
    finally:
        monkeypatch.undo()
        os.umask(previous)
        writer._file_mode.cache_clear()
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]  # no temp file left
