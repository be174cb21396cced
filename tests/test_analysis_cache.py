"""The per-results-root record cache (analysis.inputs.cache): never a stale result, safe
for a reader while a writer replaces an entry, and `--no-cache` gives the same numbers."""

import json
import multiprocessing
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from synthetic_records import write_synthetic_run

from analysis.cli import main
from analysis.inputs import cache
from analysis.inputs.facts import narrow
from analysis.inputs.load import load_runs
from runrecord import load_run, schema
from runrecord.reader import read_manifest_bytes
from runrecord.writer import _archive_previous_attempt

REFERENCE = Path(__file__).resolve().parent.parent / "results" / "reference"


def _store(tmp_path, **kw):
    """A results root <tmp>/store with one sweep; returns (root, run_dir)."""
    root = tmp_path / "store"
    run_dir = write_synthetic_run(root / "sweep", seed=1, episodes=60, updates=6, **kw)
    return root, run_dir


def _seen(root):
    """(included run ids with their episode counts, left-out statuses, warnings)."""
    rs = load_runs([root])
    return ({r.run_id: len(r.episodes) for r in rs.included},
            {x.run_id: x.status for x in rs.left_out}, rs.warnings)


def _entry(run_dir):
    return cache.cache_file(run_dir)


def test_entry_is_written_and_used(tmp_path):
    root, run_dir = _store(tmp_path)
    first = _seen(root)
    entry = _entry(run_dir)
    assert entry is not None and entry.exists()
    assert entry.parent.parent.parent == root / cache.CACHE_DIR
    # a hit: the cached tables are bit-identical to a fresh parse
    cached = load_runs([root]).included[0]
    parsed = load_run(run_dir)
    for name in parsed.episodes.names:
        np.testing.assert_array_equal(cached.episodes[name], parsed.episodes[name])
    for name in parsed.updates.names:
        assert cached.updates[name].dtype == parsed.updates[name].dtype
        np.testing.assert_array_equal(cached.updates[name], parsed.updates[name])
    assert _seen(root) == first


def test_run_that_finishes_is_seen_finished(tmp_path):
    root, run_dir = _store(tmp_path, status=schema.RUNNING)
    included, left_out, _ = _seen(root)
    assert not included and list(left_out.values()) == [schema.RUNNING]
    # Only the manifest changes (CSV sizes and mtimes as they were): the manifest hash
    # alone must invalidate the entry.
    manifest_path = run_dir / schema.MANIFEST_FILE
    m = json.loads(manifest_path.read_text())
    m["status"] = schema.COMPLETED
    manifest_path.write_text(json.dumps(m))
    included, left_out, _ = _seen(root)
    assert list(included.values()) == [30] and not left_out


def test_rerun_replaces_what_is_seen(tmp_path):
    root, run_dir = _store(tmp_path, status=schema.FAILED)
    assert list(_seen(root)[1].values()) == [schema.FAILED]
    write_synthetic_run(root / "sweep", seed=1, episodes=60, updates=6, run_dir=run_dir)
    included, left_out, _ = _seen(root)
    assert list(included.values()) == [60] and not left_out


def test_run_archived_to_previous_attempts_is_gone(tmp_path):
    root, run_dir = _store(tmp_path)
    assert len(_seen(root)[0]) == 1
    _archive_previous_attempt(run_dir)  # what a restart does before its new attempt
    included, left_out, _ = _seen(root)
    assert not included and not left_out


