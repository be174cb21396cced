"""Synthetic run records in the contract format (through runrecord.RunWriter).

For tests, the benchmark and the harness's report tests: learning curves that rise from
the env's random score towards `skill` x (high - low), seeded by (seed, env) only, so two
layouts of the same seed write bitwise-identical records unless `shift` or
`noise_seed_offset` differ. Wall time scales with `seconds_per_frame` (layouts differ in
speed, never in results).
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np

from analysis.scales.normalize import get_normaliser
from benchenv import env_protocol as protocol_of
from runrecord import RunWriter, run_id, schema
from runrecord.layout import parse_layout


def write_synthetic_run(
    root: Path | str,
    *,
    system: str = "cleanba-ppo",
    architecture: str = "cleanba",
    env_id: str = "CartPole-v1",
    seed: int = 1,
    layout: str = "a0-l0-d1",
    status: str = schema.COMPLETED,
    skill: float = 1.0,
    shift: float = 0.0,
    noise: float = 0.05,
    total_frames: int = 100_000,
    episodes: int = 300,
    updates: int = 40,
    seconds_per_frame: float = 1e-4,
    noise_seed_offset: int = 0,
    sweep: str = "synthetic",
    score_range: tuple[float, float] | None = None,
    run_dir: Path | str | None = None,
    determinism: dict | None = None,
    packages: dict | None = None,
    devices: tuple[str, ...] = ("cpu",),
) -> Path:
    """Write one run under <root>/runs/<run_id>/ (or `run_dir`, whose name is then the run
    id) and return its folder. `determinism`: the manifest's block (none when None, as in
    records written before it). `packages`: the provenance's package versions (none when
    None); `devices`: the layout's device kinds.

    Final normalised score is about skill + shift (noise: sd of per-episode normalised
    returns; a per-seed offset of sd noise/2 makes seeds differ). status other than
    completed stops after half the episodes and writes that final status (running: no
    final status at all). `score_range` (low, high) is for envs without a normaliser.
    """
    norm = get_normaliser(env_id, {env_id: score_range} if score_range else None)
    key = zlib.crc32(f"{env_id}/{seed}/{noise_seed_offset}".encode())
    rng = np.random.default_rng(key)
    frames_per_step = 4 if norm.source.startswith("Atari") else 1
    lay = parse_layout(layout)
    definition = {"system": system, "architecture": architecture, "env_id": env_id,
                  "seed": seed, "layout": lay.name, "skill": skill, "shift": shift,
                  "noise_seed_offset": noise_seed_offset, "total_frames": total_frames}
    rid = Path(run_dir).name if run_dir is not None else run_id(definition)
    manifest = {
        "run_id": rid, "sweep": sweep, "system": system, "architecture": architecture,
        "env_id": env_id, "seed": seed,
        "layout": {**lay.to_dict(), "devices": list(devices), "num_cpus": 2},
        "hyperparameters": {"total_frames": total_frames, "skill": skill},
        "env_protocol": {"frame_skip": frames_per_step},
        "provenance": {"synthetic": True, **({"packages": packages} if packages else {})},
        **({"determinism": determinism} if determinism is not None else {}),
    }
    run_dir = Path(run_dir) if run_dir is not None else Path(root) / "runs" / rid
    w = RunWriter(run_dir, manifest, extra_update_columns=["loss_total", "loss_value"])
    seed_offset = rng.normal(0, noise / 2)
    n_ep = episodes if status == schema.COMPLETED else episodes // 2
    ep_frames = np.sort(rng.uniform(0, total_frames, episodes))[:n_ep].round()
    progress = ep_frames / total_frames
    target = skill + shift + seed_offset
    score = target * (1 - np.exp(-4 * progress)) + rng.normal(0, noise, n_ep)
    returns = norm.low + score * (norm.high - norm.low)
    for f, r in zip(ep_frames, returns, strict=True):
        w.log_episode({"env_steps": int(f) // frames_per_step, "frames": int(f),
                       "wall_time_s": float(f) * seconds_per_frame,
                       "env_index": int(rng.integers(0, 8)), "episode_return": float(r),
                       "episode_length": int(rng.integers(10, 500))})
    n_up = updates if status == schema.COMPLETED else updates // 2
    for k in range(1, n_up + 1):
        lv = k + 1
        if architecture == "cleanba":
            v = 1 if k == 1 else lv - 2
            vmin = vmax = v
            mid = 0
        elif architecture == "sync":
            vmin = vmax = lv - 1
            mid = 0
        else:
            vmax = lv - 1
            vmin = max(1, vmax - int(rng.integers(0, 3)))
            mid = int(vmin != vmax)
        f = k * total_frames // updates
        w.log_update({"update": k, "env_steps": f // frames_per_step, "frames": f,
                      "wall_time_s": f * seconds_per_frame, "learner_version": lv,
                      "rollout_policy_version_min": vmin, "rollout_policy_version_max": vmax,
                      "num_rollouts": 2, "policy_changes_mid_rollout": mid, "sps": 1000.0,
                      "loss_total": float(rng.normal()), "loss_value": float(rng.normal()),
                      "rollout_queue_get_s": 0.01, "param_queue_get_s": 0.01,
                      "params_checksum": f"{zlib.crc32(f'{key}/{k}'.encode()):08x}"})
    if status == schema.RUNNING:
        return run_dir
    summary = {"env_steps": total_frames // frames_per_step, "frames": total_frames,
               "wall_time_s": total_frames * seconds_per_frame, "mean_sps": 1.0 / (
                   seconds_per_frame * frames_per_step), "updates": n_up, "episodes": n_ep}
    error = None if status == schema.COMPLETED else {
        "type": "RuntimeError", "message": "synthetic failure", "traceback": ""}
    w.finish(status, error=error, summary=summary if status == schema.COMPLETED else None)
    return run_dir


def final_score_history(final: float, *, total_frames: int, episodes: int = 150,
                        start: float = 0.0, frames_per_step: int = 4,
                        seconds_per_frame: float = 1e-5) -> dict[str, np.ndarray]:
    """Episode history of a run whose final score (mean of its last 100 episodes) is
    exactly `final`: a linear rise from `start`, then the last 100 episodes at `final`
    +- an alternating wiggle that cancels in their mean. Columns: env_steps, frames,
    wall_time_s, episode_return (episodes end evenly spaced up to total_frames)."""
    if episodes < 100:
        raise ValueError("need at least 100 episodes (the final score's window)")
    frames = np.linspace(total_frames / episodes, total_frames, episodes).round()
    rise = np.linspace(start, final, episodes - 100, endpoint=False)
    wiggle = 0.01 * (abs(final) + 1) * np.where(np.arange(100) % 2 == 0, 1.0, -1.0)
    returns = np.concatenate([rise, final + wiggle])
    return {"env_steps": frames // frames_per_step, "frames": frames,
            "wall_time_s": frames * seconds_per_frame, "episode_return": returns}


def write_final_score_run(
    root: Path | str, *, final: float, env_id: str, seed: int, system: str = "cleanba-impala",
    architecture: str = "cleanba", layout: str = "a0-l0-d1",
    env_protocol: dict | None = None, total_frames: int = 200_000_000, episodes: int = 150,
    sweep: str = "synthetic-final", run_dir: Path | str | None = None,
) -> Path:
    """One completed run record (runrecord.RunWriter) whose final score is exactly
    `final` (final_score_history). `env_protocol` defaults to the paper's
    (benchenv.env_protocol); the frame budget is hyperparameters.total_frames.
    `run_dir`: where to write it (default <root>/runs/<run id>); its name is the run id."""
    proto = protocol_of(env_id) if env_protocol is None else env_protocol
    proto = {**proto, "frame_skip": proto.get("frame_skip", 4)}
    lay = parse_layout(layout)
    definition = {"system": system, "architecture": architecture, "env_id": env_id,
                  "seed": seed, "layout": lay.name, "final": final, "protocol": proto,
                  "total_frames": total_frames}
    rid = Path(run_dir).name if run_dir is not None else run_id(definition)
    manifest = {
        "run_id": rid, "sweep": sweep, "system": system, "architecture": architecture,
        "env_id": env_id, "seed": seed,
        "layout": {**lay.to_dict(), "devices": ["cpu"], "num_cpus": 2},
        "hyperparameters": {"total_frames": total_frames}, "env_protocol": proto,
        "provenance": {"synthetic": True},
    }
    run_dir = Path(run_dir) if run_dir is not None else Path(root) / "runs" / rid
    w = RunWriter(run_dir, manifest)
    h = final_score_history(final, total_frames=total_frames, episodes=episodes,
                            frames_per_step=int(proto["frame_skip"]))
    for i in range(episodes):
        w.log_episode({"env_steps": int(h["env_steps"][i]), "frames": int(h["frames"][i]),
                       "wall_time_s": float(h["wall_time_s"][i]), "env_index": i % 8,
                       "episode_return": float(h["episode_return"][i]),
                       "episode_length": 1000})
    w.finish(schema.COMPLETED, summary={"frames": total_frames,
                                        "env_steps": total_frames // int(proto["frame_skip"]),
                                        "wall_time_s": float(h["wall_time_s"][-1]),
                                        "episodes": episodes, "updates": 0})
    return run_dir


def synthetic_layout_runs(root, seeds, layouts, shift=None, noise=0.05):
    """Synthetic runs of `seeds` on `layouts` under `root`, loaded (included runs). A
    shifted layout gets its own noise (offset 23): a seed's runs on two layouts are then
    not copies plus a constant, which the pairing by seed would decide at once."""
    from analysis.inputs.load import load_runs

    for lay in layouts:
        for s in seeds:
            write_synthetic_run(root, seed=s, layout=lay, noise=noise,
                                shift=(shift or {}).get(lay, 0.0),
                                noise_seed_offset=23 * int(lay in (shift or {})))
    return load_runs([root]).included
