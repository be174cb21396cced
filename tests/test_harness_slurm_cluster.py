"""`harness run --backend slurm` against a real Slurm 22.05 on localhost.

scripts/slurm-local.sh brings the cluster up, without accounting for the first class and
with slurmdbd + MariaDB (sacct) for the second. Each scenario is a small CartPole sweep run
by the test-only trainer (real records; it sleeps instead of training), driven the way a
user or Slurm would (scancel, scontrol requeue, USR2, SIGINT/SIGTERM, a drained node). A
class starts its scenarios side by side in threads; each test waits for its own and asserts
the record's state and reason, the attempts spent, the exit code and console lines, and
that a second `harness run` loses and duplicates nothing. The drain scenario runs alone (it
takes the only node away).
"""

from __future__ import annotations

import json
import re
import signal
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from slurm_cluster import (
    Harness,
    cluster,
    go_fast,
    job_state,
    ledger,
    node,
    requeue,
    run_harness,
    slow_sbatch,
    slurm,
    sweep_file,
    wait_until,
)

from harness.store import ATTEMPTS_DIR, run_state
from runrecord import schema

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

HOLD = "additional_parameters = { hold = true }"
LONG = "updates = 400\nsleep-s = 0.25"  # 100 s: longer than any scenario lets it run
SHORT = "updates = 24\nsleep-s = 0.25"  # 6 s


def manifest(root: Path, sweep: str, run_id: str) -> dict:
    return json.loads((root / sweep / "runs" / run_id / schema.MANIFEST_FILE).read_text())


def state(root: Path, sweep: str, run_id: str):
    return run_state(root / sweep / "runs" / run_id)


def wait_running(root: Path, sweep: str, run_id: str, timeout: float = 60) -> None:
    """Until the trainer itself has written its record (the harness holds the lock earlier)."""
    def trainer_running() -> bool:
        p = root / sweep / "runs" / run_id / schema.MANIFEST_FILE
        return (state(root, sweep, run_id).state == "running" and p.exists()
                and manifest(root, sweep, run_id).get("provenance", {}).get("pid") is not None)
    wait_until(trainer_running, timeout, f"run {run_id} running")


def snapshot(root: Path, sweep: str, runs) -> dict[str, tuple]:
    """{run: (state, failures, manifest error or None)} before the next `harness run`."""
    out = {}
    for r in runs:
        st = state(root, sweep, r)
        p = root / sweep / "runs" / r / schema.MANIFEST_FILE
        out[r] = (st.state, st.failures,
                  json.loads(p.read_text()).get("error") if p.exists() else None)
    return out


def archived(root: Path, sweep: str, run_id: str) -> list[dict]:
    d = root / sweep / "runs" / run_id / ATTEMPTS_DIR
    return [json.loads(p.read_text()) for p in sorted(d.glob(f"*/{schema.MANIFEST_FILE}"))]


def log_line(root: Path, sweep: str, index: int = -1) -> dict:
    lines = (root / sweep / "harness-runs.jsonl").read_text().splitlines()
    return json.loads(lines[index])


class Scenarios:
    """Scenario functions run side by side; each test joins its own."""

    def __init__(self, tmp: Path, funcs: dict[str, Callable[[Path], dict[str, Any]]]):
        self.results: dict[str, Any] = {}
        self.threads = {}
        for name, fn in funcs.items():
            d = tmp / name
            d.mkdir()
            t = threading.Thread(target=self._run, args=(name, fn, d), daemon=True)
            t.start()
            self.threads[name] = t

    def _run(self, name: str, fn, d: Path) -> None:
        t0 = time.monotonic()
        try:
            self.results[name] = fn(d)
            self.results[name]["elapsed_s"] = time.monotonic() - t0
        except BaseException:  # noqa: BLE001  (reported by the scenario's own test)
            self.results[name] = AssertionError(f"scenario {name} broke:\n"
                                                f"{traceback.format_exc()}")

    def get(self, name: str, timeout: float = 400) -> dict[str, Any]:
        self.threads[name].join(timeout)
        res = self.results.get(name, AssertionError(f"scenario {name} still running"))
        if isinstance(res, BaseException):
            raise res
        print(f"scenario {name}: {res['elapsed_s']:.1f} s")  # the fault table's figures
        return res


# --------------------------------------------------------------------------- scenarios


