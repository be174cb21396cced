"""Inputs of the analysis: run records, published per-game tables, openrlbenchmark CSVs.

Run records go through `runrecord` (the only reader). Only `completed` runs enter
aggregates; every other run is listed in `RunSet.left_out` with its status and reason.
openrlbenchmark-style CSV exports are turned into in-memory `runrecord.Run`s (status
`completed`, layout name `openrlbenchmark`), so they flow through the same code.
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from analysis.errors import AnalysisError
from analysis.inputs.cache import CACHE_DIR, episode_count, load_many
from analysis.inputs.published_data import resolve_published_table
from benchenv import LEGACY_BACKEND
from runrecord import RecordError, Run, find_run_dirs, schema

DEFAULT_LAST_N = 100
NO_CACHE_ENV = "CLEANBA_ANALYSIS_NO_CACHE"
"""Set (to anything but empty): every command parses every record, as with --no-cache, and
neither reads nor writes a cache. `harness verify` recomputes claims so: a cache shipped
beside the records would otherwise answer for them."""
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


BACKEND_KEY = "env_protocol.backend"
"""The manifest key of a run's env backend (`envpool`, `ale`): group by it to compare
backends (the protocol guard then lets the backend differ, and only it)."""


def manifest_get(manifest: dict[str, Any], dotted: str) -> Any:
    """`manifest_get(m, "layout.name")` -> m["layout"]["name"] (None when absent)."""
    return lookup_dotted(manifest, dotted)[1]


def lookup_dotted(manifest: dict[str, Any], dotted: str) -> tuple[bool, Any]:
    """(whether the manifest holds the dotted key (a null value counts as held), its value
    or None); a recorded env protocol without a backend holds EnvPool's
    (benchenv.LEGACY_BACKEND)."""
    if dotted == BACKEND_KEY and isinstance(manifest.get("env_protocol"), dict):
        return True, manifest["env_protocol"].get("backend", LEGACY_BACKEND)
    value: Any = manifest
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return False, None
        value = value[part]
    return True, value


def group_key(run: Run, group_by: str | Sequence[str]) -> str:
    """The group label of a run: manifest values of the dotted keys, joined by ' / ';
    a key the run does not have (an imported run's architecture) is left out, never
    printed as None."""
    keys = [group_by] if isinstance(group_by, str) else list(group_by)
    keys = [k.strip() for key in keys for k in key.split(",") if k.strip()]
    values = [manifest_get(run.manifest, k) for k in keys]
    return " / ".join(str(v) for v in values if v is not None) or "(no " + ", ".join(keys) + ")"


def _reason(run: Run) -> str:
    err = run.manifest.get("error") or {}
    msg = err.get("message") if isinstance(err, dict) else str(err)
    if run.status == schema.RUNNING:
        return "still running, or killed without a final status"
    return f"status {run.status}" + (f": {msg}" if msg else "")


def is_seed(value: Any) -> bool:
    """A manifest seed is an integer (JSON int; not a bool, float or string)."""
    return isinstance(value, int) and not isinstance(value, bool)


def load_runs(inputs: Iterable[Path | str], *, use_cache: bool = True) -> RunSet:
    """Every run record under each input folder (a run folder, a sweep, or a results root).

    Records come from the results root's cache where current (analysis.inputs.cache;
    `use_cache=False` parses every record). Unreadable records and runs that are not `completed` (running, failed, interrupted,
    skipped) or have no finished episode are left out, with the reason.
    """
    use_cache = use_cache and not os.environ.get(NO_CACHE_ENV)
    out = RunSet()
    roots = [Path(r) for r in inputs]
    seen: set[str] = set()
    fresh: list[Path] = []
    named: list[Path] = []  # the input each run was found under
    for root in roots:
        if not root.exists():
            raise AnalysisError(f"{root}: no such folder (expected a run or sweep folder)")
        dirs = list(find_run_dirs(root, skip=(CACHE_DIR,)))  # not the cache's 100,000 files
        if not dirs:
            out.warnings.append(f"{root}: no run records (no manifest.json below it)")
        if len(roots) == 1:  # a run is listed once per input: nothing to drop
            fresh, named = dirs, [root] * len(dirs)
            break
        real = [os.path.realpath(d) for d in dirs]
        fresh += [d for d, r in zip(dirs, real, strict=True) if r not in seen]
        named += [root for r in real if r not in seen]
        seen.update(real)
    # One call for every input (a report names each run folder): each root's cache index
    # is read once.
    loaded = load_many(fresh, named, use_cache=use_cache)
    for run_dir, run in zip(fresh, loaded, strict=True):
            if isinstance(run, RecordError):
                out.left_out.append(LeftOut(run_dir.name, "unreadable", str(run), str(run_dir)))
                continue
            out.warnings += run.warnings
            if run.status != schema.COMPLETED:
                out.left_out.append(LeftOut(run.run_id, run.status, _reason(run), str(run_dir)))
            elif episode_count(run) == 0:
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
    """Read a `mean ± std` (or plain number) CSV: first column game ids, header systems.
    `path` may name a shipped table (`cleanba:main_10CPU`; analysis.inputs.published_data)."""
    path = resolve_published_table(path)
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
