"""Weights & Biases runs -> run records: offline run folders, and history CSV exports.

An offline run (`wandb/offline-run-*/run-<id>.wandb`) is wandb's transaction log: 32 KiB
blocks of protobuf `Record`s. wandb 0.31 has no Python reader for it (its Go core reads
it), so the framing is read here, checksums verified, and each record decoded with
`wandb.proto.wandb_internal_pb2`. A run without an exit record or with a non-zero exit
code is left out, with the reason. A history CSV export is one run's history as a table.
"""

from __future__ import annotations

import csv
import json
import struct
import zlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from analysis.errors import AnalysisError
from analysis.importers.build import ImportedRun, episodes_in_order
from analysis.importers.declare import (
    CLEANRL_RUN_NAME,
    RETURN_KEY,
    RUNTIME_KEY,
    SEED_PATTERN,
    STEP_KEY,
    Declared,
    config_value,
    find_files,
    identify,
    int_seed,
    path_facts,
    patterns_for,
    require_frames_per_step,
    require_library,
    run_path_facts,
)
from runrecord.words import counted

BLOCK = 32768
HEADER = struct.Struct("<4sHB")  # ":W&B", magic 0xBEE1, version 0
RECORD = struct.Struct("<IHB")  # crc32 of type byte + data, data length, type
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
MAGIC = 0xBEE1


def log_records(path: Path) -> Iterator[bytes]:
    """The records of a wandb transaction log (`run-<id>.wandb`), reassembled across
    blocks; a torn tail (a killed writer) ends the iteration."""
    data = path.read_bytes()
    if len(data) < HEADER.size:
        raise AnalysisError(f"{path}: too short for a wandb log")
    if not data.strip(b"\0"):
        return  # created, nothing flushed yet: a run starting or killed at once
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


HISTORY_FIELD, SUMMARY_FIELD = 2, 3  # Record's field numbers (wandb_internal.proto)


def _field_of(raw: bytes) -> int | None:
    """The field number of a serialized Record's first field after `num` (field 1): its
    record type, as wandb writes fields in number order; None when it cannot tell."""
    i = 0
    if raw[:1] == b"\x08":  # num: skip its varint
        i = 1
        while i < len(raw) and raw[i] & 0x80:
            i += 1
        i += 1
    if i >= len(raw) or raw[i] & 0x80:
        return None
    return raw[i] >> 3


def read_offline_run(path: Path, only_with: str | None = None) -> dict[str, Any]:
    """{run_id, project, config, history: [dict], exit_code (None: no exit record)} of
    one `run-<id>.wandb` log; `only_with`: keep only the history rows that hold this key
    (the others' values are never decoded: most rows of a CleanRL run are losses)."""
    from wandb.proto import wandb_internal_pb2 as pb

    out: dict[str, Any] = {"run_id": None, "project": None, "config": {}, "history": [],
                           "exit_code": None, "display_name": None}
    # The key's last part is in the bytes of every row that holds it (nested or not).
    mark = None if only_with is None else only_with.split("/")[-1].encode()
    for raw in log_records(path):
        field = _field_of(raw)
        if field == SUMMARY_FIELD or (mark is not None and mark not in raw
                                      and field == HISTORY_FIELD):
            continue  # never decoded: half a run's records are summary updates
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
            items = rec.history.item
            if only_with is None or any(_item_key(i) == only_with for i in items):
                out["history"].append({_item_key(i): _item_value(i) for i in items})
        elif kind == "exit":
            out["exit_code"] = int(rec.exit.exit_code)
    return out


