"""No test interrupts work after a sleep: it waits for an event that proves the work is
under way (a line the child prints, a file it writes, a hold it reports), so the signal
cannot come too early or too late on another machine or under load.

A sleep may pace a poll of such an event; one directly before a signal or a kill is a bet
on timing, and this test names it.
"""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
SLEEP = re.compile(r"\btime\.sleep\(")
INTERRUPT = re.compile(r"\.send_signal\(|\bos\.kill\(|\bos\.killpg\(|\.kill\(\)|\.terminate\(\)")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def sleeps_before_an_interrupt(text: str, within: int = 2) -> list[int]:
    """Line numbers of sleeps followed in their own block, within `within` code lines, by a
    signal or kill. A sleep that ends its block (a poll loop's body) paces a wait for an
    event; what follows the loop comes after the event."""
    lines = text.splitlines()
    found = []
    for i, line in enumerate(lines):
        if not SLEEP.search(line.split("#", 1)[0]):
            continue
        after = [x for x in lines[i + 1:] if x.strip() and not x.strip().startswith("#")]
        for x in after[:within]:
            if _indent(x) < _indent(line):
                break  # the sleep's block ended: it was a poll's pace
            if INTERRUPT.search(x):
                found.append(i + 1)
                break
    return found


def test_the_check_finds_a_sleep_then_a_signal():
    text = ("time.sleep(1.0)  # the trainer is starting\n"
            "p.send_signal(signal.SIGINT)\n")
    assert sleeps_before_an_interrupt(text) == [1]
    polling = ("while not ready():\n"
               "    time.sleep(0.05)\n"
               "p.send_signal(signal.SIGINT)\n")
    assert sleeps_before_an_interrupt(polling) == []
    after_a_poll = polling.replace("p.send_signal", "time.sleep(1.0)\np.send_signal")
    assert sleeps_before_an_interrupt(after_a_poll) == [3]
    assert sleeps_before_an_interrupt("time.sleep(0.1)\nx = 1\ny = 2\nos.kill(pid, 9)\n") == []


def test_no_test_sleeps_then_signals():
    offenders = {}
    for path in sorted(TESTS.glob("*.py")):
        if path.name == Path(__file__).name:
            continue
        hits = sleeps_before_an_interrupt(path.read_text(encoding="utf-8"))
        if hits:
            offenders[path.name] = hits
    assert offenders == {}, (
        f"sleeps right before a signal or kill (file: line numbers): {offenders}; wait for an "
        "event instead (a printed line, a file, CLEANBA_HOLD_AT / FAKE_TRAINER_HOLD_AFTER)")


def test_children_of_a_test_started_with_ctrl_c_ignored_still_get_it():
    """A test process started as a shell's background job (SIGINT ignored) gives the
    signal back before its tests start children (tests/conftest.py): a child started from
    it handles Ctrl-C, so a test's SIGINT reaches it."""
    import subprocess
    import sys

    # (conftest gives the signals back when it is imported, as pytest imports it)
    child = ("import signal; print(signal.getsignal(signal.SIGINT) is "
             "signal.default_int_handler)")
    test_process = (f"import sys; sys.path.insert(0, {str(TESTS)!r}); import subprocess, "
                    f"conftest; "
                    f"subprocess.run([sys.executable, '-c', {child!r}])")
    out = subprocess.run(["bash", "-c", 'trap "" INT QUIT; exec "$0" -c "$1"', sys.executable,
                          test_process], capture_output=True, text=True, timeout=120,
                         cwd=TESTS.parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True"], out.stdout
    # and without the give-back, the child inherits the ignored signal (why it exists)
    plain = subprocess.run(["bash", "-c", 'trap "" INT; exec "$0" -c "$1"', sys.executable,
                            child], capture_output=True, text=True, timeout=60)
    assert plain.stdout.split() == ["False"], plain.stdout
