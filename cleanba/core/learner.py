"""The learner thread: takes one rollout from every actor queue (in thread order), runs the
algorithm's update on the learner devices, publishes the new parameters and writes one
updates.csv row (and the batch's finished episodes)."""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

import benchenv
from cleanba.core import actor_state, checkpoint, stopping
from cleanba.core.actor import Rollout
from cleanba.core.context import Context
from cleanba.core.records import Episode, console
from cleanba.numerics.parallel import LearnerMesh, checksum, first_replica
from runrecord import schema
from runrecord.digest import DIGEST_COLUMN, episode_cells, next_digest


def assemble_batch(rollouts: Sequence[Rollout], fields: Sequence[str], num_devices: int):
    """Concatenate this process's rollouts along the env axis (global env order) and split
    the envs evenly over the learner devices: each field held in host memory becomes
    (devices, T, envs/dev, ...). Fields the actors keep on their devices (jax.Arrays) are
    left out: `device_batch` places them."""
    batch = {}
    for name in fields:
        parts = [r.arrays[name] for r in rollouts]
        if isinstance(parts[0], jax.Array):
            continue
        full = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
        if num_devices == 1:
            batch[name] = full[None]
        else:
            batch[name] = np.stack(np.split(full, num_devices, axis=1))
    return batch


def device_batch(rollouts: Sequence[Rollout], fields: Sequence[str], mesh: LearnerMesh,
                 host: dict[str, np.ndarray]) -> dict[str, Any]:
    """The batch on the learner devices: the host fields (`assemble_batch`'s) sharded from
    host memory, the fields the actors kept on their devices moved device to device
    (`LearnerMesh.shard_parts`: the same split, the same values)."""
    out = dict(mesh.shard(host))
    for name in fields:
        parts = [r.arrays[name] for r in rollouts]
        if isinstance(parts[0], jax.Array):
            out[name] = mesh.shard_parts(parts)
    return out


def rollout_stats(rollouts: Sequence[Rollout]) -> np.ndarray:
    """[min version, max version, rollouts, rollouts with a mid-rollout change, param wait]."""
    return np.array(
        [
            min(int(r.versions.min()) for r in rollouts),
            max(int(r.versions.max()) for r in rollouts),
            len(rollouts),
            sum(int(r.versions.min() != r.versions.max()) for r in rollouts),
            sum(r.param_wait_s for r in rollouts),
        ],
        np.float64,
    )


def gather_from_processes(
    stats: np.ndarray, episodes: list[Episode], capacity: int, stop_signal: int = 0
) -> tuple[np.ndarray, list[Episode], dict[int, str]]:
    """All processes' rollout stats (combined) and episodes, in process order, and the
    processes that a signal asked to stop ({index: signal name}; stop_signal: this
    process's signal number, 0 for none).

    Episodes travel in a fixed-size buffer (one row per possible episode of a batch) so
    every process contributes arrays of the same shape to the all-gather.
    """
    if jax.process_count() == 1:
        return stats, episodes, {}
    from jax.experimental import multihost_utils

    buf = np.full((2 + capacity, 5), np.nan, np.float64)
    buf[0] = stats
    buf[1, 0] = stop_signal
    for i, e in enumerate(episodes):
        buf[2 + i] = (e.env_steps, e.env_index, e.episode_return, e.episode_length,
                      e.wall_time_s)
    everything = np.asarray(multihost_utils.process_allgather(buf))  # (processes, 2 + cap, 5)
    all_stats = everything[:, 0]
    combined = np.array(
        [all_stats[:, 0].min(), all_stats[:, 1].max(), all_stats[:, 2].sum(),
         all_stats[:, 3].sum(), all_stats[:, 4].sum()]
    )
    signalled = {i: signal.Signals(int(v)).name for i, v in enumerate(everything[:, 1, 0]) if v}
    out = []
    for rows in everything[:, 2:]:
        for row in rows[~np.isnan(rows[:, 0])]:
            out.append(Episode(int(row[0]), int(row[1]), float(row[2]), int(row[3]),
                               float(row[4])))
    return combined, out, signalled


class NonFiniteLoss(FloatingPointError):
    pass


