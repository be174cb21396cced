"""Manifests carry no absolute paths of this machine where a relative one will do."""

from __future__ import annotations

from pathlib import Path

from runrecord import RunWriter, read_manifest, resolve_path
from runrecord.paths import PROJECT_ROOT, portable_path, results_root_of


def test_portable_path_rules(tmp_path):
    home = Path("/home/alice")
    proj = Path("/home/alice/src/cleanba-bench")
    res = Path("/scratch/alice/results")
    rules = {"project_root": proj, "results_root": res, "home": home}
    assert portable_path("/home/alice/src/cleanba-bench/cleanba/ppo.py", **rules) == "cleanba/ppo.py"
    assert portable_path("/home/alice/src/cleanba-bench", **rules) == "."
    assert portable_path("/scratch/alice/results/smoke/runs/abc", **rules) == \
        "<results>/smoke/runs/abc"
    assert portable_path("/home/alice/venv/bin/python", **rules) == "~/venv/bin/python"
    assert portable_path("/usr/bin/python3", **rules) == "/usr/bin/python3"
    assert portable_path("127.0.0.1:1234", **rules) == "127.0.0.1:1234"
    assert portable_path("--seed", **rules) == "--seed"
    # A prefix that is not a parent folder is not rewritten.
    assert portable_path("/home/alice/src/cleanba-bench-old/x", **rules) == "~/src/cleanba-bench-old/x"
    assert results_root_of("/r/sweep/runs/abc") == Path("/r")
    assert results_root_of("/somewhere/else") is None


def test_writer_records_relative_paths_and_readers_resolve_old_and_new(tmp_path):
    run_dir = tmp_path / "res" / "sw" / "runs" / "abc123"
    command = ["/usr/bin/python3", str(PROJECT_ROOT / "cleanba" / "ppo.py"), "--run-dir",
               str(run_dir), "--seed", "1"]
    manifest = {"run_id": "abc123", "provenance": {"command": command, "cwd": str(PROJECT_ROOT),
                                                   "host": "node7"},
                "hyperparameters": {"run_dir": str(run_dir), "lr": 0.1, "ids": [0, 1]}}
    w = RunWriter(run_dir, manifest)
    w.finish("interrupted")
    m = read_manifest(run_dir)
    assert m["provenance"]["command"] == ["/usr/bin/python3", "cleanba/ppo.py", "--run-dir",
                                          "<results>/sw/runs/abc123", "--seed", "1"]
    assert m["provenance"]["cwd"] == "." and m["provenance"]["host"] == "node7"
    assert m["hyperparameters"] == {"run_dir": "<results>/sw/runs/abc123", "lr": 0.1,
                                    "ids": [0, 1]}
    assert str(tmp_path) not in (run_dir / "manifest.json").read_text()
    root = tmp_path / "res"
    assert resolve_path(m["hyperparameters"]["run_dir"], results_root=root) == run_dir
    assert resolve_path(m["provenance"]["command"][1]) == PROJECT_ROOT / "cleanba" / "ppo.py"
    # An old record's absolute path reads as itself.
    assert resolve_path(str(run_dir)) == run_dir
