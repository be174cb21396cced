"""monobeast-impala: torchbeast's monobeast, run from the user's checkout, into a run record.

    python -m baselines.monobeast --torchbeast-path ~/src/torchbeast --env-id Breakout-v5 --seed 1

The checkout's code runs unmodified; the adapter replaces named module attributes of
torchbeast.monobeast at run time (it copies none of it):

- create_env: an EnvPool env with the shared Atari protocol (benchenv/__init__.py) and raw
  rewards (monobeast clips them itself); actor i's env is global env index i of the run
  (benchenv.env_seeds).
- act: seeds torch per actor and reports actor failures to the adapter.
- Net: by default the IMPALA ResNet of our trainers (baselines/torch_resnet.py, the
  paper's network for every agent); `--network atarinet` keeps monobeast's stock AtariNet
  (Nature CNN). Either one's forward also outputs the policy version (a shared counter
  that each learn() bumps when it loads new parameters into the actors' model), so the
  unchanged actor loop stores the version of every step in an extra rollout buffer.
- create_buffers: adds that buffer; get_batch: timed; learn: optional learner delay,
  then one updates.csv row per update with the versions its batch was generated with.
- file_writer.gather_metadata: keeps the copy of os.environ out of meta.json.
Episode returns are recorded where episodes end, in the actors' env wrappers (monobeast
stores none), and sent to this process through a queue.
"""

from __future__ import annotations

import os

# Before anything imports torch: monobeast's forked actors hang otherwise.
os.environ["OMP_NUM_THREADS"] = "1"

import _thread  # noqa: E402
import multiprocessing  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import types  # noqa: E402
from collections.abc import Mapping  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, ClassVar, Literal  # noqa: E402

import numpy as np  # noqa: E402

from baselines import common, mapping  # noqa: E402
from baselines.adapter import Baseline, Checkout, Launch, run_as_main  # noqa: E402
from baselines.native_logs import read_monobeast_logs  # noqa: E402
from benchenv import env_seeds  # noqa: E402
from runrecord import schema  # noqa: E402

XPID = "monobeast"  # native logs go to <run_dir>/native/monobeast/
D = mapping.MONOBEAST_DEFAULTS


@dataclass(kw_only=True)
class Args(common.AdapterArgs):
    """Run torchbeast's monobeast (IMPALA) from a checkout on the shared EnvPool Atari protocol.

    Args:
        seed: run seed: actor i runs the run's env i (benchenv.env_seeds); torch is seeded from it (monobeast has no seed flag)
        total_timesteps: agent steps to train for (monobeast --total_steps; frames = 4 x steps)
        num_envs: actor processes, one env each (monobeast --num_actors)
        num_steps: unroll length of each trajectory (monobeast --unroll_length)
        learning_rate: RMSprop learning rate, decayed linearly to 0 at total_timesteps
        batch_size: trajectories per learner update (monobeast --batch_size)
        learner_delay_s: seconds added to each learner update, as if learn() slept first inside its lock (Section 3 experiment: 1.0)
        gamma: discount (monobeast --discounting)
        ent_coef: entropy cost (monobeast --entropy_cost)
        vf_coef: baseline cost (monobeast --baseline_cost)
        max_grad_norm: global gradient norm clip (monobeast --grad_norm_clipping)
        use_cuda: learn on CUDA when torch sees a GPU (monobeast's default); --no-use-cuda forces CPU
    """

    DEFAULTS: ClassVar[Mapping[str, Any]] = D
    MODEL: ClassVar[str] = "monobeast's Atari networks"

    num_learner_threads: int = D["num_learner_threads"]
    """learner threads (monobeast --num_learner_threads)"""
    num_buffers: int | None = D["num_buffers"]
    """shared rollout buffers; None: monobeast's max(2 x num_envs, batch_size)"""
    network: Literal["impala-resnet", "atarinet"] = D["network"]
    """impala-resnet: our trainers' IMPALA ResNet (16-32-32, 256; the paper's network); atarinet: monobeast's stock Nature CNN"""
    torchbeast_path: Path | None = None
    """torchbeast checkout, the folder holding torchbeast/monobeast.py (default: $TORCHBEAST_PATH)"""

    def checkout(self) -> Path | None:
        return self.torchbeast_path


def actor_torch_seed(seed: int, actor_index: int) -> int:
    """Torch seed of actor i: distinct per actor (forked actors would share the parent's RNG)."""
    return int(np.random.SeedSequence([seed, 1 + actor_index]).generate_state(1, dtype=np.uint64)[0])


