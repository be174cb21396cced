"""benchenv: the environments every system runs on: the Atari protocol, its two backends
(EnvPool and ale-py's vector env) behind one interface, and run seeds -> env seeds. Shared
by our trainers, the baseline adapters, the harness and the analysis (no JAX, no trainer
code here), so none of them imports cleanba to learn it.

The Atari protocol is the paper's ("Machado" settings): sticky actions 0.25, full action
space, no life-loss signal, at most 108k frames per episode, 84x84 grey, stack 4, frame
skip 4. Reward clipping is for training only: returns are recorded from the raw game
score (info["reward"], which both backends give).

Backends (`BACKENDS`, each a `Backend`: what it needs installed, which envs it has, how
it makes them): `envpool` (Linux wheels only; the paper's and the baselines'), `ale`
(ale-py's vector env, wheels for Linux, macOS and Windows; Atari games only), made to give
EnvPool's semantics (benchenv/ale_env.py), and `ale-exact` (one ale-py game per env stepped
from Python, its own frame resize; the one backend whose env state saves and restores
exactly: benchenv/ale_exact.py). A new backend is one more `Backend` in `_REGISTRY`. A
protocol names its backend and the backend's version (`backend`, `backend_version`); the
version is information, not protocol (`INFORMATION_KEYS`): it is left out of run ids and
protocol comparisons.
"""

from __future__ import annotations

import difflib
import functools
import importlib.metadata
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ATARI_PROTOCOL: dict[str, Any] = {
    "episodic_life": False,  # no life-loss signal: an episode is a whole game
    "repeat_action_probability": 0.25,  # sticky actions
    "full_action_space": True,  # 18 actions on every game
    "noop_max": 1,
    "max_episode_steps": 27000,  # agent steps = 108k frames
    "img_height": 84,
    "img_width": 84,
    "stack_num": 4,
    "frame_skip": 4,
    "gray_scale": True,
    "reward_clip": True,  # training signal only; raw scores come from info["reward"]
}


LEGACY_BACKEND = "envpool"
"""The backend of a protocol that names none: records written before the key (every
system ran EnvPool then)."""
INFORMATION_KEYS = ("backend_version",)
"""Protocol keys that describe, not define: left out of run ids and protocol comparisons
(an EnvPool upgrade does not make runs incomparable; the backend itself does)."""


class EnvError(ValueError):
    """An env id, env option or backend that cannot be had."""


@dataclass(frozen=True)
class Backend:
    """One env backend: the package it needs, its env ids, its spaces and its envs. The
    functions import the backend's module when called, so `import benchenv` needs none."""

    name: str
    package: str  # the distribution to install
    module: str  # the module that must import
    atari_only: bool  # runs ale-py's ROMs: Atari games only
    exact_state: bool  # envs save and restore their whole state (get_state, set_state)
    env_ids: Callable[[], tuple[str, ...]]
    spaces: Callable[[str, dict[str, Any]], tuple[tuple[int, ...], bool, str, int | None]]
    # (env_id, num_envs, seeds, protocol kwargs, backend kwargs) -> a vector env
    make: Callable[[str, int, list[int], dict[str, Any], dict[str, Any]], Any]


def _envpool_ids() -> tuple[str, ...]:
    from benchenv.envpool_env import env_ids

    return env_ids()


def _envpool_spaces(env_id: str, kwargs: dict[str, Any]):
    from benchenv.envpool_env import spaces

    return spaces(env_id, kwargs)


def _envpool_make(env_id: str, num_envs: int, seeds: list[int], kwargs: dict[str, Any],
                  backend_kwargs: dict[str, Any]):
    from benchenv.envpool_env import make

    return make(env_id, num_envs, seeds, {**kwargs, **backend_kwargs})


def _ale_ids() -> tuple[str, ...]:
    from benchenv.ale_env import rom_ids

    return tuple(rom_ids())


def _ale_spaces(env_id: str, kwargs: dict[str, Any]):
    from benchenv.ale_env import action_count

    shape = (int(kwargs.get("stack_num", 4)), int(kwargs.get("img_height", 84)),
             int(kwargs.get("img_width", 84)))
    return shape, True, "Discrete", action_count(env_id, bool(kwargs.get("full_action_space", True)))


def _ale_threads(backend: str, backend_kwargs: dict[str, Any]) -> int | None:
    """The ALE backends take num_threads only (ale-exact ignores it)."""
    rest = {k: v for k, v in backend_kwargs.items() if k != "num_threads"}
    if rest:
        raise EnvError(f"the {backend} backend takes num_threads only, not {sorted(rest)}")
    return backend_kwargs.get("num_threads")


def _ale_make(env_id: str, num_envs: int, seeds: list[int], kwargs: dict[str, Any],
              backend_kwargs: dict[str, Any]):
    from benchenv.ale_env import AleVectorEnv

    return AleVectorEnv(env_id, num_envs, seeds, kwargs, _ale_threads("ale", backend_kwargs))


