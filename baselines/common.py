"""What both adapters share: their common flags, checkouts, the EnvPool env behind the old
gym API, records.

Nothing here imports torch: the adapters must set OMP_NUM_THREADS before torch loads.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np

from baselines.native_logs import NativeLog, NativeLogError
from benchenv import (
    EnvError,
    check_env_id,
    env_protocol,
    env_seeds,
    frames_per_step,
    is_atari,
    make_env,
)
from runrecord import (
    Layout,
    RecordError,
    provenance,
    run_id,
    write_skipped,
)
from runrecord.ids import file_digest
from runrecord.writer import read_json_or_none

ARCHITECTURE = "async"
LAYOUT = Layout((0,), (0,), 1)  # a0-l0-d1: one process, actors and learner on one device
PROVENANCE_PACKAGES = ("torch", "envpool", "numpy")
# updates.csv columns both adapters add first: the loss terms as each baseline weighs them.
LOSS_COLUMNS = ("loss_total", "loss_policy", "loss_value", "loss_entropy")


REDACTED = "[removed by the baselines adapter: copy of os.environ]"


@dataclass(kw_only=True)
class AdapterArgs:
    """The flags every adapter takes (the trainer command-line contract, docs/harness.md).

    Each adapter's Args adds its own flags, gives the defaults (DEFAULTS: its
    mapping.*_DEFAULTS) and, in its docstring's Args section, the help of these flags in
    its baseline's terms: that is what --help shows.
    """

    DEFAULTS: ClassVar[Mapping[str, Any]]
    """The harness config keys of this baseline and their defaults."""
    MODEL: ClassVar[str]
    """The baseline's networks, as named by the Atari-only error."""

    env_id: str
    """EnvPool Atari id, e.g. Breakout-v5"""
    seed: int
    """run seed: the env seeds (benchenv.env_seeds) and torch's"""
    total_timesteps: int
    """agent steps to train for (frames = 4 x steps)"""
    num_envs: int
    """envs in all"""
    num_steps: int
    """unroll length of each trajectory"""
    learning_rate: float
    """learning rate, decayed linearly to 0 at total_timesteps"""
    batch_size: int
    """trajectories per learner update"""
    learner_delay_s: float
    """seconds added to each learner update (Section 3 experiment: 1.0)"""
    gamma: float
    """discount"""
    ent_coef: float
    """entropy cost"""
    vf_coef: float
    """baseline cost"""
    max_grad_norm: float
    """global gradient norm clip"""
    use_cuda: bool
    """learn on CUDA when torch sees a GPU; --no-use-cuda forces CPU"""
    run_dir: Path | None = None
    """record folder; default <results-root>/<sweep or standalone>/runs/<run id>"""
    sweep: str | None = None
    """sweep name stored in the manifest (None: a standalone run)"""
    run_id: str | None = None
    """run id to record (the harness passes its own); default: hash of the run's definition"""
    results_root: Path = Path("results")
    """root of the results store, used when --run-dir is not given"""

    @classmethod
    def defaults(cls: type[A]) -> A:
        """The flags' defaults: the baseline's own settings (mapping.*_DEFAULTS)."""
        return cls(**cls.DEFAULTS)

    def check(self) -> None:
        """Raise ValueError naming a setting that cannot run (after parsing, for a plain message)."""
        if not is_atari(self.env_id):
            raise ValueError(f"env_id {self.env_id!r}: {self.MODEL} needs an Atari "
                             "'<Game>-v5' id, e.g. Breakout-v5")
        if self.learner_delay_s < 0:
            raise ValueError(f"learner_delay_s must be >= 0, got {self.learner_delay_s}")

    def checkout(self) -> Path | None:
        """The value of the adapter's checkout flag (--torchbeast-path, --moolib-path)."""
        raise NotImplementedError

    def hyperparameters(self) -> dict[str, Any]:
        """The harness config of this run: the keys of DEFAULTS."""
        d = asdict(self)
        return {k: d[k] for k in self.DEFAULTS}


A = TypeVar("A", bound=AdapterArgs)


