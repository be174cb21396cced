"""The protocol guard's core: differences between recorded env protocols."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analysis.inputs.protocol import (
    UNKNOWN,
    ProtocolMismatch,
    check_same_protocol,
    protocol_differences,
)
from benchenv import ATARI_PROTOCOL
from runrecord import Run, Table


def _run(run_id: str, env_id: str, protocol: dict | None) -> Run:
    manifest: dict = {"run_id": run_id, "env_id": env_id, "status": "completed"}
    if protocol is not None:
        manifest["env_protocol"] = protocol
    empty = Table({"episode_return": np.array([])}, 0)
    return Run(Path(run_id), manifest, empty, empty, [])


def test_differences_name_keys_and_values():
    sticky0 = dict(ATARI_PROTOCOL, repeat_action_probability=0.0)
    assert protocol_differences(ATARI_PROTOCOL, ATARI_PROTOCOL) == {}
    assert protocol_differences(ATARI_PROTOCOL, sticky0) == {
        "repeat_action_probability": (0.25, 0.0)}
    only_a = protocol_differences({"frame_skip": 4}, {})
    assert only_a == {"frame_skip": (4, UNKNOWN)}


def test_unknown_protocol_matches_nothing():
    assert "env_protocol" in protocol_differences(None, ATARI_PROTOCOL)
    assert "env_protocol" in protocol_differences(None, None)


def test_check_refuses_and_allows_with_warning():
    a = [_run("a1", "Breakout-v5", ATARI_PROTOCOL), _run("a2", "Pong-v5", ATARI_PROTOCOL)]
    b = [_run("b1", "Breakout-v5", dict(ATARI_PROTOCOL, repeat_action_probability=0.0))]
    assert check_same_protocol({"A": a, "B": a}) == []
    with pytest.raises(ProtocolMismatch) as e:
        check_same_protocol({"A": a, "B": b})
    assert e.value.differing_keys == ["repeat_action_probability"]
    assert "repeat_action_probability" in str(e.value) and "--allow-protocol-mismatch" in str(e.value)
    warnings = check_same_protocol({"A": a, "B": b}, allow_mismatch=True)
    assert len(warnings) == 1 and "0.25" in warnings[0] and "0.0" in warnings[0]
