"""Stop signals at any moment of a trainer's life, the coordinator's bind address, and a
closed console: real `python -m cleanba.ppo|impala` processes, real signals.

The rule under test (cleanba/core/stopping.py, docs/cleanba.md): SIGINT/SIGTERM always exits
130; before the record exists nothing is written; after, the record says `interrupted`
with the signal and the phase; once the final record is written it stands, and the exit
code is its own.
"""

from __future__ import annotations

import ipaddress
import signal
import subprocess
from pathlib import Path

import psutil
import pytest
from cleanba_runs import TINY, TrainerProcess, command, free_port, trainer_env

from cleanba.core.stopping import HOLD_ENV_VAR
from runrecord import load_run, schema

BATCH = 4 * 16
ARGS = {
    "ppo": TINY,
    "impala": [*TINY[:-6], "--num-minibatches", "2", "--progress-interval-s", "0"],
}
MATRIX: list[str] = []  # rows printed at the end of the module (pytest -s shows them)


@pytest.fixture(scope="module", autouse=True)
def _print_the_signal_matrix():
    """After the module's last test, the table of what each signal did (a teardown, so it
    comes after every row whatever order the tests ran in)."""
    yield
    print("\n| trainer | signal | moment | exit | record |\n|---|---|---|---|---|")
    print("\n".join(MATRIX))


def _started_its_signal_watcher(proc: subprocess.Popen) -> bool:
    # cleanba/__init__.py starts the watcher thread before any heavy import: a second
    # thread means the interpreter is now importing the trainer.
    try:
        return psutil.Process(proc.pid).num_threads() >= 2
    except psutil.NoSuchProcess:
        return False


CASES: list[tuple[str, ...]] = [
    # (trainer, signal, moment[, actor mode: serial unless given])
    ("ppo", "SIGINT", "importing"),
    ("ppo", "SIGTERM", "start-up"),
    ("ppo", "SIGTERM", "compiling"),
    ("ppo", "SIGINT", "mid-run"),
    ("ppo", "SIGTERM", "finishing"),
    ("ppo", "SIGINT", "finished"),
    ("impala", "SIGTERM", "importing"),
    ("impala", "SIGINT", "compiling"),
    ("impala", "SIGTERM", "mid-run"),
    ("impala", "SIGINT", "finishing"),
    # inside a rollout: actor thread 0 held halfway through rollout 3, in either actor mode
    # (double-buffer: one half's env step in flight; cleanba/core/actor_pipelined.py)
    ("ppo", "SIGINT", "mid-rollout", "serial"),
    ("ppo", "SIGINT", "mid-rollout", "double-buffer"),
]


@pytest.mark.parametrize("alg,signame,moment,actor_mode",
                         [case if len(case) == 4 else (*case, "serial") for case in CASES])
