"""Monitor CSV files (SB3's Monitor, gymnasium's RecordEpisodeStatistics) -> run records.

A Monitor file is one env's episodes: a line `#{"t_start": ..., "env_id": ...}`, then
columns r (return), l (length), t (seconds since t_start) and any info keys. Each folder
is one run, its files (`0.monitor.csv`, `1.monitor.csv`, ...) its envs, merged by time.
An episode's step is its env's own step count times the number of envs: exact for SB3's
vectorised envs, which step every env together.
"""

from __future__ import annotations

import csv
import json
import re
from collections import defaultdict
from pathlib import Path

import numpy as np

from analysis.errors import AnalysisError
from analysis.importers.build import ImportedRun, episodes_in_order
from analysis.importers.declare import (
    SEED_PATTERN,
    Declared,
    files_by_folder,
    identify,
    patterns_for,
    require_frames_per_step,
    run_path_facts,
)
from runrecord.words import counted

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


def _one_run_per_folder(where: str, files: list[Path]) -> None:
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
        _one_run_per_folder(where, files)
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