def normal_path(d: Path) -> dict[str, Any]:
    """A job array (seeds 1, 2 of d1) and a two-task d2 job; seed 2 fails."""
    sweep = sweep_file(d / "s.toml", "normal", [1, 2], layouts=("a0-l0-d1", "a0-l0-d2"),
                       overrides="fail-seeds = [2]\nsleep-s = 0.05")
    first = run_harness(sweep, d / "res")
    second = run_harness(sweep, d / "res")
    return {"d": d, "sweep": sweep, "first": first, "second": second}


def scancel_running_and_pending(d: Path) -> dict[str, Any]:
    sweep = sweep_file(d / "s.toml", "cancel", [1, 2], slurm_extra=HOLD, overrides=LONG)
    h = Harness(sweep, d / "res")
    jobs = h.job_ids(2)
    running, pending = sorted(jobs)
    slurm("scontrol", "release", jobs[running])
    wait_running(d / "res", "cancel", running)
    slurm("scancel", jobs[running], jobs[pending])
    rc = h.wait()
    after = snapshot(d / "res", "cancel", jobs)
    sweep_file(sweep, "cancel", [1, 2], overrides=LONG)  # the same runs, not held
    go_fast(sweep)
    second = run_harness(sweep, d / "res")
    return {"d": d, "sweep": sweep, "rc": rc, "text": h.text, "running": running,
            "pending": pending, "jobs": jobs, "second": second, "after": after}


def stop_harness(sig: int) -> Callable[[Path], dict[str, Any]]:
    def scenario(d: Path) -> dict[str, Any]:
        name = f"stop{int(sig)}"
        sweep = sweep_file(d / "s.toml", name, [1, 2], slurm_extra=HOLD, overrides=LONG)
        h = Harness(sweep, d / "res")
        jobs = h.job_ids(2)
        running, pending = sorted(jobs)
        slurm("scontrol", "release", jobs[running])
        wait_running(d / "res", name, running)
        h.signal(sig)
        rc = h.wait(timeout=150)
        states = {r: job_state(j) for r, j in jobs.items()}
        after = snapshot(d / "res", name, jobs)
        sweep_file(sweep, name, [1, 2], overrides=LONG)
        go_fast(sweep)
        second = run_harness(sweep, d / "res")
        return {"d": d, "name": name, "sweep": sweep, "rc": rc, "text": h.text,
                "running": running, "pending": pending, "states": states, "second": second,
                "after": after}
    return scenario


def second_sigint(d: Path) -> dict[str, Any]:
    """Ctrl-C twice: the second stops the waiting, still without a traceback."""
    sweep = sweep_file(d / "s.toml", "twice", [1], overrides=LONG)
    root = d / "res"
    h = Harness(sweep, root)
    run_id, job = next(iter(h.job_ids(1).items()))
    wait_running(root, "twice", run_id)
    h.signal(signal.SIGINT)
    h.wait_line(r"^harness: cancelling 1 job")
    h.signal(signal.SIGINT)
    rc = h.wait(timeout=60)
    # The job settles its record itself, after the harness has gone.
    wait_until(lambda: state(root, "twice", run_id).state == schema.INTERRUPTED, 60,
               "the cancelled job's record")
    return {"d": d, "rc": rc, "text": h.text, "job": job,
            "after": snapshot(root, "twice", [run_id])[run_id]}


SUBMITTING = 16  # runs, one job each; sbatch takes 0.3 s: submitting them takes ~5 s


def sigint_twice_while_submitting(d: Path) -> dict[str, Any]:
    """Ctrl-C at the first job submitted, and again once the harness says it stops, one
    job per run (held: none runs). The second lands while it submits, before it cancels or
    while it waits: each must end the same way."""
    sweep = sweep_file(d / "s.toml", "midsubmit", list(range(1, SUBMITTING + 1)),
                       slurm_extra=f"use_array = false\n{HOLD}", overrides=LONG)
    root = d / "res"
    h = Harness(sweep, root, path_first=slow_sbatch(d / "bin", 0.3))
    h.wait_line(r"^submitted ")
    h.signal(signal.SIGINT)
    h.wait_line(r"^harness: SIGINT: stopping the runs in flight")
    h.signal(signal.SIGINT)
    rc = h.wait(timeout=120)
    jobs = dict(re.findall(r"^submitted (\w+) .* as job (\S+)$", h.text, re.M))
    states = {j: job_state(j) for j in jobs.values()}
    after = snapshot(root, "midsubmit", jobs)
    sweep_file(sweep, "midsubmit", list(range(1, SUBMITTING + 1)),
               slurm_extra="use_array = false", overrides=LONG)
    go_fast(sweep)
    second = run_harness(sweep, root)
    return {"d": d, "sweep": sweep, "rc": rc, "text": h.text, "jobs": jobs, "states": states,
            "after": after, "second": second}


