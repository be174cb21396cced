"""Folders of log files -> run records, each folder one run: TensorBoard event files and
Monitor CSV files.

TensorBoard: one episode per scalar of a tag. CleanRL logs `charts/episodic_return` (and
`charts/episodic_length`) at step=global_step in run folders
`{env_id}__{exp_name}__{seed}__{time}`, which give task, system and seed. A folder of
`events.out.tfevents.*` files is one run (a resumed run's files merged). The TFRecord
framing is read here and each event decoded with tensorboard's protobuf classes; the CRCs
are not recomputed, since tensorboard's reader does it in pure Python without TensorFlow
(20 minutes for 57 games x 5 seeds of CleanRL files).

Monitor (SB3's Monitor, gymnasium's RecordEpisodeStatistics): a Monitor file is one env's
episodes: a line `#{"t_start": ..., "env_id": ...}`, then columns r (return), l (length),
t (seconds since t_start) and any info keys. Each folder is one run, its files
(`0.monitor.csv`, `1.monitor.csv`, ...) its envs, merged by time. An episode's step is its
env's own step count times the number of envs: exact for SB3's vectorised envs, which step
every env together.
"""

from __future__ import annotations

import csv
import json
import re
import struct
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from analysis.errors import AnalysisError
from analysis.importers.build import ImportedRun, episodes_in_order
from analysis.importers.declare import (
    CLEANRL_RUN_NAME,
    LENGTH_KEY,
    RETURN_KEY,
    SEED_PATTERN,
    Declared,
    files_by_folder,
    identify,
    patterns_for,
    require_frames_per_step,
    require_library,
    run_path_facts,
)
from runrecord.words import counted

# ---------------------------------------------------------------- TensorBoard event files

EVENT_FILE_MARK = "tfevents"


def tf_records(path: Path) -> Iterator[bytes]:
    """The records of a TFRecord file (framing: uint64 length, uint32 masked CRC of the
    length, data, uint32 masked CRC of the data); a torn tail ends the iteration."""
    data = path.read_bytes()
    pos, end = 0, len(data)
    while pos + 12 <= end:
        (length,) = struct.unpack_from("<Q", data, pos)
        start = pos + 12
        if start + length + 4 > end:
            return  # torn last record: a killed writer
        yield data[start:start + length]
        pos = start + length + 4


def _scalar(value: Any) -> float:
    """A Summary.Value's number: simple_value (torch, TF1), or a scalar tensor (TF2)."""
    if value.HasField("tensor"):
        from tensorboard.util import tensor_util

        return float(np.asarray(tensor_util.make_ndarray(value.tensor)).reshape(-1)[0])
    return float(value.simple_value)


def read_event_run(run_dir: Path, files: list[Path], tag: str, length_tag: str | None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, set[str]]:
    """(steps, wall seconds since the run's start (its first event's), returns, lengths,
    the tags present) of one run folder."""
    from tensorboard.compat.proto import event_pb2

    tags = (tag,) if not length_tag else (tag, length_tag)
    marks = [t.encode() for t in tags]
    values: dict[str, list[tuple[int, float, float]]] = {t: [] for t in tags}
    starts = []
    spans: list[tuple[Path, int, float, float]] = []  # file, first step, wall range of `tag`
    for f in files:
        got: dict[str, list[tuple[int, float, float]]] = {t: [] for t in tags}
        start: float | None = None
        for raw in tf_records(f):
            if start is not None and not any(m in raw for m in marks):
                continue
            event = event_pb2.Event.FromString(raw)
            if start is None:
                start = event.wall_time
            if not event.HasField("summary"):
                continue
            for v in event.summary.value:
                if v.tag in got:
                    got[v.tag].append((int(event.step), float(event.wall_time), _scalar(v)))
        for t in tags:
            values[t] += got[t]
        if start is not None:
            starts.append(start)
        if got[tag]:
            spans.append((f, min(s for s, _, _ in got[tag]), min(w for _, w, _ in got[tag]),
                          max(w for _, w, _ in got[tag])))
    _one_event_run(run_dir, spans, tag)
    rets = sorted(values[tag], key=lambda x: (x[0], x[1]))
    steps = np.array([r[0] for r in rets], dtype=np.float64)
    t0 = min(starts) if starts else 0.0
    wall = np.array([r[1] - t0 for r in rets], dtype=np.float64)
    returns = np.array([r[2] for r in rets], dtype=np.float64)
    lengths = np.full(len(rets), np.nan)
    if length_tag:
        # Each episode's length is logged at the same step as its return, in the same order.
        at_step: dict[int, list[float]] = defaultdict(list)
        for s, _, v in sorted(values[length_tag], key=lambda x: (x[0], x[1])):
            at_step[s].append(v)
        for i, (s, _, _) in enumerate(rets):
            if at_step.get(s):
                lengths[i] = at_step[s].pop(0)
    present = {t for t in tags if values[t]}
    return steps, wall, returns, lengths, present


