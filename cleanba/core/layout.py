"""Where the work runs: jax.distributed start-up, devices, and the split of the global sizes.

The layout never changes the hyperparameters. `make_plan` takes the global sizes of the
config (total envs, rollout length, minibatches) and the hardware (processes, actor and
learner devices, actor threads) and works out who runs what, or raises ConfigError naming
the numbers and what would be valid, before anything starts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from cleanba.core.config import CommonConfig, ConfigError
from runrecord import Layout
from runrecord.words import counted

BIND_ENV_VAR = "JAX_COORDINATOR_BIND_ADDRESS"


def coordinator_bind_address(coordinator_address: str, requested: str | None,
                             environ: Mapping[str, str] = os.environ) -> str:
    """Where process 0's jax.distributed coordinator listens.

    JAX's default is every interface ([::]:PORT), reachable by anyone who can reach the
    machine. Here: --coordinator-bind-address if given, else JAX_COORDINATOR_BIND_ADDRESS if
    set (both are the user asking), else the coordinator address itself: 127.0.0.1:PORT
    stays on loopback, node01:PORT listens on node01's own address only.
    """
    chosen = requested or environ.get(BIND_ENV_VAR) or coordinator_address
    host, sep, port = chosen.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError(
            f"coordinator bind address {chosen!r} is not HOST:PORT (e.g. 127.0.0.1:"
            f"{coordinator_address.rpartition(':')[2]}, or [::1]:PORT for IPv6)"
        )
    return chosen


def slurm_coordinator_address() -> str:
    """The coordinator address JAX derives from Slurm's variables (first node, a port from
    the job id), so that the coordinator can bind to it rather than to every interface."""
    from jax._src import clusters  # JAX's own detection, so both sides agree

    address, *_ = clusters.ClusterEnv.auto_detect_unset_distributed_params(
        None, None, None, None, None, None)
    if address is None:
        raise ConfigError("--distributed: no coordinator address could be derived from the "
                          "Slurm variables; give --coordinator-address HOST:PORT")
    return str(address)


def local_device_ids(config: CommonConfig,
                     environ: Mapping[str, str] = os.environ) -> list[int] | None:
    """The GPUs this process asks jax.distributed for (its `local_device_ids`).

    JAX_LOCAL_DEVICE_IDS when set (the user's choice; the harness's local launcher sets it
    to its CUDA_VISIBLE_DEVICES). Inside a Slurm step, the slice of the node's GPUs that
    this task's local rank owns, as many as its layout uses: layout devices 0..k-1 are the
    node's GPUs r*k .. r*k+k-1, r = SLURM_LOCALID (the harness asks `--gpus-per-node` = k
    x tasks on the node, every GPU visible to every task). Left to itself, JAX's Slurm
    detection gives each process the one GPU numbered SLURM_LOCALID whatever its layout
    uses (the same answer when k = 1). None outside Slurm: every device stays visible.
    """
    if ids := environ.get("JAX_LOCAL_DEVICE_IDS", "").strip():
        try:
            return [int(x) for x in ids.split(",")]
        except ValueError:
            raise ConfigError(f"JAX_LOCAL_DEVICE_IDS={ids!r} is not a comma-separated list "
                              "of GPU numbers (e.g. 0,1)") from None
    if "SLURM_LOCALID" not in environ:
        return None
    per_process = max((*config.actor_device_ids, *config.learner_device_ids)) + 1
    rank = int(environ["SLURM_LOCALID"])
    return list(range(rank * per_process, (rank + 1) * per_process))


def init_distributed(config: CommonConfig) -> None:
    """Start jax.distributed when asked: explicit coordinator, or Slurm's variables. The
    coordinator (process 0) listens only on `coordinator_bind_address`."""
    if not config.distributed:
        return
    import jax

    # CPU collectives across processes (pmap's psum, process_allgather) need gloo.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    # No persistent compilation cache across processes: with JAX 0.12.1 two processes
    # whose programs are in the cache (JAX_COMPILATION_CACHE_DIR) hang before their first
    # update, where a cold cache or JAX 0.10-0.12.0 run; a compile is seconds, a hang the
    # whole job. The single-process run keeps the user's cache.
    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):  # the trainer's only way to set one
        print("[cleanba] JAX's persistent compilation cache is off in a multi-process run "
              "(JAX 0.12.1 hangs reading it across processes): each process compiles",
              flush=True)
    jax.config.update("jax_enable_compilation_cache", False)
    if config.coordinator_address is not None:
        jax.distributed.initialize(
            coordinator_address=config.coordinator_address,
            num_processes=config.num_processes,
            process_id=config.process_id,
            coordinator_bind_address=coordinator_bind_address(
                config.coordinator_address, config.coordinator_bind_address),
            local_device_ids=local_device_ids(config),
        )
    else:
        if "SLURM_JOB_ID" not in os.environ:
            raise ConfigError(
                "--distributed without --coordinator-address needs a Slurm job (SLURM_* "
                "variables); outside Slurm give --coordinator-address HOST:PORT "
                "--num-processes N --process-id I"
            )
        jax.distributed.initialize(coordinator_bind_address=coordinator_bind_address(
            slurm_coordinator_address(), config.coordinator_bind_address),
            local_device_ids=local_device_ids(config))


@dataclass(frozen=True)
class Plan:
    """The split of one run over processes, devices and threads (all sizes are counts)."""

    num_processes: int
    process_index: int
    actor_device_ids: tuple[int, ...]
    learner_device_ids: tuple[int, ...]
    num_actor_threads: int  # per actor device
    num_envs: int  # global
    num_steps: int
    num_updates: int
    env_groups: int = 0  # deterministic mode: env groups G (0: off)

    @property
    def deterministic(self) -> bool:
        return self.env_groups > 0

    @property
    def envs_per_group(self) -> int:
        """Deterministic mode: envs per env group (consecutive global env indices)."""
        return self.num_envs // self.env_groups

    @property
    def groups_per_learner_device(self) -> int:
        return self.env_groups // self.total_learner_devices

    @property
    def threads_per_process(self) -> int:
        return len(self.actor_device_ids) * self.num_actor_threads

    @property
    def total_actor_threads(self) -> int:
        return self.num_processes * self.threads_per_process

    @property
    def envs_per_thread(self) -> int:
        return self.num_envs // self.total_actor_threads

    @property
    def local_num_envs(self) -> int:
        return self.num_envs // self.num_processes

    @property
    def total_learner_devices(self) -> int:
        return self.num_processes * len(self.learner_device_ids)

    @property
    def envs_per_learner_device(self) -> int:
        return self.num_envs // self.total_learner_devices

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    def thread_global_index(self, actor_device_pos: int, thread: int) -> int:
        """Global index of an actor thread: process-major, then actor device, then thread."""
        return (
            self.process_index * self.threads_per_process
            + actor_device_pos * self.num_actor_threads
            + thread
        )

    def first_env_index(self, thread_global_index: int) -> int:
        return thread_global_index * self.envs_per_thread

    @property
    def layout(self) -> Layout:
        return Layout(self.actor_device_ids, self.learner_device_ids, self.num_processes)


def check_actor_mode(config: CommonConfig, envs_per_thread: int, threads: int) -> None:
    """--actor-mode double-buffer splits each actor thread's envs into two halves; under
    --deterministic each half must hold whole env groups, so that the network sees the
    same chunks of envs as in the serial mode (cleanba/core/actor_pipelined.py)."""
    if config.actor_mode != "double-buffer":
        return
    if envs_per_thread % 2:
        raise ConfigError(
            f"--actor-mode double-buffer splits each actor thread's envs into two halves, but "
            f"{counted(threads, 'actor thread')} hold {envs_per_thread} envs each (--num-envs "
            f"{config.num_envs}); use an even number per thread, e.g. --num-envs "
            f"{2 * config.num_envs}, or --actor-mode serial"
        )
    if config.deterministic:
        per_group = config.num_envs // config.deterministic_groups
        if (envs_per_thread // 2) % per_group:
            raise ConfigError(
                f"--actor-mode double-buffer with --deterministic: each half of an actor "
                f"thread's {envs_per_thread} envs must hold whole env groups of {per_group} "
                f"envs (--num-envs {config.num_envs} / --deterministic-groups "
                f"{config.deterministic_groups}); use --deterministic-groups "
                f"{2 * config.deterministic_groups} or more, or --actor-mode serial"
            )


def make_plan(
    config: CommonConfig, num_processes: int, process_index: int, num_local_devices: int
) -> Plan:
    """Check the layout against the global sizes and the devices there are."""
    for kind, ids in (("actor", config.actor_device_ids), ("learner", config.learner_device_ids)):
        if not ids:
            raise ConfigError(f"--{kind}-device-ids is empty; give at least one id, e.g. 0")
        if len(set(ids)) != len(ids):
            raise ConfigError(f"--{kind}-device-ids repeats an id: {list(ids)}")
        bad = [i for i in ids if not 0 <= i < num_local_devices]
        if bad:
            raise ConfigError(
                f"--{kind}-device-ids {list(ids)}: device id(s) {bad} out of range; this "
                f"process has {counted(num_local_devices, 'device')}, valid ids are "
                f"0..{num_local_devices - 1}"
            )
    threads = num_processes * len(config.actor_device_ids) * config.num_actor_threads
    if config.num_envs % threads:
        valid = [threads * k for k in range(1, 5)]
        raise ConfigError(
            f"--num-envs {config.num_envs} cannot be split evenly over {threads} actor threads "
            f"({counted(num_processes, 'process', 'processes')} x {counted(len(config.actor_device_ids), 'actor device')} x "
            f"{counted(config.num_actor_threads, 'thread')}); use a multiple of {threads}, e.g. {valid}, "
            "or change the layout"
        )
    learners = num_processes * len(config.learner_device_ids)
    if config.num_envs % learners:
        raise ConfigError(
            f"--num-envs {config.num_envs} cannot be split evenly over "
            f"{counted(learners, 'learner device')} ({counted(num_processes, 'process', 'processes')}"
            f" x {len(config.learner_device_ids)}); "
            f"use a multiple of {learners}"
        )
    if config.deterministic:
        groups = config.deterministic_groups
        for what, count in (("actor threads", threads), ("learner devices", learners)):
            if groups % count:
                raise ConfigError(
                    f"--deterministic: {count} {what} cannot each hold whole env groups of the "
                    f"{groups} (--deterministic-groups); use a multiple of {count} that is a "
                    f"power of two and divides --num-envs {config.num_envs}, or change the layout"
                )
    check_actor_mode(config, config.num_envs // threads, threads)
    batch = config.num_envs * config.num_steps
    if config.total_timesteps < batch:
        raise ConfigError(
            f"--total-timesteps {config.total_timesteps} is less than one batch "
            f"(num_envs {config.num_envs} x num_steps {config.num_steps} = {batch})"
        )
    return Plan(
        num_processes=num_processes,
        process_index=process_index,
        actor_device_ids=tuple(config.actor_device_ids),
        learner_device_ids=tuple(config.learner_device_ids),
        num_actor_threads=config.num_actor_threads,
        num_envs=config.num_envs,
        num_steps=config.num_steps,
        num_updates=config.total_timesteps // batch,
        env_groups=config.deterministic_groups if config.deterministic else 0,
    )