def slurm_time_limit(d: Path) -> dict[str, Any]:
    """[slurm] timeout_min = 1 (Slurm's least) and a run that needs 100 s."""
    sweep = sweep_file(d / "s.toml", "limit", [1], slurm_extra="timeout_min = 1",
                       overrides=LONG)
    first = run_harness(sweep, d / "res", timeout=240)
    second = run_harness(sweep, d / "res", "--max-attempts", "1")
    return {"d": d, "sweep": sweep, "first": first, "second": second}


def own_timeout_first(d: Path) -> dict[str, Any]:
    """resources.timeout_min = 0.1: the harness's deadline, Slurm's limit 3 min above."""
    sweep = sweep_file(d / "s.toml", "own", [1], resources="timeout_min = 0.1",
                       overrides=LONG)
    h = Harness(sweep, d / "res")
    job = next(iter(h.job_ids(1).values()))
    limit = slurm("squeue", "-h", "-t", "all", "-r", "-j", job.split("_")[0], "-o", "%l")
    rc = h.wait()
    second = run_harness(sweep, d / "res", "--max-attempts", "1")
    return {"d": d, "sweep": sweep, "rc": rc, "text": h.text, "limit": limit.strip(),
            "second": second}


def usr2_preemption(d: Path) -> dict[str, Any]:
    sweep = sweep_file(d / "s.toml", "preempt", [1], overrides="updates = 40\nsleep-s = 0.25")
    h = Harness(sweep, d / "res")
    run_id, job = next(iter(h.job_ids(1).items()))
    wait_running(d / "res", "preempt", run_id)
    slurm("scancel", "--signal=USR2", job)
    rc = h.wait()
    second = run_harness(sweep, d / "res")
    return {"d": d, "sweep": sweep, "rc": rc, "text": h.text, "run": run_id, "job": job,
            "second": second}


def job_raises(d: Path) -> dict[str, Any]:
    """The job itself fails (its run folder cannot be made: runs/ is a file)."""
    sweep = sweep_file(d / "s.toml", "raises", [1], overrides=SHORT)
    (d / "res" / "raises").mkdir(parents=True)
    (d / "res" / "raises" / "runs").write_text("not a folder")
    return {"d": d, "first": run_harness(sweep, d / "res")}


def requeue_and_rerun(d: Path) -> dict[str, Any]:
    sweep = sweep_file(d / "s.toml", "requeue", [1], overrides="updates = 48\nsleep-s = 0.25")
    root = d / "res"
    h = Harness(sweep, root)
    run_id, job = next(iter(h.job_ids(1).items()))
    wait_running(root, "requeue", run_id)
    first_pid = manifest(root, "requeue", run_id)["provenance"]["pid"]
    requeue(job, first_pid, lambda: (
        state(root, "requeue", run_id).state == "running"
        and manifest(root, "requeue", run_id)["provenance"]["pid"] != first_pid),
        "the requeued job running the run again")
    again = run_harness(sweep, root)  # the user runs the sweep while it runs
    rc = h.wait()
    third = run_harness(sweep, root)
    return {"d": d, "sweep": sweep, "root": root, "rc": rc, "text": h.text, "run": run_id,
            "job": job, "again": again, "third": third}


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="class")
def without_accounting(tmp_path_factory):
    cluster(accounting=False)
    return Scenarios(tmp_path_factory.mktemp("plain"), {
        "normal": normal_path, "scancel": scancel_running_and_pending,
        "sigint": stop_harness(signal.SIGINT), "twice": second_sigint,
        "midsubmit": sigint_twice_while_submitting,
        "limit": slurm_time_limit,
        "own": own_timeout_first, "preempt": usr2_preemption, "raises": job_raises,
    })


@pytest.fixture(scope="class")
def with_accounting(tmp_path_factory):
    cluster(accounting=True)
    return Scenarios(tmp_path_factory.mktemp("acct"), {
        "scancel": scancel_running_and_pending, "sigterm": stop_harness(signal.SIGTERM),
        "requeue": requeue_and_rerun, "normal": normal_path,
    })


def no_traceback(text: str) -> None:
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text


# --------------------------------------------------------------------------- tests