class BaselineUnavailable(RuntimeError):
    """The baseline's checkout or package is missing; the message says how to provide it."""


def find_checkout(
    given: Path | str | None, env_var: str, name: str, marker: str, url: str
) -> Path:
    """The checkout named by the flag, else by `env_var`; it must contain `marker`."""
    how = (
        f"pass --{name}-path DIR or set {env_var}=DIR, where DIR is a clone of {url} "
        f"(the folder that contains {marker})"
    )
    raw = given if given not in (None, "") else os.environ.get(env_var, "")
    if not raw:
        raise BaselineUnavailable(f"no {name} checkout given: {how}")
    path = Path(raw).expanduser().resolve()
    if not (path / marker).is_file():
        raise BaselineUnavailable(f"{name} checkout not found at {path} (no {marker} there): {how}")
    return path


def checkout_info(path: Path, key_file: str) -> dict[str, Any]:
    """Which baseline code ran: the checkout's git commit (only when `path` is a checkout's
    top level: a copy inside another repository is not that repository's commit) and the
    key file's hash."""
    state = provenance.git_state(path)
    info: dict[str, Any] = {"path": str(path), "commit": state["sha"], "dirty": state["dirty"]}
    if state["sha"] is None and state.get("inside"):
        info["inside"] = state["inside"]
    f = path / key_file
    info["file"] = key_file
    info["file_sha256"] = file_digest(f)[0] if f.is_file() else None
    return info


@dataclass(frozen=True)
class EpisodeEnd:
    env_index: int
    episode_return: float  # raw game score of the whole game
    episode_length: int  # agent steps
    monotonic_s: float  # time.monotonic() when it ended (system-wide, so valid across forks)


class OldGymEnv:
    """One EnvPool env (num_envs=1) behind the old gym API that both baselines call.

    reset() -> obs; step(a) -> (obs, reward, done, info); seed() is a no-op because the
    env seed is fixed at construction (global env `env_index` of run `seed`, derived as
    our trainers derive it: benchenv.env_seeds), whatever the baseline asks for.
    Rewards are raw (the protocol has reward_clip=False: each baseline clips itself),
    so the episode return summed here is the raw game score. done = terminated or
    truncated (108k frames); with episodic_life=False a life loss is not an episode end.
    """

    def __init__(
        self,
        env_id: str,
        seed: int,
        env_index: int,
        protocol: Mapping[str, Any],
        on_episode_end: Callable[[EpisodeEnd], None] | None = None,
        on_step: Callable[[], None] | None = None,
    ):
        self._env = make_env(env_id, 1, seed, first_env_index=env_index, protocol=dict(protocol))
        self.env_index = env_index
        self.env_seed = env_seeds(seed, env_index, 1)[0]
        self.observation_space = self._env.observation_space  # Box (4, 84, 84) uint8
        self.action_space = self._env.action_space  # Discrete(18): full action space
        self._on_episode_end = on_episode_end
        self._on_step = on_step
        self._return = 0.0
        self._length = 0
        self._needs_reset = True

    def seed(self, seed: int | None = None) -> list[int]:
        return [self.env_seed]

    def reset(self) -> np.ndarray:
        obs, _ = self._env.reset()
        self._return, self._length, self._needs_reset = 0.0, 0, False
        return obs[0]

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, dict]:
        if self._needs_reset:
            # EnvPool would silently turn this step into an auto-reset step.
            raise RuntimeError("step() after an episode ended: call reset() first")
        obs, reward, terminated, truncated, info = self._env.step(np.array([int(action)]))
        r = float(reward[0])
        done = bool(terminated[0] or truncated[0])
        self._return += r
        self._length += 1
        if self._on_step is not None:
            self._on_step()
        if done:
            self._needs_reset = True
            if self._on_episode_end is not None:
                self._on_episode_end(
                    EpisodeEnd(self.env_index, self._return, self._length, time.monotonic())
                )
        return obs[0], r, done, {"truncated": bool(truncated[0]), "lives": int(info["lives"][0])}

    def close(self) -> None:
        self._env.close()


