"""The systems a sweep can run and how to launch each one's entry point.

Every entry point follows the trainer command-line contract (docs/harness.md): common
flags --env-id, --seed, --total-timesteps, --run-dir, --sweep, --run-id; exit code 0
completed, 1 failed, 2 bad arguments, 3 unavailable (record written as skipped), 130
interrupted. Cleanba trainers also take a PRESET positional and the layout flags.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PRESETS = ("auto", "atari", "cartpole")

# Flags the harness sets from the run's definition; a sweep may not override them.
RESERVED_FLAGS = {
    "env-id": "games",
    "seed": "seeds",
    "total-timesteps": "frames",
    "architecture": "architectures",
    "actor-device-ids": "layouts",
    "learner-device-ids": "layouts",
    "distributed": "layouts",
    "coordinator-address": "layouts",
    "num-processes": "layouts",
    "process-id": "layouts",
    "run-dir": "the results root",
    "sweep": "the sweep name",
    "run-id": "the run's definition",
    "resume-from": "the record's checkpoints (harness.store)",
}


@dataclass(frozen=True)
class System:
    """How to launch one system."""

    name: str
    entry: str
    """A module for `python -m` (cleanba.ppo), or a path to a .py script."""
    takes_preset: bool = True
    """Whether the entry point takes the PRESET positional (atari / cartpole)."""
    architectures: tuple[str, ...] = ("cleanba", "sync", "async")
    """Architectures it implements; the first is the default."""
    baseline: bool = False
    """Baseline adapters: one device, no layout or architecture flags."""
    extra: dict = field(default_factory=dict, compare=False)


BUILTIN_SYSTEMS: dict[str, System] = {
    "cleanba-ppo": System("cleanba-ppo", "cleanba.ppo"),
    "cleanba-impala": System("cleanba-impala", "cleanba.impala"),
    "monobeast-impala": System(
        "monobeast-impala", "baselines.monobeast", takes_preset=False,
        architectures=("async",), baseline=True,
    ),
    "moolib-impala": System(
        "moolib-impala", "baselines.moolib", takes_preset=False,
        architectures=("async",), baseline=True,
    ),
}

BASELINE_LAYOUT = "a0-l0-d1"


def flag_args(name: str, value: object) -> list[str]:
    """Command-line words for one hyperparameter (tyro's conventions)."""
    flag = "--" + name.replace("_", "-")
    if isinstance(value, bool):
        return [flag] if value else ["--no-" + name.replace("_", "-")]
    if isinstance(value, (list, tuple)):
        return [flag, *(_word(v) for v in value)]
    return [flag, _word(value)]


def _word(v: object) -> str:
    if isinstance(v, float):
        return repr(v)
    return str(v)


def known_hyperparameters(system: System, preset: str | None) -> set[str] | None:
    """Flags (kebab-case) the entry point's config accepts, or None when it cannot tell.

    Cleanba trainers expose PRESETS = {name: (description, config dataclass)}; importing
    one costs a JAX import, so this runs only for sweeps that override something.
    """
    import dataclasses
    import importlib

    if system.entry.endswith(".py"):
        return None
    try:
        module = importlib.import_module(system.entry)
    except Exception:  # not installed here (e.g. a baseline): the trainer will check
        return None
    presets = getattr(module, "PRESETS", None)
    if not isinstance(presets, dict) or not presets:
        return None
    entry = presets.get(preset) if preset else next(iter(presets.values()))
    if entry is None:
        return None
    config = entry[1] if isinstance(entry, tuple) else entry
    if not dataclasses.is_dataclass(config):
        return None
    return {f.name.replace("_", "-") for f in dataclasses.fields(config)}
