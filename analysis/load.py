"""Inputs of the analysis: run records, published per-game tables, openrlbenchmark CSVs.

Run records go through `runrecord` (the only reader). Only `completed` runs enter
aggregates; every other run is listed in `RunSet.left_out` with its status and reason.
openrlbenchmark-style CSV exports are turned into in-memory `runrecord.Run`s (status
`completed`, layout name `openrlbenchmark`), so they flow through the same code.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from analysis.errors import AnalysisError
from runrecord import RecordError, Run, Table, find_run_dirs, load_run, schema

DEFAULT_LAST_N = 100
IMPORTED_PROTOCOL = {"recorded_by": "openrlbenchmark export (protocol not declared)"}
"""The env protocol given to openrlbenchmark imports, which record none."""


@dataclass
class LeftOut:
    """A run found but kept out of aggregates, and why."""

    run_id: str
    status: str
    reason: str
    run_dir: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"run_id": self.run_id, "status": self.status, "reason": self.reason,
                "run_dir": self.run_dir}


@dataclass
class RunSet:
    """Completed runs (`included`), the rest (`left_out`), and reader warnings."""

    included: list[Run] = field(default_factory=list)
    left_out: list[LeftOut] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def extend(self, other: RunSet) -> None:
        self.included += other.included
        self.left_out += other.left_out
        self.warnings += other.warnings


def manifest_get(manifest: dict[str, Any], dotted: str) -> Any:
    """`manifest_get(m, "layout.name")` -> m["layout"]["name"] (None when absent)."""
    value: Any = manifest
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def group_key(run: Run, group_by: str | Sequence[str]) -> str:
    """The group label of a run: manifest values of the dotted keys, joined by ' / '."""
    keys = [group_by] if isinstance(group_by, str) else list(group_by)
    keys = [k.strip() for key in keys for k in key.split(",") if k.strip()]
    return " / ".join(str(manifest_get(run.manifest, k)) for k in keys)


def _reason(run: Run) -> str:
    err = run.manifest.get("error") or {}
    msg = err.get("message") if isinstance(err, dict) else str(err)
    if run.status == schema.RUNNING:
        return "still running, or killed without a final status"
    return f"status {run.status}" + (f": {msg}" if msg else "")


def is_seed(value: Any) -> bool:
    """A manifest seed is an integer (JSON int; not a bool, float or string)."""
    return isinstance(value, int) and not isinstance(value, bool)


def load_runs(inputs: Iterable[Path | str]) -> RunSet:
    """Every run record under each input folder (a run folder, a sweep, or a results root).

    Unreadable records and runs that are not `completed` (running, failed, interrupted,
    skipped) or have no finished episode are left out, with the reason.
    """
    out = RunSet()
    seen: set[Path] = set()
    for root in inputs:
        root = Path(root)
        if not root.exists():
            raise AnalysisError(f"{root}: no such folder (expected a run or sweep folder)")
        dirs = list(find_run_dirs(root))
        if not dirs:
            out.warnings.append(f"{root}: no run records (no manifest.json below it)")
        for run_dir in dirs:
            if run_dir.resolve() in seen:
                continue
            seen.add(run_dir.resolve())
            try:
                run = load_run(run_dir)
            except RecordError as e:
                out.left_out.append(LeftOut(run_dir.name, "unreadable", str(e), str(run_dir)))
                continue
            out.warnings += run.warnings
            if run.status != schema.COMPLETED:
                out.left_out.append(LeftOut(run.run_id, run.status, _reason(run), str(run_dir)))
            elif len(run.episodes) == 0:
                out.left_out.append(
                    LeftOut(run.run_id, run.status, "completed but no finished episode "
                            "(episodes.csv empty)", str(run_dir))
                )
            elif not run.manifest.get("env_id"):
                out.left_out.append(LeftOut(run.run_id, run.status, "manifest has no env_id",
                                            str(run_dir)))
            elif not is_seed(run.manifest.get("seed")):
                out.left_out.append(LeftOut(
                    run.run_id, run.status, f"manifest seed {run.manifest.get('seed')!r} is not "
                    "an integer (the seed identifies the replicate; valid: e.g. 1)",
                    str(run_dir)))
            else:
                out.included.append(run)
    return out


def final_return(run: Run, last_n: int = DEFAULT_LAST_N) -> float:
    """Mean raw return of the run's last `last_n` finished episodes (by env step)."""
    ret = run.episodes["episode_return"]
    if len(ret) == 0:
        raise AnalysisError(f"run {run.run_id}: no finished episode")
    order = np.argsort(run.episodes["env_steps"], kind="stable")
    return float(np.mean(ret[order][-last_n:]))


