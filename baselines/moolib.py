"""moolib-impala: moolib's examples/vtrace, run from the user's checkout, into a run record.

    python -m baselines.moolib --moolib-path ~/src/moolib --env-id Breakout-v5 --seed 1

`import moolib` must work (moolib built and installed from that checkout), and the
checkout must hold examples/vtrace (the example and its config.yaml ship only there).
The adapter starts moolib's broker on 127.0.0.1 at a free port, runs the example's Hydra
main in this process with overrides from baselines/mapping.py and a fresh savedir inside
the record (an existing checkpoint there would make moolib resume silently), and stops
the broker when the run ends or fails. Named hooks replaced at run time (none copied):

- examples.atari.environment.create_env: an EnvPool env with the shared Atari protocol
  and raw rewards (moolib clips them itself); the k-th env created is global env k of the
  run (benchenv.env_seeds); see Args.seed for how k relates to moolib's env slots.
- examples.atari.models.create_model: the stock Net whose forward also outputs the policy
  version, which then flows through moolib's batchers with each step's actor outputs.
- moolib.Group: a subclass whose all_reduce accepts `op` positionally, as the example
  passes it (moolib HEAD takes it only as a keyword: TypeError at the first stats reduce).
- common.EnvBatchState: also records each finished episode's raw return.
- compute_gradients / step_optimizer / the loss functions: one updates.csv row per
  optimizer step with the versions that generated its batch, and the losses.
- record.write_metadata: keeps the copy of os.environ out of meta.json.
"""

from __future__ import annotations

import os

# Like monobeast's: before anything imports torch (moolib's env processes are forked).
os.environ["OMP_NUM_THREADS"] = "1"

import getpass  # noqa: E402
import multiprocessing  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import types  # noqa: E402
from collections.abc import Mapping  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, ClassVar  # noqa: E402

import numpy as np  # noqa: E402

from baselines import common, mapping  # noqa: E402
from baselines.adapter import Baseline, Checkout, Launch, run_as_main  # noqa: E402
from baselines.native_logs import read_moolib_logs  # noqa: E402
from benchenv import env_seeds  # noqa: E402
from runrecord import error_entry, exits, schema  # noqa: E402
from runrecord.provenance import free_port  # noqa: E402

LOCAL_NAME = "peer0"  # the peer's folder: <savedir>/peers/peer0/
D = mapping.MOOLIB_DEFAULTS


@dataclass(kw_only=True)
class Args(common.AdapterArgs):
    """Run moolib's examples/vtrace (IMPALA) from a checkout on the shared EnvPool Atari protocol.

    Args:
        seed: run seed: the k-th env created gets global env k's seed (exact slots with --num-actor-cpus 1, see docs); torch is seeded with it (moolib has no seed key)
        total_timesteps: agent steps to train for (moolib total_steps; frames = 4 x steps)
        num_envs: envs in all: num_actor_batches batches of num_envs / num_actor_batches (moolib actor_batch_size)
        num_steps: unroll length of each trajectory (moolib unroll_length)
        learning_rate: Adam learning rate, decayed linearly to 0 at total_timesteps
        batch_size: trajectories per optimizer step (moolib batch_size and virtual_batch_size)
        learner_delay_s: seconds of sleep before each optimizer step (0: none)
        gamma: discount (moolib discounting)
        ent_coef: entropy cost (moolib entropy_cost)
        vf_coef: baseline cost (moolib baseline_cost)
        max_grad_norm: global gradient norm clip (moolib grad_norm_clipping)
        use_cuda: act and learn on cuda:0 when torch sees a GPU; --no-use-cuda forces CPU
    """

    DEFAULTS: ClassVar[Mapping[str, Any]] = D
    MODEL: ClassVar[str] = "moolib's Atari model"

    num_actor_batches: int = D["num_actor_batches"]
    """env batches that moolib steps in turn (moolib num_actor_batches)"""
    num_actor_cpus: int = D["num_actor_cpus"]
    """env worker processes (moolib num_actor_cpus)"""
    reward_clip: float = D["reward_clip"]
    """moolib clips rewards to [-reward_clip, reward_clip] for training (0: no clipping)"""
    keep_checkpoint: bool = False
    """keep moolib's checkpoint*.tar in the record's native/ folder (default: deleted at the end)"""
    moolib_path: Path | None = None
    """moolib source checkout, the folder holding examples/vtrace (default: $MOOLIB_PATH)"""

    def check(self) -> None:
        super().check()
        mapping.moolib_actor_batch_size(self.num_envs, self.num_actor_batches)

    def checkout(self) -> Path | None:
        return self.moolib_path