def check_normal_path(r: dict[str, Any]) -> None:
    rc, text = r["first"]
    assert rc == 1, text
    assert len(re.findall(r"^submitted \w+ .* as job \d+_[01]$", text, re.M)) == 4, text
    assert re.search(r"\] failed \w+ .* s2 a0-l0-d1 \(job \S+\): RuntimeError: fake trainer "
                     r"told to fail on seed 2$", text, re.M), text
    assert "sacct" not in text and "Bypassing" not in text, text  # no submitit warnings
    root = r["d"] / "res"
    for p in sorted((root / "normal" / "runs").iterdir()):
        m = json.loads((p / schema.MANIFEST_FILE).read_text())
        assert m["status"] == ("failed" if m["seed"] == 2 else "completed"), m
        if m["layout"]["num_processes"] == 2 and m["seed"] == 1:
            log = (p / "stdout.log").read_text()
            assert "--process-id 0" in log and "--process-id 1" in log
            assert len(set(re.findall(r"--coordinator-address (\S+)", log))) == 1
    done = ledger(r["sweep"], "normal")
    assert len(done) == 2 == len(set(done))
    rc2, text2 = r["second"]  # the failed ones once more (transient), nothing else
    assert rc2 == 1 and text2.count("submitted") == 2, text2
    assert "2 already-completed, 2 failed" in text2, text2
    assert ledger(r["sweep"], "normal") == done


def check_scancel(r: dict[str, Any]) -> None:
    root, text = r["d"] / "res", r["text"]
    assert r["rc"] == 1, text
    run, pend = r["running"], r["pending"]
    st, failures, err = r["after"][run]
    assert st == schema.INTERRUPTED and failures == 0, r["after"]
    assert err["type"] == "Interrupted" and "Slurm sent SIGTERM" in err["message"], err
    assert re.search(rf"interrupted {pend} .*: Slurm job {re.escape(r['jobs'][pend])} ended "
                     r"CANCELLED before it started", text), text
    assert r["after"][pend] == ("pending", 0, None)  # nothing written for it
    assert "2 interrupted runs (no attempt spent)" in text, text
    assert "UncompletedJobError" not in text and "failed" not in text, text
    no_traceback(text)
    rc2, text2 = r["second"]
    assert rc2 == 0 and "2 completed" in text2, text2
    assert sorted(ledger(r["sweep"], "cancel")) == sorted([run, pend])
    assert [a["status"] for a in archived(root, "cancel", run)] == ["interrupted"]


def check_stop(r: dict[str, Any], signame: str) -> None:
    root, text, name = r["d"] / "res", r["text"], r["name"]
    assert r["rc"] == 130, text
    assert f"harness: {signame}: stopping the runs in flight" in text, text
    assert re.search(r"harness: cancelling 2 jobs", text), text
    assert "1 interrupted run (no attempt spent) and 1 run not started" in text, text
    no_traceback(text)
    st, failures, err = r["after"][r["running"]]
    assert st == schema.INTERRUPTED and failures == 0, r["after"]
    assert "Slurm sent SIGTERM" in err["message"], err
    assert r["after"][r["pending"]] == ("pending", 0, None)
    assert set(r["states"].values()) == {"CANCELLED"}, r["states"]  # no job left behind
    entry = log_line(root, name, 0)  # the stopped `harness run`
    assert entry["exit_code"] == 130 and entry["backend"] == "slurm", entry
    assert entry["outcomes"] == {r["running"]: "interrupted"}, entry
    rc2, text2 = r["second"]
    assert rc2 == 0 and "2 completed" in text2, text2
    assert sorted(ledger(r["sweep"], name)) == sorted([r["running"], r["pending"]])