def read_wandb_offline_runs(src: Path | str, declared: Declared, *, metric: str = RETURN_KEY,
                         step: str = STEP_KEY, config_task: str = "env_id",
                         config_seed: str = "seed", config_system: str = "exp_name",
                         ) -> tuple[list[ImportedRun], list[str]]:
    """Every finished offline run (`run-*.wandb`) below `src`. Task, seed and system come
    from the flags, else the path, else the run's config (keys config_task, ...).
    Returns (runs, why each unfinished run was left out)."""
    src = Path(src)
    require_library("wandb", "W&B offline runs")
    fps = require_frames_per_step(declared, f"{step!r} step")
    logs = find_files(src, "run-*.wandb", "wandb offline run (wandb/offline-run-*/run-*.wandb)")
    patterns = patterns_for(declared, [SEED_PATTERN])
    runs, left_out = [], []
    for log in logs:
        where, facts = run_path_facts(src, log.parent, patterns)
        run = read_offline_run(log, only_with=metric)
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
        runtime = np.array([float(r.get(RUNTIME_KEY, np.nan)) for r in rows])
        read_keys = {metric, step, RUNTIME_KEY}
        other = sorted({k for r in rows for k in r} - read_keys)
        cfg_seed = config_value(cfg, config_seed)
        seed = None if facts.seed is not None or cfg_seed is None else int_seed(cfg_seed, where)
        runs.append(episodes_in_order(ImportedRun(
            **identify(declared, facts, where, len(logs), "wandb", config_value(cfg, config_task),
                       seed, config_value(cfg, config_system)), env_steps=steps, frames=steps * fps,
            episode_return=np.array([float(r[metric]) for r in rows]), wall_time_s=runtime,
            sources=[log], details={"wandb_run_id": run["run_id"], "project": run["project"],
                                    "name": run["display_name"], "run_folder": where},
            rows_read=len(rows),
            used=[f"key {k}" for k in (metric, step, RUNTIME_KEY)]
            + [f"config {k}" for k, given in ((config_task, declared.task or facts.task),
                                              (config_seed, declared.seed is not None
                                               or facts.seed is not None),
                                              (config_system, declared.system or facts.system))
               if k and not given and config_value(cfg, k) is not None],
            ignored=[f"key {k}" for k in other])))
    return runs, left_out


PANEL_SEPARATOR = " - "
"""W&B's panel export (a chart's "Export CSV") names its columns `<run name> - <metric>`,
with `__MIN` / `__MAX` twins, one row per x-axis value."""


def read_csv_columns(path: Path) -> dict[str, list[str]]:
    """{column: its cells} of a CSV file with a header row (a short row padded with "")."""
    if not path.is_file():
        raise AnalysisError(f"{path}: no such CSV")
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if not header:
            raise AnalysisError(f"{path}: empty CSV")
        cols: list[list[str]] = [[] for _ in header]
        for row in reader:
            if row:
                for i, col in enumerate(cols):
                    col.append(row[i] if i < len(row) else "")
    return dict(zip(header, cols, strict=True))


def float_column(cols: Mapping[str, Sequence[str]], name: str, where: Path | str
                 ) -> np.ndarray:
    """Column `name`'s cells as floats, an empty cell as NaN; AnalysisError on another
    non-number."""
    try:
        return np.array([float(c) if c.strip() else np.nan for c in cols[name]],
                        dtype=np.float64)
    except ValueError as e:
        raise AnalysisError(f"{where}: column {name!r} holds a non-number ({e})") from None


