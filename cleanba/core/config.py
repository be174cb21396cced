"""Configuration shared by the Cleanba trainers: env, seed, layout, architecture, records.

Each entry point (cleanba.ppo, cleanba.impala) has ONE tyro dataclass that extends
`CommonConfig` with its algorithm's hyperparameters, and named presets (`atari`, the
paper's settings, and `cartpole`, a small CPU preset). Every field is a documented flag;
`python -m cleanba.ppo atari --help` lists them.

Sizes are global: `num_envs` is the total number of envs of the whole run (all actor
threads, devices and processes), `num_steps` the rollout length, and the batch is
num_envs x num_steps. The layout (device ids, threads, processes) only decides where the
work runs; an impossible split is rejected before anything starts (cleanba.core.layout).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import tyro

from benchenv import BACKENDS, EXACT_STATE_BACKENDS, MAX_ENVS, check_seed, default_backend
from runrecord.flag_bounds import flag_name

Architecture = Literal["sync", "cleanba", "async"]
ActorMode = Literal["serial", "double-buffer"]
ACTOR_MODES = ("serial", "double-buffer")
EnvBackend = Literal["envpool", "ale", "ale-exact"]


class ConfigError(ValueError):
    """Bad arguments: reported on stderr with exit code 2, before anything starts."""


@dataclass
class CommonConfig:
    """Settings every Cleanba trainer shares (environment, sizes, layout, records)."""

    # --- experiment -------------------------------------------------------------------
    env_id: str = "Breakout-v5"
    """Env id: an Atari game as '<Game>-v5' (Breakout-v5) or, on EnvPool, e.g. CartPole-v1."""
    # None only means "not chosen yet" (__post_init__ picks one): not a value to offer.
    env_backend: Annotated[EnvBackend | None,
                           tyro.conf.arg(metavar="{envpool,ale,ale-exact}")] = None
    """Atari backend: envpool, ale (ale-py's vector env, EnvPool's semantics; Linux, macOS,
    Windows) or ale-exact (one ale-py game per env, slower; checkpoints restore its envs
    exactly). Default: envpool where it is installed, else ale (said at start-up). Runs of
    different backends are not pooled unless asked (docs/cleanba.md)."""
    seed: int = 1
    """Run seed, 0..65535: env i's EnvPool seed is a bijective hash of (seed, i)
    (benchenv.env_seeds); the init and action-sampling keys derive from it."""
    total_timesteps: int = 10_000_000
    """Agent env steps of the whole run (all envs, all processes); frames = steps x frame skip."""
    num_envs: int = 128
    """Total envs of the run (global), split over processes x actor devices x threads."""
    num_steps: int = 128
    """Rollout length: steps per env per batch. Global batch = num_envs x num_steps."""

    # --- architecture and layout --------------------------------------------------------
    architecture: Architecture = "cleanba"
    """sync: staleness 0; cleanba: size-1 queues, staleness 1; async: IMPALA-style."""
    actor_device_ids: tuple[int, ...] = (0,)
    """Local device ids the actor threads run inference on (per process)."""
    learner_device_ids: tuple[int, ...] = (0,)
    """Local device ids the learner splits each batch over (gradients averaged)."""
    num_actor_threads: int = 2
    """Actor threads per actor device."""
    actor_mode: ActorMode = "serial"
    """serial: each actor thread runs the policy on all its envs, then steps them all;
    double-buffer: two halves of its envs, one half's env step overlapping the other half's
    policy step (same records under --deterministic; docs/cleanba.md, "Actor modes")."""
    learner_delay_s: float = 0.0
    """Extra sleep after each learner update (the paper's Section 3 staleness experiment)."""

    # --- deterministic mode (docs/deterministic.md) ------------------------------------
    deterministic: bool = False
    """Bit-identical params, losses and episodes on every layout of one device type: fixed
    env groups, micro-batched inference and gradients, fixed-order sums (not with async)."""
    deterministic_groups: int = 4
    """(--deterministic) Env groups G, the unit every layout splits alike: a power of two
    dividing --num-envs that the actor threads and the learner devices divide."""

    # --- network (picked from the observation space) ---------------------------------
    channels: tuple[int, ...] = (16, 32, 32)
    """IMPALA ResNet channels (image observations)."""
    hidden: int = 256
    """IMPALA ResNet hidden units (image observations)."""
    mlp_hidden: tuple[int, ...] = (64, 64)
    """MLP widths (vector observations, e.g. CartPole)."""
    separate_critic: bool = False
    """Give the value head its own torso (CleanRL's CartPole agent; Atari shares one)."""

    # --- distributed (jax.distributed) ---------------------------------------------------
    distributed: bool = False
    """Use jax.distributed (coordinator from Slurm unless --coordinator-address is given)."""
    coordinator_address: str | None = None
    """HOST:PORT of process 0's coordinator (with --distributed)."""
    coordinator_bind_address: str | None = None
    """HOST:PORT process 0's coordinator listens on; default: the coordinator address itself
    (127.0.0.1:PORT on one machine), never all interfaces unless given (0.0.0.0:PORT)."""
    num_processes: int | None = None
    """Number of processes (with --distributed and --coordinator-address)."""
    process_id: int | None = None
    """This process's index, 0 .. num_processes - 1 (with --coordinator-address)."""

    # --- records ----------------------------------------------------------------------
    run_dir: str | None = None
    """Folder of the run record; default results/standalone/runs/<run_id>."""
    sweep: str | None = None
    """Sweep name written to the manifest (the harness sets it)."""
    run_id: str | None = None
    """Run id; default: a hash of what defines the run (runrecord.run_id)."""
    params_checksum: bool = True
    """Write a SHA-256 digest of the params after each update (bitwise checks; ~ms)."""
    progress_interval_s: float = 10.0
    """Seconds between console progress lines (0 turns them off)."""
    stop_after_updates: int | None = None
    """Stop after this many updates, with the learning-rate schedule and everything else of
    the whole run (status `interrupted`, the reason naming the flag): the prefix replay of
    `harness verify --replay` (docs/certificate.md). Not part of the run id."""
    checkpoint_every: int = 0
    """Write a checkpoint of the whole training state every this many updates into the
    record's checkpoints/ folder (0: none). Every env is re-seeded at each checkpoint, the
    episodes running there cut, so the run differs from one without (its env protocol says
    `reseed_every_updates`; docs/cleanba.md, "Checkpoints and resume")."""
    checkpoint_keep: int = 2
    """Checkpoints kept: the newest ones; an older one goes once a newer one is durable."""
    resume_from: str | None = None
    """Continue the interrupted run whose record is this folder, from its newest valid
    checkpoint (a torn one, or one of another code, configuration or stack, is skipped and
    said why; none valid: from update 0). The record continues in that folder."""
    track: bool = False
    """Also log to Weights & Biases (honours WANDB_MODE=offline)."""
    wandb_project: str = "cleanba"
    """wandb project (with --track)."""
    wandb_entity: str | None = None
    """wandb entity, i.e. user or team (with --track)."""

    def make_network(self, obs_shape: tuple[int, ...], num_actions: int):
        """The actor-critic for this env: IMPALA ResNet for images, MLP for vectors."""
        from cleanba.numerics.networks import make_network

        return make_network(obs_shape, num_actions, self.channels, self.hidden, self.mlp_hidden,
                            self.separate_critic)

    def __post_init__(self) -> None:
        if self.env_backend is None:
            self.env_backend = default_backend()  # type: ignore[assignment]
        elif self.env_backend not in BACKENDS:
            raise ConfigError(f"--env-backend must be one of {', '.join(BACKENDS)}; "
                              f"got {self.env_backend!r}")
        for name in ("total_timesteps", "num_envs", "num_steps", "num_actor_threads"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{flag_name(name)} must be >= 1, got {getattr(self, name)}")
        try:
            check_seed(self.seed)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if self.num_envs > MAX_ENVS:
            raise ConfigError(f"--num-envs must be <= {MAX_ENVS}, got {self.num_envs}")
        if self.stop_after_updates is not None and self.stop_after_updates < 1:
            raise ConfigError(f"--stop-after-updates must be >= 1, got {self.stop_after_updates}")
        if self.checkpoint_every < 0:
            raise ConfigError(f"--checkpoint-every must be >= 0, got {self.checkpoint_every}")
        if self.checkpoint_keep < 1:
            raise ConfigError(f"--checkpoint-keep must be >= 1, got {self.checkpoint_keep}")
        if self.distributed and self.resume_from and not self.checkpoint_every:
            # the processes agree on a checkpoint only in runs that write them
            raise ConfigError("--resume-from with --distributed needs --checkpoint-every (the "
                              "run's own interval)")
        if self.distributed and self.checkpoint_every and self.env_backend in EXACT_STATE_BACKENDS:
            # a checkpoint would hold process 0's envs only
            raise ConfigError(f"--checkpoint-every with --distributed needs a backend that "
                              f"re-seeds at checkpoints, not {self.env_backend}")
        if self.resume_from is not None and self.run_dir is not None \
                and os.path.abspath(self.run_dir) != os.path.abspath(self.resume_from):
            raise ConfigError(f"--resume-from {self.resume_from} continues that record: "
                              f"--run-dir {self.run_dir} must be the same folder or left out")
        if self.learner_delay_s < 0:
            raise ConfigError(f"--learner-delay-s must be >= 0, got {self.learner_delay_s}")
        if self.architecture not in ("sync", "cleanba", "async"):
            raise ConfigError(
                f"--architecture must be one of sync, cleanba, async; got {self.architecture!r}"
            )
        if self.actor_mode not in ACTOR_MODES:
            raise ConfigError(f"--actor-mode must be one of {', '.join(ACTOR_MODES)}; "
                              f"got {self.actor_mode!r}")
        if self.deterministic and self.architecture == "async":
            raise ConfigError(
                "--deterministic needs --architecture sync or cleanba: with async, which policy "
                "version acts at which step depends on timing, so no two runs are alike"
            )
        groups = self.deterministic_groups
        if self.deterministic and (groups < 1 or groups & (groups - 1)
                                   or self.num_envs % groups):
            raise ConfigError(
                f"--deterministic-groups must be a power of two that divides --num-envs "
                f"{self.num_envs}, got {groups}; valid: "
                f"{[g for g in (1, 2, 4, 8, 16, 32, 64) if self.num_envs % g == 0]}"
            )
        self.actor_device_ids = tuple(self.actor_device_ids)
        self.learner_device_ids = tuple(self.learner_device_ids)
        explicit = (self.coordinator_address, self.coordinator_bind_address, self.num_processes,
                    self.process_id)
        if any(x is not None for x in explicit) and not self.distributed:
            raise ConfigError(
                "--coordinator-address/--coordinator-bind-address/--num-processes/--process-id "
                "need --distributed"
            )
        if self.coordinator_address is not None and (
            self.num_processes is None or self.process_id is None
        ):
            raise ConfigError(
                "--coordinator-address needs --num-processes and --process-id as well"
            )
        if self.num_processes is not None and self.process_id is not None:
            if not 0 <= self.process_id < self.num_processes:
                raise ConfigError(
                    f"--process-id must be in 0..{self.num_processes - 1}, got {self.process_id}"
                )


# Fields that say where and how a run is recorded or launched, not what it computes:
# left out of the run id so that the same run gets the same id wherever it is launched.
BOOKKEEPING_FIELDS = (
    "run_dir",
    "sweep",
    "run_id",
    "params_checksum",
    "progress_interval_s",
    "stop_after_updates",
    "checkpoint_every",  # its re-seeding is in the env protocol (reseed_every_updates)
    "checkpoint_keep",
    # how an actor thread schedules its work, not what it computes: under --deterministic
    # the same bits in either mode, so a run keeps its id and may resume in the other mode
    # (the manifest's hyperparameters still record it)
    "actor_mode",
    "resume_from",
    "track",
    "wandb_project",
    "wandb_entity",
    "coordinator_address",
    "coordinator_bind_address",
    "process_id",
)


def config_dict(config: Any) -> dict[str, Any]:
    """The resolved config as plain JSON-able data (tuples become lists)."""
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(config).items()}


def defining_hyperparameters(config: Any) -> dict[str, Any]:
    """The config without bookkeeping fields: what the run id hashes."""
    return {k: v for k, v in config_dict(config).items() if k not in BOOKKEEPING_FIELDS}


# --- fault injection (a test hook; documented in docs/cleanba.md) ------------------------

FAULT_ENV_VAR = "CLEANBA_FAULT"
FAULT_KINDS = ("actor", "learner", "nan", "noise")


@dataclass(frozen=True)
class Fault:
    """An injected failure: `actor:K` raises in actor thread 0 at its rollout K,
    `learner:K` raises in the learner at update K, `nan:K` makes update K's rewards NaN so
    the real loss turns NaN, `noise:K` adds noise drawn from the OS's entropy to update K's
    rewards (a non-deterministic op: the determinism check must see runs differ from
    update K on)."""

    kind: str
    at: int


def fault_from_env(environ: Mapping[str, str] = os.environ) -> Fault | None:
    text = environ.get(FAULT_ENV_VAR, "").strip()
    if not text:
        return None
    kind, _, at = text.partition(":")
    if kind not in FAULT_KINDS or not at.isdigit() or int(at) < 1:
        raise ConfigError(
            f"{FAULT_ENV_VAR}={text!r}: expected KIND:N with KIND one of {', '.join(FAULT_KINDS)}"
            " and N >= 1 (e.g. actor:3)"
        )
    return Fault(kind, int(at))


# --- where actors keep rollout observations (a test and diagnosis hook; docs/cleanba.md) --

ROLLOUT_OBS_ENV_VAR = "CLEANBA_ROLLOUT_OBS"
ROLLOUT_OBS_CHOICES = {"device": True, "host": False, "auto": None}


def rollout_obs_from_env(environ: Mapping[str, str] = os.environ) -> bool | None:
    """`CLEANBA_ROLLOUT_OBS=device|host|auto` (unset: auto): keep the actors' rollout
    observations on their devices, in reused host memory, or by platform (on the device
    unless it is a CPU; cleanba/core/actor.py). The records are the same bits either way;
    it lets a CPU run take the GPU's path, so tests compare both here."""
    text = environ.get(ROLLOUT_OBS_ENV_VAR, "").strip() or "auto"
    if text not in ROLLOUT_OBS_CHOICES:
        raise ConfigError(f"{ROLLOUT_OBS_ENV_VAR}={text!r}: expected one of "
                          f"{', '.join(ROLLOUT_OBS_CHOICES)}")
    return ROLLOUT_OBS_CHOICES[text]
