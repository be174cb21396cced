"""A real single-node Slurm for the `slurm`-marked tests (scripts/slurm-local.sh), and a
`harness run` driven from a test while its jobs run on it.

`cluster(accounting)` starts the cluster in the mode asked (switching takes ~5-8 s) and
exports the `SLURM_CONF` that `slurm-local.sh status` prints, so that this process's Slurm
commands and the `harness run` it starts (sbatch, squeue, scancel, sacct) use that cluster,
never the system's /etc/slurm. Where none can be started (not root, no packages, another
Slurm running here) the tests skip and say why; with HARNESS_SLURM_REQUIRED=1 (set by
.ci/run) they fail instead: CI never skips them.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from harness_cli import ROOT

SCRIPT = ROOT / "scripts" / "slurm-local.sh"
FAKE = ROOT / "tests" / "harness_fake_trainer.py"
# Jobs of these tests mostly sleep: declare more CPUs than the machine has, so that the
# scenarios' jobs run side by side.
DECLARED_CPUS = 16
REQUIRED_ENV = "HARNESS_SLURM_REQUIRED"


def cluster(accounting: bool) -> None:
    """Bring the local cluster up in this mode, or skip (fail in CI) saying why not."""
    reason = why_no_cluster()
    if not reason:
        argv = [str(SCRIPT), "start", "--cpus", str(DECLARED_CPUS)]
        if accounting:
            argv.append("--accounting")
        p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            reason = f"scripts/slurm-local.sh start failed: {p.stderr.strip()}"
        else:
            os.environ["SLURM_CONF"] = slurm_conf()
    skip_or_fail(reason)


def why_no_cluster() -> str:
    """Why scripts/slurm-local.sh cannot start here ("" where it can try)."""
    if os.geteuid() != 0:
        return "needs root to start scripts/slurm-local.sh (it starts daemons)"
    if not (Path("/usr/sbin/slurmctld").exists() or Path("/usr/bin/apt-get").exists()):
        return "no Slurm packages and no apt-get to install them"
    return ""


def skip_or_fail(reason: str) -> None:
    if reason:
        if os.environ.get(REQUIRED_ENV) == "1":
            pytest.fail(f"{REQUIRED_ENV}=1 but {reason}")
        pytest.skip(reason)


def slurm_conf() -> str:
    """The private slurm.conf of the running cluster, from the `export SLURM_CONF=...` line
    of `slurm-local.sh status` (the line a user evals)."""
    p = subprocess.run([str(SCRIPT), "status"], capture_output=True, text=True, timeout=60)
    m = re.search(r"^export SLURM_CONF=(\S+)$", p.stdout, re.M)
    assert p.returncode == 0 and m, f"slurm-local.sh status: rc {p.returncode}\n{p.stdout}"
    return m.group(1)


def slurm(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60).stdout


def job_state(job_id: str) -> str:
    out = slurm("squeue", "-h", "-t", "all", "-r", "-o", "%i|%T")
    for line in out.splitlines():
        jid, _, state = line.partition("|")
        if jid == job_id:
            return state
    return ""


def wait_until(cond, timeout: float, what: str, step: float = 0.3, explain=None):
    """Poll `cond` until it is true; on a timeout, the error carries `explain()` (the
    cluster's view, for a failure seen only in CI)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        got = cond()
        if got:
            return got
        time.sleep(step)
    seen = f"\n{explain()}" if explain else ""
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{seen}")


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def requeue(job: str, first_pid: int, started, what: str, gone_within: float = 60) -> None:
    """`scontrol requeue` the running job whose trainer is `first_pid`, then wait until
    `started()` says it runs again.

    Slurm holds a requeued job back (its BeginTime) while the old one is cleaned up; the
    test starts it sooner. slurmd refuses a launch whose credential is no newer, to the
    second, than its revocation of the old job's ("Job N already killed, do not launch
    batch job" in slurmd.log), and slurmctld then ends the job as failed: it never runs
    again (CI, stop 56; here, an update 0.4 s after the requeue). So the update waits
    until the first trainer is gone (slurmd revokes before it signals the step) and asks
    for a start two seconds on, again every 10 s while the job stays pending."""
    slurm("scontrol", "requeue", job)
    wait_until(lambda: job_state(job) == "PENDING", 60, f"job {job} requeued")
    wait_until(lambda: not alive(first_pid), gone_within,
               f"the first trainer (pid {first_pid}) gone")
    last_update = [0.0]

    def running_again() -> bool:
        if started():
            return True
        if job_state(job) == "PENDING" and time.monotonic() - last_update[0] > 10:
            slurm("scontrol", "update", f"jobid={job}", "starttime=now+2")
            last_update[0] = time.monotonic()
        return False
    wait_until(running_again, 180, what,
               explain=lambda: slurm("squeue", "-h", "-t", "all", "-j", job,
                                     "-o", "%i %T %r %S"))


def node() -> str:
    return socket.gethostname()


def sweep_file(path: Path, name: str, seeds: list[int], *, layouts: tuple[str, ...] =
               ("a0-l0-d1",), slurm_extra: str = "", resources: str = "",
               overrides: str = "") -> Path:
    """A CartPole sweep run by the test-only trainer (real records, sleeps instead of
    training), with a ledger that counts completions."""
    path.write_text(f"""\
name = "{name}"
systems = ["fake-ppo"]
layouts = {list(layouts)!r}
games = ["CartPole-v1"]
seeds = {seeds!r}
frames = 1000
[slurm]
{slurm_extra}
[resources]
{resources}
[entry_points.fake-ppo]
entry = "{FAKE}"
[overrides]
ledger = "{path.parent / (name + '-ledger.txt')}"
fast-file = "{path.parent / 'fast'}"
{overrides}
""".replace('\'', '"'))
    return path


def go_fast(sweep: Path) -> None:
    """From now on the sweep's trainers stop sleeping (same runs, same ids)."""
    (sweep.parent / "fast").write_text("")


def ledger(sweep: Path, name: str) -> list[str]:
    p = sweep.parent / f"{name}-ledger.txt"
    return [x.split()[0] for x in p.read_text().splitlines()] if p.exists() else []


class Harness:
    """`harness run --backend slurm` in the background; its console read line by line."""

    def __init__(self, sweep: Path, root: Path, *extra: str, path_first: Path | None = None):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "offline",
               "PYTHONUNBUFFERED": "1"}
        if path_first is not None:  # commands found there before Slurm's own
            env["PATH"] = f"{path_first}{os.pathsep}{env.get('PATH', '')}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness", "run", "--sweep", str(sweep), "--results-root",
             str(root), "--backend", "slurm", *extra],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def wait_line(self, pattern: str, timeout: float = 60) -> re.Match:
        rx = re.compile(pattern)

        def found():
            return next((m for x in list(self.lines) if (m := rx.search(x))), None)
        try:
            return wait_until(found, timeout, f"a line matching {pattern!r}")
        except AssertionError as e:
            raise AssertionError(f"{e}; console so far:\n{self.text}") from None

    def job_ids(self, count: int, timeout: float = 60) -> dict[str, str]:
        """{run_id: job id} from the 'submitted RUN ... as job ID' lines."""
        def got():
            ids = dict(re.findall(r"^submitted (\w+) .* as job (\S+)$", self.text, re.M))
            return ids if len(ids) >= count else None
        return wait_until(got, timeout, f"{count} submitted jobs")

    def signal(self, sig: int = signal.SIGINT) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float = 180) -> int:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"harness still running after {timeout} s:\n{self.text}") from None
        self._reader.join(timeout=10)
        return rc


def slow_sbatch(folder: Path, delay_s: float) -> Path:
    """A folder whose `sbatch` waits `delay_s`, then is Slurm's own: a busy controller,
    so that a test can interrupt a submission half-way."""
    folder.mkdir(parents=True, exist_ok=True)
    real = shutil.which("sbatch") or "/usr/bin/sbatch"
    script = folder / "sbatch"
    script.write_text(f'#!/bin/sh\nsleep {delay_s}\nexec {real} "$@"\n')
    script.chmod(0o755)
    return folder


def run_harness(sweep: Path, root: Path, *extra: str, timeout: float = 180) -> tuple[int, str]:
    h = Harness(sweep, root, *extra)
    rc = h.wait(timeout)
    return rc, h.text
