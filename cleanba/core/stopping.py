"""SIGINT/SIGTERM at any moment of a trainer's life: always exit 130, and say why.

Imports only the standard library: `python -m cleanba.ppo` / `cleanba.impala` call
`install()` before their heavy imports (JAX takes seconds to import), so no signal ever
meets Python's defaults (KeyboardInterrupt in a random frame, or death by SIGTERM).

How a signal is handled:
- The Python-level handler does nothing; `signal.set_wakeup_fd` makes the C-level handler
  write the signal number to a pipe at once, and a watcher thread reads it. So a signal is
  acted on even while the main thread waits in native code (jax.distributed start-up,
  compilation), which a Python handler would only see when that call returns.
- Before the run starts (imports, argument parsing, the start-up checks, jax.distributed
  start-up) nothing has been written: the watcher prints which signal arrived in which
  phase and ends the process with exit 130. No record exists, and none is left half-made.
- From `running(on_stop)` on (process 0 has created its record), the watcher calls
  on_stop(signal name): the run stops its threads and writes its record with status
  `interrupted` and the signal and phase as the reason.
- `finish(decide)`: the final status is decided and written while the watcher waits, so a
  signal either arrives before the decision (status `interrupted`) or after the record is
  complete (the record stands, and the process exits at once with the record's code).

The main thread holds `lock` while it changes what a signal means, so a signal never
finds a half-created record or a half-written final status.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from runrecord.exits import EXIT_INTERRUPTED

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

# Test hook (docs/cleanba.md): CLEANBA_HOLD_AT=<point>[@<seed>][,...] makes the trainer stop
# at that point (of the run with that seed, or of every run), print "[cleanba] holding at
# <point>" and wait (up to HOLD_MAX_S) for a signal, so a test signals a phase exactly when
# it is under way instead of betting on timing. Several runs of one sweep share the
# harness's environment: the seed picks the run.
HOLD_ENV_VAR = "CLEANBA_HOLD_AT"
HOLD_POINTS = ("start-up", "compiling", "update-K", "rollout-K", "finishing", "finished")
# rollout-K: actor thread 0 halfway through its rollout K (cleanba/core/actor.py)
HOLD_MAX_S = 120.0


class SignalWatcher:
    """The one stop-signal policy of a trainer process (see the module docstring)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.phase = "start-up (importing)"
        self.received: list[str] = []  # "SIGTERM during <phase>", in arrival order
        self._on_stop: Callable[[str], None] | None = None
        self._exit_code: int | None = None  # set once the final record is written
        self._previous: dict[int, Any] = {}
        self._previous_fd = -1
        self._read_fd = self._write_fd = -1
        self._thread: threading.Thread | None = None
        self._signalled = threading.Event()
        self._holds: set[tuple[str, int | None]] | None = None  # CLEANBA_HOLD_AT, read once

    # --- installation --------------------------------------------------------------

    def install(self) -> None:
        """Take over SIGINT/SIGTERM (main thread only)."""
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._write_fd, False)
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, _ignore_in_main_thread)
        self._previous_fd = signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        self._thread = threading.Thread(target=self._watch, name="cleanba-signals", daemon=True)
        self._thread.start()
        # A launcher may block the signals across exec to close the interpreter's start-up
        # window (before this line, a signal would meet the kernel's default); any signal
        # held pending meanwhile is delivered now, to the watcher.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)

    def uninstall(self) -> None:
        """Give SIGINT/SIGTERM back (in-process callers, e.g. tests calling cli())."""
        signal.set_wakeup_fd(self._previous_fd)
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        os.close(self._write_fd)  # the watcher reads EOF and ends

    def reinstall_handlers(self) -> None:
        """Re-take the signals after a library installed its own native handler (jax.distributed
        may register a SIGTERM preemption notifier)."""
        for signum in STOP_SIGNALS:
            signal.signal(signum, _ignore_in_main_thread)

    # --- what a signal means now -------------------------------------------------------

    def set_phase(self, phase: str) -> None:
        with self.lock:
            self.phase = phase

    def running(self, on_stop: Callable[[str], None]) -> None:
        """From now on a signal stops the run through on_stop(reason) instead of exiting."""
        with self.lock:
            self._on_stop = on_stop

    def finished(self, exit_code: int) -> None:
        """The final record is written: a later signal exits at once with its code."""
        with self.lock:
            self._exit_code = exit_code

    def _watch(self) -> None:
        while True:
            try:
                data = os.read(self._read_fd, 1)
            except OSError:
                return
            if not data:  # uninstall() closed the pipe
                os.close(self._read_fd)
                return
            if data[0] in STOP_SIGNALS:
                self.handle(signal.Signals(data[0]).name)

    def hold(self, point: str, seed: int | None = None) -> None:
        """The CLEANBA_HOLD_AT test hook (a no-op unless the variable names `point`, for
        every run or for the run of `seed`)."""
        if self._holds is None:  # read at the first point, not at every learner update
            self._holds = parse_holds(os.environ.get(HOLD_ENV_VAR, ""))
        if (point, None) not in self._holds and (point, seed) not in self._holds:
            return
        _say(f"holding at {point} ({HOLD_ENV_VAR})")
        self._signalled.wait(HOLD_MAX_S)

    def handle(self, name: str) -> None:
        try:
            self._handle(name)
        finally:
            # A held thread (CLEANBA_HOLD_AT) goes on only once the stop is requested: else
            # it could finish its rollout, and the learner an update, before the run stops.
            self._signalled.set()

    def _handle(self, name: str) -> None:
        with self.lock:
            if self._exit_code is not None:
                _say(f"{name} after the record was finished: exiting with its code "
                     f"{self._exit_code}")
                os._exit(self._exit_code)
            if self._on_stop is None:
                reason = f"{name} during {self.phase}"
                self.received.append(reason)
                _say(f"{reason}: stopped before anything was written (exit "
                     f"{EXIT_INTERRUPTED})")
                os._exit(EXIT_INTERRUPTED)
            # Under the lock: the main thread cannot decide the final status meanwhile.
            self._on_stop(name)