def _ale_exact_make(env_id: str, num_envs: int, seeds: list[int], kwargs: dict[str, Any],
                    backend_kwargs: dict[str, Any]):
    from benchenv.ale_exact import AleExactEnv

    return AleExactEnv(env_id, num_envs, seeds, kwargs, _ale_threads("ale-exact", backend_kwargs))


_REGISTRY = (
    Backend("envpool", "envpool", "envpool", atari_only=False, exact_state=False,
            env_ids=_envpool_ids, spaces=_envpool_spaces, make=_envpool_make),
    Backend("ale", "ale-py", "ale_py", atari_only=True, exact_state=False,
            env_ids=_ale_ids, spaces=_ale_spaces, make=_ale_make),
    Backend("ale-exact", "ale-py", "ale_py", atari_only=True, exact_state=True,
            env_ids=_ale_ids, spaces=_ale_spaces, make=_ale_exact_make),
)
BACKEND = {b.name: b for b in _REGISTRY}
BACKENDS = tuple(BACKEND)
"""The backends' names, in order of preference where several are installed."""
EXACT_STATE_BACKENDS = tuple(b.name for b in _REGISTRY if b.exact_state)
"""The backends whose envs save and restore their whole state, so a checkpoint holds them
instead of re-seeding (cleanba/core/checkpoint.py)."""


def backend_installed(backend: str) -> bool:
    return importlib.util.find_spec(BACKEND[backend].module) is not None


def default_backend() -> str:
    """EnvPool where it is installed, else ALE (macOS, Windows: EnvPool has no wheels)."""
    return "envpool" if backend_installed("envpool") else "ale"


def check_backend(backend: str) -> None:
    """Raise EnvError unless `backend` is one of BACKENDS and installed."""
    if backend not in BACKENDS:
        raise EnvError(f"unknown env backend {backend!r}; valid: {', '.join(BACKENDS)}")
    if not backend_installed(backend):
        hint = (" (EnvPool has Linux wheels only; use --env-backend ale)"
                if backend == "envpool" else "")
        raise EnvError(f"env backend {backend!r} needs the package {BACKEND[backend].package!r}, "
                       f"which is not installed{hint}")


def backend_version(backend: str) -> str | None:
    try:
        return importlib.metadata.version(BACKEND[backend].package)
    except importlib.metadata.PackageNotFoundError:
        return None


def protocol_backend(protocol: dict[str, Any] | None) -> str:
    """The backend a protocol names (LEGACY_BACKEND when it names none)."""
    return str((protocol or {}).get("backend", LEGACY_BACKEND))


def restores_exactly(protocol: dict[str, Any] | None) -> bool:
    """Whether the protocol's backend is one of EXACT_STATE_BACKENDS."""
    return protocol_backend(protocol) in EXACT_STATE_BACKENDS


def defining_protocol(protocol: dict[str, Any]) -> dict[str, Any]:
    """The protocol without INFORMATION_KEYS: what a run id hashes."""
    return {k: v for k, v in protocol.items() if k not in INFORMATION_KEYS}


@functools.cache
def _env_ids(backend: str) -> tuple[str, ...]:
    return BACKEND[backend].env_ids()


def is_atari(env_id: str) -> bool:
    """Atari games in EnvPool are the `<Game>-v5` ids."""
    return env_id.endswith("-v5")


def frames_per_step(env_id: str) -> int:
    return int(ATARI_PROTOCOL["frame_skip"]) if is_atari(env_id) else 1


