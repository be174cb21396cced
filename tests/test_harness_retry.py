"""Which failures are retried (harness.store) and what `status` says about them."""

from __future__ import annotations

import json

import pytest

from harness.execute import left_alone
from harness.store import (
    CORRUPT,
    DETERMINISTIC,
    PENDING,
    TRANSIENT,
    RunState,
    failed_state_text,
    failure_kind,
    run_state,
    will_retry,
)
from runrecord import RunWriter, schema


@pytest.mark.parametrize("error, kind", [
    ({"type": "NonFiniteLoss", "message": "loss_total is nan at update 2"}, DETERMINISTIC),
    ({"type": "ConfigError", "message": "--num-envs 7 cannot be split"}, DETERMINISTIC),
    ({"type": "TrainerExit", "message": "bad arguments", "exit_codes": [2]}, DETERMINISTIC),
    ({"type": "TrainerExit", "message": "bad arguments", "exit_codes": [0, 2]}, DETERMINISTIC),
    ({"type": "TypeError", "message": "unsupported operand"}, DETERMINISTIC),
    ({"type": "TrainerExit", "message": "killed by SIGKILL", "exit_codes": [-9]}, TRANSIENT),
    ({"type": "OSError", "message": "[Errno 28] No space left on device"}, TRANSIENT),
    ({"type": "XlaRuntimeError", "message": "UNAVAILABLE: connection reset"}, TRANSIENT),
    ({"type": "RuntimeError", "message": "injected learner fault"}, TRANSIENT),
    ({"type": "Timeout", "message": "timeout after 1 min", "exit_codes": [130]}, TRANSIENT),
    ({"type": "TrainerExit", "message": "the trainer failed", "exit_codes": [1]}, TRANSIENT),
    (None, TRANSIENT),
])
def test_failure_kind(error, kind):
    assert failure_kind(error) == kind


def test_will_retry_and_the_words_status_shows():
    assert will_retry(TRANSIENT, failures=1, max_attempts=2)
    assert not will_retry(TRANSIENT, failures=2, max_attempts=2)
    assert not will_retry(DETERMINISTIC, failures=1, max_attempts=2)
    assert will_retry(DETERMINISTIC, failures=1, max_attempts=2, retry_failed=True)
    assert not will_retry(DETERMINISTIC, failures=2, max_attempts=2, retry_failed=True)
    assert "will be retried, attempt 2 of 2" in failed_state_text(TRANSIENT, 1, 2)
    assert "not retried" in failed_state_text(DETERMINISTIC, 1, 2)
    assert "--retry-failed" in failed_state_text(DETERMINISTIC, 1, 2)
    assert "2 of 2 attempts spent" in failed_state_text(TRANSIENT, 2, 2)


def _record(run_dir, status, error=None):
    w = RunWriter(run_dir, {"run_id": run_dir.name, "provenance": {}, "hyperparameters": {}})
    w.finish(status, error=error)


def test_run_state_corrupt_failed_kinds(tmp_path):
    assert run_state(tmp_path / "none").state == PENDING
    bad = tmp_path / "bad"
    _record(bad, schema.COMPLETED)
    (bad / schema.MANIFEST_FILE).write_text('{"status": "compl')  # torn by a disk fault
    st = run_state(bad)
    assert st.state == CORRUPT and st.failures == 0
    nan = tmp_path / "nan"
    _record(nan, schema.FAILED, {"type": "NonFiniteLoss", "message": "nan", "traceback": ""})
    st = run_state(nan)
    assert (st.state, st.kind, st.failures) == ("failed", DETERMINISTIC, 1)
    killed = tmp_path / "killed"
    _record(killed, schema.FAILED, {"type": "TrainerExit", "message": "killed",
                                    "traceback": "", "exit_codes": [-9]})
    assert run_state(killed).kind == TRANSIENT
    assert json.loads((killed / schema.MANIFEST_FILE).read_text())["error"]["exit_codes"] == [-9]


@pytest.mark.parametrize("state, flags, expected", [
    (RunState("r", "completed", 1, 0), {}, "already-completed"),
    (RunState("r", "skipped", 1, 0, error="Unavailable: no moolib"), {}, "skipped"),
    (RunState("r", "skipped", 1, 0), {"retry_skipped": True}, None),
    (RunState("r", "failed", 1, 1, kind=TRANSIENT), {}, None),
    (RunState("r", "failed", 1, 1, kind=DETERMINISTIC), {}, "not-retried"),
    (RunState("r", "failed", 1, 1, kind=DETERMINISTIC), {"retry_failed": True}, None),
    (RunState("r", "failed", 2, 2, kind=DETERMINISTIC), {"retry_failed": True}, "exhausted"),
    (RunState("r", "interrupted", 3, 2), {}, "exhausted"),
    (RunState("r", "interrupted", 2, 1), {}, None),
    (RunState("r", PENDING, 0, 0), {}, None),
    (RunState("r", CORRUPT, 0, 0), {}, None),
])
def test_left_alone_decides_which_runs_start(state, flags, expected):
    left = left_alone(state, max_attempts=2, **flags)
    assert (None if left is None else left[0]) == expected