def baseline_protocol(env_id: str) -> dict[str, Any]:
    """The shared env protocol with raw rewards: both baselines clip rewards themselves."""
    p = env_protocol(env_id, reward_clip=False, backend="envpool")  # baselines: EnvPool only
    p.setdefault("frame_skip", frames_per_step(env_id))
    return p


def run_definition(
    system: str, env_id: str, seed: int, hyperparameters: Mapping[str, Any],
    protocol: Mapping[str, Any],
) -> dict[str, Any]:
    return {
        "system": system,
        "architecture": ARCHITECTURE,
        "env_id": env_id,
        "seed": seed,
        "hyperparameters": dict(hyperparameters),
        "env_protocol": dict(protocol),
        "layout": LAYOUT.name,
    }


def build_manifest(
    system: str,
    env_id: str,
    seed: int,
    hyperparameters: Mapping[str, Any],
    protocol: Mapping[str, Any],
    device_kind: str,
    baseline: Mapping[str, Any],
    sweep: str | None,
    given_run_id: str | None,
) -> dict[str, Any]:
    definition = run_definition(system, env_id, seed, hyperparameters, protocol)
    return {
        "run_id": given_run_id or run_id(definition),
        "sweep": sweep,
        "system": system,
        "architecture": ARCHITECTURE,
        "env_id": env_id,
        "seed": seed,
        "layout": LAYOUT.record_block([device_kind]),
        "hyperparameters": dict(hyperparameters),
        "env_protocol": dict(protocol),
        "provenance": provenance.collect(packages=PROVENANCE_PACKAGES, baseline=dict(baseline)),
    }


def require_packages(packages: Mapping[str, str]) -> dict[str, Any]:
    """Import each package (name -> what to tell the user if it is missing); the modules,
    or BaselineUnavailable naming the first that failed."""
    import importlib

    out = {}
    for name, hint in packages.items():
        try:
            out[name] = importlib.import_module(name)
        except ImportError as e:
            raise BaselineUnavailable(f"import {name} failed: {e}; {hint}") from e
    return out


def import_from_checkout(checkout: Path, modules: tuple[str, ...], stubs: Mapping[str, str],
                         required: tuple[str, ...], tested_at: str) -> list[Any]:
    """Import `modules` from the baseline's `checkout` (put first on sys.path), or raise
    BaselineUnavailable saying what failed.

    stubs: module name -> docstring of an empty stand-in registered first (the baselines'
    own env modules import gym/atari-py, which the adapters replace with EnvPool).
    required: attributes the first module must have (the functions the adapter patches or
    calls); tested_at: the checkout commit the adapter was tested with, for the message.
    A module found outside the checkout (another installed package shadowing it) fails.
    """
    import importlib
    import types

    if str(checkout) not in sys.path:
        sys.path.insert(0, str(checkout))
    for name, doc in stubs.items():
        stub = types.ModuleType(name)
        stub.__doc__ = doc
        sys.modules[name] = stub
    try:
        loaded = [importlib.import_module(m) for m in modules]
    except ImportError as e:
        raise BaselineUnavailable(f"import {modules[0]} from {checkout} failed: {e}") from e
    where = Path(str(loaded[0].__file__)).resolve()
    if checkout.resolve() not in where.parents:
        raise BaselineUnavailable(
            f"{modules[0]} was imported from {where}, not from the checkout {checkout}: "
            "another installed package shadows it; uninstall it or use that checkout")
    for name in required:
        if not hasattr(loaded[0], name):
            raise BaselineUnavailable(
                f"{where} has no {name!r}: this adapter needs {modules[0]} as of {tested_at}")
    return loaded


def parse_cli(cls: type[A], argv: list[str] | None, prog: str) -> A | None:
    """The adapter's parsed and checked Args, or None after printing why (exit EXIT_BAD_INPUT)."""
    from runrecord.cli_help import parse_config

    try:
        args = parse_config(cls, args=argv, prog=prog, default=cls.defaults())
        args.check()
        check_env_id(args.env_id)
    except (ValueError, EnvError) as e:
        print(f"error: {e}", file=sys.stderr)
        return None
    return args


