"""Read an offline wandb run (WANDB_MODE=offline) back: its history rows and config,
with the importer's reader (analysis.importers.wandb_runs: the `.wandb` log framing,
records decoded with wandb's own protobuf classes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analysis.importers.wandb_runs import read_offline_run as read_log


def read_offline_run(run_dir: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(history rows, config) of an offline-run-* folder."""
    (path,) = Path(run_dir).glob("run-*.wandb")
    run = read_log(path)
    return run["history"], run["config"]


def check_openrlbenchmark_keys(offline_dir: Path, record: Any) -> None:
    """Part of test_manifest_and_wandb_offline: a --track run carries what openrlbenchmark
    reads (global_step in the history, charts/episodic_return and
    charts/avg_episodic_return, env_id / exp_name / seed in the config), and its history,
    written in openrlbenchmark's cache layout, reads back as the same episodes' scores."""
    import numpy as np

    from analysis.importers.declare import declaration
    from analysis.importers.orb import read_cached_run, write_cached_run

    history, config = read_offline_run(offline_dir)
    m = record.manifest
    assert config["env_id"] == m["env_id"] and config["seed"] == m["seed"]
    assert config["exp_name"] == f"{m['system']}_{m['architecture']}_{m['layout']['name']}"
    steps = [row["global_step"] for row in history]
    assert steps == sorted(steps) and steps[-1] == m["summary"]["env_steps"]
    with_returns = [row for row in history if "charts/episodic_return" in row]
    assert with_returns and all("charts/avg_episodic_return" in row for row in with_returns)
    # The per-update mean of charts/episodic_return is the record's episodes, grouped.
    ep = record.episodes
    first = with_returns[0]
    ended = ep["episode_return"][ep["env_steps"] <= first["global_step"]]
    assert np.isclose(first["charts/episodic_return"], ended.mean())
    # Through openrlbenchmark's cache layout and back.
    meta = {"id": m["run_id"], "name": "ours", "state": "finished",
            "url": "offline", "project": "cleanba-bench", "entity": "me", "config": config,
            "tags": [], "path": ["me", "cleanba-bench", m["run_id"]]}
    cache = Path(offline_dir) / "orb-cache"
    run = read_cached_run(write_cached_run(cache, meta, history), declaration("paper"))
    assert run.manifest["imported"]["entity"] == "me"
    assert len(run.episodes) == len(with_returns)
