"""Benchmark: analysis and harness commands on study-sized run stores, without and with
the cache.

    python benchmarks/bench_scale.py                       # the study sizes
    python benchmarks/bench_scale.py --long-runs 1000 --short-runs 10000   # a tenth
    python benchmarks/bench_scale.py --workdir /tmp/b --keep --stores long # one store, kept

Builds stores in a temp folder with a fast writer (each table formatted in one string
operation, not row by row through runrecord.RunWriter; the same columns and manifest keys
the analysis reads):
- long: `long_runs` runs of `long_episodes` episodes (default: 10,000 x 20,000, ~11 GB);
- short: `short_runs` runs of `short_episodes` episodes (default: 100,000 x 300);
- harness: a sweep file of `harness_runs` runs (4 systems x 4 layouts x Atari games x
  seeds) with a record of `harness_episodes` episodes at each run's place in the store,
  each added to the analysis cache as `harness run` does when a run settles.
Runs: 4 systems x 4 layouts (16 groups) x Atari games x seeds. Each command runs as its
own process; wall time, CPU time (user + system, with its worker processes) and peak RSS
(os.wait4) are printed as a table with the machine's 1-minute load before each command.
Analysis commands: `summary --no-cache` (parse everything; --no-no-cache-baseline skips
it), `summary` cold (builds the cache), then warm `summary`, `equivalence --group-by
layout.name` and `aggregate` (16 groups, `reps` replicates). Harness commands: `status`
and `report`, twice each. An existing store under --workdir is reused (its cache is set
aside first, so the cold command is cold; deleted at the end). Checks free disk first.
Page cache: the cold command reads records as the machine has them (this VM drops its
page cache on its own: a store written minutes ago may be read from disk).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analysis.scales.normalize import ATARI_RANDOM_HUMAN  # noqa: E402
from runrecord import schema  # noqa: E402
from runrecord.cli_help import parse_config  # noqa: E402
from runrecord.layout import parse_layout  # noqa: E402
from runrecord.words import counted  # noqa: E402

FAMILIES = [("cleanba-ppo", "cleanba"), ("cleanba-impala", "cleanba"),
            ("monobeast-impala", "async"), ("moolib-impala", "async")]
LAYOUTS = ["a0-l0-d1", "a0-l1-d1", "a0-l0-d2", "a0-l0,1-d1"]
FAKE_TRAINER = ROOT / "tests" / "harness_fake_trainer.py"
BYTES_PER_EPISODE = 56  # measured size of one episodes.csv row from this writer


@dataclass
class BenchConfig:
    long_runs: int = 10_000
    """Runs of the long store."""
    long_episodes: int = 20_000
    """Episodes per run of the long store."""
    short_runs: int = 100_000
    """Runs of the short store."""
    short_episodes: int = 300
    """Episodes per run of the short store."""
    updates: int = 40
    """Rows of each updates.csv."""
    reps: int = 50_000
    """Bootstrap replicates of `aggregate`."""
    workdir: Path | None = None
    """Where the stores go (default: a temp folder, deleted afterwards)."""
    keep: bool = False
    """Keep the stores."""
    timeout_s: int = 3600
    """Per command."""
    harness_runs: int = 10_000
    """Runs of the harness sweep."""
    harness_episodes: int = 300
    """Episodes per run of the harness sweep (a warm report reads no episodes)."""
    stores: tuple[str, ...] = ("long", "short", "harness")
    """Which stores to build and measure."""
    no_cache_baseline: bool = True
    """Also time `summary --no-cache` (parses every record once more)."""
    aggregate_stores: tuple[str, ...] = ("long",)
    """Stores whose `aggregate` is timed (the speed goal is on the long store; on the
    short one, 110 seeds per group, P(X > Y) compares 110 x 110 seeds per game and rep)."""


def study_shape(runs: int) -> tuple[list[str], int]:
    """Games and seeds so that 16 groups x games x seeds is about `runs` (>= 3 seeds)."""
    games = sorted(ATARI_RANDOM_HUMAN)
    seeds = max(3, math.ceil(runs / (len(FAMILIES) * len(LAYOUTS) * len(games))))
    n_games = min(len(games), max(1, math.ceil(runs / (len(FAMILIES) * len(LAYOUTS) * seeds))))
    return games[:n_games], seeds


def write_table(path: Path, header: tuple[str, ...], fmt: str, data: np.ndarray) -> None:
    """All rows in one formatting operation (the vectorised writer)."""
    body = (fmt * len(data)) % tuple(data.ravel().tolist()) if len(data) else ""
    path.write_text(",".join(header) + "\n" + body)


def write_run(run_dir: Path, manifest: dict, episodes: int, updates: int,
              rng: np.random.Generator) -> None:
    run_dir.mkdir(parents=True)
    frames_total = 200_000_000
    frames = np.sort(rng.integers(1, frames_total, episodes)) // 4 * 4
    ret = np.cumsum(rng.normal(1.0, 5.0, episodes)) * 0.01 + rng.normal(0, 1, episodes)
    ep = np.column_stack([frames // 4, frames, frames * 1e-5, rng.integers(0, 64, episodes),
                          ret, rng.integers(10, 5000, episodes)])
    write_table(run_dir / schema.EPISODES_FILE, schema.EPISODE_COLUMNS,
                "%d,%d,%.3f,%d,%.4f,%d\n", ep)
    k = np.arange(1, updates + 1)
    f = k * (frames_total // updates)
    up = np.column_stack([k, f // 4, f, f * 1e-5, k + 1, k, k, np.full(updates, 2),
                          np.zeros(updates), np.full(updates, 1e4), np.full(updates, 0.01),
                          np.full(updates, 0.01), rng.normal(0, 1, updates)])
    header = (*schema.UPDATE_COLUMNS[:-len(schema.TRAILING_UPDATE_COLUMNS)], "loss_total",
              "rollout_queue_get_s", "param_queue_get_s")
    write_table(run_dir / schema.UPDATES_FILE, header,
                "%d,%d,%d,%.3f,%d,%d,%d,%d,%d,%.1f,%.3f,%.3f,%.5f\n",
                up[:, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 10, 11]])
    manifest = {**manifest, "summary": {"wall_time_s": float(frames_total * 1e-5),
                                        "frames": frames_total, "episodes": episodes}}
    (run_dir / schema.MANIFEST_FILE).write_text(json.dumps(manifest))


def build_store(root: Path, runs: int, episodes: int, updates: int) -> int:
    games, seeds = study_shape(runs)
    rng = np.random.default_rng(0)
    n = 0
    for system, arch in FAMILIES:
        for layout in LAYOUTS:
            lay = parse_layout(layout)
            for game in games:
                for seed in range(1, seeds + 1):
                    rid = f"{system}-{lay.name}-{game}-{seed}".replace(",", "_")
                    manifest = {
                        "schema_version": schema.SCHEMA_VERSION, "run_id": rid,
                        "sweep": "study", "system": system, "architecture": arch,
                        "env_id": game, "seed": seed, "status": schema.COMPLETED,
                        "layout": {**lay.to_dict(), "devices": ["cpu"]},
                        "hyperparameters": {"total_frames": 200_000_000},
                        "env_protocol": {"frame_skip": 4}, "provenance": {"bench": True}}
                    write_run(root / "study" / "runs" / rid, manifest, episodes, updates, rng)
                    n += 1
    return n


def measure(args: list[str], timeout_s: int) -> tuple[float, float, float, int]:
    """(wall s, CPU s, peak RSS MiB, exit code) of one command in its own process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = t0 + timeout_s
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.05)
    return (time.perf_counter() - t0, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024,
            os.waitstatus_to_exitcode(status))


