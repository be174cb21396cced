"""Helpers for the Cleanba trainer tests: run `python -m cleanba.<alg>` in a subprocess."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from runrecord import load_run, schema

# A tiny CartPole run: 4 envs x 16 steps per batch; a few seconds including compilation.
TINY = ["--num-envs", "4", "--num-steps", "16", "--num-actor-threads", "1",
        "--num-minibatches", "2", "--update-epochs", "1", "--progress-interval-s", "0"]


def trainer_env(devices: int = 1, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    flags = [f for f in env.get("XLA_FLAGS", "").split()
             if not f.startswith("--xla_force_host_platform_device_count")]
    flags.append(f"--xla_force_host_platform_device_count={devices}")
    env["XLA_FLAGS"] = " ".join(flags)
    env.setdefault("WANDB_MODE", "offline")
    env.setdefault("WANDB_SILENT", "true")
    # A fault or a hold is asked for per trainer (in `extra`), never inherited: a test that
    # set CLEANBA_HOLD_AT for the harness it drives would else hold its own reference run
    # for HOLD_MAX_S (120 s) before it goes on.
    env.pop("CLEANBA_FAULT", None)
    env.pop("CLEANBA_HOLD_AT", None)
    env.update(extra)
    return env


class TrainerProcess:
    """A trainer process whose output lines a thread collects, for the markers a test waits
    on: its stderr only (stdout discarded), or with `merge_stdout` both streams in one."""

    def __init__(self, argv: list[str], *, merge_stdout: bool = False, **env: str) -> None:
        self.proc = subprocess.Popen(
            argv, env=trainer_env(1, **env), text=True,
            stdout=subprocess.PIPE if merge_stdout else subprocess.DEVNULL,
            stderr=subprocess.STDOUT if merge_stdout else subprocess.PIPE)
        self.lines: list[str] = []
        stream = self.proc.stdout if merge_stdout else self.proc.stderr
        assert stream is not None
        self._reader = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._reader.start()

    def _read(self, stream: Any) -> None:
        for line in stream:  # each line visible to a waiting test as soon as it is read
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_until(self, ready: Callable[[], bool], what: str, timeout: float = 240) -> None:
        """Until `ready()` (the event; polling only reads what is collected); fails, with
        the output, if the trainer exits or the time runs out first."""
        deadline = time.monotonic() + timeout
        while not ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                pytest.fail(f"never reached {what}; rc {self.proc.poll()}:\n{self.output}")
            time.sleep(0.01)

    def wait_for(self, text: str, timeout: float = 240) -> None:
        """Until a line says `text`."""
        self.wait_until(lambda: text in self.output, f"saying {text!r}", timeout)

    def finish(self, timeout: float = 90) -> int:
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return code


def command(alg: str, preset: str, run_dir: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", f"cleanba.{alg}", preset, "--run-dir", str(run_dir), *args]


def run(alg: str, run_dir: Path, *args: str, preset: str = "cartpole", devices: int = 1,
        timeout: float = 180, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        command(alg, preset, run_dir, *args), env=trainer_env(devices, **env),
        capture_output=True, text=True, timeout=timeout,
    )


# The standard small run that several test modules read (run once per test session):
# PPO on CartPole, cleanba architecture, layout a0-l0, 2 actor threads, 8 updates, seed 1.
STANDARD_UPDATES = 8
STANDARD_BATCH = 4 * 16
STANDARD = [*TINY[:-6], "--num-actor-threads", "2", *TINY[-6:], "--total-timesteps",
            str(STANDARD_BATCH * STANDARD_UPDATES)]
_cache: dict[tuple[str, ...], Path] = {}


def cached_run(alg: str, *args: str) -> Path:
    """Run once per test session and return the record folder (the run must complete).
    Under pytest-xdist the workers of one session share it: the first makes it (under a
    file lock), the others read it."""
    key = (alg, *args)
    if key not in _cache:
        session = os.environ.get("PYTEST_XDIST_TESTRUNUID")
        if session is None:
            run_dir = Path(tempfile.mkdtemp(prefix="cleanba-test-")) / "run"
            p = run(alg, run_dir, *args)
            assert p.returncode == 0, p.stderr
        else:
            run_dir = _shared_run(session, alg, *args)
        _cache[key] = run_dir
    return _cache[key]


def _shared_run(session: str, alg: str, *args: str) -> Path:
    name = hashlib.sha256("\0".join((alg, *args)).encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"cleanba-test-{session}" / name
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "done").exists():
            shutil.rmtree(folder / "run", ignore_errors=True)  # a worker's that failed
            p = run(alg, folder / "run", *args)
            assert p.returncode == 0, p.stderr
            (folder / "done").write_text("")
    return folder / "run"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def staleness(run_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """Per update: (max staleness, min staleness) of the data it trained on."""
    u = load_run(run_dir).updates
    lv = u["learner_version"]
    return (
        schema.staleness(lv, u["rollout_policy_version_min"]),
        schema.staleness(lv, u["rollout_policy_version_max"]),
    )


def check_valid_record(run_dir: Path, num_envs: int, batch: int, num_updates: int):
    """A completed record with the contract's columns, counts and step bookkeeping."""
    r = load_run(run_dir)
    assert r.warnings == []
    assert r.status == schema.COMPLETED, r.manifest.get("error")
    lead = schema.UPDATE_COLUMNS[:-len(schema.TRAILING_UPDATE_COLUMNS)]
    assert list(r.updates.names[:len(lead)]) == list(lead)
    assert list(r.updates.names[-len(schema.TRAILING_UPDATE_COLUMNS):]) == list(
        schema.TRAILING_UPDATE_COLUMNS)
    assert len(r.updates) == num_updates
    np.testing.assert_array_equal(r.updates["update"], np.arange(1, num_updates + 1))
    np.testing.assert_array_equal(r.updates["env_steps"], batch * np.arange(1, num_updates + 1))
    np.testing.assert_array_equal(r.updates["learner_version"], np.arange(2, num_updates + 2))
    assert np.all(np.isfinite(r.updates["loss_total"]))
    e = r.episodes
    assert len(e) > 0
    assert set(np.unique(e["env_index"]).astype(int)) <= set(range(num_envs))
    assert np.all(e["env_steps"] <= batch * num_updates)
    assert np.all(e["episode_length"] >= 1)
    m = r.manifest
    assert m["summary"]["env_steps"] == batch * num_updates
    assert m["summary"]["updates"] == num_updates
    assert m["summary"]["episodes"] == len(e)
    return r
