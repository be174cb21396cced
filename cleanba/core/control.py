"""Stopping: one stop event shared by every thread of a run, the first error and the
interrupt flag.

Every queue put/get and sleep waits in short slices and gives up when the event is set.
The first exception of any thread is recorded (status `failed`); SIGINT/SIGTERM set status
`interrupted` with the signal and the phase it arrived in (the signal policy of the whole
process, from its first import, is cleanba/core/stopping.py).

In a multi-process run a process that stopped on its own would leave the others waiting
in the next update's collective, to abort when the coordinator's process exits. So while
the learner runs there (`together`), a signal only asks for a stop: the request travels
with the update's all-gather, and every process stops after the same update. A second
signal stops at once.
"""

from __future__ import annotations

import queue
import sys
import threading
from typing import Any

from cleanba.core.records import console

WAIT_SLICE_S = 0.05  # granularity of every blocking wait, so a stop is noticed quickly


class Stopped(Exception):
    """Raised inside a thread when the run is stopping (another thread failed, a signal)."""


class Control:
    """The stop event, the first error and the interrupt flag, shared by all threads.
    `phase` says where the run is (the reason of an interrupt names it)."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.interrupted = False
        self.interrupt_reason = ""
        self.phase = "start-up"
        self.together = False  # a multi-process learner is running: stops are agreed
        self.requested_signal = ""  # a signal asked this process to stop (agreed stop)
        self._lock = threading.Lock()

    def fail(self, exc: BaseException) -> None:
        with self._lock:
            if self.error is None and not self.interrupted:
                self.error = exc
        self.stop.set()

    def interrupt(self, signal_name: str) -> None:
        """A stop signal: `interrupted` unless a thread failed first (the first signal's
        phase is the reason)."""
        with self._lock:
            if self.error is None and not self.interrupted:
                self.interrupted = True
                self.interrupt_reason = f"{signal_name} during {self.phase}"
            ask_first = self.together and not self.requested_signal
            self.requested_signal = self.requested_signal or signal_name
        if ask_first:
            console(f"[cleanba] {signal_name}: stopping after this update, with the other "
                    f"processes (during {self.phase}; a second signal stops at once)",
                    sys.stderr)
            return
        console(f"[cleanba] {signal_name}: stopping (during {self.phase})", sys.stderr)
        self.stop.set()

    def stop_together(self, update: int, signalled: dict[int, str]) -> None:
        """The processes agreed to stop after `update` ({process index: signal} were
        signalled): `interrupted`, the reason saying so, unless this process failed first."""
        together = f"every process stopped after update {update}"
        with self._lock:
            if self.error is None:
                if not self.interrupted:
                    self.interrupted = True
                    self.interrupt_reason = ", ".join(
                        f"{name} to process {i}" for i, name in sorted(signalled.items()))
                self.interrupt_reason += f"; {together}"
        self.stop.set()

    def stop_early(self, reason: str) -> None:
        """A stop the run asked for itself (--stop-after-updates): `interrupted`, with
        `reason`, unless a thread failed first."""
        with self._lock:
            if self.error is None and not self.interrupted:
                self.interrupted = True
                self.interrupt_reason = reason
        self.stop.set()

    def check(self) -> None:
        if self.stop.is_set():
            raise Stopped

    def put(self, q: queue.Queue, item: Any) -> None:
        while True:
            self.check()
            try:
                q.put(item, timeout=WAIT_SLICE_S)
                return
            except queue.Full:
                pass

    def get(self, q: queue.Queue) -> Any:
        while True:
            self.check()
            try:
                return q.get(timeout=WAIT_SLICE_S)
            except queue.Empty:
                pass

    def sleep(self, seconds: float) -> None:
        if self.stop.wait(seconds):
            raise Stopped
