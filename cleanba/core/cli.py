"""`python -m cleanba.ppo|impala PRESET [flags]`: the preset, then tyro over its config."""

from __future__ import annotations

import sys
from typing import Any

from cleanba.core import stopping
from cleanba.core.algorithm import AlgorithmFactory
from cleanba.core.checks import preset_choice
from cleanba.core.config import ConfigError
from cleanba.core.records import console
from cleanba.core.runtime import exit_after, train
from runrecord.cli_help import command_help, flow_field_help, wants_help
from runrecord.exits import EXIT_BAD_INPUT


def main(presets: dict[str, tuple[str, Any]], factory: AlgorithmFactory, system: str,
         description: str | None, argv: list[str] | None = None) -> int:
    """Parse `PRESET [flags]` with tyro and train. The preset is required: its settings
    differ by orders of magnitude (a 50M-step Atari run vs a one-minute CartPole run)."""
    import tyro

    watcher = stopping.installed()
    if watcher is not None:
        watcher.set_phase("start-up (parsing arguments)")
    prog = f"python -m cleanba.{system.split('-')[-1]}"
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or (args[0] not in presets and args[0] not in ("-h", "--help")):
        console(f"error: {prog} needs a preset first, then flags: {prog} PRESET [flags]; "
                f"{'got ' + repr(args[0]) if args else 'got none'}. Presets:\n"
                + "\n".join(f"  {name}: {text}" for name, (text, _) in presets.items())
                + f"\nexample: {prog} cartpole --seed 2", sys.stderr)
        return EXIT_BAD_INPUT
    if wants_help(args):  # once per config class: presets share one
        for config_class in {type(config) for _, config in presets.values()}:
            flow_field_help(config_class)
    try:
        config = tyro.extras.overridable_config_cli(
            presets, prog=prog, args=args,
            description=command_help(description, decides=False) if description else None,
        )
    except ConfigError as exc:
        console(f"error: {exc}", sys.stderr)
        return EXIT_BAD_INPUT
    preset = preset_choice(presets, args[0])
    code = train(config, factory, system, preset, tuple(presets))
    exit_after(code)
    return code
