"""openrlbenchmark's wandb cache (the Cleanba paper's per-seed runs) as runs, with provenance.

openrlbenchmark 0.3.x caches each run it downloads with `--scan-history` as
`<cache>/<entity>/<project>/<wandb run id>/run_df.csv` (pandas' to_csv of
run.scan_history(): an index column first) beside `run.json` ({"id", "name", "state",
"url", "project", "entity", "config", "tags", "path", "user"}); a run.json with `_attrs` is
its legacy format, which only a live run can rewrite, so it is refused. A finished run
becomes a `runrecord.Run` whose manifest holds `imported` (its wandb provenance), `system`
= its exp_name, layout `imported:<entity>/<project>`, and the env protocol and frame
budget only as the user declared them (wandb records neither; undeclared, the guards
refuse them). `fetch_wandb` (network) writes the same layout.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from analysis.errors import AnalysisError
from analysis.importers.build import (
    ORB_VIA,
    ImportedRun,
    ImportResult,
    RecordPlan,
    episode_summary,
    episodes_in_order,
    write_planned,
)
from analysis.importers.declare import (
    IMPORTED_LAYOUT_PREFIX,
    RETURN_KEY,
    RUNTIME_KEY,
    STEP_KEY,
    Declared,
    config_value,
    declaration,
    int_seed,
    read_json_object,
)
from analysis.importers.wandb_runs import export_history, read_csv_columns
from analysis.inputs.load import IMPORTED_PROTOCOL, LeftOut, RunSet
from analysis.scales.normalize import ATARI_RANDOM_HUMAN, atari_env_id
from runrecord import Run, Table, schema
from runrecord.writer import atomic_write_text

RUN_JSON = "run.json"
RUN_DF = "run_df.csv"
RUN_JSON_KEYS = ("id", "name", "state", "url", "project", "entity", "config", "tags", "path")
PAPER_METRIC = "charts/avg_episodic_return"
"""The metric of the paper's figures and tables (openrlbenchmark's `metric=`)."""
UNDECLARED = declaration()


# ---------------------------------------------------------------- openrlbenchmark CSVs

@dataclass(frozen=True)
class ColumnMap:
    """Which columns of an openrlbenchmark-style export hold what, and the flags that
    named them (a missing column's error says which flags to set)."""

    step: str = STEP_KEY
    episode_return: str = RETURN_KEY
    wall_time: str = RUNTIME_KEY
    flags: str = "--step-column and --return-column"


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
    """One run's exported history (read by wandb_runs.export_history, as every history
    export is) as an in-memory Run (status completed): an episode per row with a return;
    frames = step x `frames_per_step` (default 4 for Atari ids, else 1: CleanRL/Cleanba
    log global_step in agent steps)."""
    path = Path(path)
    steps, returns, wall = export_history(read_csv_columns(path), path, columns.step,
                                          columns.episode_return, columns.wall_time,
                                          flags=columns.flags)
    if frames_per_step is None:
        frames_per_step = 4 if atari_env_id(env_id) in ATARI_RANDOM_HUMAN else 1
    run = episodes_in_order(ImportedRun(
        env_id, seed, system, group, env_steps=steps, frames=steps * frames_per_step,
        episode_return=returns, wall_time_s=wall, sources=[path]))
    episodes = run.episode_columns()
    manifest = {
        "schema_version": schema.SCHEMA_VERSION,
        "run_id": f"orb-{system}-{env_id}-{seed}",
        "system": system,
        "architecture": None,
        "env_id": env_id,
        "seed": seed,
        "layout": {"name": group},
        # Exports record no env protocol: one shared, undeclared marker, so imports pool
        # with each other and the protocol guard refuses them against declared records.
        "env_protocol": dict(IMPORTED_PROTOCOL),
        "status": schema.COMPLETED,
        "source": str(path),
        "summary": episode_summary(episodes),
    }
    updates = Table({c: np.array([], dtype=np.float64) for c in schema.UPDATE_COLUMNS}, 0)
    return Run(path.parent, manifest, Table(episodes, len(run.episode_return)), updates, [])


def load_openrlbenchmark_dir(
    root: Path | str, *, columns: ColumnMap = ColumnMap(), frames_per_step: int | None = None,
    declared: Declared = UNDECLARED,
) -> RunSet:
    """Every run of openrlbenchmark's cache below `root` (`run.json` + `run_df.csv`, read
    by load_orb_cache with provenance and the `declared` protocol/budget) and every
    `<system>/<env_id>/<seed>.csv` export (no provenance, protocol unknown)."""
    root = Path(root)
    out = load_orb_cache(root, declared, columns=columns, frames_per_step=frames_per_step)
    for path in sorted(root.rglob("*.csv")):
        if path.name == RUN_DF and path.with_name(RUN_JSON).exists():
            continue
        rel, digits = path.relative_to(root).parts, re.sub(r"\D", "", path.stem)
        if len(rel) < 3:
            out.warnings.append(f"{path}: not <system>/<env_id>/<seed>.csv; skipped")
            continue
        try:
            if not digits:  # never guess a seed: it identifies the replicate
                raise AnalysisError("no seed in the file name (expected "
                                    "<system>/<env_id>/<seed>.csv, e.g. 1.csv)")
            out.included.append(load_openrlbenchmark_csv(
                path, env_id=rel[-2], system=rel[-3], seed=int(digits), columns=columns,
                frames_per_step=frames_per_step))
        except ValueError as e:  # the reader's own errors name the file already
            why = str(e) if str(path) in str(e) else f"{path}: {e}"
            out.left_out.append(LeftOut(path.stem, "unreadable", why, str(path)))
    return out


# ---------------------------------------------------------------- reading the cache

def read_cached_run(run_dir: Path | str, declared: Declared = UNDECLARED, *,
                    columns: ColumnMap = ColumnMap(episode_return=PAPER_METRIC),
                    frames_per_step: int | None = None) -> Run:
    """One cached run as a Run with provenance (`manifest["imported"]`) and the declared
    protocol/budget. Its run.json is openrlbenchmark's CachedRun.dump_json (config values
    unwrapped here)."""
    run_dir = Path(run_dir)
    path = run_dir / RUN_JSON
    meta = read_json_object(path, "a JSON object")
    if "_attrs" in meta:
        raise AnalysisError(f"{path}: openrlbenchmark's legacy cache format (_attrs); "
                            "re-download it with openrlbenchmark >= 0.2 or fetch_wandb")
    missing = [k for k in RUN_JSON_KEYS if k not in meta]
    if missing:
        raise AnalysisError(f"{path}: missing {missing} (openrlbenchmark's run.json has "
                            f"{list(RUN_JSON_KEYS)} and user)")
    cfg = meta.get("config") or {}
    if not isinstance(cfg, dict):
        raise AnalysisError(f"{path}: config must be an object")
    cfg = {k: config_value(cfg, k) for k in cfg}
    for key in ("env_id", "seed"):
        if cfg.get(key) is None:
            raise AnalysisError(f"{path}: config has no {key!r} (openrlbenchmark groups runs "
                                "by config.env_id and config.exp_name)")
    exp_name = str(cfg.get("exp_name") or meta["name"])
    group = f"{IMPORTED_LAYOUT_PREFIX}{meta['entity']}/{meta['project']}"
    run = load_openrlbenchmark_csv(run_dir / RUN_DF, env_id=str(cfg["env_id"]),
                                   system=exp_name, seed=int_seed(cfg["seed"], str(path)),
                                   columns=columns, frames_per_step=frames_per_step,
                                   group=group)
    m = run.manifest
    m["run_id"] = f"wandb:{meta['entity']}/{meta['project']}/{meta['id']}"
    user = meta.get("user") or {}
    m["imported"] = {"source": "wandb", "via": ORB_VIA, "entity": meta["entity"],
                     "project": meta["project"], "wandb_run_id": meta["id"],
                     "name": meta["name"], "url": meta["url"],
                     "tags": list(meta.get("tags") or []), "state": meta["state"],
                     "path": meta.get("path"),
                     "user": user.get("username") if isinstance(user, dict) else None,
                     "cache_dir": str(run_dir), "metric": columns.episode_return,
                     "declared": declared.describe()}
    m["hyperparameters"] = declared.hyperparameters()
    if declared.protocol is not None:
        m["env_protocol"] = dict(declared.protocol)
    if meta["state"] != "finished":
        m["status"] = str(meta["state"])
    return Run(run_dir, m, run.episodes, run.updates, run.warnings)


def load_orb_cache(root: Path | str, declared: Declared = UNDECLARED, *,
                   columns: ColumnMap = ColumnMap(episode_return=PAPER_METRIC),
                   frames_per_step: int | None = None) -> RunSet:
    """Every cached run (a folder holding run.json) below `root`: the cache, an entity, a
    project or one run folder; unreadable or unfinished runs are left out, with the reason."""
    root = Path(root)
    if not root.is_dir():
        raise AnalysisError(f"{root}: no such folder (expected openrlbenchmark's cache: "
                            "<entity>/<project>/<run id>/run.json + run_df.csv)")
    out = RunSet()
    for d in sorted(p.parent for p in root.rglob(RUN_JSON)):
        try:
            run = read_cached_run(d, declared, columns=columns, frames_per_step=frames_per_step)
        except AnalysisError as e:
            out.left_out.append(LeftOut(d.name, "unreadable", str(e), str(d)))
            continue
        if run.status != "completed":
            out.left_out.append(LeftOut(run.run_id, run.status,
                                        f"wandb state {run.status} (only finished runs count)",
                                        str(d)))
        elif len(run.episodes) == 0:
            out.left_out.append(LeftOut(run.run_id, "completed",
                                        f"no {columns.episode_return} values in {RUN_DF}",
                                        str(d)))
        else:
            out.included.append(run)
    return out


def write_orb_records(runs: Sequence[Run], out: Path | str) -> ImportResult:
    """Runs of read_cached_run as records (write_planned) under
    `<out>/runs/wandb_<entity>_<project>_<wandb run id>/`, their run id, provenance and
    declarations kept. A folder holding the import of the same wandb run, metric and
    declarations is kept as it is."""
    out = Path(out)
    plans = []
    for run in runs:
        p = run.manifest["imported"]
        name = re.sub(r"[^A-Za-z0-9_.-]", "_",
                      f"wandb_{p['entity']}_{p['project']}_{p['wandb_run_id']}")
        keep = ("run_id", "system", "env_id", "seed", "layout", "hyperparameters",
                "env_protocol", "imported")
        plans.append(RecordPlan(
            out / "runs" / name, {k: run.manifest[k] for k in keep},
            {c: run.episodes[c] for c in schema.EPISODE_COLUMNS},
            {k: p[k] for k in ("entity", "project", "wandb_run_id", "metric", "declared")},
            f"wandb run {p['entity']}/{p['project']}/{p['wandb_run_id']}"))
    return write_planned(plans, out, packages=("numpy",))


# ---------------------------------------------------------------- writing the cache

def write_cached_run(cache_dir: Path | str, meta: Mapping[str, Any],
                     rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write one run in openrlbenchmark's cache layout: `meta` has run.json's keys
    (RUN_JSON_KEYS and user), `rows` are history rows (dicts, keys may vary by row).
    run_df.csv is written like pandas' DataFrame.to_csv: an unnamed index column first,
    columns in order of first appearance, missing values empty."""
    missing = [k for k in RUN_JSON_KEYS if k not in meta]
    if missing:
        raise AnalysisError(f"run metadata lacks {missing}")
    run_dir = Path(cache_dir, str(meta["entity"]), str(meta["project"]), str(meta["id"]))
    run_dir.mkdir(parents=True, exist_ok=True)
    names: list[str] = []
    for row in rows:
        names += [k for k in row if k not in names and k != "videos"]
    table = io.StringIO()
    w = csv.writer(table, lineterminator="\n")  # as pandas writes it
    w.writerow(["", *names])
    for i, row in enumerate(rows):
        w.writerow([i, *(_pandas_cell(row.get(k)) for k in names)])
    atomic_write_text(run_dir / RUN_DF, table.getvalue())
    # run.json last: openrlbenchmark treats a folder with run.json as complete.
    body = {k: meta[k] for k in RUN_JSON_KEYS}
    body["user"] = dict(meta.get("user") or {"username": None, "name": None})
    atomic_write_text(run_dir / RUN_JSON, json.dumps(body))
    return run_dir


def _pandas_cell(v: Any) -> Any:
    """A history value in run_df.csv: missing or NaN empty and a bool as True/False, as
    pandas' to_csv writes them; anything not a number or text (a wandb media or table
    entry) as JSON."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, (int, float, str)):
        return v
    return json.dumps(v)


def fetch_wandb(entity: str, project: str, cache_dir: Path | str,
                filters: Mapping[str, Any] | None = None) -> list[Path]:
    """Download the runs of `entity/project` matching `filters` (wandb's MongoDB-style
    filters, e.g. {"config.env_id": "Breakout-v5", "config.exp_name":
    "cleanba_impala_a0_l0_d1_cpu10"}) into `cache_dir` in openrlbenchmark's layout.
    Needs network access and the wandb package; running runs are skipped."""
    if not re.match(r"^[\w.-]+$", entity) or not re.match(r"^[\w.-]+$", project):
        raise AnalysisError(f"bad wandb entity/project {entity!r}/{project!r}")
    # Here only: wandb is heavy and needed by this one network path, never by analysis.
    try:
        import wandb
    except ImportError:
        raise AnalysisError("orb-fetch needs the wandb package, not in the core install: "
                            "pip install 'cleanba-bench[wandb]'") from None

    api = wandb.Api()
    out = []
    for run in api.runs(f"{entity}/{project}", filters=dict(filters or {})):
        if run.state == "running":
            continue
        # Into the cache as openrlbenchmark does: every history row (run.scan_history())
        # and run.json; a run already there is kept.
        run_dir = Path(cache_dir, run.entity, run.project, run.id)
        if not (run_dir / RUN_JSON).exists():
            meta = {k: getattr(run, k) for k in RUN_JSON_KEYS}
            meta.update(config=dict(meta["config"]), tags=list(meta["tags"] or []),
                        path=list(meta["path"]),
                        user={"username": run.user.username, "name": run.user.name})
            write_cached_run(cache_dir, meta, list(run.scan_history()))
        out.append(run_dir)
    return out
