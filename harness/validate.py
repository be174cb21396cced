"""Check every run's command line with the trainer's own parser before anything starts.

`harness plan` and `harness run` build, for each distinct run shape, the exact command the
harness would launch and hand it to the entry point's parser: for the Cleanba trainers
tyro over their preset configs (types, ranges in __post_init__), then the trainers' own
start-up check, cleanba.core.checks.check_run (env id, the layout split, discrete actions, the
preset against the env, the algorithm's sizes), without starting JAX's backends or any
env; for the baseline adapters their tyro Args and check(). A bad override fails the whole
sweep with exit 2, naming the key, its line and the parser's words. Entry points given as
.py scripts follow only the command-line contract and are checked when they start.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import re
from collections.abc import Iterable
from typing import Any

from harness.sweep import RunSpec, SweepError

RUN_DIR_PLACEHOLDER = "<run-dir>"


def _quiet_call(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, str]:
    """fn's result and everything it printed; a parser's SystemExit becomes (None, text)."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stderr(out), contextlib.redirect_stdout(out):
            return fn(*args, **kwargs), out.getvalue()
    except SystemExit:
        return None, out.getvalue()


def _tidy(text: str) -> str:
    """A parser's boxed console message as one line of plain text."""
    lines = [re.sub(r"[─-╿]+", " ", line).strip(" |-") for line in text.splitlines()]
    lines = [line for line in lines if line and not line.startswith("For full helptext")
             and line not in ("Value error", "Parsing error")]
    if "Argument helptext:" in lines:
        lines = lines[:lines.index("Argument helptext:")]
    return re.sub(r"\s+", " ", " ".join(lines)).strip()


def check_cleanba(module: Any, spec: RunSpec, argv: list[str]) -> str | None:
    """The trainer's complaint about `spec`'s command line `argv`, or None when it would
    start: its parser, then the trainer's own start-up check (cleanba.core.checks.check_run)
    for the processes and devices the harness would give it."""
    from cleanba.core.checks import Topology, check_run, preset_choice

    where = Topology(spec.num_processes, 0, spec.cpu_devices or spec.layout.devices_per_process)
    try:
        config, printed = _quiet_call(_tyro_parse, module, argv, spec.entry)
        if config is None:
            return _tidy(printed) or "the trainer rejected its command line"
        check_run(config, module.make_algorithm, lambda _: where,
                  preset_choice(module.PRESETS, spec.preset), tuple(module.PRESETS))
    except ValueError as e:  # check_run's ConfigError and EnvError, a parser's ValueError
        return str(e)
    return None


def _tyro_parse(module: Any, argv: list[str], entry: str) -> Any:
    import tyro

    return tyro.extras.overridable_config_cli(module.PRESETS, prog=f"python -m {entry}",
                                              args=argv)


def check_baseline(module: Any, spec: RunSpec, argv: list[str]) -> str | None:
    """A baseline adapter's complaint about `spec`'s command line `argv` (its tyro Args,
    check())."""
    from baselines import common

    args, printed = _quiet_call(common.parse_cli, module.Args, argv, f"python -m {spec.entry}")
    if args is None:
        return _tidy(printed) or "the adapter rejected its command line"
    return None


def check_spec(spec: RunSpec) -> str | None:
    """The entry point's complaint about this run's command, or None (also when the entry
    point cannot be checked without starting it: a .py script, a module not installed)."""
    if spec.entry.endswith(".py"):
        return None
    try:
        module = importlib.import_module(spec.entry)
    except ImportError:
        return None
    argv = spec.command(RUN_DIR_PLACEHOLDER)
    argv = argv[argv.index(spec.entry) + 1:]
    if hasattr(module, "PRESETS") and hasattr(module, "make_algorithm"):
        return check_cleanba(module, spec, argv)
    if hasattr(module, "Args"):
        return check_baseline(module, spec, argv)
    return None


def _shape(spec: RunSpec) -> tuple:
    # What the parsers look at; the seed is checked by the sweep loader (integers >= 0).
    return (spec.entry, spec.preset, spec.env_id, spec.architecture, spec.layout.name,
            spec.total_timesteps, spec.cpu_devices, tuple(sorted(map(str, spec.overrides.items()))))


def culprit(spec: RunSpec, message: str) -> str:
    """Which sweep key a parser's message is about: an override, else layouts/frames/games."""
    for key in sorted(spec.overrides, key=len, reverse=True):
        if re.search(rf"--{re.escape(key)}\b|\b{re.escape(key.replace('-', '_'))}\b", message):
            return key
    if re.search(r"device-ids|actor thread|learner device|process", message):
        return "layouts"
    if "total-timesteps" in message:
        return "frames"
    if "env" in message.lower() and spec.env_id in message:
        return "games"
    return "overrides" if spec.overrides else "layouts"


def check_runs(specs: Iterable[RunSpec]) -> None:
    """Raise SweepError for the first run whose command its entry point would reject."""
    seen: set[tuple] = set()
    for spec in specs:
        shape = _shape(spec)
        if shape in seen:
            continue
        seen.add(shape)
        message = check_spec(spec)
        if message is None:
            continue
        key = culprit(spec, message)
        line = spec.key_lines.get(key)
        where = f"line {line}: " if line else ""
        what = f"{key} = {spec.overrides[key]!r}" if key in spec.overrides else key
        raise SweepError(f"{spec.key_source}: {where}{what}: {spec.label()} would fail at "
                         f"launch: {message}")
