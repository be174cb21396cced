"""The fault matrix: each fault against a small CartPole sweep, then a resume.

For every fault: the status and exit code it leaves, the attempts it spends, and after a
resume: 0 runs lost, 0 run completed twice, 0 torn or unfinished records read as data
(analysis.inputs.load), no orphan process (psutil). The real trainer (cleanba.ppo) takes the
signals; the test-only trainer (tests/harness_fake_trainer.py) stands in where the
harness is what is under test (kill -9, disk full, corrupt and torn files). The table is
printed at the end of the module (also without -s).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from harness_cli import ROOT, harness_run, harness_run_argv
from trainer_output import trainer_said

from analysis.inputs.load import load_runs
from harness.store import ATTEMPTS_DIR, run_state
from harness.sweep import RunSpec, load_sweep
from runrecord import load_run, schema

FAKE = ROOT / "tests" / "harness_fake_trainer.py"
UPDATES = 8  # real runs: 8 updates of 8 envs x 128 steps

REAL_SWEEP = f"""\
name = "faults"
systems = ["cleanba-ppo"]
architectures = ["cleanba"]
layouts = ["a0-l0-d1"]
games = ["CartPole-v1"]
seeds = [1, 2, 3, 4, 5, 6]
frames = {UPDATES * 1024}
[overrides]
progress-interval-s = 0
[resources]
timeout_min = 10
"""

FAKE_SWEEP = """\
name = "faults-fake"
systems = ["fake-ppo"]
layouts = ["a0-l0-d1"]
games = ["CartPole-v1"]
seeds = [1, 2, 3, 4, 5, 6, 7]
frames = 1000
[entry_points.fake-ppo]
entry = "{fake}"
[overrides]
sleep-s = 0.25
updates = 16
ledger = "{ledger}"
"""


# --------------------------------------------------------------------------- the table

@dataclass
class Row:
    fault: str
    trainer: str
    expected: str
    status: str = "?"
    exit_code: str = "?"
    attempts: str = "?"
    lost: str = "?"
    duplicated: str = "?"
    torn_as_data: str = "?"
    orphans: str = "?"


MATRIX: list[Row] = []
COLUMNS = ("fault", "trainer", "expected", "status", "exit_code", "attempts", "lost",
           "duplicated", "torn_as_data", "orphans")
HEADERS = ("fault", "trainer", "expected", "recorded status", "exit code", "attempts spent",
           "lost", "dup", "torn read", "orphans")


def format_matrix(rows: list[Row]) -> list[str]:
    cells = [HEADERS] + [tuple(str(getattr(r, c)) for c in COLUMNS) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADERS))]
    lines = ["| " + " | ".join(c[i].ljust(widths[i]) for i in range(len(c))) + " |"
             for c in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return lines


@pytest.fixture(scope="module", autouse=True)
def print_matrix(request):
    yield
    if not MATRIX:
        return
    lines = ["", "FAULT MATRIX (after resume: lost / dup / torn read / orphans)",
             *format_matrix(MATRIX)]
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        print("\n".join(lines), flush=True)
    out = os.environ.get("FAULT_MATRIX_OUT")
    if out:
        Path(out).write_text("\n".join(lines) + "\n")


# --------------------------------------------------------------------------- helpers

def run_dirs(root: Path, sweep: str, specs: list[RunSpec]) -> dict[int, Path]:
    return {s.seed: root / sweep / "runs" / s.run_id for s in specs}


def first_exit_code(run_dir: Path) -> str:
    """The exit code(s) of the first attempt, from the harness's line in stdout.log."""
    try:
        m = re.search(r"=== harness: exit codes \[([^\]]*)\]", (run_dir / "stdout.log").read_text())
    except OSError:
        return "-"
    return m[1] if m else "-"


def manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / schema.MANIFEST_FILE).read_text())


def orphans(root: Path, grace_s: float = 5.0) -> list[int]:
    """Processes still alive whose command line names this test's results root, once a
    killed process has had `grace_s` to be gone (the list is empty as soon as it is)."""
    deadline = time.monotonic() + grace_s
    while True:
        found = _alive_naming(root)
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)  # a poll of the process table


def _alive_naming(root: Path) -> list[int]:
    found = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
        except (psutil.Error, TypeError):
            continue
        if str(root) in cmd and p.info["status"] != psutil.STATUS_ZOMBIE and p.pid != os.getpid():
            found.append(p.pid)
    return found


