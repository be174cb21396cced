"""Flags shared by the subcommands of `python -m analysis`, and how they print
what is left out and warned about.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import tyro

from analysis.errors import AnalysisError
from analysis.importers.build import imported_text
from analysis.importers.declare import RETURN_KEY, RUNTIME_KEY, STEP_KEY, declaration
from analysis.importers.orb import ColumnMap, load_openrlbenchmark_dir
from analysis.inputs.load import DEFAULT_LAST_N, RunSet, load_records, parse_env_map
from analysis.scales.normalize import parse_normalisers
from analysis.scoring.grouping import (
    Analysis,
    analyse,
)
from analysis.scoring.scores import DEFAULT_POINTS
from runrecord import Run

if TYPE_CHECKING:
    from analysis.scoring.tables import TableData


@dataclass(kw_only=True)
class RunFilter:
    """Which runs count: flags every subcommand that reads run records shares."""

    where: tuple[str, ...] = ()
    """Keep only runs whose manifest matches KEY=VALUE (dotted keys), e.g.
    system=cleanba-ppo. Repeatable; all must match."""
    last_n: int = DEFAULT_LAST_N
    """Final score of a run = mean return of its last N episodes."""
    env_map: tuple[str, ...] = ()
    """FROM=TO: score runs on env FROM as env TO, e.g. BreakoutNoFrameskip-v4=Breakout-v5.
    Without it different env ids are different tasks, versions of one game included (one
    rule in every command; a line says when it applied). Repeatable."""

    def records(self, inputs: tuple[Path, ...]) -> RunSet:
        """The run records under `inputs` that these flags keep."""
        return RecordArgs(inputs=inputs, where=self.where, last_n=self.last_n,
                          env_map=self.env_map).runset()


@dataclass(kw_only=True)
class ScoreOptions:
    """How runs are normalised and whether different env protocols may meet."""

    normaliser: tuple[str, ...] = ()
    """Extra score normalisers ENV=LOW,HIGH (e.g. MyEnv-v0=0,100); Atari and CartPole-v1
    are built in."""
    allow_protocol_mismatch: bool = False
    """Pool or compare runs whose recorded env protocols differ (sticky actions, episode
    cap, ...); without it such runs are refused (exit 2). A warning or note says so."""


@dataclass(kw_only=True)
class Grouping:
    group_by: str = "layout.name"
    """Comma-separated dotted manifest keys that define groups, e.g. layout.name or
    system,layout.name. Systems and architectures are always kept apart."""


@dataclass(kw_only=True)
class RecordArgs(RunFilter, ScoreOptions, Grouping):
    """Where the runs are and how to group and score them."""

    inputs: tyro.conf.Positional[tuple[Path, ...]] = ()
    """Run folders, sweep folders or results roots (searched for manifest.json)."""
    orb: tuple[Path, ...] = ()
    """Folders of openrlbenchmark-style per-run CSV exports (run_df.csv + run.json, or
    <system>/<env_id>/<seed>.csv)."""
    step_column: str = STEP_KEY
    """openrlbenchmark CSVs: the column of agent steps."""
    return_column: str = RETURN_KEY
    """openrlbenchmark CSVs: the column of episode returns."""
    time_column: str = RUNTIME_KEY
    """openrlbenchmark CSVs: the column of seconds since the start."""
    frames_per_step: int | None = None
    """openrlbenchmark CSVs: frames per agent step (default 4 on Atari, 1 elsewhere)."""
    orb_protocol: str | None = None
    """--orb runs: the env protocol you vouch they ran under: 'paper' or a JSON file of
    EnvPool settings. Undeclared = unknown: the protocol guard refuses it."""
    orb_frames: float | None = None
    """--orb runs: the frame budget you vouch they ran for, e.g. 200e6. Undeclared =
    unknown."""
    points: int = DEFAULT_POINTS
    """Points of the common frame grid for curves and AUC."""
    # One flag, --no-cache: its pair would read --no-no-cache.
    no_cache: Annotated[bool, tyro.conf.FlagCreatePairsOff] = False
    """Parse every record instead of using <results root>/.analysis-cache (same numbers;
    the cache only saves time)."""

    def runset(self) -> RunSet:
        if self.last_n < 1:
            raise AnalysisError(f"--last-n must be >= 1, got {self.last_n}")
        if self.points < 2:
            raise AnalysisError(f"--points must be >= 2, got {self.points}")
        columns = ColumnMap(self.step_column, self.return_column, self.time_column)
        declared = declaration(self.orb_protocol, self.orb_frames, flag="--orb-protocol")
        read_orb = partial(load_openrlbenchmark_dir, columns=columns, declared=declared,
                           frames_per_step=self.frames_per_step)
        return load_records(self.inputs, more=[partial(read_orb, d) for d in self.orb],
                            where=self.where, use_cache=not self.no_cache,
                            env_map=parse_env_map(self.env_map))

    def analysis(self) -> Analysis:
        rs = self.runset()
        included_runs(rs)
        return analyse(rs, group_by=self.group_by, last_n=self.last_n, points=self.points,
                       normalisers=parse_normalisers(self.normaliser),
                       allow_protocol_mismatch=self.allow_protocol_mismatch)


@dataclass(kw_only=True)
class TableFormat:
    """How a command that ends in a table prints it."""

    format: Literal["console", "markdown", "latex", "csv", "json"] = "console"
    """console: the lines as always. markdown, latex (a booktabs tabular for \\input),
    csv or json (a list of row objects): only the result's table on stdout, for a paper
    (`> table.tex`); warnings stay on stderr, files and exit code as with console."""

    def print_lines(self, lines: list[str]) -> None:
        """The console lines, unless a table format replaces them."""
        if self.format == "console":
            print("\n".join(lines))

    def say(self, line: str) -> None:
        """A line beside the result (e.g. "wrote FILE"): on stderr when stdout is the
        table, so that `> table.tex` holds the table alone."""
        print(line, file=sys.stdout if self.format == "console" else sys.stderr)

    def print_table(self, rows: Callable[[], TableData]) -> None:
        """The result's table, `rows()`, in the table format (nothing for console)."""
        if self.format != "console":
            sys.stdout.write(rows().render(self.format))


def print_left_out(rs: RunSet) -> None:
    for x in rs.left_out:
        print(f"left out: {x.run_id} [{x.status}] {x.reason}", file=sys.stderr)


def included_runs(rs: RunSet) -> list[Run]:
    """The runs to analyse; with none, the left-out ones are printed and refused."""
    if not rs.included:
        print_left_out(rs)
        raise AnalysisError("no completed runs with episodes to analyse")
    return rs.included


def print_imported(runs: list[Run]) -> None:
    for r in runs:
        print(f"imported: {r.run_id} {r.manifest.get('env_id')} seed "
              f"{r.manifest.get('seed')}: {imported_text(r)}")


def print_warnings(ws: list[str]) -> None:
    for w in ws:
        print(f"warning: {w}", file=sys.stderr)
