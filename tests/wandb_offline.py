"""Read an offline wandb run (WANDB_MODE=offline) back: its history rows and config.

wandb >= 0.19 has no Python reader for its `.wandb` files, so this reads the documented
layout: a 7-byte file header (":W&B", magic 0xBEE1, version), then LevelDB-log-style
records (4-byte CRC, 2-byte length, 1-byte type FULL/FIRST/MIDDLE/LAST) in 32 KiB blocks,
each payload a wandb_internal_pb2.Record protobuf.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BLOCK = 32768
HEADER = 7


def records(path: Path) -> Iterator[Any]:
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    assert data[:4] == b":W&B", f"{path}: not a wandb run file"
    pos, buf = HEADER, b""
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # block trailer: padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + HEADER])
        buf += data[pos + HEADER:pos + HEADER + length]
        pos += HEADER + length
        if kind == 0 and length == 0:
            continue
        if kind in (1, 4):  # FULL or LAST: a whole record
            rec = pb.Record()
            rec.ParseFromString(buf)
            buf = b""
            yield rec


def read_offline_run(run_dir: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(history rows, config) of an offline-run-* folder."""
    (path,) = Path(run_dir).glob("run-*.wandb")
    history: list[dict[str, Any]] = []
    config: dict[str, Any] = {}
    for rec in records(path):
        kind = rec.WhichOneof("record_type")
        if kind == "history":
            history.append({i.key or "/".join(i.nested_key): json.loads(i.value_json)
                            for i in rec.history.item})
        elif kind == "config":
            config.update({i.key: json.loads(i.value_json) for i in rec.config.update})
        elif kind == "run":
            config.update({i.key: json.loads(i.value_json) for i in rec.run.config.update})
    return history, config


def check_openrlbenchmark_keys(offline_dir: Path, record: Any) -> None:
    """Part of test_manifest_and_wandb_offline: a --track run carries what openrlbenchmark
    reads (global_step in the history, charts/episodic_return and
    charts/avg_episodic_return, env_id / exp_name / seed in the config), and its history,
    written in openrlbenchmark's cache layout, reads back as the same episodes' scores."""
    import numpy as np

    from analysis.inputs.orb import declaration, read_cached_run, write_cached_run

    history, config = read_offline_run(offline_dir)
    m = record.manifest
    assert config["env_id"] == m["env_id"] and config["seed"] == m["seed"]
    assert config["exp_name"] == f"{m['system']}_{m['architecture']}_{m['layout']['name']}"
    steps = [row["global_step"] for row in history]
    assert steps == sorted(steps) and steps[-1] == m["summary"]["env_steps"]
    with_returns = [row for row in history if "charts/episodic_return" in row]
    assert with_returns and all("charts/avg_episodic_return" in row for row in with_returns)
    # The per-update mean of charts/episodic_return is the record's episodes, grouped.
    ep = record.episodes
    first = with_returns[0]
    ended = ep["episode_return"][ep["env_steps"] <= first["global_step"]]
    assert np.isclose(first["charts/episodic_return"], ended.mean())
    # Through openrlbenchmark's cache layout and back.
    meta = {"id": m["run_id"], "name": "ours", "state": "finished",
            "url": "offline", "project": "cleanba-bench", "entity": "me", "config": config,
            "tags": [], "path": ["me", "cleanba-bench", m["run_id"]]}
    cache = Path(offline_dir) / "orb-cache"
    run = read_cached_run(write_cached_run(cache, meta, history), declaration("paper"))
    assert run.manifest["imported"]["entity"] == "me"
    assert len(run.episodes) == len(with_returns)