def actor_params_after(architecture: str, update: int, before: Any, after: Any) -> tuple[int, Any]:
    """(version, params) the actors act with from rollout `update` + 1 on: under cleanba's
    queue of one the version the update started from, else the update's result."""
    return (update, before) if architecture == "cleanba" else (update + 1, after)


def write_checkpoint(ctx: Context, k: int, state: Any, actor: tuple[int, Any]) -> None:
    """Checkpoint after update k (cleanba/core/checkpoint.py): the CSV rows it names are
    made durable first, so a checkpoint never names rows the record may lose."""
    assert ctx.writer is not None
    t0 = time.monotonic()
    ctx.writer.sync()
    meta = {"rows": {"updates.csv": k, "episodes.csv": ctx.episodes_written},
            "actor_version": actor[0], "wall_time_s": time.monotonic() - ctx.start_time,
            "action_key": np.asarray(ctx.action_key).tolist(),
            DIGEST_COLUMN: ctx.records_digest,
            "fingerprint": checkpoint.fingerprint(ctx.prep.manifest)}
    files = checkpoint.state_files(first_replica(state), actor[1])
    if not checkpoint.reseed_every(ctx.prep.checked.env.protocol, ctx.config.checkpoint_every):
        # envs that restore exactly: what each actor thread carried at the end of rollout k
        carried = ctx.snapshots.take(k)
        if len(carried) != ctx.plan.threads_per_process:
            raise RuntimeError(f"checkpoint after update {k}: {len(carried)} of "
                               f"{ctx.plan.threads_per_process} actor threads' env states")
        files[checkpoint.ACTORS_FILE] = actor_state.pack(carried)
    folder = checkpoint.write(ctx.prep.run_dir, k, files, meta, ctx.config.checkpoint_keep)
    ctx.timing.setdefault("checkpoint", []).append(time.monotonic() - t0)
    ctx.checkpoint_bytes = sum(len(b) for b in files.values())
    console(f"[cleanba] checkpoint after update {k}: {folder.relative_to(ctx.prep.run_dir)}"
                f" ({ctx.checkpoint_bytes:,} bytes, {time.monotonic() - t0:.3f} s)")