def set_aside_cache(root: Path, work: Path) -> None:
    """Move an existing cache out of the store (deleted at the end), so the next command
    is cold. Moved, not deleted now: on ext4 without a journal (this VM's disk) a file
    created within a minute or more of many deletions costs ~10x more (the inode
    allocator skips recently deleted inodes), which a store that never had a cache
    does not pay."""
    cache = root / ".analysis-cache"
    if cache.exists():
        cache.rename(work / f".set-aside-cache-{time.time_ns()}")


def delete_set_aside(work: Path) -> None:
    for old in work.glob(".set-aside-cache-*"):
        shutil.rmtree(old, ignore_errors=True)


def run_commands(name: str, commands: list[tuple[str, list[str]]],
                 cfg: BenchConfig) -> list[list[str]]:
    rows = []
    for label, args in commands:
        load = os.getloadavg()[0]
        wall, cpu, rss, code = measure(args, cfg.timeout_s)
        rows.append([name, label, f"{wall:.1f} s", f"{cpu:.1f} s", f"{rss:.0f} MiB",
                     f"{load:.1f}", str(code)])
        print(" | ".join(rows[-1]), flush=True)
    return rows


def bench_store(name: str, root: Path, cfg: BenchConfig) -> list[list[str]]:
    py = [sys.executable, "-m", "analysis"]
    commands = [("summary --no-cache", [*py, "summary", str(root), "--no-cache"])]
    if not cfg.no_cache_baseline:
        commands = []
    commands += [
        ("summary (cold: builds the cache)", [*py, "summary", str(root)]),
        ("summary (warm)", [*py, "summary", str(root)]),
        ("equivalence --group-by layout.name (warm)",
         [*py, "equivalence", str(root), "--group-by", "layout.name"]),
    ]
    if root.name in cfg.aggregate_stores:
        commands.append((f"aggregate, 16 groups, {cfg.reps} reps (warm)",
                         [*py, "aggregate", str(root), "--reps", str(cfg.reps)]))
    return run_commands(name, commands, cfg)


