"""Imported runs -> run records: shape checks, provenance, and the one writer of them.

Every importer reads its files into `ImportedRun`s; `write_records` checks the whole
import and writes nothing when a check fails. `write_planned` writes each run with
`runrecord.RunWriter` (the writer our trainers use), for file imports and orb-import alike.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from analysis.errors import AnalysisError
from analysis.importers.declare import MAX_SEED_VALUES, Declared
from runrecord import Run, RunWriter, schema
from runrecord.ids import file_digest
from runrecord.ids import run_id as definition_id
from runrecord.provenance import collect


@dataclass
class ImportedRun:
    """One run read from another tool's files, before it is written as a record."""

    env_id: str
    seed: int
    system: str
    layout: str
    env_steps: np.ndarray  # agent steps when each episode ended (as logged)
    frames: np.ndarray
    episode_return: np.ndarray
    wall_time_s: np.ndarray
    sources: list[Path]  # the files it was read from
    env_index: np.ndarray | None = None
    episode_length: np.ndarray | None = None
    details: dict[str, Any] = field(default_factory=dict)  # what the format adds (tag, ...)
    # What the import says of each run: so that a column or tag it did not read is seen.
    rows_read: int | None = None  # rows, scalars or history rows read for it
    used: list[str] = field(default_factory=list)  # columns, tags, keys, files
    ignored: list[str] = field(default_factory=list)

    def read_line(self) -> str:
        """`<system> / <layout> on <task>, seed <n>: R rows read, E episodes written;
        used ...; ignored ...`."""
        rows = "" if self.rows_read is None else f"{self.rows_read} rows read, "
        return (f"{self.system} / {self.layout} on {self.env_id}, seed {self.seed}: {rows}"
                f"{len(self.episode_return)} episodes written; used: "
                f"{', '.join(self.used) or '-'}; ignored: {', '.join(self.ignored) or 'none'}")

    def episode_columns(self) -> dict[str, np.ndarray]:
        """Every column of episodes.csv (env 0 and unknown lengths where not read)."""
        n = len(self.episode_return)
        return {"env_steps": self.env_steps, "frames": self.frames,
                "wall_time_s": self.wall_time_s,
                "env_index": self.env_index if self.env_index is not None else np.zeros(n),
                "episode_return": self.episode_return,
                "episode_length": (self.episode_length if self.episode_length is not None
                                   else np.full(n, np.nan))}

    def key(self) -> tuple[str, str, str, int]:
        return (self.system, self.layout, self.env_id, self.seed)

    def where(self, src: Path) -> str:
        return ", ".join(_rel(p, src) for p in self.sources)


def episodes_in_order(run: ImportedRun) -> ImportedRun:
    """The run with episodes sorted by step (stable), NaN returns dropped."""
    keep = np.isfinite(run.episode_return) & np.isfinite(run.env_steps)
    order = np.argsort(run.env_steps[keep], kind="stable")

    def pick(a: np.ndarray | None) -> np.ndarray | None:
        return None if a is None else np.asarray(a, dtype=np.float64)[keep][order]

    run.env_steps, run.frames = pick(run.env_steps), pick(run.frames)  # type: ignore[assignment]
    run.episode_return, run.wall_time_s = pick(run.episode_return), pick(run.wall_time_s)  # type: ignore[assignment]
    run.env_index, run.episode_length = pick(run.env_index), pick(run.episode_length)
    return run


def _rel(path: Path, src: Path) -> str:
    try:
        return path.resolve().relative_to(src.resolve()).as_posix() or "."
    except ValueError:
        return path.name


# ---------------------------------------------------------------- shape checks

def check_shape(runs: Sequence[ImportedRun], src: Path, declared: Declared) -> list[str]:
    """Refuse an import that cannot be a set of seeds (no run or episode, a negative or
    repeated seed, more than MAX_SEED_VALUES seeds of one task unless allowed); return
    warnings for odd shapes (every episode of a run ending at one step)."""
    if not runs:
        raise AnalysisError(f"{src}: no run found to import")
    warnings: list[str] = []
    seen: dict[tuple[str, str, str, int], ImportedRun] = {}
    for r in runs:
        where = r.where(src)
        if len(r.episode_return) == 0:
            raise AnalysisError(f"{where}: no episode with a return (check the column/tag "
                                "names; nothing was written)")
        if r.seed < 0:
            raise AnalysisError(f"{where}: seed {r.seed} < 0; seeds are integers >= 0")
        if r.key() in seen:
            other = seen[r.key()].where(src)
            raise AnalysisError(
                f"two runs of {r.system} on {r.env_id} with seed {r.seed} (layout {r.layout}): "
                f"{other} and {where}. One seed is one run: give each run its own seed (or "
                "--layout to keep two settings apart); nothing was written")
        seen[r.key()] = r
        if len(r.episode_return) > 1 and np.all(r.env_steps == r.env_steps[0]):
            warnings.append(
                f"{where}: all {len(r.episode_return)} episodes of {r.env_id} seed {r.seed} "
                f"end at one step ({r.env_steps[0]:g}): the run has no learning curve (AUC and "
                "curves are flat); if these rows are seeds, name the seed column")
    per_task = Counter((r.system, r.layout, r.env_id) for r in runs)
    (system, layout, task), n = per_task.most_common(1)[0]
    if n > MAX_SEED_VALUES and not declared.allow_many_seeds:
        raise AnalysisError(
            f"{n} seeds of {system} on {task} (layout {layout}): more than "
            f"{MAX_SEED_VALUES} looks like episodes or steps read as seeds, which would "
            "shrink every confidence interval. Check the seed column/pattern, or pass "
            "--allow-many-seeds if they really are seeds; nothing was written")
    return warnings


