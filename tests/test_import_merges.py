"""An import never merges runs its source tells apart. A table's `system` and
`layout` columns are read by name; an unmapped text column that differs within a run
stops the import (exit 2, nothing written) until it is mapped or ignored; every import
says per run what it read and what it left. The other formats refuse two runs in one
folder or file, and still take a CleanRL run's several envs' episodes at one step as
one run."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from foreign_runs import cleanrl_run_dir, write_monitor_file, write_tensorboard_run
from harness_cli import ROOT

from analysis.cli import main
from analysis.inputs.load import load_records

TABLE_ARGS = ["--protocol", "paper", "--frames", "4e6", "--frames-column", "frames"]
EPISODES = 39


def _two_systems_csv(path: Path, system_column: str = "system") -> Path:
    """2 systems x 3 seeds x 39 episodes on Breakout-v5, at the same frames."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow([system_column, "layout", "task", "seed", "return", "frames",
                    "episode_id"])
        for system, level in (("cleanba-ppo", 10.0), ("cleanrl-ppo", 30.0)):
            for seed in (1, 2, 3):
                for k in range(EPISODES):
                    w.writerow([system, "1gpu", "Breakout-v5", seed, level + k + seed,
                                (k + 1) * 100_000, k])
    return path


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_system_and_layout_columns_are_read_by_name(tmp_path, capsys):
    src = _two_systems_csv(tmp_path / "runs.csv")
    out = tmp_path / "sweep"
    assert main(["import", "table", str(src), "--out", str(out), *TABLE_ARGS]) == 0
    said = capsys.readouterr().out
    assert "6 runs written" in said
    assert said.count(f"{EPISODES} rows read, {EPISODES} episodes written") == 6
    assert ("used: column task, column seed, column system, column layout, column return, "
            "column frames; ignored: column episode_id") in said
    runs = load_records([out]).included
    assert len(runs) == 6
    groups = {(r.manifest["system"], r.manifest["layout"]["name"]) for r in runs}
    assert groups == {("cleanba-ppo", "1gpu"), ("cleanrl-ppo", "1gpu")}
    for r in runs:
        frames = np.asarray(r.episodes["frames"])
        assert len(frames) == EPISODES and len(np.unique(frames)) == EPISODES
    capsys.readouterr()
    assert main(["summary", str(out)]) == 0
    summary = capsys.readouterr().out
    assert "cleanba-ppo" in summary and "cleanrl-ppo" in summary


def test_an_unmapped_text_column_that_splits_runs_is_refused(tmp_path, capsys):
    src = _two_systems_csv(tmp_path / "runs.csv", system_column="agent")
    out = tmp_path / "sweep"
    args = ["import", "table", str(src), "--out", str(out), *TABLE_ARGS]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "column 'agent' is not mapped" in err
    assert "--system-column agent" in err and "--ignore-column agent" in err
    assert "nothing was written" in err
    assert not out.exists()

    # An --out that already holds records is left exactly as it was.
    other = _two_systems_csv(tmp_path / "other.csv")
    assert main(["import", "table", str(other), "--out", str(out), *TABLE_ARGS]) == 0
    before = _tree(out)
    assert main(args) == 2
    assert _tree(out) == before
    capsys.readouterr()

    assert main([*args[:4], str(tmp_path / "mapped"), *TABLE_ARGS,
                 "--system-column", "agent"]) == 0
    assert len(load_records([tmp_path / "mapped"]).included) == 6
    assert main([*args[:4], str(tmp_path / "merged"), *TABLE_ARGS,
                 "--ignore-column", "agent"]) == 0
    said = capsys.readouterr().out
    assert "ignored: column agent, column episode_id" in said
    runs = load_records([tmp_path / "merged"]).included
    assert len(runs) == 3 and {len(r.episodes) for r in runs} == {2 * EPISODES}


def test_a_declared_system_does_not_hide_a_system_column_that_differs(tmp_path, capsys):
    src = _two_systems_csv(tmp_path / "runs.csv")
    base = ["import", "table", str(src), *TABLE_ARGS, "--system", "mine"]
    assert main([*base, "--out", str(tmp_path / "a")]) == 2
    assert "column 'system' is not mapped" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()
    assert main([*base, "--out", str(tmp_path / "b"), "--ignore-column", "nope"]) == 2
    assert "--ignore-column nope: no such column" in capsys.readouterr().err
    assert main([*base, "--out", str(tmp_path / "c"), "--ignore-column", "frames"]) == 2
    assert "names a column the import reads" in capsys.readouterr().err