def episode_frames(run: Run) -> np.ndarray:
    """Frames at which each episode ended (falls back to env_steps when frames is NaN)."""
    frames = run.episodes["frames"]
    if np.all(np.isnan(frames)):
        return run.episodes["env_steps"]
    return frames


# ---------------------------------------------------------------- published tables

@dataclass
class PublishedTable:
    """A published per-game table: rows games, columns systems/settings.

    mean/std: (games, columns) arrays (std NaN where the cell had no `± std`).
    """

    path: Path
    games: list[str]
    columns: list[str]
    mean: np.ndarray
    std: np.ndarray


_CELL_RE = re.compile(r"^\s*([-+0-9.eE]+)\s*(?:±|\+-|\+/-)\s*([-+0-9.eE]+)\s*$")


def _parse_cell(text: str, path: Path, game: str, column: str) -> tuple[float, float]:
    m = _CELL_RE.match(text)
    if m:
        return float(m[1]), float(m[2])
    try:
        return float(text), np.nan
    except ValueError:
        raise AnalysisError(
            f"{path}: cell ({game}, {column}) is {text!r}; expected 'mean ± std' or a number"
        ) from None


def load_published_table(path: Path | str) -> PublishedTable:
    """Read a `mean ± std` (or plain number) CSV: first column game ids, header systems."""
    path = Path(path)
    if not path.exists():
        raise AnalysisError(f"{path}: no such table")
    with open(path, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.reader(f) if r]
    if len(rows) < 2 or len(rows[0]) < 2:
        raise AnalysisError(f"{path}: expected a header row of columns and one row per game")
    columns = rows[0][1:]
    games, means, stds = [], [], []
    for r in rows[1:]:
        if len(r) != len(columns) + 1:
            raise AnalysisError(
                f"{path}: row {r[0]!r} has {len(r) - 1} cells, header has {len(columns)}"
            )
        games.append(r[0])
        cells = [_parse_cell(c, path, r[0], col) for c, col in zip(r[1:], columns, strict=True)]
        means.append([c[0] for c in cells])
        stds.append([c[1] for c in cells])
    return PublishedTable(path, games, columns, np.array(means), np.array(stds))


def runtimes_twin(path: Path | str) -> Path:
    """`main_10CPU.csv` -> `main_10CPU_runtimes.csv`."""
    path = Path(path)
    return path.with_name(f"{path.stem}_runtimes{path.suffix}")


# ---------------------------------------------------------------- openrlbenchmark CSVs

@dataclass(frozen=True)
class ColumnMap:
    """Which columns of an openrlbenchmark-style export hold what."""

    step: str = "global_step"
    episode_return: str = "charts/episodic_return"
    wall_time: str = "_runtime"