# ---------------------------------------------------------------- records

def _episode_cell(v: float) -> Any:
    """An episodes.csv value: NaN as an empty cell, an integral value as an integer."""
    if math.isnan(v):
        return None
    return int(v) if v.is_integer() and abs(v) < 2**53 else v


def _episode_rows(columns: Mapping[str, np.ndarray]) -> list[dict[str, Any]]:
    """Rows of episodes.csv (_episode_cell's cells)."""
    lists = {c: np.asarray(columns[c], dtype=np.float64).tolist()
             for c in schema.EPISODE_COLUMNS}
    n = len(lists["episode_return"])
    return [{c: _episode_cell(lists[c][i]) for c in schema.EPISODE_COLUMNS} for i in range(n)]


def episode_summary(columns: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """A record's `summary` of its episodes: the last step, frame and time reached."""
    def last(name: str) -> float | None:
        a = np.asarray(columns[name], dtype=np.float64)
        finite = a[np.isfinite(a)]
        return float(finite.max()) if len(finite) else None

    return {"env_steps": last("env_steps"), "frames": last("frames"),
            "wall_time_s": last("wall_time_s"), "mean_sps": None, "updates": 0,
            "episodes": int(len(columns["episode_return"]))}


@dataclass
class ImportResult:
    written: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)  # imported before, same source
    warnings: list[str] = field(default_factory=list)
    read: dict[Path, str] = field(default_factory=dict)  # run folder -> ImportedRun.read_line

    def lines(self) -> list[str]:
        def with_read(what: str, p: Path) -> list[str]:
            return [f"{what} {p}", *([f"  {self.read[p]}"] if p in self.read else [])]

        return ([x for p in self.written for x in with_read("wrote", p)]
                + [x for p in self.unchanged
                   for x in with_read("already imported (same files):", p)])


@dataclass
class RecordPlan:
    """One imported run, ready to be written as a record."""

    run_dir: Path
    manifest: dict[str, Any]  # run_id, system, env_id, seed, layout name, hyperparameters,
    # env_protocol, imported; the writer adds sweep, provenance, status, times, summary
    episodes: Mapping[str, np.ndarray]  # every column of schema.EPISODE_COLUMNS
    same_import: dict[str, Any]  # what `imported` of an earlier record in run_dir must
    # hold for it to be this import (kept as it is); anything else is refused
    source: str  # names what was imported, in a refusal
    read_line: str | None = None


def _earlier_import(manifest_path: Path, same: Mapping[str, Any]) -> bool:
    try:
        imported = json.loads(manifest_path.read_text(encoding="utf-8"))["imported"]
        return all(imported[k] == v for k, v in same.items())
    except (OSError, ValueError, KeyError, TypeError):
        return False


def write_planned(plans: Sequence[RecordPlan], out: Path, *, packages: Sequence[str],
                  warnings: Sequence[str] = ()) -> ImportResult:
    """Write each plan as a completed record with runrecord.RunWriter, the importing
    environment's provenance and a summary of its episodes, after checking them all: a
    folder holding this import (`same_import`) is kept, one holding anything else refuses
    the whole import."""
    result = ImportResult(warnings=list(warnings))
    todo = []
    for plan in plans:
        if (plan.run_dir / schema.MANIFEST_FILE).exists():
            if not _earlier_import(plan.run_dir / schema.MANIFEST_FILE, plan.same_import):
                raise AnalysisError(
                    f"{plan.run_dir} holds an import of {plan.source} made from other file "
                    "contents (or another record): delete that folder to import again, or "
                    "choose another --out; nothing was written")
            result.unchanged.append(plan.run_dir)
        else:
            todo.append(plan)
            result.written.append(plan.run_dir)
        if plan.read_line is not None:
            result.read[plan.run_dir] = plan.read_line
    prov = collect(packages=packages) if todo else {}
    for plan in todo:
        layout = plan.manifest["layout"]["name"]
        manifest = {**plan.manifest, "sweep": out.name, "architecture": None,
                    "layout": {k: (layout if k == "name" else None) for k in schema.LAYOUT_KEYS},
                    "provenance": prov, "determinism": None}
        w = RunWriter(plan.run_dir, manifest)
        try:
            w.episodes.append_many(_episode_rows(plan.episodes))
        except BaseException as e:
            w.finish(schema.FAILED, error=e)
            raise
        w.finish(schema.COMPLETED, summary=episode_summary(plan.episodes))
    return result