class TestWithoutAccounting:
    def test_job_array_and_d2_as_two_tasks_then_resume(self, without_accounting):
        check_normal_path(without_accounting.get("normal"))

    def test_scancel_running_and_pending_settles_without_accounting(self, without_accounting):
        """A job cancelled while pending was waited for for ever (UNKNOWN)."""
        check_scancel(without_accounting.get("scancel"))

    def test_sigint_to_harness_cancels_its_jobs(self, without_accounting):
        """Ctrl-C stopped nothing; the second one ended in a traceback."""
        check_stop(without_accounting.get("sigint"), "SIGINT")

    def test_second_sigint_stops_waiting_without_a_traceback(self, without_accounting):
        """The second Ctrl-C ended in a KeyboardInterrupt traceback."""
        r = without_accounting.get("twice")
        assert r["rc"] == 130, r["text"]
        assert "harness: second interrupt: not waiting any longer" in r["text"], r["text"]
        assert "1 interrupted run (no attempt spent)" in r["text"], r["text"]
        no_traceback(r["text"])
        assert job_state(r["job"]) in ("CANCELLED", ""), r["job"]
        st, failures, err = r["after"]
        assert st == schema.INTERRUPTED and failures == 0 and "SIGTERM" in err["message"]

    def test_sigint_twice_while_submitting(self, without_accounting):
        """Ctrl-C twice during submission ended in a KeyboardInterrupt traceback, and the
        jobs sbatch had made kept running: now submitting stops, what was submitted is
        cancelled, the summary and log line are written, exit 130."""
        r = without_accounting.get("midsubmit")
        assert r["rc"] == 130, r["text"]
        no_traceback(r["text"])
        assert "harness: SIGINT: stopping the runs in flight" in r["text"], r["text"]
        assert 1 <= len(r["jobs"]) < SUBMITTING, r["text"]  # submitting stopped
        assert all(s in ("CANCELLED", "") for s in r["states"].values()), r["states"]
        assert all(st != schema.RUNNING and failures == 0
                   for st, failures, _ in r["after"].values()), r["after"]
        assert re.search(r"^sweep midsubmit: no run ran$", r["text"], re.M), r["text"]
        assert f"{SUBMITTING} runs not started: the next `harness run` runs them" in r["text"]
        assert log_line(r["d"] / "res", "midsubmit", 0)["exit_code"] == 130
        rc2, text2 = r["second"]
        assert rc2 == 0 and f"{SUBMITTING} completed" in text2, text2
        assert sorted(ledger(r["sweep"], "midsubmit")) == sorted(
            set(ledger(r["sweep"], "midsubmit")))  # each run completed once
        assert len(ledger(r["sweep"], "midsubmit")) == SUBMITTING

    def test_slurm_time_limit_records_timeout_and_spends_an_attempt(self, without_accounting):
        """At Slurm's limit the record stayed `running`, then `stale`."""
        r = without_accounting.get("limit")
        rc, text = r["first"]
        assert rc == 1, text
        run_id = next((r["d"] / "res" / "limit" / "runs").iterdir()).name
        st = state(r["d"] / "res", "limit", run_id)
        assert st.state == schema.FAILED and st.failures == 1 and st.kind == "transient", st
        err = manifest(r["d"] / "res", "limit", run_id)["error"]
        assert err["type"] == "Timeout", err
        assert "the Slurm time limit (1 min) is near" in err["message"], err
        assert re.search(r"\] failed \w+ .*: Timeout: timeout: the Slurm time limit \(1 min\)",
                         text), text
        assert "UncompletedJobError" not in text and ".out" not in text.split("log:")[0], text
        rc2, text2 = r["second"]  # its one attempt is spent: not resubmitted
        assert rc2 == 1 and "1 exhausted" in text2 and "submitted" not in text2, text2

    def test_trainer_timeout_fires_before_the_slurm_limit(self, without_accounting):
        r = without_accounting.get("own")
        assert r["limit"] == "4:00", r  # ceil(0.1 + 3 min grace)
        assert r["rc"] == 1, r["text"]
        run_id = next((r["d"] / "res" / "own" / "runs").iterdir()).name
        st = state(r["d"] / "res", "own", run_id)
        assert st.state == schema.FAILED and st.failures == 1, st
        err = manifest(r["d"] / "res", "own", run_id)["error"]
        assert err["type"] == "Timeout" and "timeout after 0.1 min" in err["message"], err
        rc2, text2 = r["second"]
        assert rc2 == 1 and "1 exhausted" in text2 and "submitted" not in text2, text2

    def test_usr2_preemption_is_recorded_and_rerun_without_an_attempt(self,
                                                                      without_accounting):
        """USR2 killed the trainer silently; 'its supervising harness died'."""
        r = without_accounting.get("preempt")
        root, text, run_id = r["d"] / "res", r["text"], r["run"]
        assert r["rc"] == 0, text
        assert re.search(rf"^preempted: {run_id} .*\(job {re.escape(r['job'])}\): "
                         r"resubmitted, no attempt spent$", text, re.M), text
        assert text.count(f"submitted {run_id}") == 2, text
        st = state(root, "preempt", run_id)
        assert st.state == schema.COMPLETED and st.failures == 0, st
        old = archived(root, "preempt", run_id)
        assert [a["status"] for a in old] == ["interrupted"], old
        assert old[0]["error"]["type"] == "Preempted", old[0]["error"]
        assert "Slurm sent USR2" in old[0]["error"]["message"], old[0]["error"]
        assert "supervising harness died" not in json.dumps(old)
        assert ledger(r["sweep"], "preempt") == [run_id]
        rc2, text2 = r["second"]
        assert rc2 == 0 and "1 already-completed" in text2 and "submitted" not in text2

    def test_failed_job_line_gives_the_exception_not_a_log_path(self, without_accounting):
        """The console showed the last line of submitit's error, a path."""
        rc, text = without_accounting.get("raises")["first"]
        assert rc == 1, text
        line = next(x for x in text.splitlines() if re.match(r"\[1/1\] failed", x))
        assert re.search(r": job \S+: (NotADirectoryError|FileExistsError): \[Errno \d+\]",
                         line), line
        summary = next(x for x in text.splitlines() if x.strip().startswith("failed:"))
        assert "Error: [Errno" in summary and not summary.rstrip().endswith((".out", ".err"))