def completions(run_dir: Path) -> int:
    """How many attempts of a run completed (current record and archived ones)."""
    paths = [run_dir / schema.MANIFEST_FILE,
             *run_dir.glob(f"{ATTEMPTS_DIR}/*/{schema.MANIFEST_FILE}")]
    n = 0
    for p in paths:
        try:
            n += json.loads(p.read_text()).get("status") == schema.COMPLETED
        except (OSError, ValueError):
            continue
    return n


def check_store(root: Path, sweep: str, dirs: dict[int, Path], *,
                not_completed: set[int] = frozenset(), updates: int) -> tuple[int, int, int]:
    """(lost, duplicated, torn or unfinished records read as data) after a resume."""
    lost = sum(1 for s, d in dirs.items() if s not in not_completed and completions(d) != 1)
    duplicated = sum(1 for d in dirs.values() if completions(d) > 1)
    loaded = load_runs([root / sweep / "runs"])
    expected = {d.name for s, d in dirs.items() if s not in not_completed}
    mine = [r for r in loaded.included if r.run_id in {d.name for d in dirs.values()}]
    included = {r.run_id for r in mine}
    # read as data although not completed, or read twice (an archived attempt)
    torn = len(included - expected) + len(mine) - len(included)
    for run in mine:
        # every included run is complete and whole: all its updates, no dropped torn line
        if run.warnings or len(run.updates) != updates:
            torn += 1
    lost += len(expected - included)
    return lost, duplicated, torn


