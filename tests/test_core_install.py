"""The analysis installs and runs without the training stack.

- test_analysis_runs_with_the_trainer_stack_blocked: in a fresh interpreter whose imports
  of JAX, EnvPool, Flax, Optax, torch, wandb and our trainer/harness packages raise,
  `import analysis`, every analysis module, every Python API name, every subcommand's
  --help and real summary / aggregate / equivalence runs on records all work; and none of
  those modules is in sys.modules at the end.
- test_core_only_venv (slow; CI runs it through scripts/test.sh): a venv with nothing but
  `pip install .` (the core install) runs `python -m analysis --help` and each
  subcommand's --help from outside the checkout, has no JAX or EnvPool, and passes the
  analysis tests listed in CORE_TESTS.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harness_cli import ROOT
from synthetic_records import write_synthetic_run
from venv_install import pip_install

PACKAGES = ("runrecord", "benchenv", "cleanba", "analysis", "calibration", "harness",
            "baselines")
TRAINER_STACK = ("jax", "jaxlib", "flax", "optax", "envpool", "torch", "wandb", "cleanba",
                 "harness", "baselines")
CORE_TESTS = ["tests/test_core_install.py", "tests/test_rly_checks.py",
              "tests/test_analysis_metrics.py", "tests/test_analysis_verdicts.py",
              "tests/test_analysis_api.py", "tests/test_architecture.py",
              "tests/test_importers.py"]
"""Analysis tests run in the core-only venv (rliable's oracle tests skip there)."""

PROBE = r"""
import contextlib, importlib, importlib.abc, io, json, pkgutil, sys
BLOCKED = set(sys.argv[1].split(","))
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"analysis imported {name} (blocked by the test)")
sys.meta_path.insert(0, Blocker())
import analysis
api = [getattr(analysis, name) for name in analysis.__all__]
from analysis import rly
modules = [m.name for m in pkgutil.walk_packages(analysis.__path__, "analysis.")
           if not m.name.endswith("__main__")]
for name in modules:
    importlib.import_module(name)
from analysis.cli import Command, main
from runrecord.cli_dispatch import subcommands
helps = {}
for sub in subcommands(Command):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            main([sub, "--help"])
        except SystemExit as e:
            helps[sub] = (e.code, len(out.getvalue()))
runs = {}
for argv in json.loads(sys.argv[2]):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        runs[" ".join(argv[:1])] = (main(argv), out.getvalue()[-300:])
loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
print(json.dumps({"modules": len(modules), "api": len(api), "helps": helps, "runs": runs,
                  "loaded": loaded}))
"""


def probe(python: str, cwd: Path, runs: list[list[str]], env: dict | None = None) -> dict:
    r = subprocess.run([python, "-c", PROBE, ",".join(TRAINER_STACK), json.dumps(runs)],
                       cwd=cwd, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def check_probe(out: dict) -> None:
    assert out["loaded"] == []
    assert out["modules"] > 60 and out["api"] > 15
    assert len(out["helps"]) >= 15
    assert all(code == 0 and size > 200 for code, size in out["helps"].values()), out["helps"]


def record_runs(root: Path) -> list[list[str]]:
    """Three seeds on two layouts, and the commands to run on them."""
    for layout, shift in (("a0-l0-d1", 0.0), ("a0-l1-d1", 0.0)):
        for seed in (1, 2, 3):
            write_synthetic_run(root, seed=seed, layout=layout, shift=shift)
    return [["summary", str(root)], ["aggregate", str(root), "--reps", "500"],
            ["equivalence", str(root), "--a", "a0-l1-d1", "--reference", "a0-l0-d1"]]


def test_analysis_runs_with_the_trainer_stack_blocked(tmp_path):
    runs = record_runs(tmp_path / "runs")
    out = probe(sys.executable, ROOT, runs, env={**os.environ, "PYTHONPATH": str(ROOT)})
    check_probe(out)
    assert out["runs"]["summary"][0] == 0 and "a0-l1-d1" in out["runs"]["summary"][1]
    assert out["runs"]["aggregate"][0] == 0
    assert out["runs"]["equivalence"][0] == 0  # EQUIVALENT: copies of one run


def test_probe_catches_a_blocked_import(tmp_path):
    """The blocker really refuses: a module that imports JAX makes the probe fail."""
    r = subprocess.run([sys.executable, "-c", PROBE.replace("import analysis\n",
                                                            "import analysis\nimport jax\n", 1),
                        "jax", "[]"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "analysis imported jax" in r.stderr


def source_copy(dest: Path) -> Path:
    """What `pip install .` builds from, copied: the build leaves build/ and *.egg-info
    beside the sources (and would reuse a stale build/ of the checkout)."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, dest / pkg,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


@pytest.mark.slow
def test_core_only_venv(tmp_path):
    if os.environ.get("CLEANBA_BENCH_CORE_VENV") == "1":
        pytest.skip("already inside the core-only venv")
    venv = tmp_path / "core"
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = str(venv / ("Scripts" if os.name == "nt" else "bin") / "python")
    r = pip_install(py, str(source_copy(tmp_path / "src")), "pytest", timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    install_s = time.monotonic() - start
    listed = subprocess.run([py, "-m", "pip", "list", "--format", "json"],
                            capture_output=True, text=True, check=True).stdout
    names = {p["name"].lower() for p in json.loads(listed)}
    assert "cleanba-bench" in names and "scipy" in names
    assert not names & {"jax", "jaxlib", "envpool", "flax", "optax", "wandb", "torch"}

    # The installed package, from outside the checkout: help, and real runs on records.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = subprocess.run([py, "-m", "analysis", "--help"], cwd=elsewhere, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and "summary" in r.stdout and "equivalence" in r.stdout
    # The published tables are package data: named without a path, read from the wheel.
    r = subprocess.run([py, "-m", "analysis", "paper-tables", "--table", "cleanba:main_10CPU"],
                       cwd=elsewhere, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "165.8%" in r.stdout, r.stdout + r.stderr
    out = probe(py, elsewhere, record_runs(tmp_path / "runs"))
    check_probe(out)
    assert out["runs"]["summary"][0] == 0

    # The analysis tests that need no trainer, on the checkout's tests.
    env = {**os.environ, "CLEANBA_BENCH_CORE_VENV": "1", "MPLBACKEND": "Agg"}
    r = subprocess.run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", *CORE_TESTS],
                       cwd=ROOT, capture_output=True, text=True, timeout=1200, env=env)
    assert r.returncode == 0, r.stdout[-4000:]
    print(f"core-only venv: install {install_s:.0f} s; tests: {r.stdout.strip().splitlines()[-1]}")
