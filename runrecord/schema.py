"""The run-record format: the one place that names its files, columns and statuses.

Every part of the project (trainers, baseline adapters, harness, analysis) writes and
reads run records through this package. docs/run-format.md explains each field; bump
SCHEMA_VERSION when a change would make an old reader misread a new record.
"""

from __future__ import annotations

SCHEMA_VERSION = 1

MANIFEST_FILE = "manifest.json"
EPISODES_FILE = "episodes.csv"
UPDATES_FILE = "updates.csv"

# Run states. `running` is written first; exactly one of the others ends a run.
RUNNING = "running"
COMPLETED = "completed"
FAILED = "failed"
INTERRUPTED = "interrupted"
# A run the harness could not start because something outside the project is missing
# (e.g. a baseline checkout). Never carries results.
SKIPPED = "skipped"
# Files the harness keeps in a run folder across attempts: the supervisor's lock and the
# console log (appended, one header line per attempt). The writer never archives them.
LOCK_FILE = ".lock"
LOG_FILE = "stdout.log"
HARNESS_FILES = (LOCK_FILE, LOG_FILE)
# Below a run folder: the files of unfinished earlier attempts, one numbered folder each
# (previous_attempts/1/, ...). History, not runs: readers skip it.
ATTEMPTS_DIR = "previous_attempts"
# The results layout: <root>/<sweep>/RUNS_DIR/<run_id> (runrecord.paths.run_folder).
RUNS_DIR = "runs"

STATUSES = (RUNNING, COMPLETED, FAILED, INTERRUPTED, SKIPPED)
FINAL_STATUSES = (COMPLETED, FAILED, INTERRUPTED, SKIPPED)

SYSTEMS = ("cleanba-ppo", "cleanba-impala", "monobeast-impala", "moolib-impala")
ARCHITECTURES = ("sync", "cleanba", "async")

# One row per finished episode. Returns are raw game scores of whole games.
EPISODE_COLUMNS = (
    "env_steps",  # global env steps (all envs, all processes) when the episode ended
    "frames",  # env_steps x frame skip (Atari: 4; classic control: 1)
    "wall_time_s",  # seconds since the run started
    "env_index",  # global index of the env in the whole run (0 .. total envs - 1)
    "episode_return",  # raw, unclipped
    "episode_length",  # agent steps
)


def episode_row(env_steps: int, frame_skip: int, wall_time_s: float, env_index: int,
                episode_return: float, episode_length: int) -> dict:
    """An episodes.csv row (EPISODE_COLUMNS): the episode ended at `env_steps` agent steps
    (frames: x frame_skip), `wall_time_s` after training started."""
    return {
        "env_steps": env_steps,
        "frames": env_steps * frame_skip,
        "wall_time_s": wall_time_s,
        "env_index": env_index,
        "episode_return": episode_return,
        "episode_length": episode_length,
    }


# Columns every updates.csv has, in this order. Algorithm-specific columns follow the
# required ones: losses are prefixed "loss_" (loss_total, loss_policy, loss_value,
# loss_entropy, ...) and other learner statistics "stat_" (stat_grad_norm, ...).
UPDATE_COLUMNS = (
    "update",  # 1-based learner update index
    "env_steps",  # global env steps consumed so far (including this update's batch)
    "frames",
    "wall_time_s",
    "learner_version",  # the policy version this update produces (initial params = 1)
    "rollout_policy_version_min",  # oldest version that generated any step of the batch
    "rollout_policy_version_max",  # newest version that generated any step of the batch
    "num_rollouts",  # trajectories (actor rollouts) in the batch
    "policy_changes_mid_rollout",  # how many of them saw more than one policy version
    "sps",  # env steps per second over this update (delta, not cumulative)
    "rollout_queue_get_s",  # learner's wait for data
    "param_queue_get_s",  # actor's wait for params, summed over the batch's rollouts
    "params_checksum",  # optional: hex digest of the params after the update, or ""
    "records_digest",  # optional: the running digest of the records (runrecord.digest), or ""
)
# Columns a reader does not require (records written before them, or by writers that
# do not compute them, lack them or leave them empty).
OPTIONAL_UPDATE_COLUMNS = ("params_checksum", "records_digest")
REQUIRED_UPDATE_COLUMNS = UPDATE_COLUMNS[:-len(OPTIONAL_UPDATE_COLUMNS)]
# The columns written after an algorithm's loss_ and stat_ columns, in this order.
TRAILING_UPDATE_COLUMNS = UPDATE_COLUMNS[-4:]
LOSS_PREFIX = "loss_"
STAT_PREFIX = "stat_"

# Keys of manifest.json. Values are documented in docs/run-format.md.
MANIFEST_KEYS = (
    "schema_version",
    "run_id",
    "sweep",
    "system",
    "architecture",
    "env_id",
    "seed",
    "layout",
    "hyperparameters",
    "env_protocol",
    "provenance",
    "determinism",  # optional (runrecord.determinism); records before it lack it
    "status",
    "started_at",
    "finished_at",
    "error",
    "summary",
)
LAYOUT_KEYS = (
    "name",
    "actor_device_ids",
    "learner_device_ids",
    "num_processes",
    "devices",
    "num_cpus",
)
SUMMARY_KEYS = ("env_steps", "frames", "wall_time_s", "mean_sps", "updates", "episodes")


def summary(env_steps: int, frame_skip: int, wall_time_s: float, updates: int,
            episodes: int) -> dict:
    """The manifest's `summary` (SUMMARY_KEYS): `env_steps` agent steps trained on,
    `frame_skip` frames each, in `wall_time_s` seconds."""
    return {
        "env_steps": int(env_steps),
        "frames": int(env_steps) * frame_skip,
        "wall_time_s": float(wall_time_s),
        "mean_sps": float(env_steps) / wall_time_s if wall_time_s > 0 else 0.0,
        "updates": int(updates),
        "episodes": int(episodes),
    }


def staleness(learner_version: int, rollout_policy_version: int) -> int:
    """Policy lag of the data an update trained on.

    Update k produces version k+1 from version k; data from version k has staleness 0.
    """
    return learner_version - 1 - rollout_policy_version