def _read_csv_columns(path: Path) -> dict[str, list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames is None:
            raise AnalysisError(f"{path}: empty CSV")
        cols: dict[str, list[str]] = {name: [] for name in reader.fieldnames}
        for row in reader:
            for name in reader.fieldnames:
                cols[name].append(row.get(name) or "")
    return cols


def load_openrlbenchmark_csv(
    path: Path | str,
    *,
    env_id: str,
    system: str,
    seed: int,
    columns: ColumnMap = ColumnMap(),
    frames_per_step: int | None = None,
    group: str = "openrlbenchmark",
) -> Run:
    """One run's exported history as an in-memory Run (status completed).

    Rows without a return (logged at other steps) are skipped. frames = step x
    `frames_per_step` (default 4 for Atari ids, else 1), because CleanRL/Cleanba log
    global_step in agent steps.
    """
    path = Path(path)
    if not path.exists():
        raise AnalysisError(f"{path}: no such CSV")
    cols = _read_csv_columns(path)
    missing = [c for c in (columns.step, columns.episode_return) if c not in cols]
    if missing:
        raise AnalysisError(
            f"{path}: missing column(s) {missing}; it has {list(cols)}. Map them with "
            "--step-column / --return-column / --time-column"
        )

    def num(name: str) -> np.ndarray:
        if name not in cols:
            return np.full(len(cols[columns.step]), np.nan)
        return np.array([float(v) if v not in ("", "nan", "NaN") else np.nan for v in cols[name]])

    steps, returns, wall = num(columns.step), num(columns.episode_return), num(columns.wall_time)
    keep = ~np.isnan(returns) & ~np.isnan(steps)
    order = np.argsort(steps[keep], kind="stable")
    steps, returns, wall = steps[keep][order], returns[keep][order], wall[keep][order]
    if frames_per_step is None:
        from analysis.normalize import ATARI_RANDOM_HUMAN, atari_env_id

        frames_per_step = 4 if atari_env_id(env_id) in ATARI_RANDOM_HUMAN else 1
    n = len(steps)
    episodes = Table(
        {
            "env_steps": steps,
            "frames": steps * frames_per_step,
            "wall_time_s": wall,
            "env_index": np.zeros(n),
            "episode_return": returns,
            "episode_length": np.full(n, np.nan),
        },
        n,
    )
    updates = Table({c: np.array([], dtype=np.float64) for c in schema.UPDATE_COLUMNS}, 0)
    manifest = {
        "schema_version": schema.SCHEMA_VERSION,
        "run_id": f"orb-{system}-{env_id}-{seed}",
        "system": system,
        "architecture": None,
        "env_id": env_id,
        "seed": seed,
        "layout": {"name": group},
        # Exports record no env protocol. They are marked as one shared, undeclared
        # protocol: imports pool with each other, but the protocol guard refuses to
        # compare them with records that declare theirs (analysis.protocol).
        "env_protocol": dict(IMPORTED_PROTOCOL),
        "status": schema.COMPLETED,
        "source": str(path),
        "summary": {"frames": float(steps[-1] * frames_per_step) if n else None,
                    "wall_time_s": float(np.nanmax(wall)) if n and not np.all(np.isnan(wall))
                    else None},
    }
    return Run(path.parent, manifest, episodes, updates, [])


def load_openrlbenchmark_dir(
    root: Path | str, *, columns: ColumnMap = ColumnMap(), frames_per_step: int | None = None,
    declared: Any = None,
) -> RunSet:
    """Every run of openrlbenchmark's cache below `root` (`run.json` + `run_df.csv`, read
    by analysis.orb with provenance and the `declared` protocol/budget) and every
    `<system>/<env_id>/<seed>.csv` export (no provenance, protocol unknown)."""
    from analysis.orb import RUN_DF, Declaration, load_orb_cache

    root = Path(root)
    out = load_orb_cache(root, declared or Declaration(), columns=columns,
                         frames_per_step=frames_per_step)
    out.warnings = [w for w in out.warnings if "not an openrlbenchmark cache" not in w]
    for path in sorted(root.rglob("*.csv")):
        if path.name == RUN_DF and path.with_name("run.json").exists():
            continue
        rel = path.relative_to(root).parts
        if len(rel) < 3:
            out.warnings.append(f"{path}: not <system>/<env_id>/<seed>.csv; skipped")
            continue
        system, env_id = rel[-3], rel[-2]
        try:
            digits = re.sub(r"\D", "", path.stem)
            if not digits:  # never guess a seed: it identifies the replicate
                out.left_out.append(LeftOut(
                    path.stem, "unreadable", f"{path}: no seed in the file name (expected "
                    "<system>/<env_id>/<seed>.csv, e.g. 1.csv)", str(path)))
                continue
            seed = int(digits)
            out.included.append(load_openrlbenchmark_csv(
                path, env_id=env_id, system=system, seed=seed, columns=columns,
                frames_per_step=frames_per_step))
        except (KeyError, ValueError) as e:
            out.left_out.append(LeftOut(path.stem, "unreadable", f"{path}: {e}", str(path)))
    return out
