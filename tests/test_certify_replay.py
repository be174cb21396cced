"""Certificates, tier 2, on a fresh --deterministic sweep made here (tiny CartPole PPO, two
seeds that complete and one run that fails at its first update): the CI round trip
(certify, then verify with 2 runs replayed for 3 updates: exit 0, and the report shows the
root and the verdict), and the tampers that need real runs: the failed run deleted, a
replay with changed code (a hyperparameter default: mismatch at update 1), a replay under
another XLA flag or jax version (NOT CHECKABLE). The committed reference records were made
on another machine, before the determinism block: they cannot be replayed here."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from importlib.metadata import version

import psutil
import pytest

import harness.certify.facts as facts
from harness.certify.flags import Verify
from harness.certify.report_section import certificate_section
from harness.certify.verify import verify
from harness.cli import main as harness_main
from runrecord import PROJECT_ROOT
from runrecord.exits import EXIT_FAILED, EXIT_OK, EXIT_UNDECIDED

TINY = "deterministic = true, num-envs = 4, num-steps = 16, num-minibatches = 2, update-epochs = 1"
SWEEP = f"""\
name = "cert"
description = "certificate round trip: tiny deterministic CartPole PPO, and a run that fails"
seeds = [1, 2]

[resources]
cpus_per_process = 1
timeout_min = 8

[report]
group_by = "layout.name"
reps = 200
seed = 0

[[matrix]]
name = "ok"
systems = ["cleanba-ppo"]
architectures = ["cleanba"]
layouts = ["a0-l0-d1"]
games = ["CartPole-v1"]
frames = 256

overrides = {{ {TINY} }}

