"""TensorBoard event files -> run records, one episode per scalar of a tag.

CleanRL logs `charts/episodic_return` (and `charts/episodic_length`) at step=global_step
in run folders `{env_id}__{exp_name}__{seed}__{time}`, which give task, system and seed.
A folder of `events.out.tfevents.*` files is one run (a resumed run's files merged).
The TFRecord framing is read here and each event decoded with tensorboard's protobuf
classes; the CRCs are not recomputed, since tensorboard's reader does it in pure Python
without TensorFlow (20 minutes for 57 games x 5 seeds of CleanRL files).
"""

from __future__ import annotations

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


def read_scalars(path: Path, tags: tuple[str, ...]) -> tuple[dict[str, list[tuple[int, float, float]]],
                                                               float | None]:
    """{tag: [(step, wall_time, value), ...]} of the given tags in one event file, and the
    file's first wall time (its start)."""
    from tensorboard.compat.proto import event_pb2

    marks = [t.encode() for t in tags]
    out: dict[str, list[tuple[int, float, float]]] = {t: [] for t in tags}
    start: float | None = None
    for raw in tf_records(path):
        if start is not None and not any(m in raw for m in marks):
            continue
        event = event_pb2.Event.FromString(raw)
        if start is None:
            start = event.wall_time
        if not event.HasField("summary"):
            continue
        for v in event.summary.value:
            if v.tag in out:
                out[v.tag].append((int(event.step), float(event.wall_time), _scalar(v)))
    return out, start


def read_event_run(run_dir: Path, files: list[Path], tag: str, length_tag: str | None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, set[str]]:
    """(steps, wall seconds since the run's start, returns, lengths) of one run folder."""
    tags = (tag,) if not length_tag else (tag, length_tag)
    values: dict[str, list[tuple[int, float, float]]] = {t: [] for t in tags}
    starts = []
    spans: list[tuple[Path, int, float, float]] = []  # file, first step, wall range of `tag`
    for f in files:
        got, start = read_scalars(f, tags)
        for t in tags:
            values[t] += got[t]
        if start is not None:
            starts.append(start)
        if got[tag]:
            spans.append((f, min(s for s, _, _ in got[tag]), min(w for _, w, _ in got[tag]),
                          max(w for _, w, _ in got[tag])))
    _one_run_per_folder(run_dir, spans, tag)
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


def _one_run_per_folder(run_dir: Path, spans: list[tuple[Path, int, float, float]],
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