def sweep_text(runs: int) -> str:
    """A sweep file of about `runs` runs of 4 systems (the test trainer; never started)."""
    games, seeds = study_shape(runs)
    systems = [f"fake-{s}" for s, _ in FAMILIES]
    return (f'name = "study"\nsystems = {json.dumps(systems)}\nlayouts = {json.dumps(LAYOUTS)}\n'
            f"games = {json.dumps(games)}\nseeds = {json.dumps(list(range(1, seeds + 1)))}\n"
            "frames = 200000000\n\n[report]\nreps = 2000\n"
            + "".join(f'\n[entry_points.{s}]\nentry = "{FAKE_TRAINER}"\n' for s in systems))


def build_sweep_store(root: Path, runs: int, episodes: int, updates: int) -> tuple[Path, int]:
    """A sweep file and a completed record for each of its runs, each added to the analysis
    cache as the harness adds a run when it settles; returns (sweep file, runs)."""
    from analysis.inputs.cache import refresh_run
    from harness.store import Store
    from harness.sweep import parse_sweep

    path = root / "study.toml"
    root.mkdir(parents=True, exist_ok=True)
    path.write_text(sweep_text(runs))
    sweep = parse_sweep(path.read_text(), path, check_games=False)
    store = Store(root, sweep.name)
    rng = np.random.default_rng(0)
    for spec in sweep.runs:
        manifest = {
            "schema_version": schema.SCHEMA_VERSION, "run_id": spec.run_id,
            "sweep": sweep.name, "system": spec.system, "architecture": spec.architecture,
            "env_id": spec.env_id, "seed": spec.seed, "status": schema.COMPLETED,
            "layout": {**spec.layout.to_dict(), "devices": ["cpu"]},
            "hyperparameters": {"total_frames": spec.frames},
            "env_protocol": {"frame_skip": 4}, "provenance": {"bench": True}}
        run_dir = store.run_dir(spec.run_id)
        write_run(run_dir, manifest, episodes, updates, rng)
        refresh_run(run_dir)
    return path, len(sweep.runs)


def bench_harness(root: Path, sweep: Path, runs: int, cfg: BenchConfig) -> list[list[str]]:
    py = [sys.executable, "-m", "harness"]
    where = ["--sweep", str(sweep), "--results-root", str(root)]
    commands = [("harness status", [*py, "status", *where]),
                ("harness status (again)", [*py, "status", *where]),
                ("harness report (first after the sweep)", [*py, "report", *where]),
                ("harness report (again)", [*py, "report", *where])]
    return run_commands(f"harness ({runs} x {cfg.harness_episodes})", commands, cfg)


def main(cfg: BenchConfig) -> None:
    work = cfg.workdir or Path(tempfile.mkdtemp(prefix="bench-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    sizes = {"long": cfg.long_runs * cfg.long_episodes,
             "short": cfg.short_runs * cfg.short_episodes,
             "harness": cfg.harness_runs * cfg.harness_episodes}
    need = sum(sizes[s] for s in cfg.stores if not (work / s).exists()) \
        * BYTES_PER_EPISODE * 1.6  # CSVs, and the cache's scoring columns
    free = shutil.disk_usage(work).free
    if need > free:
        sys.exit(f"need about {need / 2**30:.1f} GiB under {work}, {free / 2**30:.1f} GiB free; "
                 "pass smaller --long-runs / --short-runs")
    print(f"load before: {os.getloadavg()}, {counted(os.cpu_count() or 1, 'CPU')}", flush=True)
    rows = []
    try:
        for name, runs, episodes in [("long", cfg.long_runs, cfg.long_episodes),
                                     ("short", cfg.short_runs, cfg.short_episodes),
                                     ("harness", cfg.harness_runs, cfg.harness_episodes)]:
            if runs == 0 or name not in cfg.stores:
                continue
            root = work / name
            t0 = time.perf_counter()
            if name == "harness":
                sweep, n = build_sweep_store(root, runs, episodes, cfg.updates)
            elif (root / "study").exists():
                set_aside_cache(root, work)
                n = sum(1 for _ in (root / "study" / "runs").iterdir())
            else:
                n = build_store(root, runs, episodes, cfg.updates)
            size = sum(p.stat().st_size for p in root.rglob("*.csv"))
            print(f"{name}: {n} runs x {episodes} episodes, {size / 2**20:.0f} MiB of CSV, "
                  f"ready in {time.perf_counter() - t0:.0f} s", flush=True)
            if name == "harness":
                rows += bench_harness(root, sweep, n, cfg)
            else:
                rows += bench_store(f"{name} ({n} x {episodes})", root, cfg)
    finally:
        delete_set_aside(work)
        if not cfg.keep and cfg.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"load after: {os.getloadavg()}")
    print("| store | command | wall | CPU | peak RSS | load | exit |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main(parse_config(BenchConfig))
