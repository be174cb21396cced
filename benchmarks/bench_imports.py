"""Time `python -m analysis import <format>` on real-world-sized sources: 57 Atari games x
5 seeds of CleanRL-sized runs (PPO on EnvPool, 10M agent steps: 9,765 updates of 9
scalars each, ~8,000 episodes), written with the real writers (tests/foreign_runs.py).

    python benchmarks/bench_imports.py --out /tmp/bench-imports

Each format's sources are written once per seed (5 distinct runs per format) and copied
to the 57 games' paths: every import still reads and hashes every file in full. Prints a
markdown table (wall and CPU seconds per format, files, bytes, runs; the machine's load
average before and after: on a shared machine CPU seconds are the steadier figure) and
writes it as JSON.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from foreign_runs import (  # noqa: E402
    history,
    table_rows,
    write_monitor_run,
    write_table_csv,
    write_table_parquet,
    write_wandb_history_csv,
)

from analysis.scales.normalize import ATARI_RANDOM_HUMAN  # noqa: E402
from runrecord.cli_help import parse_config  # noqa: E402

SCALARS_PER_UPDATE = ("charts/learning_rate", "losses/value_loss", "losses/policy_loss",
                      "losses/entropy", "losses/old_approx_kl", "losses/approx_kl",
                      "losses/clipfrac", "losses/explained_variance", "charts/SPS")


@dataclass
class BenchConfig:
    out: Path = Path("/tmp/bench-imports")
    """Scratch folder (sources and records; deleted first)."""
    games: int = 57
    seeds: int = 5
    episodes: int = 8_000
    """Episodes per run."""
    updates: int = 9_765
    """PPO updates per run (10M steps / (8 envs x 128 steps)), 9 scalars each."""
    formats: tuple[str, ...] = ("tensorboard", "monitor", "wandb", "wandb-csv", "table")
    wandb_rows: int = 0
    """History rows of loss scalars per W&B run besides the episodes (0: one per update)."""


def cleanrl_events(path_dir: Path, h: dict, updates: int) -> None:
    """A CleanRL event file as torch's SummaryWriter writes it: simple_value scalars."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    path_dir.mkdir(parents=True, exist_ok=True)
    w = EventFileWriter(str(path_dir), max_queue_size=100_000)
    t0 = time.time()
    upd_steps = np.linspace(0, h["steps"][-1], updates).astype(int)
    events = [(int(s), 0, i) for i, s in enumerate(h["steps"])] + [
        (int(s), 1, j) for j, s in enumerate(upd_steps)]
    for step, kind, i in sorted(events):
        wall = t0 + step / 20_000
        if kind == 0:
            vals = [("charts/episodic_return", h["returns"][i]),
                    ("charts/episodic_length", h["lengths"][i])]
        else:
            vals = [(tag, 0.01 * (i % 100)) for tag in SCALARS_PER_UPDATE]
        for tag, v in vals:
            summ = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag,
                                                                        simple_value=float(v))])
            w.add_event(event_pb2.Event(summary=summ, step=step, wall_time=wall))
    w.close()


def wandb_run(root: Path, h: dict, game: str, seed: int, updates: int) -> None:
    import wandb

    run = wandb.init(mode="offline", dir=str(Path(root).resolve()), project="bench",
                     config={"env_id": game, "seed": seed, "exp_name": "ppo_atari_envpool"})
    upd = np.linspace(0, h["steps"][-1], updates).astype(int)
    rows = sorted([(int(s), 0, i) for i, s in enumerate(h["steps"])]
                  + [(int(s), 1, j) for j, s in enumerate(upd)])
    for step, kind, i in rows:
        if kind == 0:
            run.log({"charts/episodic_return": float(h["returns"][i]),
                     "charts/episodic_length": float(h["lengths"][i]), "global_step": step})
        else:
            run.log({**{t: 0.01 for t in SCALARS_PER_UPDATE}, "global_step": step})
    run.finish()
    wandb.teardown()  # the run's file complete on disk before it is copied


