"""`python -m analysis <subcommand>`: numbers, verdicts and figures from run records.

Exit codes: runrecord.exits.EXIT_CODES, shown at the end of this help and of every
deciding subcommand's (DECIDING); an error is a message on stderr, no traceback.
"""

from __future__ import annotations

import inspect
import sys
import typing
from typing import Annotated, Any

import tyro

from analysis.cli.calibrate import Calibrate
from analysis.cli.imports import IMPORT_HELP, Import
from analysis.cli.published import Atari5, OrbFetch, OrbImport, PaperTables, Reproduce
from analysis.cli.scores import (
    Aggregate,
    Curves,
    Figures,
    PlanSeeds,
    PlanSequential,
    Staleness,
    Summary,
)
from analysis.cli.verdicts import Equivalence, Regression
from analysis.errors import AnalysisError
from runrecord import RecordError
from runrecord.exits import EXIT_BAD_INPUT, command_help
from runrecord.flag_bounds import FlagValueError, check_flags

Command = (
    Annotated[Summary, tyro.conf.subcommand("summary")]
    | Annotated[Aggregate, tyro.conf.subcommand("aggregate")]
    | Annotated[Curves, tyro.conf.subcommand("curves")]
    | Annotated[Equivalence, tyro.conf.subcommand("equivalence")]
    | Annotated[Regression, tyro.conf.subcommand("regression")]
    | Annotated[PlanSeeds, tyro.conf.subcommand("plan-seeds")]
    | Annotated[PlanSequential, tyro.conf.subcommand("plan-sequential")]
    | Annotated[Staleness, tyro.conf.subcommand("staleness")]
    | Annotated[Figures, tyro.conf.subcommand("figures")]
    | Annotated[PaperTables, tyro.conf.subcommand("paper-tables")]
    | Annotated[Atari5, tyro.conf.subcommand("atari5")]
    | Annotated[Reproduce, tyro.conf.subcommand("reproduce")]
    | Annotated[OrbImport, tyro.conf.subcommand("orb-import")]
    | Annotated[OrbFetch, tyro.conf.subcommand("orb-fetch")]
    | Annotated[Import, tyro.conf.subcommand("import", description=IMPORT_HELP)]
    | Annotated[Calibrate, tyro.conf.subcommand("calibrate")]
)


DECIDING = ("equivalence", "regression", "staleness", "reproduce", "calibrate")
"""The subcommands whose exit code is a verdict: their --help ends with the exit codes."""
HELP = "`python -m analysis <subcommand>`: numbers, verdicts and figures from run records."


def _subcommands() -> dict[str, type]:
    """{name: config class} of every subcommand in Command."""
    out = {}
    for member in typing.get_args(Command):
        cls, *meta = typing.get_args(member)
        out[next(m.name for m in meta if hasattr(m, "name"))] = cls
    return out


def _description(name: str) -> str:
    """A subcommand's --help text: its own description (the marker's, else the class
    docstring), then the exit codes where it decides."""
    member = next(m for m in typing.get_args(Command)
                  if any(getattr(x, "name", None) == name for x in typing.get_args(m)[1:]))
    cls, *meta = typing.get_args(member)
    text = next((m.description for m in meta if getattr(m, "description", None)), None)
    return command_help(text or inspect.getdoc(cls) or "", name in DECIDING)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    sub = _subcommands()
    cmd: Any
    if args and args[0] in sub:
        # Parse one subcommand on its own, so that an unknown flag's "perhaps you meant"
        # suggestions come from the flags this subcommand accepts, not from the others'.
        cmd = tyro.cli(sub[args[0]], args=args[1:],  # type: ignore[call-overload]
                       prog=f"python -m analysis {args[0]}",
                       description=_description(args[0]))
    else:
        cmd = tyro.cli(Command, args=args, prog="python -m analysis",  # type: ignore[call-overload]
                       description=command_help(HELP, decides=True))
    try:
        check_flags(cmd)  # before the command reads or writes anything
        return int(cmd.run())
    except (AnalysisError, RecordError, FlagValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
