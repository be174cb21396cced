"""Which failed runs deserve another attempt: transient errors yes, deterministic ones no.

A run's attempt is spent only by a failure (never by an interruption). A failed run gets
another attempt while it has attempts left (`harness run --max-attempts`), but only when
its error can be transient; a deterministic error would come back identically, so the
run waits for the user (`harness run --retry-failed` after fixing the cause).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from runrecord.exits import EXIT_BAD_INPUT

FailureKind = Literal["transient", "deterministic"]
TRANSIENT: FailureKind = "transient"
DETERMINISTIC: FailureKind = "deterministic"

# Exception types that say the code or its arguments are wrong, or the numbers blew up:
# the same run fails the same way again. Anything else (OSError and its kin such as a full
# disk or a refused connection, MemoryError, XLA runtime errors, a RuntimeError, a
# process killed by a signal, a timeout) may depend on the machine, so it is retried.
DETERMINISTIC_TYPES = frozenset({
    # bad arguments (the trainers' and baselines' own checks)
    "ConfigError", "EnvError", "LayoutError", "MappingError", "BadArguments",
    # numerical failure of a seeded run
    "NonFiniteLoss", "FloatingPointError", "ZeroDivisionError",
    # programming errors and a record the writer refuses
    "RecordError", "TypeError", "ValueError", "KeyError", "IndexError", "AttributeError",
    "AssertionError", "NameError", "NotImplementedError", "ImportError",
    "ModuleNotFoundError", "SyntaxError",
})


def failure_kind(error: Mapping[str, Any] | None) -> FailureKind:
    """Classify a failed run's recorded `error` ({type, message, exit_codes?}).

    deterministic: the trainer rejected its arguments (exit code 2, or a ConfigError-like
    type), the loss became non-finite, or a programming error was raised: re-running the
    same definition repeats it, so no attempt is spent on it blindly.
    transient: everything else that can depend on the machine (killed by a signal such
    as the OOM killer's SIGKILL, a full disk or other OSError, lost peers, a timeout,
    exit without a record): worth another attempt.
    """
    if not error:
        return TRANSIENT
    codes = error.get("exit_codes") or []
    if EXIT_BAD_INPUT in codes:
        return DETERMINISTIC
    if str(error.get("type", "")) in DETERMINISTIC_TYPES:
        return DETERMINISTIC
    return TRANSIENT


def will_retry(kind: FailureKind, failures: int, max_attempts: int,
               retry_failed: bool = False) -> bool:
    """Whether the next `harness run` starts another attempt of a failed run."""
    if failures >= max_attempts:
        return False
    return kind == TRANSIENT or retry_failed


def failed_state_text(kind: FailureKind, failures: int, max_attempts: int) -> str:
    """The state `harness status` shows for a failed run: what happens next, and why."""
    if failures >= max_attempts:
        return (f"failed ({kind}; {failures} of {max_attempts} attempts spent: not retried, "
                "--max-attempts raises the cap)")
    if kind == DETERMINISTIC:
        return ("failed (deterministic: not retried; fix the cause, then "
                "`harness run --retry-failed`)")
    return f"failed (transient: will be retried, attempt {failures + 1} of {max_attempts})"