def parse_holds(value: str) -> set[tuple[str, int | None]]:
    """CLEANBA_HOLD_AT's (point, seed) pairs (seed None: every run). ValueError says what
    is wrong and what is valid."""
    holds: set[tuple[str, int | None]] = set()
    for item in filter(None, (v.strip() for v in value.split(","))):
        point, _, seed = item.partition("@")
        kind, _, number = point.partition("-")
        named = point in HOLD_POINTS or (kind in ("update", "rollout") and number.isdigit())
        if not named or (seed and not seed.isdigit()):
            raise ValueError(f"{HOLD_ENV_VAR}={value!r}: {item!r} is not POINT or POINT@SEED "
                             f"with POINT one of {', '.join(HOLD_POINTS)} (K: an update "
                             "or rollout number)")
        holds.add((point, int(seed) if seed else None))
    return holds


def hold(point: str, seed: int | None = None) -> None:
    """The hook of the installed watcher (none installed: a no-op)."""
    if _watcher is not None:
        _watcher.hold(point, seed)


def _ignore_in_main_thread(signum: int, frame: Any) -> None:
    """The watcher thread acts on the signal (it was written to the wakeup pipe)."""


def _say(message: str) -> None:
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass  # stdout may be a closed pipe (`| head`); the message goes to stderr anyway
    try:
        print(f"[cleanba] {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


_watcher: SignalWatcher | None = None


def install() -> SignalWatcher:
    """Install the process's watcher (idempotent; main thread only)."""
    global _watcher
    if _watcher is None:
        _watcher = SignalWatcher()
        _watcher.install()
    return _watcher


def installed() -> SignalWatcher | None:
    return _watcher


def uninstall() -> None:
    global _watcher
    if _watcher is not None:
        _watcher.uninstall()
        _watcher = None
