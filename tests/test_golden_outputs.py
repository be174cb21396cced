"""Golden outputs: every read-only subcommand of `python -m analysis` and `python -m harness`
on the shipped reference records (results/reference/smoke-cartpole) prints what
tests/golden/<case>.txt holds, byte for byte after normalising.

Each case runs the command as a user does (a subprocess from the project root) and keeps
its exit code, stdout, stderr and the text files it writes (CSV, Markdown, LaTeX, JSON,
plain text; of figures only their names, their bytes depend on the plotting stack). Only
what legitimately varies is normalised: the test's temporary folder, the project root and
the interpreter's path. Numbers are compared as printed: every bootstrap is seeded, so a
changed digit is a changed result. The harness cases read a copy of the reference laid
out as the smoke preset's store in the case's own temporary folder (report writes there).
The record cache is off (CLEANBA_ANALYSIS_NO_CACHE=1): a cache left beside the reference
by an older checkout must not answer for the code under test, and nothing is written
beside the shipped records.

On a difference the failure shows a unified diff of the stored and the new output. When a
change of output is meant (a fix), rewrite the stored files and commit them with the fix:

    GOLDEN_UPDATE=1 .venv/bin/python -m pytest -n 0 tests/test_golden_outputs.py

test_every_subcommand_is_covered checks that every subcommand `--help` lists has a case
here or a reason in EXCLUDED, so a new subcommand cannot slip past.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from harness_cli import ROOT

GOLDEN = ROOT / "tests" / "golden"
REF = "results/reference/smoke-cartpole"
UPDATE = os.environ.get("GOLDEN_UPDATE") == "1"
TEXT_SUFFIXES = (".csv", ".md", ".tex", ".json", ".jsonl", ".txt")
COLUMN = "Cleanba IMPALA, 1 A100, 10 CPU"


@dataclass(frozen=True)
class Case:
    cli: str  # analysis or harness
    args: tuple[str, ...]  # {tmp}: the case's temporary folder
    store: bool = False  # {tmp}/results/smoke/runs: a copy of the reference


def analysis(*args: str) -> Case:
    return Case("analysis", args)


def harness(*args: str) -> Case:
    return Case("harness", (*args, "--results-root", "{tmp}/results"), store=True)


SMOKE = ("--preset", "smoke", "--games", "CartPole-v1")

CASES: dict[str, Case] = {
    "analysis-summary": analysis("summary", REF),
    "analysis-summary-layouts": analysis("summary", REF, "--group-by", "layout.name",
                                         "--last-n", "20", "--points", "20"),
    "analysis-aggregate": analysis("aggregate", REF, "--reps", "2000", "--all-pairs",
                                   "--out", "{tmp}/out"),
    "analysis-curves": analysis("curves", REF, "--group-by", "system,layout.name",
                                "--out", "{tmp}/out"),
    "analysis-equivalence": analysis("equivalence", REF),
    "analysis-equivalence-latex": analysis("equivalence", REF, "--where",
                                           "system=cleanba-ppo", "--a", "a0-l0-d2",
                                           "--format", "latex"),
    "analysis-regression": analysis("regression", "--new", REF, "--reference", REF,
                                    "--where", "system=cleanba-ppo", "--delta", "0.3",
                                    "--json-out", "{tmp}/regression.json"),
    # two systems in one comparison: refused (exit 2), naming the --where that selects one
    "analysis-regression-mixed": analysis("regression", "--new", REF, "--reference", REF),
    "analysis-regression-number": analysis("regression", "--new", REF, "--where",
                                           "system=cleanba-ppo", "--reference", "0.6",
                                           "--reference-sd", "0.06", "--reference-seeds",
                                           "3", "--delta", "0.05"),
    "analysis-plan-seeds": analysis("plan-seeds", REF),
    "analysis-plan-seeds-gate": analysis("plan-seeds", REF, "--gate-delta", "0.3"),
    "analysis-plan-seeds-sd": analysis("plan-seeds", "--sd", "0.063", "--delta", "0.2"),
    "analysis-plan-sequential": analysis("plan-sequential", "--sd", "0.06", "--suite",
                                         "CartPole-v1"),
    "analysis-staleness": analysis("staleness", REF, "--per-run", "--json-out",
                                   "{tmp}/staleness.json"),
    # fewer bootstrap reps: the figures' CIs are the same code as curves' and aggregate's
    "analysis-figures": analysis("figures", REF, "--reps", "200", "--aggregate-reps", "200",
                                 "--out", "{tmp}/out"),
    "analysis-paper-tables": analysis("paper-tables", "--table", "cleanba:main_10CPU"),
    "analysis-atari5-table": analysis("atari5", "--table", "cleanba:main_10CPU"),
    # CartPole records: both refuse them (exit 2); the message is the output kept
    "analysis-atari5": analysis("atari5", REF),
    "analysis-reproduce": analysis("reproduce", "--runs", REF, "--where",
                                   "system=cleanba-impala", "--published",
                                   "cleanba:main_10CPU", "--column", COLUMN),
    # an empty store of its own: the runs' states must not follow the user's results/smoke
    "harness-plan": Case("harness", ("plan", "--preset", "smoke", "--results-root",
                                      "{tmp}/results")),
    "harness-status": harness("status", *SMOKE),
    "harness-regress": harness("regress", *SMOKE),
    "harness-report": harness("report", *SMOKE),
}

EXCLUDED: dict[str, str] = {
    "analysis orb-import": "writes run records from an openrlbenchmark cache",
    "analysis orb-fetch": "downloads from W&B (the network)",
    "analysis import": "writes run records from another tool's logs",
    "harness run": "trains",
    "harness determinism-check": "trains tiny runs to measure this machine's bit-identity",
    "harness certify": "writes a certificate that binds the code's digest, which every "
                       "commit changes",
    "harness verify": "needs a certificate from certify and prints its code digest and "
                      "this machine's stack; tests/test_certify.py checks it",
}


TIMING = re.compile(r"(planned in )\d+(?:\.\d+)? s")
"""The wall-clock time a planner prints of its own run."""
SLOW_FIRST = ("harness-plan", "analysis-figures", "harness-report", "harness-regress")
"""The longest cases (6-11 s alone), started first so that the pool ends together."""


def run_case(case: Case, tmp: Path) -> str:
    """The case's command run from the project root, as one normalised text."""
    if case.store:
        shutil.copytree(ROOT / REF, tmp / "results" / "smoke" / "runs")
    args = [a.replace("{tmp}", str(tmp)) for a in case.args]
    # COLUMNS: the width the help and tables wrap at must not follow the CI's terminal
    env = {**os.environ, "CLEANBA_ANALYSIS_NO_CACHE": "1", "COLUMNS": "100"}
    proc = subprocess.run([sys.executable, "-m", case.cli, *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    parts = [f"$ python -m {case.cli} {' '.join(case.args)}", f"exit: {proc.returncode}",
             "--- stdout", proc.stdout, "--- stderr", proc.stderr]
    written = sorted(p for p in tmp.rglob("*") if p.is_file()
                     and not p.relative_to(tmp).parts[:3] == ("results", "smoke", "runs"))
    for path in written:
        rel = path.relative_to(tmp).as_posix()
        if path.suffix in TEXT_SUFFIXES:
            parts += [f"--- file {rel}", path.read_text()]
        else:
            parts.append(f"--- file {rel} (not compared)")
    return normalise("\n".join(parts), tmp)


def normalise(text: str, tmp: Path) -> str:
    """Paths that differ per machine and per run replaced by a placeholder; nothing else."""
    for path, name in ((sys.executable, "<PYTHON>"), (str(tmp), "<TMP>"),
                       (str(ROOT), "<ROOT>")):
        text = text.replace(path, name)
    text = TIMING.sub(r"\1<S> s", text)
    text = re.sub(r"[ \t]+\n", "\n", text)  # (trailing blanks of padded tables)
    return text.rstrip("\n") + "\n"


@pytest.fixture(scope="module")
def started(request, tmp_path_factory):
    """In one pytest process, the selected cases run a few at a time from the first case
    on (each case is mostly one process's imports and its own numbers: 60 s one after the
    other on 2 cores); under pytest-xdist each worker runs the cases it is dealt."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        yield {}
        return
    names = {item.callspec.params["name"] for item in request.session.items
             if getattr(item, "originalname", "") == "test_golden_output"}
    order = sorted(names, key=lambda n: (n not in SLOW_FIRST, n))
    with ThreadPoolExecutor(max_workers=min(3, os.cpu_count() or 1)) as pool:
        futures = {n: pool.submit(run_case, CASES[n], tmp_path_factory.mktemp(n))
                   for n in order}
        yield futures
        for future in futures.values():
            future.cancel()


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_output(name, tmp_path, started):
    got = started[name].result() if name in started else run_case(CASES[name], tmp_path)
    path = GOLDEN / f"{name}.txt"
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(got)
        return
    assert path.exists(), f"no golden file {path.name}: run with GOLDEN_UPDATE=1"
    want = path.read_text()
    if got != want:
        diff = "".join(difflib.unified_diff(want.splitlines(keepends=True),
                                            got.splitlines(keepends=True),
                                            f"tests/golden/{name}.txt", "now"))
        pytest.fail(f"output of {name} changed (GOLDEN_UPDATE=1 rewrites it if meant):\n"
                    f"{diff}", pytrace=False)


def subcommands(cli: str) -> set[str]:
    """The subcommands `python -m CLI --help` lists in its usage line."""
    out = subprocess.run([sys.executable, "-m", cli, "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120).stdout
    match = re.search(r"usage: python -m \S+ \[-h\] \{([^}]*)\}", out)
    assert match, out[:500]
    return {f"{cli} {name}" for name in match.group(1).split(",")}


def test_every_subcommand_is_covered():
    listed = subcommands("analysis") | subcommands("harness")
    covered = {f"{case.cli} {case.args[0]}" for case in CASES.values()}
    assert not covered & set(EXCLUDED), "a subcommand is both covered and excluded"
    assert listed - covered - set(EXCLUDED) == set(), "add a golden case or an EXCLUDED reason"
    assert (covered | set(EXCLUDED)) - listed == set(), "a case names no subcommand"
    assert all(EXCLUDED.values())


def test_no_stale_golden_files():
    assert sorted(p.stem for p in GOLDEN.glob("*.txt")) == sorted(CASES)