def export_history(cols: Mapping[str, Sequence[str]], where: Path | str, step: str,
                   metric: str, time: str, *, flags: str
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(steps, returns, seconds: NaN without a time column) of one run's history export
    (`run.history()` / `scan_history()` written by pandas: a `wandb-csv` import's file and
    openrlbenchmark's run_df.csv alike). Refused: a missing step or return column, a
    non-number, and steps that go back between rows with a return: the file then holds
    several runs' histories one after another (e.g. a concatenation of run.history()
    frames), which would be merged into one run. Several returns at one step are one run
    (CleanRL logs each env's episodes at the step they end). `flags`: the calling command's
    flags that name the step and return columns, for the missing-column hint."""
    missing = [c for c in (step, metric) if c not in cols]
    if missing:
        raise AnalysisError(f"{where}: missing column(s) {missing}; it has {list(cols)}. "
                            f"Name the step and return columns with {flags}")
    steps, returns = float_column(cols, step, where), float_column(cols, metric, where)
    logged = steps[np.isfinite(returns) & np.isfinite(steps)]
    back = np.flatnonzero(np.diff(logged) < 0)
    if len(back):
        i = int(back[0])
        raise AnalysisError(
            f"{where}: {step!r} goes back from {logged[i]:g} to {logged[i + 1]:g} between two "
            f"rows with {metric!r}: the file holds several runs' histories one after "
            "another, which would be merged into one run. Export each run to a file of its "
            "own; nothing was written")
    return steps, returns, (float_column(cols, time, where) if time in cols
                            else np.full(len(steps), np.nan))


def read_wandb_csv_runs(src: Path | str, declared: Declared, *, metric: str = RETURN_KEY,
                        step: str = STEP_KEY, time: str = RUNTIME_KEY) -> list[ImportedRun]:
    """Every W&B CSV export below `src` (or the one file `src`): a run's history export
    (columns = history keys: one run per file; task and seed from --task/--seed or
    --path-pattern, default a seed_N in the path), or a chart's panel export (columns
    `<run name> - <metric>`: one run per column; task, seed and system from the run name,
    e.g. CleanRL's {env_id}__{exp_name}__{seed}__{time}, or --path-pattern over
    `<file>/<run name>`). The step column must be env steps (`--step`), not W&B's `Step`."""
    src = Path(src)
    fps = require_frames_per_step(declared, f"{step!r} step")
    files = find_files(src, "*.csv", "W&B history CSV export")
    patterns = patterns_for(declared, [CLEANRL_RUN_NAME, SEED_PATTERN])
    base = src if src.is_dir() else src.parent
    runs = []
    for f in files:
        where = f.resolve().relative_to(base.resolve()).as_posix()
        cols = read_csv_columns(f)
        header = list(cols)
        suffix = PANEL_SEPARATOR + metric
        panel = [c for c in header if c.endswith(suffix)]
        if metric not in header and panel:
            runs += _panel_runs(f, where, cols, panel, suffix, declared, patterns, step, fps,
                                n_files=len(files))
            continue
        steps, returns, wall = export_history(cols, where, step, metric, time,
                                             flags="--step and --metric")
        runs.append(episodes_in_order(ImportedRun(
            **identify(declared, path_facts(where, patterns), where, len(files), "wandb"),
            env_steps=steps, frames=steps * fps, episode_return=returns,
            wall_time_s=wall, sources=[f], details={"file": where},
            rows_read=int(np.sum(np.isfinite(steps + returns))),
            used=[f"column {c}" for c in (step, metric, time) if c in header],
            ignored=[f"column {c}" for c in header if c not in (step, metric, time)])))
    return runs


def _panel_runs(f: Path, where: str, cols: dict[str, list[str]], panel: list[str],
                suffix: str, declared: Declared, patterns: list[str], step: str, fps: float,
                n_files: int) -> list[ImportedRun]:
    """One run per `<run name> - <metric>` column of a panel export."""
    if step not in cols:
        raise AnalysisError(
            f"{where}: a W&B panel export without a {step!r} column (its x axis is "
            f"{next(iter(cols))!r}). Export the chart with {step!r} as its x axis (W&B's Step counts "
            "log calls, not env steps), or name the column with --step")
    declared.notes.append(
        f"{where}: a chart's export holds the points the chart drew, and W&B samples long "
        "histories for charts: prefer the runs' history exports or offline runs, which hold "
        "every episode")
    steps = float_column(cols, step, where)
    runs = []
    for col in panel:
        name = col[: -len(suffix)]
        at = f"{where}/{name}"
        facts = path_facts(at, patterns)
        values = float_column(cols, col, where)
        keep = np.isfinite(values)
        runs.append(episodes_in_order(ImportedRun(
            **identify(declared, facts, at, n_files * len(panel), "wandb"),
            env_steps=steps[keep], frames=steps[keep] * fps, episode_return=values[keep],
            wall_time_s=np.full(int(keep.sum()), np.nan), sources=[f],
            details={"file": where, "run_name": name}, rows_read=int(keep.sum()),
            used=[f"column {step}", f"column {col}"],
            ignored=[f"{counted(len(cols) - 2, 'other column')} (other runs, __MIN/__MAX)"])))
    return runs