def load_checkout(
    given: Path | None, env_var: str, name: str, marker: str, url: str,
    importer: Callable[[Path], Any], run_dir: Path,
    manifest_for: Callable[[dict[str, Any]], Mapping[str, Any]],
) -> tuple[Path, Any] | None:
    """(checkout, what `importer` returns), or None after recording the run as skipped."""
    named = given or os.environ.get(env_var)
    try:
        checkout = find_checkout(given, env_var, name, marker, url)
        return checkout, importer(checkout)
    except BaselineUnavailable as e:
        try:
            record_unavailable(run_dir, manifest_for({"path": named and str(named)}), e)
        except RecordError as re:
            print(f"error: {e}\nerror: {re}", file=sys.stderr)
        return None


def record_unavailable(run_dir: Path, manifest: Mapping[str, Any], error: BaselineUnavailable) -> None:
    """Write the `skipped` record of a run whose baseline is missing, and say so."""
    reason = f"baseline unavailable: {error}"
    write_skipped(run_dir, manifest, reason)
    print(f"error: {reason}", file=sys.stderr)
    print(f"recorded as skipped in {run_dir}", file=sys.stderr)


def redact_native_logs(native_dir: Path) -> list[Path]:
    """Replace the os.environ copies that the baselines write into meta.json files.

    Returns the files changed. Symlinked meta.json (moolib) are resolved to their target.
    """
    changed: list[Path] = []
    for p in sorted(Path(native_dir).rglob("meta.json*")):
        if p.is_symlink() or not p.is_file():
            continue
        meta = read_json_or_none(p)
        if isinstance(meta, dict) and isinstance(meta.get("env"), dict):
            meta["env"] = REDACTED
            p.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
            changed.append(p)
    return changed


def finish_native(native_dir: Path, run_dir: Path, logs_file: str,
                  read_logs: Callable[[Path], NativeLog]) -> dict[str, Any]:
    """Tidy a baseline's own files (its `latest` symlink removed, its meta.json redacted)
    and summarise its log `logs_file` (relative to `native_dir`, read with `read_logs`):
    the manifest's note about them."""
    latest = native_dir / "latest"
    if latest.is_symlink():
        latest.unlink()
    redact_native_logs(native_dir)
    note: dict[str, Any] = {"dir": str(native_dir.relative_to(run_dir)), "logs": None}
    logs = native_dir / logs_file
    if logs.exists():
        try:
            parsed = read_logs(logs)
            note["logs"] = {"file": logs_file, "rows": len(parsed.rows), "warnings": parsed.warnings}
        except NativeLogError as e:
            note["logs"] = {"file": logs_file, "error": str(e)}
    return note


def update_row(update: int, env_steps: int, frame_skip: int, wall_time_s: float,
               learner_version: int, sps: float, learning_rate: float, learner_delay_s: float,
               rollout_queue_get_s: float = 0.0) -> dict[str, Any]:
    """The updates.csv columns every baseline writes for an update (`env_steps`: agent
    steps trained on so far). Actors never wait for parameters (they act on the model the
    learner updates in place), and torch models have no params checksum."""
    return {
        "update": update,
        "env_steps": env_steps,
        "frames": env_steps * frame_skip,
        "wall_time_s": wall_time_s,
        "learner_version": learner_version,
        "sps": sps,
        "stat_learning_rate": learning_rate,
        "stat_learner_delay_s": learner_delay_s,
        "rollout_queue_get_s": rollout_queue_get_s,
        "param_queue_get_s": 0.0,
        "params_checksum": "",
    }


def version_stats(versions: np.ndarray) -> dict[str, int]:
    """Policy versions of a batch, shape [T, B] (step t of trajectory b) -> record columns."""
    v = np.asarray(versions)
    if v.ndim != 2 or v.size == 0:
        raise ValueError(f"versions must be a non-empty [T, B] array, got shape {v.shape}")
    return {
        "rollout_policy_version_min": int(v.min()),
        "rollout_policy_version_max": int(v.max()),
        "num_rollouts": int(v.shape[1]),
        "policy_changes_mid_rollout": int((v.min(axis=0) != v.max(axis=0)).sum()),
    }