def wait_for(cond, timeout: float, what: str, poll: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(poll)
    pytest.fail(f"timed out waiting for {what}")


def update_rows(run_dir: Path) -> int:
    try:
        text = (run_dir / schema.UPDATES_FILE).read_text()
    except OSError:
        return 0
    return max(0, text.count("\n") - 1)


def trainer_process(harness_pid: int, run_id: str) -> psutil.Process | None:
    try:
        kids = psutil.Process(harness_pid).children(recursive=True)
    except psutil.Error:
        return None
    for k in kids:
        try:
            cmd = k.cmdline()
        except psutil.Error:
            continue
        if run_id in cmd and "harness._child" not in " ".join(cmd):
            return k
    return None


# --------------------------------------------------------------------------- real trainer

# seed -> (signal, moment, the trainer's hold). Each trainer of the sweep waits at its
# seed's hold (CLEANBA_HOLD_AT=POINT@SEED) until the test signals it, so the signal comes in
# that phase however fast or loaded the machine: start-up (checks; nothing written yet),
# start-up (compiling; record written, no update), mid-run (2 of 8 updates written), final
# write (all 8 updates written, the final status not yet).
TRAINER_SIGNALS = {
    1: (signal.SIGTERM, "start-up (checks)", "start-up"),
    2: (signal.SIGINT, "start-up (compiling)", "compiling"),
    3: (signal.SIGTERM, "mid-run", "update-2"),
    4: (signal.SIGINT, "mid-run", "update-2"),
    5: (signal.SIGTERM, "final write", "finishing"),
    6: (signal.SIGINT, "final write", "finishing"),
}
HOLDS = ",".join(f"{hold}@{seed}" for seed, (_, _, hold) in TRAINER_SIGNALS.items())


def holding(run_dir: Path, hold: str) -> bool:
    """The trainer says it waits at `hold`."""
    return trainer_said(run_dir, f"holding at {hold}")


def signal_trainers(harness_pid: int, dirs: dict[int, Path], sent: dict[int, str],
                    stop: threading.Event) -> None:
    """Send each seed's signal once its trainer holds (runs in a thread beside the harness)."""
    while not stop.is_set() and len(sent) < len(TRAINER_SIGNALS):
        for seed, (sig, _moment, hold) in TRAINER_SIGNALS.items():
            if seed in sent or not holding(dirs[seed], hold):
                continue
            proc = trainer_process(harness_pid, dirs[seed].name)
            if proc is None:  # it held, and is gone: the hold did not keep it
                sent[seed] = "exited before the signal"
                continue
            proc.send_signal(sig)
            sent[seed] = f"sent at {update_rows(dirs[seed])} updates, holding at {hold}"
        time.sleep(0.02)  # a poll of the runs' logs


@pytest.mark.slow
def test_fault_matrix_real_trainer_signals_preemption_and_nan(tmp_path):
    sweep = tmp_path / "faults.toml"
    sweep.write_text(REAL_SWEEP)
    root = tmp_path / "res"
    specs = load_sweep(sweep).runs
    dirs = run_dirs(root, "faults", specs)

    # 1. SIGTERM/SIGINT to each trainer at start-up, mid-run and at the final write.
    proc = subprocess.Popen(harness_run_argv(sweep, root, "--max-parallel", "6"), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "CLEANBA_HOLD_AT": HOLDS})
    sent: dict[int, str] = {}
    stop = threading.Event()
    th = threading.Thread(target=signal_trainers, args=(proc.pid, dirs, sent, stop), daemon=True)
    th.start()
    out = proc.communicate(timeout=900)[0]
    stop.set()
    th.join()
    assert proc.returncode == 1, out  # some runs interrupted (the harness itself was not)
    first = {}
    for seed in TRAINER_SIGNALS:
        m = manifest(dirs[seed])
        st = run_state(dirs[seed])
        first[seed] = (m["status"], first_exit_code(dirs[seed]), st.failures)
    orphans_after_faults = orphans(root)
    # 2. Resume: every run completes exactly once.
    p = harness_run(sweep, root)
    assert p.returncode == 0, p.stdout + p.stderr
    lost, dup, torn = check_store(root, "faults", dirs, updates=UPDATES)
    left = orphans(root)
    for seed, (sig, moment, _hold) in TRAINER_SIGNALS.items():
        status, code, attempts = first[seed]
        MATRIX.append(Row(
            f"{sig.name} to trainer, {moment}", "cleanba.ppo", "interrupted/130/0",
            f"{status} ({sent.get(seed, 'not sent')})", code, str(attempts), str(lost),
            str(dup), str(torn), str(len(left) + len(orphans_after_faults))))
    for seed, (_sig, moment, _hold) in TRAINER_SIGNALS.items():
        status, code, attempts = first[seed]
        assert sent.get(seed, "").startswith("sent at"), \
            f"seed {seed}: the signal did not come {moment}: {sent.get(seed, 'never held')}"
        assert attempts == 0, (seed, first[seed])
        assert (status, code) == (schema.INTERRUPTED, "130"), (seed, moment, first[seed])
    assert (lost, dup, torn) == (0, 0, 0)
    assert left == [] and orphans_after_faults == []

    # 3. SIGTERM to the harness while its trainer starts (Slurm preemption).
    # Its trainer holds once its record exists, before compiling: the SIGTERM surely
    # comes while it starts.
    proc = subprocess.Popen(harness_run_argv(sweep, root, "--seeds", "7"),
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "CLEANBA_HOLD_AT": "compiling@7"})
    pre = {s.seed: s for s in load_sweep(sweep, seeds=[7]).runs}
    pre_dirs = run_dirs(root, "faults", list(pre.values()))
    wait_for(lambda: any(holding(d, "compiling") for d in pre_dirs.values()),
             600, "a preempted run's trainer to start")
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=120)[0]
    code = proc.returncode
    statuses = sorted({run_state(d).state for d in pre_dirs.values()})
    attempts = sum(run_state(d).failures for d in pre_dirs.values())
    exit_codes = sorted({first_exit_code(d) for d in pre_dirs.values()})
    mid_orphans = orphans(root)
    p = harness_run(sweep, root, "--seeds", "7")
    lost, dup, torn = check_store(root, "faults", pre_dirs, updates=UPDATES)
    left = orphans(root)
    MATRIX.append(Row("SIGTERM to harness at trainer start-up (preemption)", "cleanba.ppo",
                      "interrupted/130/0, harness exit 130", f"{','.join(statuses)}",
                      f"trainers {','.join(exit_codes)}; harness {code}", str(attempts),
                      str(lost), str(dup), str(torn), str(len(left) + len(mid_orphans))))
    assert code == 130, out
    assert "no attempt spent" in out and "next `harness run` runs them" in out, out
    assert statuses == [schema.INTERRUPTED] and attempts == 0
    assert p.returncode == 0, p.stdout + p.stderr
    assert (lost, dup, torn) == (0, 0, 0) and left == [] and mid_orphans == []

    # 4. A NaN loss: a deterministic failure, recorded, not retried.
    nan_sweep = tmp_path / "nan.toml"
    nan_sweep.write_text(REAL_SWEEP.replace('"faults"', '"faults-nan"')
                         .replace("seeds = [1, 2, 3, 4, 5, 6]", "seeds = [1]")
                         .replace(f"frames = {UPDATES * 1024}", "frames = 4096"))
    nan_dirs = run_dirs(root, "faults-nan", load_sweep(nan_sweep).runs)
    p = harness_run(nan_sweep, root, env={**os.environ, "CLEANBA_FAULT": "nan:2"})
    d = nan_dirs[1]
    m = manifest(d)
    st = run_state(d)
    resumed = harness_run(nan_sweep, root)
    status_out = subprocess.run([sys.executable, "-m", "harness", "status", "--sweep",
                                 str(nan_sweep), "--results-root", str(root)], cwd=ROOT,
                                capture_output=True, text=True, timeout=120).stdout
    loaded = load_runs([root / "faults-nan" / "runs"])
    left = orphans(root)
    MATRIX.append(Row("NaN loss (CLEANBA_FAULT=nan:2)", "cleanba.ppo",
                      "failed/1/1, deterministic, not retried", f"{m['status']} "
                      f"({st.kind})", first_exit_code(d), str(st.failures),
                      "0" if d.exists() and not (d / "previous_attempts").exists() else "1",
                      "0", str(len(loaded.included)), str(len(left))))
    assert p.returncode == 1 and m["status"] == schema.FAILED, p.stdout + p.stderr
    assert m["error"]["type"] == "NonFiniteLoss" and first_exit_code(d) == "1"
    assert st.failures == 1 and st.kind == "deterministic"
    assert resumed.returncode == 1 and "deterministic error, not retried" in resumed.stdout
    assert not (d / "previous_attempts").exists()  # not run again
    assert "deterministic: not retried" in status_out, status_out
    assert loaded.included == [] and left == []