def test_a_stop_signal_at_any_moment_exits_130_and_says_why(tmp_path, alg, signame, moment,
                                                           actor_mode):
    run_dir = tmp_path / "run"
    argv = command(alg, "cartpole", run_dir, *ARGS[alg], "--total-timesteps", str(BATCH * 3),
                   "--actor-mode", actor_mode)
    # Each moment but the first is a hold (CLEANBA_HOLD_AT): the trainer waits there for the
    # signal, so it arrives in that phase however fast or loaded the machine is. The hold
    # names this run's seed, as a sweep's harness does for one run of several.
    hold = {"start-up": "start-up", "compiling": "compiling", "mid-run": "update-2",
            "finishing": "finishing", "finished": "finished",
            "mid-rollout": "rollout-3"}.get(moment)
    t = TrainerProcess(argv, **({HOLD_ENV_VAR: f"{hold}@1"} if hold else {}))
    if moment == "importing":
        t.wait_until(lambda: _started_its_signal_watcher(t.proc), "the signal watcher")
    else:
        t.wait_until(lambda: f"holding at {hold}" in t.output, f"the hold at {hold}")
    t.proc.send_signal(getattr(signal, signame))
    code = t.finish()
    err = t.output
    if not run_dir.exists():
        outcome = "no record"
    else:
        r = load_run(run_dir)
        outcome = f"{r.status}: {(r.manifest['error'] or {}).get('message', '')}"
    MATRIX.append(f"| {alg} ({actor_mode}) | {signame} | {moment} | {code} | {outcome} |")
    assert "Traceback" not in err, err
    if moment == "finished":  # the record was complete before the signal: it stands
        assert code == 0, err
        assert load_run(run_dir).status == schema.COMPLETED
        assert f"{signame} after the record was finished" in err
        return
    assert code == 130, err
    if moment in ("importing", "start-up"):
        assert not run_dir.exists()  # nothing was written, nothing half-made
        assert f"{signame} during start-up (" in err
        assert "stopped before anything was written" in err
        if moment == "start-up":
            assert "during start-up (checks, jax.distributed" in err
        return
    r = load_run(run_dir)
    assert r.warnings == []
    assert r.status == schema.INTERRUPTED
    assert r.manifest["error"]["type"] == "Interrupted"
    reason = r.manifest["error"]["message"]
    expected = {
        "compiling": f"{signame} during start-up (compiling, creating environments)",
        "mid-run": f"{signame} during training (after update ",
        # rollout 3 needs update 1's params; update 2 may be done or under way
        "mid-rollout": f"{signame} during training (after update ",
        "finishing": f"{signame} during finishing (all 3 updates done, before the final write)",
    }[moment]
    assert reason.startswith(expected), reason
    assert r.manifest["summary"]["updates"] == len(r.updates)
    if moment == "compiling":
        assert len(r.updates) == 0
    if moment == "mid-run":  # held after update 2: the signal came then
        assert reason.startswith(f"{signame} during training (after update 2 of 3)"), reason
    if moment == "mid-rollout":
        assert len(r.updates) in (1, 2)
    if moment == "finishing":
        assert len(r.updates) == 3  # every row kept; the run still counts as interrupted


