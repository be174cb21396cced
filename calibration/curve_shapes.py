"""Real learning-curve shapes for the calibration of the looks over training time.

A shape is one system on one game: per seed, the gate's per-seed value (the normalised
mean return of the last 100 episodes ended by then) at a grid of fractions of the frame
budget, read from run records: ours (results/reference/smoke-cartpole seeds 1-3 and
results/curve-shapes/cartpole seeds 4-13, layout a0-l0-d1) or any folder given, e.g.
runs imported with `python -m analysis import`. Layout copies of a seed are one seed.

Draws keep the shape's mean curve and its seed-to-seed covariance along the curve (a
normal draw with the sample covariance of the seeds' curves: the same seeds, later, are
correlated as they were in the records), then a case changes the candidate's curve.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from analysis.inputs.facts import episode_x
from analysis.inputs.load import DEFAULT_LAST_N, load_runs
from analysis.scales.normalize import get_normaliser
from runrecord import PROJECT_ROOT, Run

GRID = np.round(np.arange(1, 21) / 20, 4)
"""Fractions of the budget a shape is read at (5%, 10%, ..., 100%)."""
MIN_SEEDS = 4
DEFAULT_FOLDERS = ("results/reference/smoke-cartpole", "results/curve-shapes")
LAYOUT = "a0-l0-d1"


@dataclass(frozen=True)
class Shape:
    name: str  # e.g. "cleanba-ppo CartPole-v1 (13 seeds)"
    values: np.ndarray  # (seeds, len(GRID)) per-seed values

    @property
    def mean(self) -> np.ndarray:
        return self.values.mean(axis=0)

    def at(self, fractions: Sequence[float]) -> np.ndarray:
        """Column indexes of the grid at the given fractions."""
        return np.array([int(np.argmin(np.abs(GRID - f))) for f in fractions])

    def draw(self, rng: np.random.Generator, sims: int, seeds: int) -> np.ndarray:
        """(sims, seeds, len(GRID)) new seeds: the mean curve plus a normal draw with the
        records' seed-to-seed covariance along the curve."""
        resid = self.values - self.mean
        g = rng.standard_normal((sims, seeds, resid.shape[0]))
        return self.mean + g @ resid / np.sqrt(resid.shape[0] - 1)


def run_curve(run: Run, last_n: int = DEFAULT_LAST_N) -> np.ndarray:
    """The run's normalised last-`last_n` mean at every GRID fraction of its budget."""
    x = episode_x(run.episodes)
    order = np.argsort(run.episodes["env_steps"], kind="stable")
    x, ret = x[order], run.episodes["episode_return"][order]
    steps = float(run.manifest["hyperparameters"]["total_timesteps"])
    ratio = np.nanmedian(x / np.maximum(run.episodes["env_steps"][order], 1.0))
    budget = steps * (ratio if np.isfinite(ratio) and ratio > 0 else 1.0)
    norm = get_normaliser(str(run.manifest["env_id"]))
    out = []
    for f in GRID:
        kept = ret[x <= f * budget] if f < 1 else ret
        out.append(float(np.mean(kept[-last_n:])) if len(kept) else np.nan)
    return np.asarray(norm(np.array(out)), dtype=np.float64)


def load_shapes(folders: Sequence[Path | str] | None = None, layout: str | None = LAYOUT
                ) -> list[Shape]:
    """One Shape per (system, game) with >= MIN_SEEDS seeds over the folders (default:
    DEFAULT_FOLDERS under the project root, those that exist), on `layout` (None: every
    layout, copies of a seed averaged)."""
    if folders is None:
        folders = [PROJECT_ROOT / f for f in DEFAULT_FOLDERS if (PROJECT_ROOT / f).is_dir()]
    if not folders:
        return []
    runs = load_runs(list(folders)).included
    by_seed: dict[tuple[str, str], dict[int, list[np.ndarray]]] = defaultdict(
        lambda: defaultdict(list))
    for r in runs:
        lay = (r.manifest.get("layout") or {}).get("name")
        if layout is not None and lay != layout:
            continue
        key = (str(r.manifest.get("system")), str(r.manifest["env_id"]))
        by_seed[key][int(r.manifest["seed"])].append(run_curve(r))
    out = []
    for (system, env), seeds in sorted(by_seed.items()):
        curves = np.array([np.mean(v, axis=0) for _, v in sorted(seeds.items())])
        if len(curves) >= MIN_SEEDS and np.isfinite(curves).all():
            out.append(Shape(f"{system} {env} ({len(curves)} seeds)", curves))
    return out