def import_monobeast(checkout: Path) -> types.ModuleType:
    """torchbeast.monobeast from `checkout`, or BaselineUnavailable saying what failed."""
    common.require_packages({"torch": "install it with pip install 'cleanba-bench[baselines]'"})
    # atari_wrappers imports gym and cv2 for monobeast's own create_env, which the adapter
    # replaces; an empty stand-in keeps those imports (and old atari-py) unnecessary.
    (mb,) = common.import_from_checkout(
        checkout, ("torchbeast.monobeast",),
        stubs={"torchbeast.atari_wrappers":
               "stand-in: baselines.monobeast replaces create_env with an EnvPool env"},
        required=("create_env", "act", "learn", "get_batch", "create_buffers", "AtariNet",
                  "train", "parser"),
        tested_at="torchbeast commit 0af07b0")
    return mb


def network_class(mb: Any, network: str) -> type:
    """The model class monobeast builds for `network` (before the policy-version hook)."""
    if network == "atarinet":
        return mb.AtariNet  # type: ignore[no-any-return]
    if network == "impala-resnet":
        from baselines.torch_resnet import MonobeastImpalaNet

        return MonobeastImpalaNet
    raise ValueError(f"unknown network {network!r}; valid: {list(mapping.MONOBEAST_NETWORKS)}")


