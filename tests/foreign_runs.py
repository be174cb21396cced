"""Runs as other tools write them, made with those tools' own writers, for the importer
tests and the import timing (scripts/time_imports.py):

- TensorBoard event files in CleanRL's layout (`{env}__{exp}__{seed}__{time}/`), written
  with tensorboard's own `tensorboard.summary.Writer`, or with tensorboard's
  EventFileWriter and simple_value scalars exactly as torch's SummaryWriter writes them;
- Monitor CSV files (SB3's format: a `#{"t_start", "env_id"}` line, then r, l, t), one
  per env of a vectorised run;
- W&B offline runs (`wandb.init(mode="offline")`) and W&B history CSV exports (pandas'
  to_csv of the history rows, as run.history() gives them);
- long tables (CSV, Parquet through pyarrow).

The returns are a learning curve that plateaus at `final` (x (1 + noise)), so the final
score of a run (mean of its last 100 episodes) is known to the test.
"""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

CLEANRL_EXP = "ppo_atari_envpool"
FRAMES_PER_STEP = 4
TOTAL_STEPS = 50_000_000  # 200M frames


def history(final: float, seed: int, *, episodes: int = 300, noise: float = 1e-3,
            total_steps: int = TOTAL_STEPS, salt: int = 0) -> dict[str, np.ndarray]:
    """steps, returns, lengths, seconds of one run: a ramp to a plateau at `final`
    reached at 60% of the steps, every episode x (1 + noise x N(0, 1))."""
    rng = np.random.default_rng(1000 * seed + salt)
    steps = np.linspace(total_steps / episodes, total_steps, episodes).round()
    progress = np.minimum(1.0, steps / (0.6 * total_steps))
    returns = final * (0.2 + 0.8 * progress) * (1 + noise * rng.standard_normal(episodes))
    lengths = np.full(episodes, 1000.0)
    seconds = steps / 20_000.0
    return {"steps": steps, "returns": returns, "lengths": lengths, "seconds": seconds}


def final_score(h: dict[str, np.ndarray], last_n: int = 100) -> float:
    return float(np.mean(h["returns"][-last_n:]))


def cleanrl_run_dir(root: Path, env_id: str, seed: int, exp: str = CLEANRL_EXP) -> Path:
    return Path(root) / f"{env_id}__{exp}__{seed}__{1_700_000_000 + seed}"


def write_tensorboard_run(run_dir: Path, h: dict[str, np.ndarray], *, torch_style: bool = False,
                          losses_every: int = 5) -> None:
    """CleanRL's scalars: charts/episodic_return and charts/episodic_length at each
    episode's global_step, plus losses/value_loss and charts/SPS between them."""
    run_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.time()  # the writers stamp their first event (the file version) with now
    if torch_style:
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        writer = EventFileWriter(str(run_dir))

        def add(tag: str, value: float, step: int, wall: float) -> None:
            summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(
                tag=tag, simple_value=float(value))])
            writer.add_event(event_pb2.Event(summary=summary, step=step, wall_time=wall))
    else:
        from tensorboard.summary import Writer

        tb = Writer(str(run_dir))

        def add(tag: str, value: float, step: int, wall: float) -> None:
            tb.add_scalar(tag, float(value), step=step, wall_time=wall)
    for i, (s, r, n, t) in enumerate(zip(h["steps"], h["returns"], h["lengths"], h["seconds"],
                                        strict=True)):
        step, wall = int(s), t0 + float(t)
        add("charts/episodic_return", r, step, wall)
        add("charts/episodic_length", n, step, wall)
        if i % losses_every == 0:
            add("losses/value_loss", 0.5 / (1 + i), step, wall)
            add("charts/SPS", 20_000.0, step, wall)
    (writer if torch_style else tb).close()