def check_env_id(env_id: str, backend: str | None = None) -> None:
    """Raise EnvError naming close matches when `backend` (default: default_backend())
    has no such env, or is not installed."""
    backend = backend or default_backend()
    check_backend(backend)
    ids = _env_ids(backend)
    if env_id in ids:
        return
    close = difflib.get_close_matches(env_id, ids, n=5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    if BACKEND[backend].atari_only:
        extra = (" Classic control (CartPole-v1) needs the EnvPool backend (Linux)."
                 if not is_atari(env_id) else "")
        raise EnvError(f"unknown env id {env_id!r} for the {backend} backend: it runs the "
                       f"{len(ids)} Atari games as '<Game>-v5', e.g. Breakout-v5.{extra}{hint}")
    raise EnvError(
        f"unknown env id {env_id!r}: EnvPool has {len(ids)} envs "
        f"(Atari games as '<Game>-v5', e.g. Breakout-v5; classic control e.g. CartPole-v1).{hint}"
    )


def env_protocol(env_id: str, reward_clip: bool = True, backend: str | None = None,
                 **overrides: Any) -> dict[str, Any]:
    """The env settings of `env_id` (what a manifest records as env_protocol): EnvPool's
    kwargs, plus the backend (default: default_backend()) and its version."""
    if is_atari(env_id):
        kwargs = dict(ATARI_PROTOCOL)
        kwargs["reward_clip"] = reward_clip
    else:
        kwargs = {}
    kwargs.update(overrides)
    backend = backend or default_backend()
    kwargs["backend"] = backend
    kwargs["backend_version"] = backend_version(backend)
    return kwargs


@dataclass(frozen=True)
class Spaces:
    """What a trainer needs of an env before making it."""

    obs_shape: tuple[int, ...]
    frames: bool  # uint8 frames (else float vectors)
    action_space: str  # the class name, e.g. Discrete
    num_actions: int | None  # None unless discrete


def env_spaces(env_id: str, protocol: dict[str, Any]) -> Spaces:
    """`env_id`'s spaces under `protocol` (no env is made)."""
    return Spaces(*BACKEND[protocol_backend(protocol)].spaces(env_id, _backend_kwargs(protocol)))


def _backend_kwargs(protocol: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in protocol.items() if k not in ("backend", "backend_version")}


# --- env seeds --------------------------------------------------------------------------
# EnvPool takes int32 seeds, so env seeds live in [0, 2**31). A run's env i gets
# mix31(seed * 2**ENV_INDEX_BITS + i): (seed, i) packed into 31 bits, then a bijective
# integer hash. Distinct (seed, i) pairs therefore give distinct env seeds (no two envs of
# any runs share a stream, unlike seed + i where run 1's env 2 was run 2's env 1), and
# the hash spreads neighbouring pairs over the whole range.
ENV_SEED_BITS = 31
ENV_INDEX_BITS = 15
MAX_ENVS = 2**ENV_INDEX_BITS  # global envs per run
MAX_SEED = 2 ** (ENV_SEED_BITS - ENV_INDEX_BITS) - 1  # run seeds 0 .. MAX_SEED
_MASK31 = 2**ENV_SEED_BITS - 1


def mix31(x: int) -> int:
    """A bijection of [0, 2**31): xor-shifts and multiplications by odd constants modulo
    2**31 (each step invertible), the shape of Wellons' lowbias32 hash on 31 bits."""
    x &= _MASK31
    x ^= x >> 16
    x = (x * 0x7FEB352D) & _MASK31
    x ^= x >> 15
    x = (x * 0x846CA68B) & _MASK31
    x ^= x >> 16
    return x


def check_seed(seed: int) -> None:
    """Raise ValueError unless `seed` is a run seed the env-seed derivation accepts."""
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"--seed must be an integer in 0..{MAX_SEED}, got {seed} (env seeds "
                         f"pack the run seed and the env index into EnvPool's int32 range)")


def env_seeds(base_seed: int, first_env_index: int, num_envs: int,
              segment: int = 0) -> list[int]:
    """EnvPool seeds of envs [first, first + num) of the run with seed `base_seed`:
    mix31(seed * MAX_ENVS + global env index).

    Depends only on (run seed, global env index), never on which thread, device or process
    runs the env, so one seed gives the same streams on every layout (the deterministic
    mode relies on it), and distinct (seed, index) pairs never share a seed.

    segment > 0: the seeds of the envs re-seeded at that update (checkpoint boundaries,
    cleanba/core/checkpoint.py): mix31(segment seed + segment), a bijection of the
    segment-0 seed for each segment, so one segment's envs never share a seed.
    """
    check_seed(base_seed)
    if first_env_index < 0 or first_env_index + num_envs > MAX_ENVS:
        raise ValueError(f"env indices {first_env_index}..{first_env_index + num_envs - 1} "
                         f"outside 0..{MAX_ENVS - 1}")
    first = [mix31(base_seed * MAX_ENVS + first_env_index + i) for i in range(num_envs)]
    return first if segment == 0 else [mix31(s + segment) for s in first]


def make_env(
    env_id: str,
    num_envs: int,
    base_seed: int,
    first_env_index: int = 0,
    protocol: dict[str, Any] | None = None,
    segment: int = 0,
    **backend_kwargs: Any,
):
    """A gymnasium-API vector env of the protocol's backend (default: env_protocol(env_id)):
    reset() -> (obs, info), step(actions) -> (obs, reward, terminated, truncated, info),
    close(); EnvPool's semantics on every backend (benchenv/ale_env.py, ale_exact.py).
    `ale-exact` envs also have get_state() -> bytes and set_state(bytes). Env i is the
    run's env first_env_index + i and gets its seed from `env_seeds` (of `segment`: 0, or
    the update at which the run re-seeds its envs). backend_kwargs:
    num_threads (the ALE backends; ale-exact ignores it), or any other EnvPool kwarg
    (EnvPool only)."""
    protocol = env_protocol(env_id) if protocol is None else protocol
    backend = protocol_backend(protocol)
    check_env_id(env_id, backend)
    seeds = env_seeds(base_seed, first_env_index, num_envs, segment)
    return BACKEND[backend].make(env_id, num_envs, seeds, _backend_kwargs(protocol), backend_kwargs)
