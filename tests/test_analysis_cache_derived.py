"""The cache's derived layer (analysis.inputs.derived) and compact entries: every event that
changes a run, and every option that changes what is computed from it, gives the numbers a
fresh parse gives; a warm command reads the index and the derived files only."""

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from synthetic_records import write_synthetic_run

from analysis.cli import main
from analysis.inputs import cache, derived
from analysis.inputs.facts import narrow, widen
from analysis.inputs.load import load_runs
from analysis.scales.normalize import get_normaliser
from analysis.scoring.scores import binned_curve, scores_by_group
from analysis.verdicts.staleness import audit
from runrecord import RecordError, schema
from runrecord.reader import read_table
from runrecord.writer import _archive_previous_attempt

REFERENCE = Path(__file__).resolve().parent.parent / "results" / "reference"


def _cli(args, capsys):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def _store(tmp_path, first_status=schema.COMPLETED):
    """A results root with 2 layouts x 3 seeds of CartPole, the first run with
    `first_status`; returns (root, run dirs)."""
    root = tmp_path / "store"
    dirs = [write_synthetic_run(root / "sweep", seed=s, layout=lay, episodes=80, updates=6,
                                status=first_status if (s, lay) == (1, "a0-l0-d1")
                                else schema.COMPLETED)
            for lay in ("a0-l0-d1", "a0-l1-d1") for s in (1, 2, 3)]
    return root, dirs


def _derived_files(root):
    return sorted((root / cache.CACHE_DIR / derived.DERIVED_DIR).glob("*.npz"))


def _derived_keys(root):
    """{file name: its row keys}: what the derived layer holds."""
    out = {}
    for p in _derived_files(root):
        with np.load(p) as data:
            out[p.name] = sorted(data["keys"].tolist())
    return out


def _same_as_no_cache(root, capsys, *options):
    plain = _cli(["summary", str(root), *options, "--no-cache"], capsys)
    cached = _cli(["summary", str(root), *options], capsys)
    assert plain == cached
    return cached


def _finish(run_dir):
    path = run_dir / schema.MANIFEST_FILE
    m = json.loads(path.read_text())
    m["status"] = schema.COMPLETED
    path.write_text(json.dumps(m))


def _rerun(run_dir):
    write_synthetic_run(run_dir.parent.parent, seed=1, skill=0.3, episodes=50, updates=6,
                        run_dir=run_dir)


def _tear_last_line(run_dir):
    with open(run_dir / schema.EPISODES_FILE, "a") as f:
        f.write("99999,99999,1.0,0,4")  # torn: the process died mid-line


