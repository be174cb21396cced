"""Weights & Biases runs -> run records: offline run folders, and history CSV exports.

An offline run folder (`wandb/offline-run-<time>-<id>/`, from `wandb.init(mode="offline")`
or WANDB_MODE=offline) keeps everything in `run-<id>.wandb`: wandb's transaction log, a
LevelDB-style log of 32 KiB blocks whose records are wandb's own protobuf `Record`s
(run, config, history, exit, ...). wandb 0.31 no longer ships a Python reader for it (its
Go core reads it), so the log framing is read here (checksums verified, as wandb's
datastore did) and every record is decoded with wandb's protobuf classes
(`wandb.proto.wandb_internal_pb2`). A run without an exit record (killed) or with a
non-zero exit code is left out, with the reason.

A history CSV export is one run's history as a table (run.history() or
run.scan_history() written with pandas, as openrlbenchmark caches it): read with
analysis.inputs.orb's reader; task and seed come from the path or flags.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from analysis.errors import AnalysisError
from analysis.importers.build import IMPORTED_LAYOUT_PREFIX, ImportedRun, episodes_in_order
from analysis.importers.declare import (
    SEED_PATTERN,
    Declared,
    path_facts,
    patterns_for,
    require_frames_per_step,
    resolve_seed,
    resolve_task,
    run_path_facts,
)
from analysis.inputs.orb import ColumnMap, load_openrlbenchmark_csv

BLOCK = 32768
HEADER = struct.Struct("<4sHB")  # ":W&B", magic 0xBEE1, version 0
RECORD = struct.Struct("<IHB")  # crc32 of type byte + data, data length, type
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
MAGIC = 0xBEE1
RETURN_KEY = "charts/episodic_return"
STEP_KEY = "global_step"


def log_records(path: Path) -> Iterator[bytes]:
    """The records of a wandb transaction log (`run-<id>.wandb`), reassembled across
    blocks; a torn tail (a killed writer) ends the iteration."""
    data = path.read_bytes()
    if len(data) < HEADER.size:
        raise AnalysisError(f"{path}: too short for a wandb log")
    ident, magic, version = HEADER.unpack_from(data, 0)
    if ident != b":W&B" or magic != MAGIC or version != 0:
        raise AnalysisError(f"{path}: not a wandb transaction log (header {data[:7]!r})")
    pos, pending = HEADER.size, b""
    while pos + RECORD.size <= len(data):
        left = BLOCK - pos % BLOCK
        if left < RECORD.size:  # the block's tail is padding
            pos += left
            continue
        crc, length, kind = RECORD.unpack_from(data, pos)
        if kind == 0 and length == 0:
            pos += left
            continue
        chunk = data[pos + RECORD.size: pos + RECORD.size + length]
        if len(chunk) < length or zlib.crc32(chunk, zlib.crc32(bytes([kind]))) != crc:
            return  # torn or corrupt tail: what came before stands
        pos += RECORD.size + length
        if kind == FULL:
            yield chunk
        elif kind == FIRST:
            pending = chunk
        elif kind == MIDDLE:
            pending += chunk
        elif kind == LAST:
            yield pending + chunk
            pending = b""


def _item_key(item: Any) -> str:
    return item.key or "/".join(item.nested_key)


def _item_value(item: Any) -> Any:
    which = item.WhichOneof("value")
    if which == "json":
        return json.loads(item.json)
    if which is not None and which != "none":
        return getattr(item, which)
    return json.loads(item.value_json) if item.value_json else None


def read_offline_run(path: Path) -> dict[str, Any]:
    """{run_id, project, config, history: [dict], exit_code (None: no exit record)} of
    one `run-<id>.wandb` log."""
    from wandb.proto import wandb_internal_pb2 as pb

    out: dict[str, Any] = {"run_id": None, "project": None, "config": {}, "history": [],
                           "exit_code": None, "display_name": None}
    for raw in log_records(path):
        rec = pb.Record.FromString(raw)  # type: ignore[attr-defined]
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            out["run_id"], out["project"] = rec.run.run_id, rec.run.project
            out["display_name"] = rec.run.display_name or None
            for c in rec.run.config.update:
                out["config"][_item_key(c)] = json.loads(c.value_json)
        elif kind == "config":
            for c in rec.config.update:
                out["config"][_item_key(c)] = json.loads(c.value_json)
        elif kind == "history":
            out["history"].append({_item_key(i): _item_value(i) for i in rec.history.item})
        elif kind == "exit":
            out["exit_code"] = int(rec.exit.exit_code)
    return out


def _config_value(config: dict[str, Any], key: str | None) -> Any:
    if not key:
        return None
    value = config.get(key)
    if isinstance(value, dict) and "value" in value:
        value = value["value"]
    return value


def _int_or_none(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not (isinstance(value, int) or (
            isinstance(value, str) and value.strip().lstrip("-").isdigit())):
        raise AnalysisError(f"{where}: config seed {value!r} is not an integer")
    return int(value)


def read_wandb_offline_runs(src: Path | str, declared: Declared, *, metric: str = RETURN_KEY,
                         step: str = STEP_KEY, config_task: str = "env_id",
                         config_seed: str = "seed", config_system: str = "exp_name",
                         ) -> tuple[list[ImportedRun], list[str]]:
    """Every finished offline run (`run-*.wandb`) below `src`. Task, seed and system come
    from the flags, else the path, else the run's config (keys config_task, ...).
    Returns (runs, why each unfinished run was left out)."""
    src = Path(src)
    fps = require_frames_per_step(declared, f"{step!r} step")
    logs = sorted(src.rglob("run-*.wandb")) if src.is_dir() else [src]
    if not logs or not all(p.is_file() for p in logs):
        raise AnalysisError(f"{src}: no wandb offline run (wandb/offline-run-*/run-*.wandb) "
                            "below it")
    patterns = patterns_for(declared, [SEED_PATTERN])
    runs, left_out = [], []
    for log in logs:
        where, facts = run_path_facts(src, log.parent, patterns)
        run = read_offline_run(log)
        if run["exit_code"] != 0:
            left_out.append(f"{where}: left out: " + (
                "no exit record (still running, or killed)" if run["exit_code"] is None
                else f"exit code {run['exit_code']}"))
            continue
        cfg = run["config"]
        rows = [r for r in run["history"] if r.get(metric) is not None]
        if rows and any(r.get(step) is None for r in rows):
            have = sorted({k for r in run["history"] for k in r})
            raise AnalysisError(f"{where}: history rows with {metric!r} lack {step!r}; name "
                                f"the step key with --step (keys: {have})")
        steps = np.array([float(r[step]) for r in rows])
        runtime = np.array([float(r.get("_runtime", np.nan)) for r in rows])
        task = facts.task or _config_value(cfg, config_task)
        seed = facts.seed if facts.seed is not None else _int_or_none(
            _config_value(cfg, config_seed), where)
        runs.append(episodes_in_order(ImportedRun(
            env_id=resolve_task(declared, None if task is None else str(task), where),
            seed=resolve_seed(declared, seed, where, len(logs)),
            system=str(declared.system or facts.system or _config_value(cfg, config_system)
                       or "wandb"),
            layout=declared.layout or facts.layout or f"{IMPORTED_LAYOUT_PREFIX}wandb",
            env_steps=steps, frames=steps * fps,
            episode_return=np.array([float(r[metric]) for r in rows]), wall_time_s=runtime,
            sources=[log], details={"wandb_run_id": run["run_id"], "project": run["project"],
                                    "name": run["display_name"], "run_folder": where})))
    return runs, left_out


def read_wandb_csv_runs(src: Path | str, declared: Declared, *, metric: str = RETURN_KEY,
                     step: str = STEP_KEY, time: str = "_runtime") -> list[ImportedRun]:
    """Every history CSV export below `src` (or the one file `src`) as one run; task and
    seed from --task/--seed or --path-pattern (default: a seed_N in the path)."""
    src = Path(src)
    fps = require_frames_per_step(declared, f"{step!r} step")
    files = sorted(src.rglob("*.csv")) if src.is_dir() else [src]
    if not files or not all(p.is_file() for p in files):
        raise AnalysisError(f"{src}: no W&B history CSV export below it")
    patterns = patterns_for(declared, [SEED_PATTERN])
    base = src if src.is_dir() else src.parent
    runs = []
    for f in files:
        where = f.resolve().relative_to(base.resolve()).as_posix()
        facts = path_facts(where, patterns)
        task = resolve_task(declared, facts.task, where)
        seed = resolve_seed(declared, facts.seed, where, len(files))
        run = load_openrlbenchmark_csv(f, env_id=task, system="wandb", seed=seed,
                                       columns=ColumnMap(step, metric, time),
                                       frames_per_step=1)
        ep = run.episodes
        steps = np.asarray(ep["env_steps"], dtype=np.float64)
        runs.append(episodes_in_order(ImportedRun(
            env_id=task, seed=seed, system=declared.system or facts.system or "wandb",
            layout=declared.layout or facts.layout or f"{IMPORTED_LAYOUT_PREFIX}wandb",
            env_steps=steps, frames=steps * fps,
            episode_return=np.asarray(ep["episode_return"], dtype=np.float64),
            wall_time_s=np.asarray(ep["wall_time_s"], dtype=np.float64), sources=[f],
            details={"file": where})))
    return runs