def test_several_envs_episodes_at_one_step_are_one_run(tmp_path, capsys):
    """CleanRL logs each env's finished episode at the global step it ends: a table and a
    W&B history export with two episodes at every step are one run each."""
    table = tmp_path / "t.csv"
    with open(table, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["task", "seed", "return", "frames"])
        w.writerows(["Pong-v5", 1, float(k), (k // 2 + 1) * 1000] for k in range(40))
    assert main(["import", "table", str(table), "--out", str(tmp_path / "o1"),
                 *TABLE_ARGS]) == 0
    (run,) = load_records([tmp_path / "o1"]).included
    assert len(run.episodes) == 40

    hist = tmp_path / "exports" / "Pong-v5" / "seed_1.csv"
    hist.parent.mkdir(parents=True)
    with open(hist, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["global_step", "charts/episodic_return", "_runtime", "note"])
        w.writerows([(k // 2 + 1) * 128, float(k), k * 0.1, "x"] for k in range(40))
    wcsv = ["import", "wandb-csv", str(tmp_path / "exports"), "--protocol", "paper",
            "--frames-per-step", "4", "--path-pattern",
            r"(?P<task>[^/]+)/seed_(?P<seed>\d+)\.csv"]
    assert main([*wcsv, "--out", str(tmp_path / "o2")]) == 0
    assert "ignored: column note" in capsys.readouterr().out
    (run,) = load_records([tmp_path / "o2"]).included
    assert len(run.episodes) == 40

    with open(hist, "a", newline="", encoding="utf-8") as f:  # a second run appended
        csv.writer(f).writerows([(k + 1) * 128, 1.0, k * 0.1, "x"] for k in range(5))
    assert main([*wcsv, "--out", str(tmp_path / "o3")]) == 2
    assert "goes back from 2560 to 128" in capsys.readouterr().err
    assert not (tmp_path / "o3").exists()


@pytest.mark.parametrize("fault, why", [
    ([[256, 1.0, 0.2], [128, 2.0, 0.3]], "'global_step' goes back from 256 to 128"),
    ([[256, "lots", 0.2]], "column 'charts/episodic_return' holds a non-number"),
    ([], "missing column(s) ['global_step']")])
def test_a_wandb_csv_import_and_an_openrlbenchmark_csv_refuse_a_fault_alike(
        tmp_path, capsys, fault, why):
    """Both read a history export with one reader (wandb_runs.export_history): the same
    fault is refused with the same words, by the import (exit 2) and by --orb (the run
    left out as unreadable)."""
    from analysis.importers.orb import load_openrlbenchmark_dir

    hist = tmp_path / "exports" / "cleanrl" / "Pong-v5" / "seed_1.csv"
    hist.parent.mkdir(parents=True)
    with open(hist, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["step" if not fault else "global_step", "charts/episodic_return",
                    "_runtime"])
        w.writerows([[128, 0.0, 0.1], *fault])
    assert main(["import", "wandb-csv", str(tmp_path / "exports"), "--protocol", "paper",
                 "--frames-per-step", "4", "--task", "Pong-v5", "--out",
                 str(tmp_path / "o")]) == 2
    assert why in capsys.readouterr().err
    (left,) = load_openrlbenchmark_dir(tmp_path / "exports").left_out
    assert left.status == "unreadable" and why in left.reason


def test_a_missing_column_names_the_flags_of_the_command_that_read_it(tmp_path, capsys):
    """One reader serves four commands whose column flags differ: its hint names the
    flags of the command the user ran (a generic hint sent users to flags that command
    does not have)."""
    export = tmp_path / "exports" / "cleanrl" / "Pong-v5" / "seed_1.csv"
    export.parent.mkdir(parents=True)
    export.write_text("step,charts/episodic_return,charts/avg_episodic_return\n128,0.0,0.0\n")
    cache = tmp_path / "cache" / "entity" / "project" / "run1"
    cache.mkdir(parents=True)
    (cache / "run.json").write_text(json.dumps({
        "id": "run1", "name": "x", "state": "finished", "url": "u", "project": "project",
        "entity": "entity", "tags": [], "path": ["entity", "project", "run1"],
        "config": {"env_id": "Pong-v5", "seed": 1, "exp_name": "cleanrl"}}))
    (cache / "run_df.csv").write_text(export.read_text())
    commands = {
        "--step and --metric": [
            ["import", "wandb-csv", str(tmp_path / "exports"), "--protocol", "paper",
             "--frames-per-step", "4", "--task", "Pong-v5", "--out", str(tmp_path / "o")],
            ["orb-import", str(tmp_path / "cache"), "--out", str(tmp_path / "o")]],
        "--step-column and --return-column": [
            ["aggregate", "--orb", str(tmp_path / "exports")]],
        "--orb-step and --orb-metric": [
            ["reproduce", "--runs", str(ROOT / "results" / "reference" / "smoke-cartpole"), "--orb", str(tmp_path / "exports")]]}
    for flags, argvs in commands.items():
        for argv in argvs:
            assert main(argv) == 2, argv
            err = capsys.readouterr().err
            assert "missing column(s) ['global_step']" in err, (argv, err)
            assert err.count(str(export)) <= 1, err  # the file named once
            assert f"Name the step and return columns with {flags}" in err, (argv, err)
    # reproduce says why it has nothing to compare (not "give --orb": it was given)
    assert "no run under --orb could be read (1 run left out above" in err
    assert not (tmp_path / "o").exists()


def test_tensorboard_cleanrl_envs_at_one_step_are_one_run_two_runs_in_a_folder_are_not(
        tmp_path, capsys):
    pytest.importorskip("tensorboard")
    steps = np.repeat(np.arange(1, 21) * 512.0, 4)  # 4 envs' episodes at each step
    h = {"steps": steps, "returns": np.arange(80.0), "lengths": np.full(80, 100.0),
         "seconds": steps / 20_000.0}
    run_dir = cleanrl_run_dir(tmp_path / "tb", "Breakout-v5", 1)
    write_tensorboard_run(run_dir, h)
    args = ["import", "tensorboard", str(tmp_path / "tb"), "--protocol", "paper",
            "--frames-per-step", "4"]
    assert main([*args, "--out", str(tmp_path / "o1")]) == 0
    said = capsys.readouterr().out
    assert "80 rows read, 80 episodes written; used: tag charts/episodic_return" in said
    (run,) = load_records([tmp_path / "o1"]).included
    assert len(run.episodes) == 80
    write_tensorboard_run(run_dir, h)  # another run written into the same folder
    assert main([*args, "--out", str(tmp_path / "o2")]) == 2
    assert "two runs in one folder" in capsys.readouterr().err
    assert not (tmp_path / "o2").exists()


def test_monitor_files_of_two_runs_in_one_folder_are_refused(tmp_path, capsys):
    rows = [(1.0, 10, 0.5), (2.0, 10, 1.0)]
    (tmp_path / "seed_1").mkdir()
    for name in ("a_0.monitor.csv", "b_0.monitor.csv"):
        write_monitor_file(tmp_path / "seed_1" / name, 1_700_000_000.0, "Pong-v5", rows)
    assert main(["import", "monitor", str(tmp_path), "--out", str(tmp_path / "out"),
                 "--protocol", "paper", "--frames-per-step", "4"]) == 2
    assert "not the envs of one run" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_parquet_table_is_checked_the_same_way(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    import pyarrow as pa
    import pyarrow.parquet as pq

    with open(_two_systems_csv(tmp_path / "runs.csv", system_column="agent"),
              newline="", encoding="utf-8") as f:
        header, *rows = list(csv.reader(f))
    cols = {c: [r[i] for r in rows] for i, c in enumerate(header)}
    numbers = {c: [float(v) for v in cols[c]] for c in ("seed", "return", "frames",
                                                         "episode_id")}
    pq.write_table(pa.table({**cols, **numbers}), tmp_path / "runs.parquet")
    args = ["import", "table", str(tmp_path / "runs.parquet"), *TABLE_ARGS]
    assert main([*args, "--out", str(tmp_path / "a")]) == 2
    assert "column 'agent' is not mapped" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()
    assert main([*args, "--out", str(tmp_path / "b"), "--system-column", "agent"]) == 0
    assert len(load_records([tmp_path / "b"]).included) == 6