def _die_with_parent() -> None:
    """In the broker child (Linux): get SIGTERM when the adapter dies, even by kill -9."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, 15)  # PR_SET_PDEATHSIG, SIGTERM
    except (OSError, AttributeError):
        pass


class Broker:
    """moolib's broker (`python -m moolib.broker 127.0.0.1:PORT`) as a child process."""

    def __init__(self, log_path: Path, attempts: int = 3, timeout_s: float = 30.0):
        self.proc: subprocess.Popen | None = None
        self.address = ""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_path, "ab")
        for _ in range(attempts):  # the free port may be taken between probe and bind
            port = free_port()
            self.address = f"127.0.0.1:{port}"
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "moolib.broker", self.address],
                stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    return
                except OSError:
                    time.sleep(0.2)
            self.stop()
        raise RuntimeError(f"moolib broker did not start on 127.0.0.1 (see {log_path})")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def close(self) -> None:
        self.stop()
        self._log.close()


def import_moolib_example(checkout: Path) -> types.SimpleNamespace:
    """moolib and the checkout's vtrace example modules, or BaselineUnavailable."""
    pip = "pip install 'cleanba-bench[baselines]'"
    packages = common.require_packages({
        "moolib": f"build and install it from the checkout (cd {checkout} && pip install "
                  "--no-build-isolation .; see docs/baselines.md)",
        "torch": f"install it with {pip}",
        **{dep: f"moolib's vtrace example needs it: {pip}"
           for dep in ("hydra", "omegaconf", "coolname")},
    })
    # examples/atari/environment.py imports gym for moolib's own create_env, which the
    # adapter replaces: a stand-in module takes its place before the example imports it.
    env_module = "examples.atari.environment"
    experiment, models = common.import_from_checkout(
        checkout, ("examples.vtrace.experiment", "examples.atari.models"),
        stubs={env_module: "stand-in: baselines.moolib provides create_env (EnvPool)"},
        required=("main", "compute_gradients", "step_optimizer", "compute_entropy_loss",
                  "compute_policy_gradient_loss", "compute_baseline_loss", "common", "record"),
        tested_at="moolib commit 06e7a3e")
    return types.SimpleNamespace(moolib=packages["moolib"], experiment=experiment,
                                 models=models, env=sys.modules[env_module])


def keyword_op_group(group_cls: type) -> type:
    class KeywordOpGroup(group_cls):  # type: ignore[misc, valid-type]
        """moolib.Group whose all_reduce also takes `op` positionally (the example does)."""

        def all_reduce(self, name, data, op=None, **kwargs):
            if op is not None:
                kwargs["op"] = op
            return super().all_reduce(name, data, **kwargs)

    return KeywordOpGroup


def versioned_model_class(base: type) -> type:
    import torch

    class VersionedNet(base):  # type: ignore[misc, valid-type]
        """moolib's Net; forward also outputs the version of the parameters it acted with."""

        policy_version = 1  # initial parameters; set after each optimizer step

        def forward(self, inputs, core_state=None):
            out, state = super().forward(inputs, core_state)
            out["policy_version"] = torch.full(
                out["action"].shape, self.policy_version, dtype=torch.int64,
                device=out["action"].device,
            )
            return out, state

    return VersionedNet


def _user_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "cleanba-bench"