# --------------------------------------------------------------------------- fake trainer

# The fake trainers of a harness started with this environment wait after update 2 until
# the test's signal or kill (tests/harness_fake_trainer.py): "mid-run" is a state, not a
# moment to catch.
HOLD_MID_RUN = {**os.environ, "FAKE_TRAINER_HOLD_AFTER": "2"}


def fake_holding(run_dir: Path) -> bool:
    return trainer_said(run_dir, "holding after update 2")


def _fake_setup(tmp_path: Path):
    sweep = tmp_path / "fake.toml"
    sweep.write_text(FAKE_SWEEP.format(fake=FAKE, ledger=tmp_path / "ledger.txt"))
    root = tmp_path / "res"
    specs = load_sweep(sweep).runs
    return sweep, root, specs, run_dirs(root, "faults-fake", specs)


def _ledger(tmp_path: Path) -> list[str]:
    p = tmp_path / "ledger.txt"
    return [line.split()[0] for line in p.read_text().splitlines()] if p.exists() else []


def _try_mount_tmpfs(path: Path, size: str) -> bool:
    if os.geteuid() != 0:
        return False
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                       capture_output=True, timeout=30)
    return r.returncode == 0


def test_fault_matrix_harness_kill_disk_corrupt_torn(tmp_path):
    sweep, root, specs, dirs = _fake_setup(tmp_path)
    ids = {s: d.name for s, d in dirs.items()}

    # a. SIGKILL of the harness mid-sweep (seeds 1-4), a torn CSV line left behind.
    proc = subprocess.Popen(harness_run_argv(sweep, root, "--seeds", "1,2,3,4", "--max-parallel",
                                         "4"), cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=HOLD_MID_RUN)
    wait_for(lambda: sum(fake_holding(dirs[s]) for s in (1, 2, 3, 4)) >= 2, 120,
             "two runs mid-way")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    code = proc.returncode
    mid_orphans = orphans(root)
    killed = [s for s in (1, 2, 3, 4) if run_state(dirs[s]).state == "stale"]
    states = sorted({run_state(dirs[s]).state for s in (1, 2, 3, 4)})
    attempts = sum(run_state(dirs[s]).failures for s in (1, 2, 3, 4))
    # A kill in the middle of a CSV write leaves a torn last line: simulate it on one.
    victim = dirs[killed[0]]
    with open(victim / schema.UPDATES_FILE, "a") as f:
        f.write("7,7000,7000,1.5,8")
    torn_run = load_run(victim)
    torn_rows_ok = len(torn_run.updates) == update_rows(victim) and torn_run.warnings
    p = harness_run(sweep, root, "--seeds", "1,2,3,4")
    lost, dup, torn = check_store(root, "faults-fake", {s: dirs[s] for s in (1, 2, 3, 4)},
                                  updates=16)
    archived = load_run(victim / "previous_attempts" / "1")
    left = orphans(root)
    MATRIX.append(Row("SIGKILL to harness mid-sweep", "fake", "stale (interrupted)/-/0",
                      f"{len(killed)} stale (others: {','.join(sorted(set(states) - {'stale'})) or '-'})", f"harness {code}", str(attempts), str(lost), str(dup),
                      str(torn), str(len(left) + len(mid_orphans))))
    MATRIX.append(Row("torn CSV line (kill mid-write)", "fake",
                      "torn line dropped, re-run", f"stale; reader dropped it: "
                      f"{bool(torn_rows_ok)}", "-", "0", str(lost), str(dup), str(torn),
                      str(len(left))))
    assert code == -signal.SIGKILL and len(killed) >= 2
    assert set(states) <= {"stale", "pending", "completed"}  # killed, not started, done
    assert attempts == 0
    assert mid_orphans == []  # trainers die with their supervisor
    assert torn_rows_ok and any("torn" in w or "dropped" in w for w in torn_run.warnings), \
        torn_run.warnings
    assert p.returncode == 0, p.stdout + p.stderr
    assert sorted(_ledger(tmp_path)) == sorted(ids[s] for s in (1, 2, 3, 4))
    assert archived.status == "interrupted" and archived.warnings  # kept, torn line dropped
    assert (lost, dup, torn) == (0, 0, 0) and left == []

    # b. SIGKILL of one trainer mid-run (seed 5): failed, transient, retried.
    proc = subprocess.Popen(harness_run_argv(sweep, root, "--seeds", "5"), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=HOLD_MID_RUN)
    wait_for(lambda: fake_holding(dirs[5]), 120, "seed 5 mid-way")
    pid = int(next(dirs[5].glob("pid-*")).name.split("-")[1])
    os.kill(pid, signal.SIGKILL)
    out = proc.communicate(timeout=120)[0]
    st = run_state(dirs[5])
    m = manifest(dirs[5])
    p = harness_run(sweep, root, "--seeds", "5")
    lost, dup, torn = check_store(root, "faults-fake", {5: dirs[5]}, updates=16)
    left = orphans(root)
    MATRIX.append(Row("SIGKILL to one trainer", "fake", "failed/-9/1, transient, retried",
                      f"{m['status']} ({st.kind})", first_exit_code(dirs[5]), str(st.failures),
                      str(lost), str(dup), str(torn), str(len(left))))
    assert proc.returncode == 1 and m["status"] == "failed", out
    assert m["error"]["exit_codes"] == [-9] and st.kind == "transient" and st.failures == 1
    assert "[transient error]" in out
    assert p.returncode == 0 and (lost, dup, torn) == (0, 0, 0) and left == []

    # c. A full disk for one run's folder (seed 6): a 4 KiB tmpfs, else a read-only folder.
    mounted = _try_mount_tmpfs(dirs[6], "20k")  # the trainer starts, then runs out
    if not mounted and os.geteuid() == 0:  # root ignores a read-only mode: nothing to test
        MATRIX.append(Row("disk full in one run's folder", "fake", "-",
                          "not simulated (mount refused; root ignores permissions)"))
        assert harness_run(sweep, root, "--seeds", "6").returncode == 0
    else:
        _disk_full(sweep, root, dirs, mounted)
    _corrupt_and_ctrl_c(tmp_path, sweep, root, dirs, ids)