def versioned_net(base: type, counter: Any, on_build: Any = None) -> type:
    """`base` (a monobeast model class) whose forward also returns the policy version,
    bumped by load_state_dict; `on_build(model)` is called with each model built."""
    import torch

    class VersionedNet(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            if on_build is not None:
                on_build(self)

        def forward(self, inputs, core_state=()):
            # Read before computing: learn() may load new parameters mid-forward (hogwild).
            version = int(counter.item())
            out, state = super().forward(inputs, core_state)
            out["policy_version"] = torch.full(
                out["action"].shape, version, dtype=torch.int64, device=out["action"].device
            )
            return out, state

        def load_state_dict(self, *args, **kwargs):
            # learn() ends by loading the new parameters into the actors' shared model:
            # from here on, actors act with the next version.
            result = super().load_state_dict(*args, **kwargs)
            counter.add_(1)
            return result

    return VersionedNet


class _SpacesOnly:
    """What monobeast's train() needs from the env it makes in the main process: spaces."""

    def __init__(self, env_id: str, protocol: dict[str, Any]):
        import envpool

        spec = envpool.make_spec(env_id, **protocol)
        self.observation_space = spec.observation_space
        self.action_space = spec.action_space

    def close(self) -> None:
        pass


class MonobeastRun:
    """Hooks monobeast, runs its train(), and writes the record."""

    def __init__(self, launch: Launch[Args], flags: Any):
        import torch

        args = self.args = launch.args
        self.mb = launch.code
        self.writer = launch.writer
        self.protocol = launch.protocol
        self.native_dir = launch.native_dir
        self.plan = launch.plan or {}
        self.flags = flags  # monobeast's parsed argv
        self.frame_skip = int(self.protocol["frame_skip"])
        self.batch_steps = args.num_steps * args.batch_size
        ctx = multiprocessing.get_context("fork")
        # Shared with the forked actors: the policy version, each actor's step count, events.
        self.version = torch.ones((), dtype=torch.int64).share_memory_()
        self.actor_steps = ctx.Array("q", args.num_envs, lock=False)
        self.events = ctx.SimpleQueue()
        self.actor_index: int | None = None  # set in each actor process
        self.t0 = time.monotonic()
        self.wall_time_s = 0.0
        self.error: str | None = None
        self.interrupted = False
        self.learner_done = False
        self.stopped = False  # set when the record is being finished: no more updates
        self.updates = 0
        self.episodes = 0
        self.actor_pids: dict[int, int] = {}
        self.network: dict[str, Any] = {"name": args.network}  # completed when the model is built
        self._learn_lock = threading.Lock()
        self._tls = threading.local()
        self._last_row_time = self.t0
        self._orig = {n: getattr(self.mb, n) for n in ("act", "learn", "get_batch", "create_buffers")}

    # ---- hooks (run inside monobeast) ----

    def _on_build(self, model) -> None:
        # monobeast builds the actors' model and the learner's in this process: the record
        # names the network that really ran.
        from baselines.torch_resnet import parameter_count

        base = type(model).__mro__[1]
        self.network = {"name": self.args.network, "class": f"{base.__module__}.{base.__qualname__}",
                        "parameters": parameter_count(model)}

    def create_env(self, flags):
        if self.actor_index is None:  # train() in the main process: only needs the spaces
            return _SpacesOnly(self.args.env_id, self.protocol)
        return common.OldGymEnv(
            self.args.env_id,
            self.args.seed,
            self.actor_index,
            self.protocol,
            on_episode_end=self._send_episode,
            on_step=self._count_step,
        )

    def _count_step(self) -> None:
        self.actor_steps[self.actor_index] += 1  # own slot only: no lock needed

    def _send_episode(self, ep: common.EpisodeEnd) -> None:
        env_steps = sum(self.actor_steps)  # all actors' steps so far (others' slots read racily)
        self.events.put(("episode", ep.env_index, ep.episode_return, ep.episode_length, env_steps,
                         ep.monotonic_s))

    def act(self, flags, actor_index, *rest):
        import torch

        self.actor_index = actor_index
        torch.manual_seed(actor_torch_seed(self.args.seed, actor_index))
        self.events.put(("started", actor_index, os.getpid()))
        try:
            return self._orig["act"](flags, actor_index, *rest)
        except Exception:
            self.events.put(("error", f"actor {actor_index} failed:\n{traceback.format_exc()}"))
            raise

    def create_buffers(self, flags, obs_shape, num_actions):
        import torch

        buffers = self._orig["create_buffers"](flags, obs_shape, num_actions)
        buffers["policy_version"] = [
            torch.zeros(flags.unroll_length + 1, dtype=torch.int64).share_memory_()
            for _ in range(flags.num_buffers)
        ]
        return buffers

    def get_batch(self, *a, **kw):
        start = time.monotonic()
        try:
            out = self._orig["get_batch"](*a, **kw)
        except Exception:
            self._fail(f"get_batch failed:\n{traceback.format_exc()}")
            raise
        self._tls.wait_s = time.monotonic() - start
        return out

    def learn(self, flags, actor_model, model, batch, initial_agent_state, optimizer, scheduler):
        try:
            # Slot 0 repeats the previous rollout's last step; steps 1..T are this rollout's.
            versions = batch["policy_version"][1:].cpu().numpy()
            with self._learn_lock:
                if self.stopped:
                    # The run is over (interrupted or failed) but monobeast's learner threads
                    # have no stop signal: park this one; the process ends with os._exit.
                    threading.Event().wait()
                if self.args.learner_delay_s > 0:
                    time.sleep(self.args.learner_delay_s)
                stats = self._orig["learn"](
                    flags, actor_model, model, batch, initial_agent_state, optimizer, scheduler
                )
                self._log_update(versions, stats, scheduler)
            return stats
        except Exception:
            self._fail(f"learn failed:\n{traceback.format_exc()}")
            raise

    def _log_update(self, versions: np.ndarray, stats: dict, scheduler) -> None:
        self.updates += 1
        learner_version = int(self.version.item())
        now = time.monotonic()
        env_steps = self.updates * self.batch_steps
        row = {
            **common.update_row(
                update=self.updates, env_steps=env_steps, frame_skip=self.frame_skip,
                wall_time_s=now - self.t0, learner_version=learner_version,
                sps=self.batch_steps / max(now - self._last_row_time, 1e-9),
                learning_rate=float(scheduler.get_last_lr()[0]),
                learner_delay_s=self.args.learner_delay_s,
                rollout_queue_get_s=getattr(self._tls, "wait_s", 0.0)),
            **common.version_stats(versions),
            "loss_total": stats["total_loss"],
            "loss_policy": stats["pg_loss"],
            "loss_value": stats["baseline_loss"],
            "loss_entropy": stats["entropy_loss"],
        }
        self._last_row_time = now
        self.writer.log_update(row)
        if env_steps >= self.args.total_timesteps:
            self.learner_done = True

    # ---- adapter side ----

    def _fail(self, message: str) -> None:
        if self.error is None:
            self.error = message
            _thread.interrupt_main()  # monobeast's main loop ends on KeyboardInterrupt

    def _drain_events(self, stop: threading.Event) -> None:
        # Polls instead of waiting for a sentinel: an actor terminated mid-put could hold
        # the queue's write lock, and a put(None) from here would then never return.
        while True:
            if self.events.empty():
                if stop.is_set():
                    return
                time.sleep(0.05)
                continue
            msg = self.events.get()
            kind = msg[0]
            if kind == "episode":
                _, env_index, ret, length, env_steps, t = msg
                self.writer.log_episode(schema.episode_row(env_steps, self.frame_skip,
                                                           t - self.t0, env_index, ret, length))
                self.episodes += 1
            elif kind == "started":
                self.actor_pids[msg[1]] = msg[2]
            elif kind == "error":
                self._fail(msg[1])

    def _watch_actors(self, stop: threading.Event) -> None:
        """An actor that dies (e.g. killed) would leave monobeast's learner waiting forever."""
        import psutil

        while not stop.wait(2.0):
            if self.learner_done or self.interrupted or self.error:
                continue
            for i, pid in list(self.actor_pids.items()):
                try:
                    dead = psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
                except psutil.NoSuchProcess:
                    dead = True
                if dead and not (self.learner_done or self.interrupted):
                    self._fail(f"actor {i} (pid {pid}) exited while training was running")

    def _on_signal(self, signum, frame) -> None:
        # Set before monobeast's train() stops its actors, so the watchdog expects them to go.
        if self.error is None:
            self.interrupted = True
        raise KeyboardInterrupt

    def train(self) -> str:
        """Train; returns the final status. The record is finished by the caller."""
        import torch

        mb: Any = self.mb
        mb.create_env = self.create_env
        mb.act = self.act
        mb.learn = self.learn
        mb.get_batch = self.get_batch
        mb.create_buffers = self.create_buffers
        mb.Net = versioned_net(network_class(mb, self.args.network), self.version, self._on_build)
        fw: Any = sys.modules["torchbeast.core.file_writer"]
        gather = fw.gather_metadata
        fw.gather_metadata = lambda: {**gather(), "env": common.REDACTED}

        torch.manual_seed(self.args.seed)  # learner (and initial actor) parameters
        stop_drain = threading.Event()
        drain = threading.Thread(target=self._drain_events, args=(stop_drain,), daemon=True)
        stop_watch = threading.Event()
        watch = threading.Thread(target=self._watch_actors, args=(stop_watch,), daemon=True)
        drain.start()
        watch.start()
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        self.t0 = self._last_row_time = time.monotonic()
        try:
            mb.train(self.flags)  # returns early (no exception) when interrupted: it catches Ctrl-C
        except KeyboardInterrupt:
            pass
        except Exception:
            if self.error is None:
                self.error = f"monobeast train() failed:\n{traceback.format_exc()}"
        finally:
            self.wall_time_s = time.monotonic() - self.t0
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            stop_watch.set()
            with self._learn_lock:
                self.stopped = True
            if not self.learner_done and self.error is None:
                self.interrupted = True
            self._stop_actors()
            stop_drain.set()
            drain.join(timeout=30)
        if self.error is not None:
            return schema.FAILED
        return schema.INTERRUPTED if self.interrupted else schema.COMPLETED

    def _stop_actors(self) -> None:
        # monobeast asks its actors to stop and waits 1 s; give them time to finish the
        # rollout they are in (their last episodes are still drained), then terminate.
        deadline = time.monotonic() + 30
        for p in multiprocessing.active_children():
            p.join(timeout=max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)

    def close(self) -> dict[str, Any]:
        native = common.finish_native(self.native_dir, self.writer.run_dir, f"{XPID}/logs.csv",
                                      read_monobeast_logs) if self.native_dir.exists() else None
        return {**self.plan, "network": self.network, "native": native}

    def summary(self) -> dict[str, Any]:
        return schema.summary(self.updates * self.batch_steps, self.frame_skip, self.wall_time_s,
                              self.updates, self.episodes)

    def failure(self, error: object) -> str:
        return str(self.error or error)


def plan(args: Args, native_dir: Path) -> dict[str, Any]:
    """monobeast's argv (mapping.MappingError if it cannot express `args`), and the seeds:
    the manifest's baseline_run block."""
    native_argv = mapping.monobeast_argv(args.hyperparameters(), savedir=str(native_dir), xpid=XPID)
    return {
        "argv": native_argv,
        "seeds": {
            "env": env_seeds(args.seed, 0, args.num_envs),
            "env_rule": "actor i: global env index i (benchenv.env_seeds(seed, i, 1))",
            "torch_learner": args.seed,
            "torch_actor_rule": "actor i: SeedSequence([seed, 1 + i])",
        },
        "versions": "shared counter: initial parameters 1, +1 after each learn()",
    }


def start(launch: Launch[Args]) -> MonobeastRun:
    flags = launch.code.parser.parse_args((launch.plan or {})["argv"])
    return MonobeastRun(launch, flags)


TORCHBEAST = Checkout(name="torchbeast", env_var="TORCHBEAST_PATH",
                      marker="torchbeast/monobeast.py",
                      url="https://github.com/facebookresearch/torchbeast")
BASELINE = Baseline(system="monobeast-impala", args=Args, prog="python -m baselines.monobeast",
                    checkout=TORCHBEAST, load=import_monobeast, plan=plan, start=start,
                    extra_columns=(*common.LOSS_COLUMNS, "stat_learning_rate",
                                   "stat_learner_delay_s"))


if __name__ == "__main__":
    run_as_main(BASELINE)