def _repair_torn_line(run_dir):
    episodes = run_dir / schema.EPISODES_FILE
    stat = episodes.stat()
    with open(episodes, "a") as f:
        f.write("00.5,10\n")  # the repair completes the line
    os.utime(episodes, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # coarse NFS mtime


EVENTS = {
    "finish": _finish,
    "re-run": _rerun,
    "archive": _archive_previous_attempt,
    "repaired line": _repair_torn_line,
    "delete": shutil.rmtree,
}


@pytest.mark.parametrize("event", list(EVENTS))
def test_every_event_invalidates_the_derived_values(event, tmp_path, capsys):
    first = {"finish": schema.RUNNING, "re-run": schema.FAILED}.get(event, schema.COMPLETED)
    root, dirs = _store(tmp_path, first)
    if event == "repaired line":
        _tear_last_line(dirs[0])
    before = _same_as_no_cache(root, capsys)
    assert _derived_files(root)
    EVENTS[event](dirs[0])
    after = _same_as_no_cache(root, capsys)
    assert after != before  # the event changed what the analysis sees
    assert _same_as_no_cache(root, capsys) == after  # and the warm command agrees


@pytest.mark.parametrize("options", [
    ["--last-n", "7"], ["--points", "9"], ["--normaliser", "CartPole-v1=0,250"],
    ["--where", "seed=2"],
], ids=lambda o: " ".join(o))
def test_an_option_that_changes_a_value_is_recomputed(options, tmp_path, capsys):
    root, _ = _store(tmp_path)
    default = _same_as_no_cache(root, capsys)
    held = _derived_keys(root)
    changed = _same_as_no_cache(root, capsys, *options)
    assert changed != default
    assert _derived_keys(root) != held  # new values, stored under their own key
    assert _same_as_no_cache(root, capsys) == default  # the default's values still stand


def test_normaliser_is_part_of_each_row_key(tmp_path):
    root, _ = _store(tmp_path)
    runs = load_runs([root]).included
    assert all(isinstance(r, cache.CachedRun) for r in runs)
    plain = load_runs([root], use_cache=False).included
    for norms in (None, {"CartPole-v1": (0.0, 250.0)}, None):
        for _ in range(2):  # cold, then from the derived files
            got = scores_by_group(runs, "layout.name", normalisers=norms)
            want = scores_by_group(plain, "layout.name", normalisers=norms)
            for g in want:
                for field in ("final", "final_raw", "curves", "time_curves", "frame_grid"):
                    np.testing.assert_array_equal(getattr(got[g], field),
                                                  getattr(want[g], field))


def test_warm_command_reads_only_index_and_derived_files(tmp_path, capsys):
    root, _ = _store(tmp_path)
    cold = _cli(["equivalence", str(root), "--group-by", "layout.name"], capsys)
    entries = list((root / cache.CACHE_DIR).rglob(f"*{cache.ENTRY_SUFFIX}"))
    assert len(entries) == 6
    for p in entries:  # a warm command must not need them
        p.unlink()
    warm = _cli(["equivalence", str(root), "--group-by", "layout.name"], capsys)
    assert warm == cold and "identical" in warm[1]
    assert not any(p.exists() for p in entries)


def test_derived_file_that_is_torn_is_a_miss(tmp_path, capsys):
    root, _ = _store(tmp_path)
    first = _cli(["summary", str(root)], capsys)
    for p in _derived_files(root):
        p.write_bytes(p.read_bytes()[:100])
    assert _cli(["summary", str(root)], capsys) == first


@pytest.mark.parametrize("options", [
    ["summary", "--normaliser", "CartPole-v1=0,250"],
    ["summary", "--points", "5", "--last-n", "2"],
    ["aggregate", "--reps", "300", "--points", "7"],
    ["equivalence", "--group-by", "layout.name", "--where", "seed=1", "--last-n", "5"],
], ids=lambda o: " ".join(o))
def test_reference_numbers_with_and_without_cache(options, tmp_path, capsys):
    ref = tmp_path / "reference"
    shutil.copytree(REFERENCE, ref)
    command, rest = options[0], options[1:]
    plain = _cli([command, str(ref), *rest, "--no-cache"], capsys)
    cold = _cli([command, str(ref), *rest], capsys)
    warm = _cli([command, str(ref), *rest], capsys)
    assert plain == cold == warm and plain[1].strip()


def test_narrow_keeps_every_bit():
    cols = [np.array([1.0, 2.0, 3e9]), np.array([0.5, -0.0, 7.0]),
            np.array([0.1, np.nan, 1e-310]), np.array([4.0, 2.0**31]), np.array(["a", "b"])]
    for col in cols:
        stored = narrow(col)
        back = widen(stored)
        if col.dtype == np.float64:
            np.testing.assert_array_equal(back.view(np.int64), col.view(np.int64))
        else:
            assert list(back) == list(col)
    assert narrow(np.array([1.0, 2.0])).dtype == np.int32
    assert narrow(np.array([0.5, -0.0])).dtype == np.float32  # -0.0 is not an int
    assert narrow(np.array([0.1])).dtype == np.float64


def test_plain_numeric_tables_read_as_float_reads_them(tmp_path):
    """The reader's one-pass path for all-numeric CSVs gives the bits float() gives, and
    anything else (empty field, text, quotes) takes the csv module's path."""
    fields = ["0.1", "-0.0", "1e-310", "nan", "123456789", "2.5E3"]
    path = tmp_path / "t.csv"
    path.write_text("a,b,c\n" + "".join(f"{fields[i % 6]},{fields[(i + 1) % 6]},{i}\n"
                                        for i in range(12)))
    t = read_table(path)
    want = np.array([float(fields[i % 6]) for i in range(12)])
    np.testing.assert_array_equal(t["a"].view(np.int64), want.view(np.int64))
    path.write_text('a,b\n1,"2"\n3,\n4,x\n')
    t = read_table(path)
    assert list(t["a"]) == [1.0, 3.0, 4.0] and list(t["b"]) == ["2", "", "x"]
    path.write_text("a,b\n1,2\n3,\n")
    t = read_table(path)
    assert t["b"][0] == 2.0 and np.isnan(t["b"][1])
    # rows whose widths make up the right total are still rows of the wrong width
    path.write_text("a,b\n1,2,3\n4\n5,6\n")
    with pytest.raises(RecordError, match="wrong number of fields"):
        read_table(path)
    path.write_text("a,b\n1,2\n3,4,5\n")  # a long last line: dropped as torn
    warnings: list[str] = []
    t = read_table(path, warnings=warnings)
    assert len(t) == 1 and any("torn" in w for w in warnings)
    path.write_text("a,b\n1,\u00fc\n2,3\n")  # text beyond ASCII: the csv module's path
    assert list(read_table(path)["b"]) == ["\u00fc", "3"]


def test_cache_files_are_readable_by_the_group_like_the_records(tmp_path, capsys):
    root, _ = _store(tmp_path)
    _cli(["summary", str(root)], capsys)
    umask = os.umask(0o022)
    os.umask(umask)
    for p in (root / cache.CACHE_DIR).rglob("*"):
        if p.is_file():
            assert p.stat().st_mode & 0o777 == 0o666 & ~umask, p


def test_staleness_audit_of_cached_runs_parses_nothing_and_agrees(tmp_path, capsys):
    root, dirs = _store(tmp_path)
    plain = _cli(["staleness", str(root), "--no-cache"], capsys)
    assert _cli(["staleness", str(root)], capsys) == plain
    want = audit(load_runs([root], use_cache=False).included).as_dict()
    runs = load_runs([root]).included
    assert all(isinstance(r, cache.CachedRun) for r in runs)
    assert (root / cache.CACHE_DIR / derived.DERIVED_DIR / "staleness.json").exists()
    for d in dirs:  # the audit must read the cache, not the CSV
        (d / schema.UPDATES_FILE).unlink()
    assert audit(runs).as_dict() == want
    (root / cache.CACHE_DIR / derived.DERIVED_DIR / "staleness.json").unlink()
    assert audit(runs).as_dict() == want  # recomputed from the cache entries
    assert audit(runs, "seed").as_dict() != want  # the group is not part of what is cached


def test_each_group_time_curve_is_on_its_own_time_grid(tmp_path):
    # three groups, two of them sharing a time grid and the middle one (by label) on
    # another: one pass over the runs still gives each run its own group's grid
    root = tmp_path / "store"
    for lay, spf in (("a0-l0-d1", 1e-4), ("a0-l0-d2", 3e-4), ("a0-l1-d1", 1e-4)):
        for s in (1, 2):
            write_synthetic_run(root / "sweep", seed=s, layout=lay, episodes=70, updates=4,
                                seconds_per_frame=spf)
    for use_cache in (True, True, False):  # cold, warm, parsed
        got = scores_by_group(load_runs([root], use_cache=use_cache).included, "layout.name")
        assert list(got) == ["a0-l0-d1", "a0-l0-d2", "a0-l1-d1"]
        grids = {g: got[g].time_grid for g in got}
        assert np.array_equal(grids["a0-l0-d1"], grids["a0-l1-d1"])
        assert not np.array_equal(grids["a0-l0-d1"], grids["a0-l0-d2"])
        for gs in got.values():
            for (seed, task), run in gs.runs.items():
                cols = cache.scoring_columns(run)
                norm = get_normaliser(task)
                want = binned_curve(cols.wall, norm(cols.ret), gs.time_grid)
                row = gs.seeds.index(seed), gs.tasks.index(task)
                assert gs.time_curves[row].tobytes() == want.tobytes()