class MoolibRun:
    """Hooks the vtrace example, runs its Hydra main, and writes the record."""

    def __init__(self, launch: Launch[Args]):
        args = self.args = launch.args
        self.mods: types.SimpleNamespace = launch.code
        self.writer = launch.writer
        self.protocol = launch.protocol
        self.native_dir = launch.native_dir
        self.on_cuda = launch.on_cuda
        self.frame_skip = int(self.protocol["frame_skip"])
        self.actor_batch_size = mapping.moolib_actor_batch_size(args.num_envs, args.num_actor_batches)
        # Shared with moolib's forked env processes: the next env seed offset.
        self.env_counter = multiprocessing.get_context("fork").Value("q", 0)
        self.t0 = time.monotonic()
        self.wall_time_s = 0.0
        self.error: str | None = None  # failures raise here: nothing to keep
        self.baseline_run: dict[str, Any] = {}  # the manifest's block, once the broker runs
        self.updates = 0
        self.episodes = 0
        self.train_steps = 0  # env steps consumed by compute_gradients
        self.applied_steps = 0  # ... of which an optimizer step has applied the gradients
        self.act_steps = 0  # env steps taken by all envs
        self.model = None
        self._batches_made = 0
        self._pending_versions: list[np.ndarray] = []
        self._pending_losses: list[dict[str, float]] = []
        self._losses: dict[str, float] = {}
        self._last_row_time = self.t0

    # ---- hooks ----

    def create_env(self, flags):
        # Runs in moolib's env worker processes, which are forked: the counter is shared.
        with self.env_counter.get_lock():
            k = int(self.env_counter.value)
            self.env_counter.value += 1
        # Why a creation counter and not the env's slot: moolib calls create_env with no
        # arguments, and the slot is fixed in its C++ (EnvRunner::run takes the next client
        # index as each worker process attaches, a race; EnvBatch::step then creates that
        # client's envs lazily, in slot order). The example waits for batch 0's first step
        # before stepping batch 1, so k = batch x actor_batch_size + (slot, up to the order
        # in which worker processes attached): exact with one worker process.
        return common.OldGymEnv(self.args.env_id, self.args.seed, k, self.protocol)

    def create_model(self, flags):
        model = versioned_model_class(self.mods.models.Net)(use_lstm=flags.use_lstm)
        model.to(device=flags.device)
        self.model = model
        return model

    def network_summary(self) -> dict[str, Any]:
        """The network that ran: moolib's example Net (IMPALA's ResNet whose heads also read
        the last action and reward), its class and parameter count."""
        out: dict[str, Any] = {"name": "moolib-net"}
        if self.model is not None:
            base = type(self.model).__mro__[1]
            out["class"] = f"{base.__module__}.{base.__qualname__}"
            out["parameters"] = sum(p.numel() for p in self.model.parameters())
        return out

    def env_batch_state_class(self, base: type) -> type:
        run = self

        class RecordingEnvBatchState(base):  # type: ignore[misc, valid-type]
            def __init__(self, flags, model):
                super().__init__(flags, model)
                # The example makes one per actor batch, in batch order.
                self.batch_index = run._batches_made
                run._batches_made += 1
                self.first = True  # the first outputs are the envs' reset observations
                self.episode_step = np.zeros(self.batch_size, dtype=np.int64)
                self.episode_return = np.zeros(self.batch_size, dtype=np.float64)

            def update(self, env_outputs, action, stats):
                super().update(env_outputs, action, stats)
                run._on_env_outputs(self, env_outputs)

        return RecordingEnvBatchState

    def _on_env_outputs(self, state, env_outputs) -> None:
        if state.first:
            state.first = False
            return
        reward = env_outputs["reward"].cpu().numpy().astype(np.float64)
        done = env_outputs["done"].cpu().numpy().astype(bool)
        state.episode_return += reward  # raw: the env does not clip
        state.episode_step += 1
        self.act_steps += len(done)
        now = time.monotonic() - self.t0
        for i in np.flatnonzero(done):
            self.writer.log_episode(schema.episode_row(
                self.act_steps, self.frame_skip, now,
                state.batch_index * self.actor_batch_size + int(i),
                float(state.episode_return[i]), int(state.episode_step[i])))
            self.episodes += 1
        state.episode_return[done] = 0.0
        state.episode_step[done] = 0

    def loss_hook(self, name: str, fn, cost_key: str | None):
        def hooked(*a, **kw):
            value = fn(*a, **kw)
            cost = 1.0 if cost_key is None else float(getattr(self.mods.experiment.FLAGS, cost_key))
            self._losses[name] = cost * float(value.detach())
            return value

        return hooked

    def compute_gradients_hook(self, fn):
        def hooked(data, learner_state, stats):
            # actor_outputs[t] chose the action that led to env_outputs[t + 1]: the trained
            # actions are steps 0..T-1 (the example drops the last with t[:-1]).
            self._pending_versions.append(data["actor_outputs"]["policy_version"][:-1].cpu().numpy())
            self._losses = {}
            fn(data, learner_state, stats)
            self._losses["loss_total"] = sum(self._losses.values())
            self._pending_losses.append(self._losses)
            self.train_steps += self.args.num_steps * self.args.batch_size

        return hooked

    def step_optimizer_hook(self, fn):
        def hooked(learner_state, stats):
            if self.args.learner_delay_s > 0:
                time.sleep(self.args.learner_delay_s)
            grad_norm_before = stats["unclipped_grad_norm"].value
            fn(learner_state, stats)
            self.model.policy_version = learner_state.model_version + 1
            self._log_update(learner_state, stats["unclipped_grad_norm"].value - grad_norm_before)

        return hooked

    def _log_update(self, learner_state, grad_norm: float) -> None:
        self.updates += 1
        now = time.monotonic()
        # One thread acts and learns on the same model: nothing waits on a queue.
        row = common.update_row(
            update=learner_state.model_version, env_steps=self.train_steps,
            frame_skip=self.frame_skip, wall_time_s=now - self.t0,
            learner_version=learner_state.model_version + 1,
            sps=(self.train_steps - self.applied_steps) / max(now - self._last_row_time, 1e-9),
            learning_rate=float(learner_state.scheduler.get_last_lr()[0]),
            learner_delay_s=self.args.learner_delay_s)
        row["stat_grad_norm"] = grad_norm
        if self._pending_versions:
            row.update(common.version_stats(np.concatenate(self._pending_versions, axis=1)))
        if self._pending_losses:
            for k in self._pending_losses[0]:
                row[k] = float(np.mean([x[k] for x in self._pending_losses]))
        self._pending_versions, self._pending_losses = [], []
        self._last_row_time, self.applied_steps = now, self.train_steps
        self.writer.log_update(row)

    def write_metadata_hook(self, fn):
        # The example's meta.json starts from a copy of os.environ; a kwarg named env
        # replaces it (the example applies kwargs over its dict).
        return lambda localdir, srcdir, **kw: fn(localdir, srcdir, **{**kw, "env": common.REDACTED})

    # ---- run ----

    def train(self) -> str:
        """Start moolib's broker, run the example, stop the broker; the final status."""
        broker = Broker(self.native_dir / "broker.log")
        try:
            overrides = mapping.moolib_overrides(
                {**self.args.hyperparameters(), "use_cuda": self.on_cuda},
                connect=broker.address, savedir=str(self.native_dir / "moolib"),
                project="cleanba-bench", group=self.writer.manifest["run_id"],
                local_name=LOCAL_NAME,
            )
            self.baseline_run = {
                "overrides": overrides,
                "broker": broker.address,
                "seeds": {
                    "env": env_seeds(self.args.seed, 0, self.args.num_envs),
                    "env_rule": "the k-th env created gets global env k's seed "
                                "(benchenv.env_seeds(seed, k, 1)); k = batch x actor_batch_size "
                                "+ slot exactly when num_actor_cpus == 1, else slots within a "
                                "batch follow the order in which moolib's worker processes "
                                "attached",
                    "env_slots_exact": self.args.num_actor_cpus == 1,
                    "torch": self.args.seed,
                },
                "versions": "learner model_version + 1 (initial parameters 1), read by the "
                            "acting forward",
            }
            self.writer.set(baseline_run=self.baseline_run)
            return self.run_example(overrides, self.native_dir)
        finally:
            broker.close()

    def run_example(self, overrides: list[str], native_dir: Path) -> str:
        import torch

        ex = self.mods.experiment
        moolib = self.mods.moolib
        saved = {
            "group": moolib.Group,
            "create_model": self.mods.models.create_model,
            "EnvBatchState": ex.common.EnvBatchState,
            "write_metadata": ex.record.write_metadata,
            "argv": sys.argv,
            "cwd": os.getcwd(),
        }
        saved_ex = {n: getattr(ex, n) for n in (
            "compute_gradients", "step_optimizer", "compute_entropy_loss",
            "compute_policy_gradient_loss", "compute_baseline_loss")}
        moolib.Group = keyword_op_group(saved["group"])
        self.mods.env.create_env = self.create_env
        self.mods.models.create_model = self.create_model
        ex.common.EnvBatchState = self.env_batch_state_class(saved["EnvBatchState"])
        ex.record.write_metadata = self.write_metadata_hook(saved["write_metadata"])
        ex.compute_entropy_loss = self.loss_hook("loss_entropy", saved_ex["compute_entropy_loss"], "entropy_cost")
        ex.compute_policy_gradient_loss = self.loss_hook(
            "loss_policy", saved_ex["compute_policy_gradient_loss"], None)
        ex.compute_baseline_loss = self.loss_hook("loss_value", saved_ex["compute_baseline_loss"], "baseline_cost")
        ex.compute_gradients = self.compute_gradients_hook(saved_ex["compute_gradients"])
        ex.step_optimizer = self.step_optimizer_hook(saved_ex["step_optimizer"])

        os.environ["HYDRA_FULL_ERROR"] = "1"  # raise errors here instead of sys.exit(1)
        if not os.environ.get("USER"):
            os.environ["USER"] = _user_name()  # the example's config reads ${oc.env:USER}
        torch.manual_seed(self.args.seed)
        # Hydra makes the working directory the "original cwd" where the example puts its
        # `latest` symlink: keep it inside the record.
        native_dir.mkdir(parents=True, exist_ok=True)
        os.chdir(native_dir)
        sys.argv = [str(Path(ex.__file__)), *overrides]
        self.t0 = self._last_row_time = time.monotonic()
        try:
            ex.main()
        finally:
            self.wall_time_s = time.monotonic() - self.t0
            os.chdir(saved["cwd"])
            sys.argv = saved["argv"]
            moolib.Group = saved["group"]
            self.mods.models.create_model = saved["create_model"]
            ex.common.EnvBatchState = saved["EnvBatchState"]
            ex.record.write_metadata = saved["write_metadata"]
            for n, f in saved_ex.items():
                setattr(ex, n, f)
        # The example also returns normally after SIGINT/SIGTERM (its own handlers).
        return schema.COMPLETED if self.train_steps >= self.args.total_timesteps else schema.INTERRUPTED

    def close(self) -> dict[str, Any]:
        native = _finish_native(self.native_dir, self.writer.run_dir, self.args.keep_checkpoint)
        return {**self.baseline_run, "network": self.network_summary(), "native": native}

    def summary(self) -> dict[str, Any]:
        return schema.summary(self.applied_steps, self.frame_skip, self.wall_time_s,
                              self.updates, self.episodes)

    def failure(self, error: object) -> str:
        if isinstance(error, BaseException):
            return "".join(traceback.format_exception(error))
        return str(error)


