"""`python -m analysis import <format> SRC --out ROOT ...`: runs from other tools as
run records (analysis.importers). Each format's flags, then one call to import_runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import tyro

from analysis.cli.common import print_warnings
from analysis.importers import FORMATS, TableColumns, import_runs
from analysis.importers.declare import LENGTH_KEY, RETURN_KEY, RUNTIME_KEY, STEP_KEY
from runrecord.exits import EXIT_OK
from runrecord.words import counted


@dataclass(kw_only=True)
class ImportArgs:
    """What every import reads and what the user declares for it."""

    src: tyro.conf.Positional[Path]
    """The file or folder to import (searched recursively)."""
    out: Path
    """Sweep folder for the records (runs/<run_id>/ below it); give it to summary,
    equivalence, regression, reproduce like any sweep."""
    protocol: tuple[str, ...] = ()
    """Required: the env protocol the runs were made under: a preset (paper), a JSON file,
    or KEY=VALUE pairs (e.g. repeat_action_probability=0.25 frame_skip=4), a preset then
    pairs overriding it; or 'unknown' (the protocol guard then refuses to compare these
    runs with any others)."""
    frames_per_step: float | None = None
    """Frames per logged step (CleanRL's global_step on Atari: 4). Required where the
    files count steps, not frames."""
    frames: float | None = None
    """The frame budget the runs were set to train for (e.g. 40e6); undeclared = unknown,
    which the budget guard of `reproduce` refuses."""
    seed: int | None = None
    """The seed of the one run in SRC, when its path does not give it."""
    task: str | None = None
    """The task (env id, e.g. Breakout-v5) of every run, when the files and paths do not
    give it."""
    system: str | None = None
    """System name for the records (groups are kept apart by system)."""
    layout: str | None = None
    """Layout (group) name, e.g. to import two settings of one system as two groups
    (default imported:<format>)."""
    path_pattern: str | None = None
    """Regular expression over each run's path relative to SRC, with named groups seed,
    task, system, layout, e.g. '(?P<task>[^/]+)/seed(?P<seed>\\d+)'."""
    allow_many_seeds: bool = False
    """Accept more than 300 seeds of one task (refused by default: likely episodes read
    as seeds)."""

    def _import(self, fmt: str, **options: Any) -> int:
        res = import_runs(fmt, self.src, self.out, protocol=self.protocol,
                          frames_per_step=self.frames_per_step, frames=self.frames,
                          seed=self.seed, task=self.task, system=self.system,
                          layout=self.layout, path_pattern=self.path_pattern,
                          allow_many_seeds=self.allow_many_seeds, **options)
        print("\n".join(res.lines()))
        print(f"{counted(len(res.written), 'run')} written, {len(res.unchanged)} already imported, "
              f"in {self.out}")
        print_warnings(res.warnings)
        return EXIT_OK


@dataclass(kw_only=True)
class TableImport(ImportArgs):
    """A long table (CSV, or Parquet by suffix): one row per episode; rows of one
    (system, layout, task, seed) are one run. A column it does not read whose text
    differs within a run (agent, config...) stops the import until it is mapped or
    --ignore-column names it; numeric columns it does not read are listed as ignored."""

    task_column: str = "task"
    """Column of task (env) ids (or declare --task)."""
    seed_column: str = "seed"
    """Column of seeds (or declare --seed)."""
    return_column: str = "return"
    """Column of episode returns."""
    step_column: str | None = None
    """Column of the step each episode ended at (needs --frames-per-step)."""
    frames_column: str | None = None
    """Column of the frame each episode ended at (instead of --step-column)."""
    system_column: str | None = None
    """Column of system names; None: the column named system, if there is one."""
    layout_column: str | None = None
    """Column of layout (group) names; None: the column named layout, if there is one."""
    time_column: str | None = None
    """Optional column of seconds since the run's start."""
    length_column: str | None = None
    """Optional column of episode lengths."""
    ignore_column: Annotated[tuple[str, ...], tyro.conf.UseAppendAction] = ()
    """A column to leave unread on purpose, e.g. a text column that tells no runs apart."""

    def run(self) -> int:
        return self._import("table", columns=TableColumns(
            task=self.task_column, seed=self.seed_column, episode_return=self.return_column,
            step=self.step_column, frames=self.frames_column, system=self.system_column,
            layout=self.layout_column, time=self.time_column, length=self.length_column,
            ignore=self.ignore_column))


@dataclass(kw_only=True)
class TensorboardImport(ImportArgs):
    """TensorBoard event files: each folder of events.out.tfevents.* is a run, one
    episode per scalar of --tag (CleanRL folders {env}__{exp}__{seed}__{time} give task,
    system and seed)."""

    tag: str = RETURN_KEY
    """Scalar tag of episode returns (its step: the step the episode ended at)."""
    length_tag: str | None = LENGTH_KEY
    """Scalar tag of episode lengths at the same steps (absent: lengths unknown)."""

    def run(self) -> int:
        return self._import("tensorboard", tag=self.tag, length_tag=self.length_tag)


@dataclass(kw_only=True)
class MonitorImport(ImportArgs):
    """Monitor CSV files (SB3/gymnasium: a JSON header line, then r, l, t): each folder
    of *monitor.csv files is one run, its files its envs, merged by time."""

    def run(self) -> int:
        return self._import("monitor")


@dataclass(kw_only=True)
class WandbImport(ImportArgs):
    """W&B offline run folders (wandb/offline-run-*/run-*.wandb): each finished run is a
    run record; task, seed and system from flags, the path, or the run's config."""

    metric: str = RETURN_KEY
    """History key of episode returns."""
    step: str = STEP_KEY
    """History key of the step each return was logged at."""
    config_task: str = "env_id"
    """Config key of the task."""
    config_seed: str = "seed"
    """Config key of the seed."""
    config_system: str = "exp_name"
    """Config key of the system name."""

    def run(self) -> int:
        return self._import("wandb", metric=self.metric, step=self.step,
                            config_task=self.config_task, config_seed=self.config_seed,
                            config_system=self.config_system)


@dataclass(kw_only=True)
class WandbCsvImport(ImportArgs):
    """W&B CSV exports: a run's history (one run per file; task and seed from --task/--seed
    or the path), or a chart's "Export CSV" (one run per `<run name> - <metric>` column;
    CleanRL run names give task, system and seed)."""

    metric: str = RETURN_KEY
    """Column of episode returns."""
    step: str = STEP_KEY
    """Column of the step each return was logged at (a chart's x axis must be it)."""
    time: str = RUNTIME_KEY
    """Column of seconds since the run's start."""

    def run(self) -> int:
        return self._import("wandb-csv", metric=self.metric, step=self.step, time=self.time)


IMPORT_HELP = ("Runs from other tools as run records: `import <format> SRC --out SWEEP "
               f"--protocol ...` with <format> one of {', '.join(FORMATS)} (docs/analysis.md, "
               "\"Your runs from elsewhere\").")
"""What `python -m analysis --help` and `import --help` say of `import` (a union of
formats has no docstring of its own: without this, tyro shows typing.Union's)."""

Import = (
    Annotated[TableImport, tyro.conf.subcommand("table")]
    | Annotated[TensorboardImport, tyro.conf.subcommand("tensorboard")]
    | Annotated[MonitorImport, tyro.conf.subcommand("monitor")]
    | Annotated[WandbImport, tyro.conf.subcommand("wandb")]
    | Annotated[WandbCsvImport, tyro.conf.subcommand("wandb-csv")]
)
"""`python -m analysis import <format> ...`."""