class TestWithAccounting:
    def test_scancel_pending_is_not_a_failure_with_accounting(self, with_accounting):
        """'failed ... UncompletedJobError: No output/error stream produced'."""
        check_scancel(with_accounting.get("scancel"))

    def test_sigterm_to_harness_cancels_its_jobs(self, with_accounting):
        """SIGTERM to the harness stopped nothing."""
        check_stop(with_accounting.get("sigterm"), "SIGTERM")

    def test_requeued_job_while_the_user_reruns_the_sweep(self, with_accounting):
        """The rerun printed '1 busy' and exited 1 with no explanation."""
        r = with_accounting.get("requeue")
        root, run_id, job = r["root"], r["run"], r["job"]
        rc2, text2 = r["again"]
        assert rc2 == 1 and "submitted" not in text2, text2
        assert re.search(rf"busy: {run_id} .*: held by Slurm job {re.escape(job)} .*"
                         rf"`scancel {re.escape(job)}`", text2), text2
        assert r["rc"] == 0, r["text"]
        assert re.search(rf"\[1/1\] completed {run_id} .*\(job {re.escape(job)}\)", r["text"])
        st = state(root, "requeue", run_id)
        assert st.state == schema.COMPLETED and st.failures == 0, st
        old = archived(root, "requeue", run_id)
        assert [a["status"] for a in old] == ["interrupted"], old
        assert "requeued" in old[0]["error"]["message"], old[0]["error"]
        assert ledger(r["sweep"], "requeue") == [run_id]  # completed once
        rc3, text3 = r["third"]
        assert rc3 == 0 and "1 already-completed" in text3 and "submitted" not in text3

    def test_job_array_and_d2_with_accounting(self, with_accounting):
        check_normal_path(with_accounting.get("normal"))

    def test_node_drained_mid_sweep(self, with_accounting, tmp_path):
        for name in ("scancel", "sigterm", "requeue", "normal"):  # the node is shared
            with_accounting.threads[name].join(400)
        sweep = sweep_file(tmp_path / "s.toml", "drain", [1, 2], slurm_extra=HOLD,
                           overrides=SHORT)
        root = tmp_path / "res"
        h = Harness(sweep, root)
        try:
            jobs = h.job_ids(2)
            first, second = sorted(jobs)
            slurm("scontrol", "release", jobs[first])
            wait_running(root, "drain", first)
            slurm("scontrol", "update", f"nodename={node()}", "state=drain",
                  "reason=drain-test")
            slurm("scontrol", "release", jobs[second])
            h.wait_line(rf"^waiting: job {re.escape(jobs[second])} \({second}\) is pending: "
                        r".*(ReqNodeNotAvail|Nodes required)", timeout=40)
            h.wait_line(rf"\] completed {first} ", timeout=40)  # the running one finishes
            assert state(root, "drain", second).state == "pending"
        finally:
            slurm("scontrol", "update", f"nodename={node()}", "state=resume")
        rc = h.wait()
        assert rc == 0, h.text
        for run in (first, second):
            st = state(root, "drain", run)
            assert st.state == schema.COMPLETED and st.failures == 0, st
        assert sorted(ledger(sweep, "drain")) == sorted([first, second])
        sweep_file(sweep, "drain", [1, 2], overrides=SHORT)
        rc2, text2 = run_harness(sweep, root)
        assert rc2 == 0 and "2 already-completed" in text2 and "submitted" not in text2