def _one_event_run(run_dir: Path, spans: list[tuple[Path, int, float, float]],
                        tag: str) -> None:
    """Refuse a folder whose event files are two runs, not one run resumed (whose next
    file starts after the last one stopped writing, at a later step)."""
    spans = sorted(spans, key=lambda x: x[2])
    for (a, step_a, _, end_a), (b, step_b, start_b, _) in zip(spans, spans[1:], strict=False):
        if start_b <= end_a or step_b <= step_a:
            why = ("were written at the same time" if start_b <= end_a else
                   f"the later starts again at step {step_b} (the earlier at {step_a})")
            raise AnalysisError(
                f"{run_dir}: event files {a.name} and {b.name} both log {tag!r} and {why}: "
                "two runs in one folder, not one run resumed. Put each run's files in a "
                "folder of its own (or import one of them); nothing was written")


def read_tensorboard_runs(src: Path | str, declared: Declared, *, tag: str = RETURN_KEY,
                       length_tag: str | None = LENGTH_KEY) -> list[ImportedRun]:
    """Every run folder of event files below `src`: one episode per `tag` scalar (its
    step = the logged step, frames = step x the declared frames per step)."""
    src = Path(src)
    require_library("tensorboard", "TensorBoard event files")
    fps = require_frames_per_step(declared, "logged step (event step)")
    found = files_by_folder(src, f"events.out.{EVENT_FILE_MARK}.*",
                            "TensorBoard event files (events.out.tfevents.*)")
    patterns = patterns_for(declared, [CLEANRL_RUN_NAME, SEED_PATTERN])
    runs = []
    for run_dir, files in found:
        where, facts = run_path_facts(src, run_dir, patterns)
        steps, wall, returns, lengths, present = read_event_run(run_dir, files, tag, length_tag)
        if tag not in present:
            raise AnalysisError(
                f"{where}: no scalar tagged {tag!r} in its event files; name the return tag "
                "with --tag (CleanRL: charts/episodic_return); nothing was written")
        runs.append(episodes_in_order(ImportedRun(
            **identify(declared, facts, where, len(found), "tensorboard"), env_steps=steps, frames=steps * fps, episode_return=returns, wall_time_s=wall,
            episode_length=lengths if length_tag in present else None, sources=files,
            details={"run_folder": where}, rows_read=len(returns),
            used=[f"tag {t}" for t in (tag, length_tag) if t in present]
            + [f"{counted(len(files), 'event file')}"],
            ignored=["every other tag (not decoded)"])))
    return runs


# ---------------------------------------------------------------- Monitor CSV files

MONITOR_SUFFIX = "monitor.csv"


def _env_order(path: Path) -> tuple[int, str]:
    m = re.match(r"(\d+)", path.name)
    return (int(m[1]) if m else -1, path.name)


def _env_name(path: Path) -> tuple[str, str]:
    """(prefix, env number) of a Monitor file name: SB3 names a run's files
    `<prefix><rank>.monitor.csv` (`0.monitor.csv`, `1.monitor.csv`, ...), one prefix
    for all of them."""
    m = re.fullmatch(r"(.*?)(\d*)[._-]?monitor\.csv", path.name)
    return (m[1], m[2]) if m else (path.name, "")


def _one_monitor_run(where: str, files: list[Path]) -> None:
    """Refuse a folder whose Monitor files name two runs: files of different prefixes
    (`a_0.monitor.csv`, `b_0.monitor.csv`) or two files of one env number would be merged
    as envs of one run."""
    names = [_env_name(p) for p in files]
    prefixes = sorted({prefix for prefix, _ in names})
    ranks = [rank for _, rank in names]
    if len(prefixes) > 1 or len(set(ranks)) < len(ranks):
        raise AnalysisError(
            f"{where}: its Monitor files {[p.name for p in files]} are not the envs of one "
            f"run (one run's files are <prefix><env number>.monitor.csv with one prefix; "
            f"these have prefixes {prefixes}). Put each run's files in a folder of its own; "
            "nothing was written")