def test_repaired_torn_line_is_seen_even_with_the_old_mtime(tmp_path):
    root, run_dir = _store(tmp_path)
    episodes = run_dir / schema.EPISODES_FILE
    with open(episodes, "a") as f:
        f.write("999999,999999,1.0,0,4")  # torn: the process died mid-line
    included, _, warnings = _seen(root)
    assert list(included.values()) == [60] and any("torn" in w for w in warnings)
    stat = episodes.stat()
    with open(episodes, "a") as f:
        f.write("00.5,10\n")  # the repair completes the line
    os.utime(episodes, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # coarse NFS mtime
    included, _, warnings = _seen(root)
    assert list(included.values()) == [61] and not any("torn" in w for w in warnings)


def test_deleted_run_is_gone(tmp_path):
    root, run_dir = _store(tmp_path)
    other = write_synthetic_run(root / "sweep", seed=2, episodes=60, updates=6)
    assert len(_seen(root)[0]) == 2
    shutil.rmtree(run_dir)
    included, left_out, _ = _seen(root)
    assert list(included) == [load_run(other).run_id] and not left_out


def _rewrite_forever(run_a, run_b, path, stop):
    """Child process: replace the entry again and again, alternating two contents."""
    a, b = load_run(run_a), load_run(run_b)
    while not stop.is_set():
        cache.write_entry(a, "key-a", path)
        cache.write_entry(b, "key-b", path)


def test_reader_during_writes_sees_whole_entries(tmp_path):
    root, run_a = _store(tmp_path)
    run_b = write_synthetic_run(root / "sweep", seed=2, episodes=80, updates=6)
    path = tmp_path / "run.entry"
    a = load_run(run_a)
    cache.write_entry(a, "key-a", path)
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    writer = ctx.Process(target=_rewrite_forever, args=(run_a, run_b, path, stop))
    writer.start()
    try:
        hits = misses = 0
        while hits + misses < 400:
            got = cache.read_columns(path, "key-a")
            if got is None:
                misses += 1  # the other content was in place: a miss, never a mix
            else:
                hits += 1
                np.testing.assert_array_equal(got.ret, a.episodes["episode_return"])
    finally:
        stop.set()
        writer.join(30)
    assert hits > 0
    assert not list(path.parent.glob(".*.tmp"))  # no temp file left behind


def test_many_new_runs_go_through_the_pool(tmp_path, monkeypatch):
    # the pool starts at the second miss and gets a chunk per run while the rest are
    # looked up: the results still come back to their own runs
    monkeypatch.setattr(cache, "POOL_MIN_MISSES", 2)
    monkeypatch.setattr(cache._MissParser, "CHUNK_RUNS", 1)
    root = tmp_path / "store"
    dirs = [write_synthetic_run(root / "sweep", seed=s, episodes=40 + s, updates=4)
            for s in range(1, 6)]
    cold = load_runs([root])
    assert all(_entry(d).exists() for d in dirs)
    warm = load_runs([root])
    plain = load_runs([root], use_cache=False)
    assert [r.run_id for r in cold.included] == [r.run_id for r in plain.included]
    for x, y, z in zip(cold.included, warm.included, plain.included, strict=True):
        assert x.run_id == y.run_id == z.run_id and cache.episode_count(x) == len(z.episodes)
        np.testing.assert_array_equal(x.episodes["episode_return"], z.episodes["episode_return"])
        np.testing.assert_array_equal(y.episodes["frames"], z.episodes["frames"])
        # the cold command holds the columns it parsed; bit for bit the entry's (the
        # warm command's) and a fresh parse's
        assert x.held is not None and y.held is None
        for held, stored, parsed in zip(cache.scoring_columns(x), cache.scoring_columns(y),
                                        cache.scoring_columns_of(z), strict=True):
            assert held.dtype == stored.dtype == parsed.dtype == np.float64
            assert held.tobytes() == stored.tobytes() == parsed.tobytes()


def test_held_columns_stay_within_their_budget(tmp_path, monkeypatch):
    root = tmp_path / "store"
    dirs = [write_synthetic_run(root / "sweep", seed=s, episodes=40, updates=4)
            for s in range(1, 4)]
    sizes = [sum(narrow(c).nbytes for c in cache.scoring_columns_of(load_run(d)))
             for d in sorted(dirs)]
    monkeypatch.setattr(cache, "HELD_COLUMNS_BYTES", sizes[0] + min(sizes[1:]) - 1)
    cold = load_runs([root]).included
    assert [r.held is not None for r in cold] == [True, False, False]
    plain = load_runs([root], use_cache=False).included
    for x, z in zip(cold, plain, strict=True):
        for a, b in zip(cache.scoring_columns(x), cache.scoring_columns_of(z), strict=True):
            assert a.tobytes() == b.tobytes()


OPTION_SETS = [
    ["summary"],
    ["summary", "--last-n", "7"],
    ["summary", "--points", "9"],
    ["summary", "--where", "layout.name=a0-l0-d1"],
    ["summary", "--group-by", "layout.name,seed"],
    ["equivalence", "--group-by", "layout.name"],
    ["equivalence", "--group-by", "layout.name", "--last-n", "3"],
    ["aggregate", "--reps", "300"],
    ["aggregate", "--reps", "300", "--last-n", "11", "--where", "system=cleanba-ppo"],
]


def _cli(args, capsys):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("options", OPTION_SETS, ids=lambda o: " ".join(o))
def test_no_cache_gives_identical_numbers_on_reference(options, tmp_path, capsys):
    ref = tmp_path / "reference"
    shutil.copytree(REFERENCE, ref)  # the cache is written beside the copy, not the repo
    command, rest = options[0], options[1:]
    plain = _cli([command, str(ref), *rest, "--no-cache"], capsys)
    assert not (ref / cache.CACHE_DIR).exists()
    cold = _cli([command, str(ref), *rest], capsys)
    assert (ref / cache.CACHE_DIR).exists()
    warm = _cli([command, str(ref), *rest], capsys)
    assert plain == cold == warm
    assert plain[1].strip()


def test_harness_adds_each_finished_run(tmp_path):
    from harness_cli import harness, run_args
    from test_harness_local import write_sweep

    sweep = write_sweep(tmp_path, extra="fail-seeds = [2]")
    root = tmp_path / "res"
    harness(*run_args(sweep, root))
    dirs = sorted((root / "fake" / "runs").iterdir())
    assert len(dirs) == 3
    for d in dirs:  # every settled run (completed or failed) has a current entry
        _, raw = read_manifest_bytes(d)
        assert cache.read_header(cache.cache_file(d), cache.run_key(d, raw)) is not None
    assert _seen(root) == _seen_plain(root)


def _seen_plain(root):
    rs = load_runs([root], use_cache=False)
    return ({r.run_id: len(r.episodes) for r in rs.included},
            {x.run_id: x.status for x in rs.left_out}, rs.warnings)


def test_script_without_main_guard_loads_runs_through_a_broken_pool(tmp_path):
    # a spawned worker re-imports the script, which starts a pool of its own while it
    # is still bootstrapping: the workers die, and the runs are parsed in the script
    root = tmp_path / "store"
    for s in (1, 2, 3):
        write_synthetic_run(root / "sweep", seed=s, episodes=20, updates=2)
    script = tmp_path / "no_guard.py"
    script.write_text("from analysis.inputs import cache\n"
                      "from analysis.inputs.load import load_runs\n"
                      "cache.POOL_MIN_MISSES = 2\n"
                      f"rs = load_runs([{str(root)!r}])\n"
                      "print('runs', len(rs.included), len(rs.left_out))\n")
    project = Path(__file__).resolve().parent.parent
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "PYTHONPATH": str(project)})
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().splitlines()[-1] == "runs 3 0"
    assert _seen(root) == _seen_plain(root)  # and what it stored is current


def test_run_that_grows_while_it_is_parsed_is_not_stored(tmp_path, monkeypatch):
    # a live run appends an episode between the parse and the key taken after it: what
    # was parsed is returned, but nothing is stored under a key it does not match
    root, run_dir = _store(tmp_path, status=schema.RUNNING)
    parse = cache.load_run

    def parse_then_grow(d, manifest=None):
        run = parse(d, manifest)
        with open(Path(d) / schema.EPISODES_FILE, "a") as f:
            f.write("999999,999999,1.0,0,4.0,10\n")
        return run

    monkeypatch.setattr(cache, "load_run", parse_then_grow)
    rs = load_runs([root])
    assert [x.status for x in rs.left_out] == [schema.RUNNING]
    assert not _entry(run_dir).exists()
    monkeypatch.setattr(cache, "load_run", parse)
    load_runs([root])  # nothing grows now: stored, holding the grown file's episodes
    assert _entry(run_dir).exists()
    assert _seen(root) == _seen_plain(root)
