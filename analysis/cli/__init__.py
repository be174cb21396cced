"""`python -m analysis <subcommand>`: numbers, verdicts and figures from run records.

Exit codes: runrecord.exits.EXIT_CODES, shown at the end of this help and of every
deciding subcommand's (DECIDING); an error is a message on stderr, no traceback.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import tyro

from analysis.cli.imports import IMPORT_HELP, Import
from analysis.cli.published import Atari5, OrbFetch, OrbImport, PaperTables, Reproduce
from analysis.cli.scores import (
    Aggregate,
    Curves,
    Equivalence,
    Figures,
    PlanSeeds,
    PlanSequential,
    Regression,
    Staleness,
    Summary,
)
from analysis.errors import AnalysisError
from runrecord import RecordError
from runrecord.cli_dispatch import flags_refused, parse_command
from runrecord.exits import EXIT_BAD_INPUT

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
)


DECIDING = ("equivalence", "regression", "staleness", "reproduce")
"""The subcommands whose exit code is a verdict: their --help ends with the exit codes."""
HELP = "`python -m analysis <subcommand>`: numbers, verdicts and figures from run records."


def main(argv: list[str] | None = None) -> int:
    cmd: Any = parse_command(Command, "python -m analysis", HELP, DECIDING, argv)
    refused = flags_refused(cmd)  # before the command reads or writes anything
    if refused is not None:
        return refused
    try:
        return int(cmd.run())
    except (AnalysisError, RecordError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