def read_monitor(path: Path) -> tuple[dict, np.ndarray, np.ndarray, np.ndarray]:
    """(header, returns, lengths, end times since t_start) of one Monitor file; the
    header also holds the file's other columns (`"extra"`: info keys, not read)."""
    with open(path, newline="", encoding="utf-8") as f:
        first = f.readline()
        if not first.startswith("#"):
            raise AnalysisError(f"{path}: not a Monitor file (its first line must be "
                                '#{"t_start": ..., "env_id": ...})')
        try:
            header = json.loads(first[1:])
        except json.JSONDecodeError as e:
            raise AnalysisError(f"{path}: Monitor header is not JSON ({e})") from None
        if not isinstance(header, dict) or "t_start" not in header:
            raise AnalysisError(f"{path}: Monitor header has no t_start")
        reader = csv.DictReader(f)
        missing = [c for c in ("r", "l", "t") if c not in (reader.fieldnames or [])]
        if missing:
            raise AnalysisError(f"{path}: Monitor columns {missing} missing; it has "
                                f"{reader.fieldnames} (expected r, l, t)")
        header["extra"] = [c for c in reader.fieldnames or [] if c not in ("r", "l", "t")]
        r, length, t = [], [], []
        for i, row in enumerate(reader):
            try:
                r.append(float(row["r"]))
                length.append(float(row["l"]))
                t.append(float(row["t"]))
            except (TypeError, ValueError):
                # A run killed mid-write leaves a torn last line: drop it, refuse others.
                if f.read(1) == "":
                    break
                raise AnalysisError(f"{path}: line {i + 3} is not numbers: {row}") from None
    return header, np.array(r), np.array(length), np.array(t)


def read_monitor_runs(src: Path | str, declared: Declared) -> list[ImportedRun]:
    """Every folder of Monitor files below `src` as one run (its files: its envs)."""
    src = Path(src)
    fps = require_frames_per_step(declared, "Monitor step (a unit of l)")
    found = files_by_folder(src, f"*{MONITOR_SUFFIX}", f"Monitor files (*{MONITOR_SUFFIX})",
                            _env_order)
    patterns = patterns_for(declared, [SEED_PATTERN])
    runs = []
    for run_dir, files in found:
        where, facts = run_path_facts(src, run_dir, patterns)
        _one_monitor_run(where, files)
        parts = [read_monitor(p) for p in files]
        env_ids = {str(h.get("env_id")) for h, *_ in parts if h.get("env_id")}
        if len(env_ids) > 1:
            raise AnalysisError(f"{where}: its Monitor files name different envs "
                                f"{sorted(env_ids)}: one folder must be one run")
        t0 = min(float(h["t_start"]) for h, *_ in parts)
        n_envs = len(parts)
        cols: dict[str, list[np.ndarray]] = defaultdict(list)
        for i, (h, r, length, t) in enumerate(parts):
            cols["ret"].append(r)
            cols["len"].append(length)
            cols["steps"].append(np.cumsum(length) * n_envs)
            cols["wall"].append(float(h["t_start"]) - t0 + t)
            cols["env"].append(np.full(len(r), float(i)))
        cat = {k: np.concatenate(v) for k, v in cols.items()}
        order = np.argsort(cat["wall"], kind="stable")  # merged by time
        cat = {k: v[order] for k, v in cat.items()}
        runs.append(episodes_in_order(ImportedRun(
            **identify(declared, facts, where, len(found), "monitor", next(iter(env_ids), None)),
            env_steps=cat["steps"], frames=cat["steps"] * fps, episode_return=cat["ret"],
            wall_time_s=cat["wall"], env_index=cat["env"], episode_length=cat["len"],
            sources=files, details={"run_folder": where, "envs": n_envs},
            rows_read=int(sum(len(r) for _, r, *_ in parts)),
            used=[f"columns r, l, t of {counted(n_envs, 'file')}"],
            ignored=[f"column {c}" for c in sorted({c for h, *_ in parts for c in h["extra"]})])))
    return runs