def make_sources(cfg: BenchConfig, fmt: str, src: Path, games: list[str]) -> None:
    hs = {s: history(400.0, s, episodes=cfg.episodes, total_steps=10_000_000)
          for s in range(1, cfg.seeds + 1)}
    if fmt == "table":
        rows = table_rows([(g, s, "ppo", "x", h) for g in games for s, h in hs.items()])
        src.mkdir(parents=True)
        write_table_csv(src / "scores.csv", rows)
        write_table_parquet(src / "scores.parquet", rows)
        return
    for s, h in hs.items():
        first = None
        for g in games:
            if fmt == "tensorboard":
                d = src / f"{g}__ppo_atari_envpool__{s}__{1_700_000_000 + s}"
            elif fmt == "monitor":
                d = src / g / f"seed_{s}"
            elif fmt == "wandb-csv":
                d = src / g
            else:
                d = src / g / f"seed_{s}"
            if first is None:
                if fmt == "tensorboard":
                    cleanrl_events(d, h, cfg.updates)
                elif fmt == "monitor":
                    write_monitor_run(d, h, g, envs=8)
                elif fmt == "wandb-csv":
                    write_wandb_history_csv(d / f"seed_{s}.csv", h)
                else:
                    d.mkdir(parents=True)
                    wandb_run(d, h, g, s, cfg.updates if not cfg.wandb_rows else cfg.wandb_rows)
                first = (d, g)
            elif fmt == "wandb-csv":
                d.mkdir(parents=True, exist_ok=True)
                shutil.copy(first[0] / f"seed_{s}.csv", d / f"seed_{s}.csv")
            else:
                shutil.copytree(first[0], d, symlinks=True)
                if fmt == "monitor":  # the env id in each Monitor header
                    for p in d.glob("*.monitor.csv"):
                        p.write_text(p.read_text().replace(first[1], g, 1))


def import_args(fmt: str, src: Path, out: Path, games: list[str]) -> list[list[str]]:
    base = ["--protocol", "paper", "--frames-per-step", "4", "--frames", "40e6"]
    if fmt == "table":
        cols = ["--task-column", "env", "--seed-column", "seed", "--system-column", "algo",
                "--step-column", "global_step", "--return-column", "episodic_return"]
        return [["import", "table", str(src / "scores.csv"), "--out", str(out / "csv"), *cols,
                 *base],
                ["import", "table", str(src / "scores.parquet"), "--out",
                 str(out / "parquet"), *cols, *base]]
    if fmt == "wandb":  # the copies' configs name the first game: the path names each
        return [["import", "wandb", str(src), "--out", str(out), "--path-pattern",
                 r"(?P<task>[^/]+)/seed_(?P<seed>\d+)", *base]]
    if fmt == "wandb-csv":
        return [["import", "wandb-csv", str(src), "--out", str(out), "--path-pattern",
                 r"(?P<task>[^/]+)/seed_(?P<seed>\d+)\.csv", *base]]
    return [["import", fmt, str(src), "--out", str(out), *base]]


def main(cfg: BenchConfig) -> None:
    shutil.rmtree(cfg.out, ignore_errors=True)
    games = sorted(ATARI_RANDOM_HUMAN)[: cfg.games]
    games = [g if g.endswith("-v5") else f"{g}-v5" for g in games]
    rows = []
    for fmt in cfg.formats:
        src, out = cfg.out / "src" / fmt, cfg.out / "records" / fmt
        t = time.perf_counter()
        make_sources(cfg, fmt, src, games)
        made = time.perf_counter() - t
        files = [p for p in src.rglob("*") if p.is_file()]
        for argv in import_args(fmt, src, out, games):
            load0 = os.getloadavg()[0]
            cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "analysis", *argv], cwd=ROOT,
                                  capture_output=True, text=True,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)})
            secs = time.perf_counter() - t
            cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
            if proc.returncode != 0:
                raise SystemExit(f"{argv}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
            n_runs = len(list(Path(argv[argv.index("--out") + 1]).rglob("manifest.json")))
            rows.append({"format": fmt if fmt != "table" else f"table ({Path(argv[2]).suffix})",
                         "seconds": round(secs, 1), "cpu_seconds": round(cpu, 1),
                         "runs": n_runs,
                         "source_files": len(files),
                         "source_MB": round(sum(p.stat().st_size for p in files) / 1e6, 1),
                         "episodes_per_run": cfg.episodes, "write_sources_s": round(made, 1),
                         "load_before": round(load0, 2),
                         "load_after": round(os.getloadavg()[0], 2)})
            print(json.dumps(rows[-1]), flush=True)
        shutil.rmtree(src)  # keep the disk small between formats
    print("| format | runs | source files | MB | import s (wall) | CPU s | load 1-min before/after |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['format']} | {r['runs']} | {r['source_files']} | {r['source_MB']} | "
              f"{r['seconds']} | {r['cpu_seconds']} | {r['load_before']} / {r['load_after']} |")
    (cfg.out / "bench_imports.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main(parse_config(BenchConfig))