def _disk_full(sweep: Path, root: Path, dirs: dict[int, Path], mounted: bool) -> None:
    if not mounted:
        dirs[6].mkdir(parents=True, exist_ok=True)
        os.chmod(dirs[6], 0o555)
    try:
        p1 = harness_run(sweep, root, "--seeds", "5,6")
        st = run_state(dirs[6])
        code = first_exit_code(dirs[6])
        status_out = subprocess.run([sys.executable, "-m", "harness", "status", "--sweep",
                                     str(sweep), "--results-root", str(root), "--seeds", "6"],
                                    cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
    finally:
        if mounted:
            subprocess.run(["umount", str(dirs[6])], check=True, timeout=30)
        else:
            os.chmod(dirs[6], 0o755)
    p = harness_run(sweep, root, "--seeds", "5,6")  # disk space is back
    lost, dup, torn = check_store(root, "faults-fake", {5: dirs[5], 6: dirs[6]}, updates=16)
    left = orphans(root)
    MATRIX.append(Row(f"disk full in one run's folder ({'20 KiB tmpfs' if mounted else 'read-only folder'})",
                      "fake", "stale (unsettled)/1/0, console says why; re-run",
                      f"{st.state}", code, str(st.failures), str(lost), str(dup), str(torn),
                      str(len(left))))
    assert p1.returncode == 1, p1.stdout + p1.stderr
    assert "No space left" in p1.stdout + p1.stderr + status_out or \
        "Permission denied" in p1.stdout + p1.stderr + status_out or "Read-only" in p1.stdout, \
        p1.stdout + p1.stderr + status_out
    assert "already-completed" in p1.stdout  # seed 5 untouched
    assert st.failures == 0
    if mounted:
        assert st.state == "stale" and code == "1"
    assert p.returncode == 0, p.stdout + p.stderr
    assert (lost, dup, torn) == (0, 0, 0) and left == []


def _corrupt_and_ctrl_c(tmp_path: Path, sweep: Path, root: Path, dirs: dict[int, Path],
                        ids: dict[int, str]) -> None:
    # d. A corrupt manifest (seed 7 completed, then its manifest torn by a disk fault).
    assert harness_run(sweep, root, "--seeds", "7").returncode == 0
    good = (dirs[7] / schema.MANIFEST_FILE).read_text()
    (dirs[7] / schema.MANIFEST_FILE).write_text(good[: len(good) // 2])
    status = subprocess.run([sys.executable, "-m", "harness", "status", "--sweep", str(sweep),
                             "--results-root", str(root), "--seeds", "7"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    st = run_state(dirs[7])
    loaded_before = load_runs([root / "faults-fake" / "runs"])
    p = harness_run(sweep, root, "--seeds", "7")
    broken = (dirs[7] / "previous_attempts" / "1" / schema.MANIFEST_FILE).read_text()
    # The earlier completion is in the archive, unreadable: it counts as one, not two.
    lost = 0 if manifest(dirs[7])["status"] == "completed" else 1
    dup = sum(1 for p_ in dirs[7].glob("previous_attempts/*/manifest.json")
              if '"completed"' in p_.read_text() and p_.read_text().rstrip().endswith("}"))
    left = orphans(root)
    torn = sum(1 for r in loaded_before.included if r.run_id == ids[7])
    MATRIX.append(Row("corrupt manifest", "fake", "corrupt (re-run, copy archived)/-/0",
                      st.state, "-", str(st.failures), str(lost), str(dup), str(torn),
                      str(len(left))))
    assert "corrupt (will be re-run; the broken copy is archived)" in status.stdout, status.stdout
    assert st.state == "corrupt" and st.failures == 0
    assert p.returncode == 0 and broken == good[: len(good) // 2]
    assert (lost, dup, torn) == (0, 0, 0) and left == []
    # After everything: every fake run completed exactly once, by the ledger.
    assert sorted(_ledger(tmp_path)) == sorted([*ids.values(), ids[7]])

    # e. Ctrl-C (SIGINT) to the harness as its trainers start (seeds 8, 9).
    ctrl_c = {s.seed: s for s in load_sweep(sweep, seeds=[8, 9]).runs}
    cdirs = run_dirs(root, "faults-fake", list(ctrl_c.values()))
    proc = subprocess.Popen(harness_run_argv(sweep, root, "--seeds", "8,9"), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=HOLD_MID_RUN)  # neither can finish before the Ctrl-C
    wait_for(lambda: any((d / "stdout.log").exists() for d in cdirs.values()), 60,
             "a trainer to start")
    proc.send_signal(signal.SIGINT)
    out = proc.communicate(timeout=120)[0]
    states = sorted({run_state(d).state for d in cdirs.values()})
    attempts = sum(run_state(d).failures for d in cdirs.values())
    codes = sorted({first_exit_code(d) for d in cdirs.values()})
    mid = orphans(root)
    p = harness_run(sweep, root, "--seeds", "8,9")
    lost, dup, torn = check_store(root, "faults-fake", cdirs, updates=16)
    left = orphans(root)
    MATRIX.append(Row("SIGINT (Ctrl-C) to harness at trainer start-up", "fake",
                      "interrupted or not started/-/0, harness exit 130", ",".join(states),
                      f"trainers {','.join(codes)}; harness {proc.returncode}", str(attempts),
                      str(lost), str(dup), str(torn), str(len(left) + len(mid))))
    assert proc.returncode == 130, out
    assert set(states) <= {"interrupted", "pending"} and attempts == 0, (states, out)
    assert "the next `harness run` runs them" in out
    assert p.returncode == 0 and (lost, dup, torn) == (0, 0, 0) and left == [] and mid == []