def learner_loop(ctx: Context, mesh: LearnerMesh, state: Any) -> None:
    """Updates start + 1 .. num_updates (start = ctx.start_update > 0: resumed from the
    checkpoint of update `start`, whose actor params make_context published already)."""
    plan, cfg, alg = ctx.plan, ctx.config, ctx.algorithm
    start = ctx.start_update
    update = alg.make_update(mesh)
    frames_per_step = benchenv.frames_per_step(cfg.env_id)
    capacity = plan.local_num_envs * plan.num_steps
    last_time, last_steps = time.monotonic(), start * plan.batch_size
    ctx.control.together = jax.process_count() > 1
    published = first_replica(state.params)  # what the learner published last
    if start > 0 and cfg.architecture == "cleanba":
        # the publish that ended update `start` before the checkpoint: rollout start + 2's
        # params, queued behind rollout start + 1's (make_context's)
        ctx.channel.publish(start + 1, published)
    for k in range(start + 1, plan.num_updates + 1):
        t0 = time.monotonic()
        rollouts = [ctx.control.get(q) for q in ctx.rollout_queues]
        queue_wait = time.monotonic() - t0
        t_update = time.monotonic()
        batch = assemble_batch(rollouts, alg.batch_fields, len(plan.learner_device_ids))
        if ctx.fault is not None and ctx.fault.kind == "nan" and ctx.fault.at == k:
            batch["rewards"] = np.full_like(batch["rewards"], np.nan)
        if ctx.fault is not None and ctx.fault.kind == "noise" and ctx.fault.at == k:
            noise = np.random.default_rng().random(batch["rewards"].shape)  # OS entropy
            batch["rewards"] = batch["rewards"] + noise.astype(batch["rewards"].dtype)
        if ctx.fault is not None and ctx.fault.kind == "learner" and ctx.fault.at == k:
            raise RuntimeError(f"injected learner fault at update {k} ({ctx.fault})")
        on_devices = device_batch(rollouts, alg.batch_fields, mesh, batch)
        # Let go of the host arrays before the update: once the transfer is done, an actor
        # can write its next rollout into that memory instead of a new set (2 sets per
        # actor thread instead of 3), and the concatenated copy is gone before the next
        # one is made (cleanba/core/rollout_buffers.py).
        stats, batch_episodes = rollout_stats(rollouts), [e for r in rollouts for e in r.episodes]
        del batch, rollouts
        state, metrics = update(state, on_devices, k)
        del on_devices
        metrics = {name: float(v) for name, v in metrics.items()}
        if not math.isfinite(metrics["loss_total"]):
            raise NonFiniteLoss(
                f"loss_total is {metrics['loss_total']} at update {k} (learner version {k + 1}); "
                "stopping the run"
            )
        params, before = first_replica(state.params), published
        ctx.channel.publish(k + 1, params)
        published = params
        digest = checksum(params) if cfg.params_checksum else ""
        ctx.timing["update"].append(time.monotonic() - t_update)

        # Read once: a signal arriving later joins the next update's gather.
        asked = ctx.control.requested_signal
        stats, episodes, signalled = gather_from_processes(
            stats, batch_episodes, capacity, signal.Signals[asked].value if asked else 0)
        # One order whatever the layout: by env step, then global env index.
        episodes.sort(key=lambda e: (e.env_steps, e.env_index))
        now = time.monotonic()
        env_steps = k * plan.batch_size
        sps = (env_steps - last_steps) / max(now - last_time, 1e-9)
        last_time, last_steps = now, env_steps
        if ctx.writer is not None:
            wall = now - ctx.start_time
            episode_rows = [schema.episode_row(e.env_steps, frames_per_step, e.wall_time_s,
                                               e.env_index, e.episode_return, e.episode_length)
                            for e in episodes]
            for episode_row in episode_rows:
                ctx.writer.log_episode(episode_row)
            ctx.records_digest = next_digest(ctx.records_digest, digest,
                                             [episode_cells(r) for r in episode_rows])
            row = {
                "update": k, "env_steps": env_steps, "frames": env_steps * frames_per_step,
                "wall_time_s": wall, "learner_version": k + 1,
                "rollout_policy_version_min": int(stats[0]),
                "rollout_policy_version_max": int(stats[1]),
                "num_rollouts": int(stats[2]), "policy_changes_mid_rollout": int(stats[3]),
                "sps": sps, "rollout_queue_get_s": queue_wait, "param_queue_get_s": stats[4],
                "params_checksum": digest, DIGEST_COLUMN: ctx.records_digest,
            }
            row.update({c: metrics.get(c) for c in alg.metric_columns})
            ctx.writer.log_update(row)
            ctx.episodes_written += len(episodes)
        if ctx.wandb is not None:
            log = {"charts/SPS": sps, "stats/rollout_queue_get_s": queue_wait,
                   "stats/param_queue_get_s": stats[4],
                   "stats/staleness_max": k - stats[0]}
            log.update({f"losses/{c}": v for c, v in metrics.items()})
            ctx.wandb.log(log, step=env_steps, episodes=episodes)
        p = ctx.progress
        p.update, p.env_steps, p.sps = k, env_steps, sps
        p.recent_returns.extend(e.episode_return for e in episodes)
        ctx.updates_done = k
        if ctx.writer is not None and checkpoint.is_boundary(k, cfg.checkpoint_every,
                                                             plan.num_updates):
            write_checkpoint(ctx, k, state,
                             actor_params_after(cfg.architecture, k, before, params))
        ctx.control.phase = (f"training (after update {k} of {plan.num_updates})"
                             if k < plan.num_updates else
                             f"finishing (all {k} updates done, before the final write)")
        if signalled:  # every process saw the same gather: all stop after update k
            ctx.control.stop_together(k, signalled)
            return
        if k < plan.num_updates:  # a test's hold mid-run (CLEANBA_HOLD_AT=update-K)
            stopping.hold(f"update-{k}", cfg.seed)
        if cfg.stop_after_updates == k and k < plan.num_updates:
            ctx.control.stop_early(f"--stop-after-updates {k}: stopped after update {k} of "
                                   f"{plan.num_updates}")
            return
        if cfg.learner_delay_s > 0 and k < plan.num_updates:
            ctx.control.sleep(cfg.learner_delay_s)