def _loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def _listening(pid: int) -> list[tuple[str, int]]:
    conns = psutil.Process(pid).net_connections(kind="inet")
    return [(c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN]


def _two_processes(run_dir: Path, port: int, updates: int, **env: str) -> list[TrainerProcess]:
    common = [*TINY, "--total-timesteps", str(BATCH * updates), "--distributed",
              "--coordinator-address", f"127.0.0.1:{port}", "--num-processes", "2"]
    return [TrainerProcess(command("ppo", "cartpole", run_dir, *common, "--process-id", str(i)),
                           **env)
            for i in range(2)]


def _held(t: TrainerProcess, point: str) -> bool:
    return f"holding at {point}" in t.output


def test_two_process_coordinator_listens_on_loopback_only_and_both_stop_on_sigterm(
        tmp_path: Path):
    """Both processes held after update 2, then signalled together: each asks for a stop,
    the request travels with update 3's all-gather, and both stop after it (before, each
    stopped on its own and the one left in the next collective aborted, exit -6)."""
    port = free_port()
    run_dir = tmp_path / "run"
    trainers = _two_processes(run_dir, port, 40, **{HOLD_ENV_VAR: "update-2"})
    for t in trainers:
        t.wait_until(lambda t=t: _held(t, "update-2"), "update 2 (held)")
    sockets = _listening(trainers[0].proc.pid)
    on_port = [ip for ip, p in sockets if p == port]
    MATRIX.append(f"coordinator port {port} listens on {on_port} (all listening: {sockets})")
    assert on_port, sockets  # the coordinator is up (process 0 hosts it)
    # gRPC listens on 127.0.0.1 through an IPv6 socket: ::ffff:127.0.0.1 (before: "::").
    assert all(_loopback(ip) for ip in on_port), sockets
    # No socket of process 0 listens beyond loopback at all.
    assert all(_loopback(ip) for ip, _ in sockets), sockets
    for t in trainers:
        t.proc.send_signal(signal.SIGTERM)
    codes = [t.finish(timeout=120) for t in trainers]
    assert codes == [130, 130], [t.output for t in trainers]
    r = load_run(run_dir)
    assert r.status == schema.INTERRUPTED
    message = r.manifest["error"]["message"]
    assert message == ("SIGTERM during training (after update 2 of 40); every process "
                       "stopped after update 3"), message
    assert list(r.updates["update"]) == [1, 2, 3]
    MATRIX.append(f"| ppo d2 | SIGTERM to both | held at update 2 | {codes} | {r.status}: "
                  f"{message} |")


def test_a_signal_to_one_process_stops_both_after_the_same_update(tmp_path: Path):
    """SIGTERM to process 1 only: process 0 stops with it after the same update, and its
    record names the process that was signalled. (A hold cannot pick one process: both
    have the seed. So the run is long, and the signal comes once rows are written.)"""
    run_dir = tmp_path / "run"
    trainers = _two_processes(run_dir, free_port(), 400)
    rows = run_dir / schema.UPDATES_FILE
    trainers[0].wait_until(lambda: rows.exists() and len(rows.read_text().splitlines()) >= 3,
                         "two updates")
    trainers[1].proc.send_signal(signal.SIGTERM)
    codes = [t.finish(timeout=120) for t in trainers]
    assert codes == [130, 130], [t.output for t in trainers]
    assert "stopping after this update, with the other processes" in trainers[1].output
    r = load_run(run_dir)
    message = r.manifest["error"]["message"]
    assert r.status == schema.INTERRUPTED
    last = len(r.updates)
    assert 2 <= last < 400, "the run ended before the signal"
    assert message == f"SIGTERM to process 1; every process stopped after update {last}", \
        message
    assert list(r.updates["update"]) == list(range(1, last + 1))
    MATRIX.append(f"| ppo d2 | SIGTERM to process 1 | after 2 updates | {codes} | "
                  f"{r.status}: {message} |")


def test_a_closed_console_never_decides_the_run_status(tmp_path):
    # `python -m cleanba.ppo ... | head -1`: the reader goes after the first line, and the
    # progress lines that follow (every 0.05 s here) meet a closed pipe.
    run_dir = tmp_path / "run"
    argv = command("ppo", "cartpole", run_dir, *TINY[:-2], "--progress-interval-s", "0.05",
                   "--total-timesteps", str(BATCH * 30))
    proc = subprocess.Popen(argv, env=trainer_env(1), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.startswith(b"[cleanba]")
    proc.stdout.close()
    _, err = proc.communicate(timeout=240)
    text = err.decode()
    assert proc.returncode == 0, text
    assert "Broken pipe" not in text and "Traceback" not in text, text
    r = load_run(run_dir)
    assert r.status == schema.COMPLETED
    assert len(r.updates) == 30


def test_the_first_of_failure_and_signal_decides_the_status():
    from cleanba.core.control import Control, Stopped
    from cleanba.core.runtime import final_status

    failed_first = Control()
    failed_first.fail(ValueError("boom"))
    failed_first.interrupt("SIGTERM")  # the stop that follows a failure is not the cause
    status, error = final_status(failed_first, Stopped())
    assert status == schema.FAILED and isinstance(error, ValueError)

    signalled_first = Control()
    signalled_first.phase = "training (after update 3 of 9)"
    signalled_first.interrupt("SIGINT")
    signalled_first.fail(RuntimeError("queue closed"))  # a consequence of the stop
    status, error = final_status(signalled_first, Stopped())  # the main thread's Stopped
    assert status == schema.INTERRUPTED
    assert error == {"type": "Interrupted", "traceback": "",
                     "message": "SIGINT during training (after update 3 of 9)"}

    assert final_status(Control(), None) == (schema.COMPLETED, None)
    assert final_status(Control(), KeyError("x"))[0] == schema.FAILED


def test_a_hold_names_a_point_and_maybe_a_seed(tmp_path):
    from cleanba.core.stopping import parse_holds

    assert parse_holds("") == set()
    assert parse_holds("compiling,update-2@3, finishing@12,rollout-3") == {
        ("compiling", None), ("update-2", 3), ("finishing", 12), ("rollout-3", None)}
    for bad in ("compile", "update-x", "finishing@one", "update-", "rollout-", "roll-3"):
        with pytest.raises(ValueError, match="is not POINT or POINT@SEED"):
            parse_holds(bad)
    # A typo stops the trainer before anything is written: exit 2, not a hold never reached.
    run_dir = tmp_path / "run"
    p = subprocess.run(command("ppo", "cartpole", run_dir, *TINY),
                       env=trainer_env(1, **{HOLD_ENV_VAR: "update_2"}), capture_output=True,
                       text=True, timeout=240)
    assert p.returncode == 2, p.stderr
    assert "CLEANBA_HOLD_AT='update_2': 'update_2' is not POINT or POINT@SEED" in p.stderr
    assert not run_dir.exists()
