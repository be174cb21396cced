"""Run records of the Cleanba trainers: manifest, episode tracking, wandb, console progress.

The files themselves are written by runrecord.RunWriter (the project's only writer).
"""

from __future__ import annotations

import os
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchenv import defining_protocol
from cleanba.core.config import config_dict, defining_hyperparameters
from runrecord import Layout, provenance, run_id
from runrecord.cli_dispatch import discard_output
from runrecord.determinism import determinism_block


def make_run_id(system: str, config: Any, env_protocol: dict, layout: Layout) -> str:
    """runrecord.run_id over what defines the run (bookkeeping flags left out)."""
    return run_id(
        {
            "system": system,
            "architecture": config.architecture,
            "env_id": config.env_id,
            "seed": config.seed,
            "hyperparameters": defining_hyperparameters(config),
            "env_protocol": defining_protocol(env_protocol),
            "layout": layout.to_dict(),
        }
    )


def build_manifest(
    *,
    system: str,
    config: Any,
    rid: str,
    env_protocol: dict,
    layout: Layout,
    derived: dict[str, Any],
    devices: list[str],
    determinism: dict[str, Any],
) -> dict[str, Any]:
    hyperparameters = config_dict(config)
    hyperparameters["derived"] = derived
    return {
        "run_id": rid,
        "sweep": config.sweep,
        "system": system,
        "architecture": config.architecture,
        "env_id": config.env_id,
        "seed": config.seed,
        "layout": layout.record_block(devices),
        "hyperparameters": hyperparameters,
        "env_protocol": env_protocol,
        "provenance": provenance.collect(
            accelerators=sorted(set(devices)), process_count=layout.num_processes
        ),
        "determinism": determinism,
    }


def determinism_facts(deterministic: bool, groups: int | None) -> dict[str, Any]:
    """The manifest's `determinism` block (runrecord.determinism) for this process, read
    from JAX (its default backend, the one the trainers use) and the environment; the
    determinism check prints the same facts. Call it after the trainer has set its XLA
    flags (cleanba.core.xla_flags), so the block shows the flags in force."""
    import jax
    import jaxlib

    return determinism_block(
        deterministic=deterministic, groups=groups, platform=jax.default_backend(),
        device_kind=jax.devices()[0].device_kind, device_count=jax.local_device_count(),
        usable_cpus=len(provenance.available_cpus()), cpu=provenance.cpu_signature(),
        jax_version=jax.__version__, jaxlib_version=jaxlib.__version__,
        xla_flags=os.environ.get("XLA_FLAGS", ""),
        matmul_precision=_text_or_none(jax.config.values["jax_default_matmul_precision"]),
        prng_impl=prng_impl_text(jax.config.values), cuda=cuda_versions_text())


def prng_impl_text(values: Any) -> str:
    """jax's default PRNG implementation and the threefry partitioning flag, both of which
    change the random bits: "threefry2x32 (partitionable)"."""
    part = "partitionable" if values.get("jax_threefry_partitionable") else "not partitionable"
    return f"{values.get('jax_default_prng_impl')} ({part})"


def cuda_versions_text() -> str | None:
    """The CUDA runtime, cuDNN and driver versions JAX's CUDA plugin reports, on a GPU
    backend ("runtime 12080, cuDNN 91000, driver 12090"); None elsewhere."""
    import jax

    if jax.default_backend() != "gpu":
        return None
    try:
        from jax._src.lib import cuda_versions  # the plugin's version getters (no public API)
    except ImportError:
        return None
    parts = []
    for name, getter in (("runtime", "cuda_runtime_get_version"), ("cuDNN", "cudnn_get_version"),
                         ("driver", "cuda_driver_get_version")):
        try:
            parts.append(f"{name} {getattr(cuda_versions, getter)()}")
        except Exception:  # noqa: BLE001 - a getter this plugin lacks, or no driver
            continue
    return ", ".join(parts) or None


def _text_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class Episode:
    """A finished episode: `env_steps` = global agent steps of the run when it ended."""

    env_steps: int
    env_index: int
    episode_return: float
    episode_length: int
    wall_time_s: float  # seconds since the run started, when the episode ended


class MissingRawReward(KeyError):
    """EnvPool clipped the rewards but gave no raw reward (info["reward"]) to record."""


@dataclass(frozen=True)
class StepRecord:
    """What the actor records for one env step of a block of envs (EnvPool's next-step
    autoreset: the step after a done only resets the env, so it is masked out).

    reward: the training reward (clipped when the protocol clips); done: terminated or
    truncated (the episode cap); mask: 0 on the reset step that follows a done, else 1;
    raw_reward: the game's unclipped reward, what episode returns are summed from.
    """

    reward: np.ndarray
    done: np.ndarray
    mask: np.ndarray
    raw_reward: np.ndarray


