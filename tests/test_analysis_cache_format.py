"""The cache's own formats and lookups (analysis.inputs.entry_file, cache_location,
runrecord.find_run_dirs): an entry cut short or foreign is never read as one, and the
fast string and os.walk paths answer exactly what the Path-based ones did."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
from synthetic_records import write_synthetic_run

from analysis.inputs import cache, entry_file
from analysis.inputs.facts import narrow, widen
from analysis.inputs.load import load_runs
from analysis.verdicts.staleness import audit
from runrecord import find_run_dirs
from runrecord.paths import results_root_of


def _arrays():
    return {"x": narrow(np.arange(5, dtype=np.float64) * 4),            # int32
            "ret": narrow(np.array([0.5, -1.25, 3.0, np.nan, np.inf])),  # float32
            "wall": narrow(np.array([0.1, 0.2, 0.3, 1e300, -0.0])),      # float64
            "u:update": narrow(np.array([1.0, 2.0])),
            "note": narrow(np.array(["a", "b,c", "ü"], dtype=object))}   # text


def test_entry_round_trip_keeps_every_bit_and_dtype(tmp_path):
    arrays = _arrays()
    assert [a.dtype.kind for a in arrays.values()] == ["i", "f", "f", "i", "U"]
    path = tmp_path / "run.entry"
    path.write_bytes(entry_file.encode({"key": "k", "facts": {"n": 5}}, arrays))
    header, got = entry_file.read(path)
    assert header["key"] == "k" and header["facts"] == {"n": 5}
    assert entry_file.read_header(path)["key"] == "k"
    assert list(got) == list(arrays)
    for name, array in arrays.items():
        assert widen(got[name]).tobytes() == widen(array).tobytes() or (
            got[name].dtype == object and list(got[name]) == list(array))
        if array.dtype.kind != "U":
            assert got[name].dtype == array.dtype


def test_entry_cut_short_or_foreign_is_never_read(tmp_path):
    data = entry_file.encode({"key": "k"}, _arrays())
    path = tmp_path / "run.entry"
    for cut in [0, 5, len(entry_file.MAGIC) + 3, len(entry_file.MAGIC) + 12, len(data) // 2,
                len(data) - 1]:
        path.write_bytes(data[:cut])
        with pytest.raises(entry_file.EntryFileError):
            entry_file.read(path)
        with pytest.raises(entry_file.EntryFileError):
            entry_file.read_header(path)
    path.write_bytes(data + b"x")  # longer than its header says: not this format either
    with pytest.raises(entry_file.EntryFileError):
        entry_file.read(path)
    path.write_bytes(b"PK\x03\x04" + data[4:])  # e.g. an entry of the old npz format
    with pytest.raises(entry_file.EntryFileError):
        entry_file.read_header(path)


def test_torn_entry_is_a_miss_and_the_run_is_parsed_again(tmp_path):
    root = tmp_path / "store"
    run_dir = write_synthetic_run(root / "sweep", seed=1, episodes=50, updates=5)
    plain = load_runs([root], use_cache=False).included[0]
    load_runs([root])
    entry = cache.cache_file(run_dir)
    entry.write_bytes(entry.read_bytes()[:-7])
    (root / cache.CACHE_DIR / cache.INDEX_FILE).unlink()  # so the entry itself is read
    got = load_runs([root]).included[0]
    assert got.held is not None  # parsed again (and stored again)
    assert cache.scoring_columns(got).ret.tobytes() == plain.episodes["episode_return"].tobytes()
    assert entry_file.read_header(entry)["key"] == got.cache_key


def _old_cache_location(run_dir, input_root=None):
    """What cache_location answered when it was written with Path."""
    run_dir = Path(os.path.abspath(run_dir))
    root = results_root_of(run_dir)
    if root is None and input_root is not None:
        named = Path(os.path.abspath(input_root))
        root = named if named in run_dir.parents else None
    return None if root is None else (root, run_dir.relative_to(root).as_posix())


@pytest.mark.parametrize("run_dir,named", [
    ("/runs/x", None), ("/a/runs/x", None), ("/a/b/runs/x/", None), ("rel/sw/runs/x", None),
    ("/a/b/c", None), ("/a/b/c", "/a"), ("/a/b/c", "/a/"), ("/a/b/c", "/a/b/c"),
    ("/a/b/c", "/"), ("/ab/c", "/a"), ("/runs/x", "/"), ("/a/runs/x", "/b"), ("x/y", "."),
    ("/a/b/../c/d", "/a")])
def test_cache_location_answers_as_the_path_version(run_dir, named):
    assert cache.cache_location(run_dir, named) == _old_cache_location(run_dir, named)


def test_find_run_dirs_orders_as_sorted_paths_and_prunes(tmp_path):
    names = ["a/b", "a-b", "a/b-c", "a.b", "A", "z/previous_attempts/1", "z", "c/d/e",
             ".cache-like/x", "c/d"]
    for n in names:
        (tmp_path / n).mkdir(parents=True, exist_ok=True)
        (tmp_path / n / "manifest.json").write_text("{}")
    (tmp_path / "link").symlink_to(tmp_path / "a", target_is_directory=True)
    want = sorted(p.parent for p in tmp_path.rglob("manifest.json")
                  if "previous_attempts" not in p.parent.relative_to(tmp_path).parts)
    assert list(find_run_dirs(tmp_path)) == want
    assert tmp_path / ".cache-like" / "x" in want
    skipped = list(find_run_dirs(tmp_path, skip=(".cache-like",)))
    assert skipped == [p for p in want if ".cache-like" not in p.parts]


def test_an_older_cache_loses_its_npz_entries_once_and_keeps_derived_files(tmp_path):
    root = tmp_path / "store"
    run_dir = write_synthetic_run(root / "sweep", seed=1, episodes=30, updates=3)
    want = load_runs([root], use_cache=False).included[0]
    cache_dir = root / cache.CACHE_DIR
    old_entry = cache_dir / "sweep" / "runs" / f"{run_dir.name}.npz"  # version 4's layout
    old_entry.parent.mkdir(parents=True)
    np.savez(old_entry, x=np.arange(3))
    derived_file = cache_dir / cache.DERIVED_DIR / "final-0123.npz"
    derived_file.parent.mkdir(parents=True)
    np.savez(derived_file, paths=np.array([], dtype=str))
    (cache_dir / cache.INDEX_FILE).write_text('{"version": 4, "runs": {}}')
    got = load_runs([root]).included[0]
    assert not old_entry.exists() and derived_file.exists()
    assert cache.cache_file(run_dir).exists()
    assert cache.scoring_columns(got).ret.tobytes() == want.episodes["episode_return"].tobytes()
    np.savez(old_entry, x=np.arange(3))  # the index is current now: nothing is dropped
    load_runs([root])
    assert old_entry.exists()


def test_row_files_of_an_older_layout_are_rebuilt_not_read(tmp_path):
    # an index of this cache version with rows of the layout before RowFile (rel -> header)
    # and a derived JSON file of that layout ({rel: [key, value]}, no version)
    root = tmp_path / "store"
    write_synthetic_run(root / "sweep", seed=1, episodes=30, updates=3)
    want = load_runs([root], use_cache=False).included[0]
    cached = load_runs([root]).included[0]
    audit([cached])  # writes derived/staleness.json
    rel = cached.cache_rel
    index = root / cache.CACHE_DIR / cache.INDEX_FILE
    staleness = root / cache.CACHE_DIR / cache.DERIVED_DIR / "staleness.json"
    header = json.loads(index.read_text())["runs"][rel][1]
    index.write_text(json.dumps({"version": cache.CACHE_VERSION, "runs": {rel: header}}))
    staleness.write_text(json.dumps({rel: [header["key"], {"updates": -1}]}))
    assert audit(load_runs([root]).included).as_dict() == audit([want]).as_dict()
    assert json.loads(index.read_text())["runs"][rel] == [header["key"], header]
    assert json.loads(staleness.read_text())["runs"][rel][0] == header["key"]