def _finish_native(native_dir: Path, run_dir: Path, keep_checkpoint: bool) -> dict[str, Any]:
    """Tidy and summarise moolib's own files (its checkpoints deleted unless kept);
    returns the manifest's note about them."""
    if not keep_checkpoint:
        for p in native_dir.rglob("checkpoint*.tar"):
            p.unlink()
    return common.finish_native(native_dir, run_dir, f"moolib/peers/{LOCAL_NAME}/logs.tsv",
                                read_moolib_logs)


def provenance(mods: types.SimpleNamespace) -> dict[str, Any]:
    return {"moolib_module": str(Path(mods.moolib.__file__).resolve().parent)}


def start(launch: Launch[Args]) -> MoolibRun | int:
    savedir = launch.native_dir / "moolib"
    # RunWriter moved any earlier attempt (with its checkpoint) to previous_attempts/.
    if (savedir / "checkpoint.tar").exists():
        launch.writer.finish(schema.FAILED, error=error_entry(
            "RecordError", f"{savedir} already holds a checkpoint"))
        print(f"error: {savedir} already holds a checkpoint; moolib would resume it", file=sys.stderr)
        return exits.EXIT_FAILED
    return MoolibRun(launch)


MOOLIB = Checkout(name="moolib", env_var="MOOLIB_PATH", marker="examples/vtrace/experiment.py",
                  url="https://github.com/facebookresearch/moolib")
BASELINE = Baseline(system="moolib-impala", args=Args, prog="python -m baselines.moolib",
                    checkout=MOOLIB, load=import_moolib_example, provenance=provenance,
                    start=start, extra_columns=(*common.LOSS_COLUMNS, "stat_grad_norm",
                                                "stat_learning_rate", "stat_learner_delay_s"))


if __name__ == "__main__":
    run_as_main(BASELINE)