def record_step(prev_done: np.ndarray, reward: np.ndarray, terminated: np.ndarray,
                truncated: np.ndarray, info: dict[str, Any], rewards_clipped: bool) -> StepRecord:
    """The record of one `env.step` (gymnasium API) given the previous step's dones.

    With clipped rewards the raw score must come from info["reward"]; there is no fallback
    to the clipped reward (that would silently record clipped returns as game scores).
    """
    if rewards_clipped:
        if "reward" not in info:
            raise MissingRawReward(
                "the env clips rewards (reward_clip=True) but its info has no 'reward' "
                f"(keys: {sorted(info)}): cannot record raw game scores"
            )
        raw_reward = np.asarray(info["reward"], np.float64)
    else:
        raw_reward = np.asarray(reward, np.float64)
    done = np.asarray(terminated, bool) | np.asarray(truncated, bool)
    return StepRecord(np.asarray(reward, np.float32), done, ~np.asarray(prev_done, bool),
                      raw_reward)


class EpisodeTracker:
    """Sums raw rewards (EnvPool's info["reward"], never clipped) per env into whole-game
    returns. Reset steps (mask 0, EnvPool's next-step autoreset) are not part of an episode.
    """

    def __init__(self, first_env_index: int, num_envs: int):
        self.env_index = first_env_index + np.arange(num_envs)
        self.returns = np.zeros(num_envs, np.float64)
        self.lengths = np.zeros(num_envs, np.int64)

    def restore(self, returns: np.ndarray, lengths: np.ndarray) -> None:
        """Continue the episodes a checkpoint saved mid-way (return and length so far)."""
        self.returns[:] = returns
        self.lengths[:] = lengths

    def step(
        self, raw_reward: np.ndarray, done: np.ndarray, mask: np.ndarray, env_steps: int,
        wall_time_s: float,
    ) -> list[Episode]:
        valid = mask > 0
        self.returns += np.where(valid, raw_reward, 0.0)
        self.lengths += valid
        finished = []
        for i in np.flatnonzero(done & valid):
            finished.append(
                Episode(env_steps, int(self.env_index[i]), float(self.returns[i]),
                        int(self.lengths[i]), wall_time_s)
            )
        self.returns[done] = 0.0
        self.lengths[done] = 0
        return finished


class WandbLogger:
    """--track: what openrlbenchmark reads (a `global_step` history key, in agent steps;
    charts/episodic_return: mean return of the episodes that ended in the update;
    charts/avg_episodic_return: mean over envs of each env's latest finished episode, as
    Cleanba logs it; env_id, exp_name and seed in the run config), plus charts/SPS,
    losses/* and stats/*."""

    def __init__(self, config: Any, system: str, rid: str, run_dir: Path, manifest: dict):
        import wandb

        self._wandb = wandb
        self._latest: dict[int, float] = {}  # env index -> return of its latest episode
        self.exp_name = exp_name(system, config.architecture, manifest["layout"]["name"])
        self.run = wandb.init(
            project=config.wandb_project,
            entity=config.wandb_entity,
            name=f"{system}/{config.env_id}/{config.architecture}/seed{config.seed}/{rid}",
            id=rid,
            dir=str(run_dir),
            config={"system": system, **manifest["hyperparameters"], "layout": manifest["layout"],
                    "env_id": config.env_id, "exp_name": self.exp_name, "seed": config.seed},
            resume="allow",
        )

    def log(self, metrics: dict[str, float], step: int,
            episodes: Sequence[Episode] = ()) -> None:
        row = {**metrics, "global_step": step}
        if episodes:
            row["charts/episodic_return"] = float(np.mean([e.episode_return for e in episodes]))
            self._latest.update((e.env_index, e.episode_return) for e in episodes)
        if self._latest:
            row["charts/avg_episodic_return"] = float(np.mean(list(self._latest.values())))
        self.run.log(row, step=step)

    def close(self, exit_code: int) -> None:
        self.run.finish(exit_code=exit_code)


def exp_name(system: str, architecture: str, layout_name: str) -> str:
    """openrlbenchmark's experiment name of a run: cleanba-impala_cleanba_a0-l0-d1."""
    return f"{system}_{architecture}_{layout_name}"


class Progress:
    """What the console progress line shows; written by the learner, read by the main thread."""

    def __init__(self, num_updates: int):
        self.num_updates = num_updates
        self.update = 0
        self.env_steps = 0
        self.sps = 0.0
        self.recent_returns: deque[float] = deque(maxlen=20)
        self.start = time.monotonic()

    def line(self) -> str:
        ret = f"{np.mean(self.recent_returns):.1f}" if self.recent_returns else "-"
        return (
            f"[cleanba] update {self.update}/{self.num_updates} | env steps {self.env_steps:,} | "
            f"SPS {self.sps:,.0f} | return (last {len(self.recent_returns)}) {ret} | "
            f"{time.monotonic() - self.start:.0f}s"
        )

    def print(self) -> None:
        console(self.line())


def console(message: str, stream: Any = None) -> None:
    """Print one line to stdout (or `stream`). Console output never decides a run's status:
    if the reader has gone (`| head` closed the pipe) the stream is pointed at /dev/null,
    so this and later writes, and the flush at exit, drop the text instead of failing."""
    stream = sys.stdout if stream is None else stream
    try:
        print(message, file=stream, flush=True)
    except (OSError, ValueError):
        discard_output(stream)