def write_records(runs: Sequence[ImportedRun], src: Path | str, out: Path | str, *,
                  fmt: str, declared: Declared, reader: Mapping[str, Any],
                  packages: Sequence[str] = ("numpy",)) -> ImportResult:
    """check_shape, then write_planned under `<out>/runs/<run_id>/`, `imported` holding
    the format, the source root, each source file's path, SHA-256 and size, what the
    reader read and what was declared (changed files since an earlier import: refused)."""
    src, out = Path(src), Path(out)
    warnings = check_shape(runs, src, declared) + list(declared.notes)
    plans = []
    for r in sorted(runs, key=lambda r: (r.system, r.layout, r.env_id, r.seed)):
        rel = [_rel(p, src) for p in r.sources]
        files = [{"path": q, "sha256": sha, "bytes": size}
                 for q, (sha, size) in zip(rel, map(file_digest, r.sources), strict=True)]
        # What identifies an imported run (its run_id hashes it): the source paths, not
        # their contents, so a re-import of changed files is caught rather than added.
        definition = {"system": r.system, "architecture": None, "env_id": r.env_id,
                      "seed": r.seed, "layout": {"name": r.layout},
                      "hyperparameters": declared.hyperparameters(),
                      "env_protocol": dict(declared.protocol or {}),
                      "imported": {"format": fmt, "sources": rel}}
        run_dir = out / "runs" / definition_id(definition)
        imported = {"format": fmt, "source_root": str(src.resolve()),
                    "files": files, "reader": dict(reader), **r.details,
                    "declared": declared.describe()}
        plans.append(RecordPlan(run_dir, {**definition, "run_id": run_dir.name,
                                          "imported": imported},
                                r.episode_columns(), {"files": files}, ", ".join(rel),
                                r.read_line()))
    return write_planned(plans, out, packages=packages, warnings=warnings)


# ---------------------------------------------------------------- provenance, shown

ORB_VIA = "openrlbenchmark cache"
"""`imported.via` of a published run read from openrlbenchmark's cache (orb.provenance);
an `analysis import` of files has `imported.format` instead."""


def is_imported(run: Run) -> bool:
    """The run came from another tool (openrlbenchmark's cache, or `analysis import`)."""
    return isinstance(run.manifest.get("imported"), dict)


def _from_orb(p: Mapping[str, Any]) -> bool:
    return p.get("via") == ORB_VIA


def is_orb_import(run: Run) -> bool:
    """The run is a published run read from openrlbenchmark's cache (not the user's, nor
    the user's own runs brought in by `analysis import`)."""
    return is_imported(run) and _from_orb(run.manifest["imported"])


def _source(p: Mapping[str, Any]) -> tuple[str, str, str]:
    """(where from, its id, its url) of an `imported` block: wandb via openrlbenchmark,
    or an `analysis import` of files (format, first source file, sha256 prefix)."""
    if not _from_orb(p):
        files = p.get("files") or [{}]
        more = f" (+{len(files) - 1} more)" if len(files) > 1 else ""
        return (f"{p['format']} import of {p.get('source_root')}",
                f"{files[0].get('path')}{more}", f"sha256 {str(files[0].get('sha256'))[:12]}")
    return (f"wandb {p.get('entity')}/{p.get('project')}", str(p.get("wandb_run_id")),
            str(p.get("url")))


def imported_text(run: Run) -> str:
    """'imported from wandb openrlbenchmark/cleanba run 1a2b3c (url) tags [...]', or
    'imported from tensorboard import of <src> run <file> (sha256 ...)'."""
    p = run.manifest.get("imported") or {}
    tags = f", tags {p.get('tags')}" if p.get("tags") else ""
    where, ident, url = _source(p)
    return f"imported from {where} run {ident} ({url}){tags}; {p.get('declared', '')}"


def imported_rows(runs: Iterable[Run]) -> list[list[Any]]:
    """Rows for an 'imported runs' table: run, env, seed, source (wandb entity/project, or
    the import's format and folder), its id (wandb run id, or first file), url (or file
    hash), tags, what was declared."""
    return [[r.run_id, r.manifest.get("env_id"), r.manifest.get("seed"), *_source(p),
             " ".join(map(str, p.get("tags") or [])), p.get("declared", "")]
            for r in runs if is_imported(r) for p in [r.manifest["imported"]]]


IMPORTED_HEADER = ["run", "env", "seed", "source (wandb entity/project or import)",
                   "wandb run id or file", "url or file hash", "tags", "declared"]