def write_monitor_run(run_dir: Path, h: dict[str, np.ndarray], env_id: str, envs: int = 4
                      ) -> list[Path]:
    """One SB3 Monitor file per env: episode k belongs to env k mod `envs`; each env's
    lengths sum to its share of the global steps (all envs step together)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    t_start = 1_700_000_000.0
    for i in range(envs):
        idx = np.arange(i, len(h["steps"]), envs)
        own = np.round(h["steps"][idx] / envs)  # whole steps, as a Monitor counts them
        lengths = np.diff(np.concatenate([[0.0], own]))
        path = run_dir / f"{i}.monitor.csv"
        write_monitor_file(path, t_start + i * 0.01, env_id,
                           zip(h["returns"][idx], lengths, h["seconds"][idx] - i * 0.01,
                               strict=True))
        paths.append(path)
    return paths


def write_monitor_file(path: Path, t_start: float, env_id: str, rows) -> None:
    """SB3's Monitor format (stable_baselines3.common.monitor.ResultsWriter)."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        f.write("#" + json.dumps({"t_start": t_start, "env_id": env_id}) + "\n")
        w = csv.DictWriter(f, fieldnames=("r", "l", "t"))
        w.writeheader()
        for r, length, t in rows:
            w.writerow({"r": round(float(r), 6), "l": int(length), "t": round(float(t), 6)})


def gymnasium_monitor_run(run_dir: Path, env_id: str, seed: int, envs: int = 2,
                          episodes_per_env: int = 12) -> list[Path]:
    """Real episodes: gymnasium's RecordEpisodeStatistics around `env_id` (random
    actions), each env's episodes written as a Monitor file."""
    import gymnasium as gym

    run_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(envs):
        env = gym.wrappers.RecordEpisodeStatistics(gym.make(env_id))
        env.action_space.seed(seed * 100 + i)
        t_start = time.time()
        rows = []
        env.reset(seed=seed * 100 + i)
        elapsed = 0.0
        while len(rows) < episodes_per_env:
            _, _, terminated, truncated, info = env.step(env.action_space.sample())
            if terminated or truncated:
                ep = info["episode"]
                elapsed += float(ep["t"])
                rows.append((float(ep["r"]), int(ep["l"]), elapsed))
                env.reset()
        env.close()
        path = run_dir / f"{i}.monitor.csv"
        write_monitor_file(path, t_start, env_id, rows)
        paths.append(path)
    return paths


def write_wandb_offline_run(root: Path, h: dict[str, np.ndarray], env_id: str, seed: int,
                            exp: str = CLEANRL_EXP) -> None:
    """A W&B offline run under `root`/wandb/offline-run-*, logged as CleanRL logs to W&B."""
    import wandb

    # Absolute: wandb's service process keeps the working directory it started in.
    run = wandb.init(mode="offline", dir=str(Path(root).resolve()), project="imports",
                     config={"env_id": env_id, "seed": seed, "exp_name": exp})
    for s, r, n in zip(h["steps"], h["returns"], h["lengths"], strict=True):
        run.log({"charts/episodic_return": float(r), "charts/episodic_length": float(n),
                 "global_step": int(s)})
    run.finish()


def finish_wandb() -> None:
    """Stop wandb's service process: every offline run file it holds is complete on disk
    when this returns (run.finish() may return before the last records are written)."""
    import wandb

    wandb.teardown()


def write_wandb_history_csv(path: Path, h: dict[str, np.ndarray]) -> None:
    """run.history() as pandas writes it: one row per log call; loss rows lack a return."""
    import pandas as pd

    rows = []
    for i, (s, r, t) in enumerate(zip(h["steps"], h["returns"], h["seconds"], strict=True)):
        rows.append({"_step": 2 * i, "global_step": int(s), "charts/episodic_return": float(r),
                     "_runtime": float(t), "_timestamp": 1_700_000_000.0 + float(t)})
        rows.append({"_step": 2 * i + 1, "global_step": int(s), "losses/value_loss": 0.1,
                     "_runtime": float(t), "_timestamp": 1_700_000_000.0 + float(t)})
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(path)


TABLE_COLUMNS = ("env", "seed", "algo", "machine", "global_step", "episodic_return")


def table_rows(runs: Sequence[tuple[str, int, str, str, dict[str, np.ndarray]]]) -> list[list]:
    """(env, seed, system, layout, history) runs as long-table rows (TABLE_COLUMNS)."""
    return [[env, seed, system, layout, int(s), float(r)]
            for env, seed, system, layout, h in runs
            for s, r in zip(h["steps"], h["returns"], strict=True)]


def write_table_csv(path: Path, rows: list[list]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(TABLE_COLUMNS)
        w.writerows(rows)


def write_table_parquet(path: Path, rows: list[list]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols = list(zip(*rows, strict=True))
    pq.write_table(pa.table({name: list(c) for name, c in zip(TABLE_COLUMNS, cols,
                                                               strict=True)}), path)