[[matrix]]
name = "fails"  # the loss is infinite at update 1: a failed run in the plan
systems = ["cleanba-ppo"]
architectures = ["cleanba"]
layouts = ["a0-l0-d1"]
games = ["CartPole-v1"]
seeds = [3]
frames = 256
overrides = {{ {TINY}, learning-rate = 1e30 }}
"""

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """The sweep run by the harness (4 updates per run), and its certificate."""
    tmp = tmp_path_factory.mktemp("cert")
    (tmp / "cert.toml").write_text(SWEEP)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "harness", "run", "--sweep", str(tmp / "cert.toml"),
                        "--results-root", str(tmp / "res"), "--no-progress",
                        "--max-attempts", "1"], cwd=PROJECT_ROOT, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == EXIT_FAILED and "2 completed, 1 failed" in p.stdout, p.stdout
    print(f"sweep: {time.perf_counter() - t0:.1f} s")
    assert harness_main(["certify", "--sweep", str(tmp / "cert.toml"), "--results-root",
                         str(tmp / "res")]) == EXIT_OK
    cert = tmp / "res" / "cert" / "certificate.json"
    doc = json.loads(cert.read_text())
    failed = [r for r, v in doc["runs"].items() if v["status"] == "failed"]
    assert len(failed) == 1 and doc["completeness"]["statuses"] == {"completed": 2, "failed": 1}
    print(f"certificate of the 3-run sweep: {cert.stat().st_size:,} bytes")
    return tmp, cert, doc, failed[0]


def test_round_trip_certify_then_verify_with_two_replays(sweep, capsys):
    tmp, cert, doc, failed = sweep
    t0 = time.perf_counter()
    code = harness_main(["verify", str(cert), "--replay", "2", "--updates", "3"])
    text = capsys.readouterr().out
    print(f"verify with 2 replays of 3 updates: {time.perf_counter() - t0:.1f} s")
    assert code == EXIT_OK and "verdict: VERIFIED" in text, text
    completed = sorted(r for r, v in doc["runs"].items() if v["status"] == "completed")
    for rid in completed:
        assert f"run {rid} " in text and ": VERIFIED: params checksum and the other " in text
    # every column the run wrote but its 4 wall-clock ones: 20 columns of PPO's updates.csv
    assert text.count("the other 16 columns of updates.csv (all but wall-clock times) "
                      "identical at updates 1-3, and the ") == 2, text
    counts = re.findall(r"1-3, and the (\d+) episodes? that ended in them", text)
    assert len(counts) == 2 and all(int(c) > 0 for c in counts), text  # the scores compared
    assert "repeat this draw: python -m harness verify" in text and "--draw-seed" in text
    assert f"tier 2 n/a, failed before its first update: {failed}" in text
    assert "replay cost:" in text and "% of the original compute" in text
    assert "the updates after 3 of the replayed runs (2 of 8 updates)" in text
    # the report's section: root and verification status
    title, html = certificate_section(cert.parent)
    assert title == "Certificate" and doc["root"] in html
    assert "VERIFIED (tier 1 + tier 2: first 3 updates of 2 drawn runs: 2 VERIFIED)" in html
    t0 = time.perf_counter()
    assert harness_main(["report", "--sweep", str(tmp / "cert.toml"), "--results-root",
                         str(tmp / "res")]) == EXIT_OK
    print(f"report: {time.perf_counter() - t0:.1f} s")
    page = (cert.parent / "report" / "index.html").read_text()
    assert "<h2 id='certificate'>Certificate</h2>" in page and html in page


def test_scores_changed_then_certified_again_mismatch_in_the_replay(sweep, tmp_path, capsys):
    """A sceptic's test: every episode return multiplied by 3, the sweep certified again
    (the files' hashes then bind the changed files). Tier 1 alone catches it (CartPole's
    returns are no longer its lengths), and a replay: the episodes that ended in the
    replayed updates are not the certified ones; each says where."""
    tmp, cert, doc, failed = sweep
    root = tmp_path / "res"
    shutil.copytree(tmp / "res", root)
    for rid, run in doc["runs"].items():
        if run["status"] != "completed":
            continue
        episodes = root / "cert" / "runs" / rid / "episodes.csv"
        lines = episodes.read_text().splitlines()
        header = lines[0].split(",")
        col = header.index("episode_return")
        rows = [line.split(",") for line in lines[1:]]
        for r in rows:
            r[col] = repr(3 * float(r[col]))
        episodes.write_text("\n".join([lines[0], *(",".join(r) for r in rows)]) + "\n")
    assert harness_main(["certify", "--sweep", str(tmp / "cert.toml"), "--results-root",
                         str(root)]) == EXIT_OK
    capsys.readouterr()
    # No replay: tier 1 alone, each record against itself (CartPole: return = length)
    code = harness_main(["verify", str(root / "cert" / "certificate.json")])
    out = capsys.readouterr().out
    assert code == EXIT_FAILED and "verdict: MISMATCH" in out, out
    for rid, run in doc["runs"].items():
        if run["status"] == "completed":
            assert re.search(rf"MISMATCH: run {rid}: episodes\.csv row 1: episode_return "
                             r"\S+ is not episode_length \d+ \(CartPole-v1 gives a reward of 1 "
                             r"per step\) \(\d+ rows? in all\)", out), out
    assert "SHA-256 differs" not in out  # certified again: the hashes bind the forgery
    code = harness_main(["verify", str(root / "cert" / "certificate.json"), "--replay", "2",
                         "--updates", "2"])
    out = capsys.readouterr().out
    assert code == EXIT_FAILED and "verdict: MISMATCH" in out, out
    assert ": MISMATCH: updates 1-2: episode 1 (env_steps " in out, out
    assert "episode_return " in out and "(replay) vs " in out and "(certified)" in out, out


def test_compare_covers_every_column_but_the_wall_clock(sweep, tmp_path):
    """compare() on a run's record against an edited copy of it (standing in for a
    replay's record): a loss or a policy version differing in one update is a MISMATCH
    naming the update and the column; the wall-clock columns may differ."""
    from harness.certify.replay import NOT_REPRODUCED, Replay, compare, read_updates

    tmp, cert, doc, failed = sweep
    rid = next(r for r, v in doc["runs"].items() if v["status"] == "completed")
    certified = cert.parent / "runs" / rid
    recorded = read_updates(certified / "updates.csv", 3)
    assert len(recorded) == 3 and "loss_total" in recorded[0]

    def against(edit) -> Replay:
        copy = tmp_path / "copy"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(certified, copy)
        lines = (copy / "updates.csv").read_text().splitlines()
        header = lines[0].split(",")
        rows = [dict(zip(header, line.split(","), strict=True)) for line in lines[1:]]
        edit(rows)
        (copy / "updates.csv").write_text("\n".join(
            [lines[0], *(",".join(r[c] for c in header) for r in rows)]) + "\n")
        return compare(Replay(rid, "NOT CHECKABLE", ""), copy, recorded, certified,
                       tmp_path / "no.log")

    def clocks(rows):
        for r in rows:
            for c in NOT_REPRODUCED:
                r[c] = "0.5"

    assert against(clocks).outcome == "VERIFIED"

    def loss(rows):
        rows[1]["loss_total"] = repr(float(rows[1]["loss_total"]) + 1e-9)

    r = against(loss)
    assert r.outcome == "MISMATCH" and r.text.startswith("update 2: loss_total "), r.text
    assert f"(replay) vs {recorded[1]['loss_total']} (certified)" in r.text

    def version(rows):
        rows[2]["rollout_policy_version_max"] = "9"

    r = against(version)
    assert r.outcome == "MISMATCH" and r.text == (
        "update 3: rollout_policy_version_max 9 (replay) vs "
        f"{recorded[2]['rollout_policy_version_max']} (certified)")


def test_the_failed_run_deleted(sweep, tmp_path, capsys):
    tmp, cert, doc, failed = sweep
    records = tmp_path / "runs"
    shutil.copytree(cert.parent / "runs", records)
    shutil.rmtree(records / failed)
    code = harness_main(["verify", str(cert), "--records", str(records)])
    text = capsys.readouterr().out
    assert code == EXIT_FAILED
    assert f"MISMATCH: run {failed} (cleanba-ppo cleanba CartPole-v1 s3 a0-l0-d1, failed): " \
        "its folder is gone" in text
    assert f"caused by run {failed} (deleted)" in text  # it was listed as left out


def test_replay_with_changed_code_mismatches_at_update_1(sweep, tmp_path, capsys):
    """The checkout changed after certifying: Adam's epsilon default 1e-5 -> 1e-4."""
    tmp, cert, doc, failed = sweep
    checkout = tmp_path / "checkout"
    for package in ("cleanba", "runrecord", "benchenv", "harness"):
        shutil.copytree(PROJECT_ROOT / package, checkout / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    ppo = checkout / "cleanba" / "ppo.py"
    text = ppo.read_text()
    assert "    adam_eps: float = 1e-5\n" in text
    ppo.write_text(text.replace("    adam_eps: float = 1e-5\n", "    adam_eps: float = 1e-4\n"))
    code = verify(Verify(cert, replay=1, updates=3, checkout=checkout))
    out = capsys.readouterr().out
    assert code == EXIT_FAILED and "verdict: MISMATCH" in out, out
    assert ": MISMATCH: update 1: params_checksum " in out  # first of the columns that differ


def test_replay_under_another_xla_flag_or_jax_version_is_not_checkable(sweep, monkeypatch,
                                                                       capsys):
    tmp, cert, doc, failed = sweep
    monkeypatch.setenv("XLA_FLAGS", f"{facts.os.environ.get('XLA_FLAGS', '')} "
                                    "--xla_cpu_max_isa=AVX2")
    code = harness_main(["verify", str(cert), "--replay", "1"])
    out = capsys.readouterr().out
    assert code == EXIT_UNDECIDED and "verdict: NOT CHECKABLE" in out
    assert "NOT CHECKABLE HERE: XLA flags differ (--xla_cpu_max_isa=AVX2 here only)" in out
    monkeypatch.undo()
    # Another jax here (a stand-in: installing a second jax costs minutes; the lookup is
    # the one the replay's check makes)
    real = facts.package_versions
    monkeypatch.setattr(facts, "package_versions",
                        lambda names: {**real(names), "jax": "0.9.0"})
    code = harness_main(["verify", str(cert), "--replay", "1"])
    out = capsys.readouterr().out
    assert code == EXIT_UNDECIDED
    assert f"NOT CHECKABLE HERE: jax {version('jax')} (recorded) vs 0.9.0 (here)" in out



def _replay_trainers(verify_pid: int) -> list[psutil.Process]:
    """The living processes a verify started for its replays (their command lines name
    the replay's temporary folder)."""
    found = []
    try:
        kids = psutil.Process(verify_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    for k in kids:
        try:
            if "cleanba-replay-" in " ".join(k.cmdline()) and k.status() != psutil.STATUS_ZOMBIE:
                found.append(k)
        except psutil.Error:
            continue
    return found


def test_ctrl_c_during_a_replay_stops_it(sweep, tmp_path):
    """SIGINT while a replay runs: its processes are killed, its temporary folder removed,
    nothing logged, exit 130.

    The replay is paused (SIGSTOP to its process group) as soon as its trainer process
    exists, so the Ctrl-C surely comes while it runs, however fast this machine is."""
    tmp, cert, doc, failed = sweep
    log = cert.with_name(cert.name + ".verify.jsonl")
    lines = log.read_text().count("\n") if log.exists() else 0
    env = {**facts.os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(tmp_path)}
    p = subprocess.Popen([sys.executable, "-m", "harness", "verify", str(cert), "--replay",
                          "1"], cwd=PROJECT_ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    assert p.stdout is not None
    for line in p.stdout:
        if line.startswith("tier 2: draw seed"):
            break
    trainers: list[psutil.Process] = []
    deadline = time.monotonic() + 120
    while not trainers:
        if p.poll() is not None or time.monotonic() > deadline:
            p.kill()
            pytest.fail(f"the replay's trainer never appeared (verify rc {p.poll()}): the "
                        "work ended before the signal could interrupt it")
        trainers = _replay_trainers(p.pid)
        time.sleep(0.01)  # a poll of the process table, not a wait for time to pass
    for t in trainers:  # each replay process leads its own session (start_new_session)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(os.getpgid(t.pid), signal.SIGSTOP)
    assert p.poll() is None and all(t.is_running() for t in trainers), \
        "the replay ended before it was paused"
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130 and "interrupted (replays stopped, nothing logged)" in err
    assert not list(tmp_path.glob("cleanba-replay-*"))
    assert (log.read_text().count("\n") if log.exists() else 0) == lines
