"""The suite's learning line: what our PPO run learned in its frames, against the reference
run at the same frames and against the random score (benchmarks/gpu_suite.py).

- ours: the mean raw return of the last 100 episodes (or fewer, if fewer ended) that ended
  by the frames of the run's last finished update (episodes.csv of our run record);
- reference: its own `charts/avg_episodic_return` (the mean, over its first actor thread's
  envs, of each env's last finished episode) logged last at or before those frames; the
  reference counts env steps, 4 frames each;
- random: the published random-agent score of the game (analysis.scales.atari_scores).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

LAST_EPISODES = 100
FRAME_SKIP = 4  # Atari v5 in EnvPool: 4 frames per env step


def last_episodes_mean(returns_by_frame: list[tuple[float, float]], frames: float,
                       n: int = LAST_EPISODES) -> tuple[float | None, int]:
    """(mean return of the last `n` episodes that ended by `frames`, how many) from
    (frames at the episode's end, return) pairs in the order they were written."""
    ended = [r for f, r in returns_by_frame if f <= frames][-n:]
    return (sum(ended) / len(ended) if ended else None), len(ended)


def value_at(points: list[tuple[float, float]], frames: float) -> tuple[float | None, float | None]:
    """(value, its frames) of the last (frames, value) point at or before `frames`."""
    before = [(f, v) for f, v in points if f <= frames]
    if not before:
        return None, None
    f, v = max(before, key=lambda p: p[0])
    return v, f


def random_score(env_id: str) -> float | None:
    from analysis.scales.atari_scores import ATARI_RANDOM_HUMAN

    scores = ATARI_RANDOM_HUMAN.get(env_id)
    return scores[0] if scores else None


def ours_learning(run_dir: Path, env_id: str) -> dict[str, Any]:
    """The learning line of one of our runs, from its run record."""
    updates = run_dir / "updates.csv"
    episodes = run_dir / "episodes.csv"
    if not updates.exists():
        return {"error": f"no {updates}"}
    with open(updates, newline="") as f:
        frames = [float(r["frames"]) for r in csv.DictReader(f) if r.get("frames")]
    if not frames:
        return {"error": "no update finished"}
    pairs: list[tuple[float, float]] = []
    if episodes.exists():
        with open(episodes, newline="") as f:
            pairs = [(float(r["frames"]), float(r["episode_return"])) for r in csv.DictReader(f)
                     if r.get("frames") and r.get("episode_return")]
    mean, count = last_episodes_mean(pairs, frames[-1])
    return {"env_id": env_id, "frames": frames[-1], "last_episodes_mean_return": mean,
            "episodes_averaged": count, "episodes_ended": len(pairs),
            "random_score": random_score(env_id)}


def reference_learning(scalars: Path, frames: float | None) -> dict[str, Any]:
    """The reference's avg_episodic_return at or before `frames` (our run's last update)."""
    points = []
    if scalars.exists():
        for line in scalars.read_text().splitlines():
            entry = json.loads(line)
            if entry["tag"] == "charts/avg_episodic_return":
                points.append((float(entry["step"]) * FRAME_SKIP, float(entry["value"])))
    if frames is None:
        frames = max((f for f, _ in points), default=0.0)
    value, at = value_at(points, frames)
    return {"avg_episodic_return": value, "frames": at, "target_frames": frames}
