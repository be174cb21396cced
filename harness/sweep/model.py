"""The sweep model: a sweep, its runs, its adaptive design and a validated matrix (the
input of expansion).

These are plain values. harness.sweep.checks makes them from a sweep file (checking every
value, with line numbers), harness.sweep.expand turns each ValidatedMatrix into RunSpecs,
and everything after that (plan, execute, adaptive looks, report) reads RunSpec, Sweep and AdaptiveConfig only.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.sweep.systems import System, flag_args
from runrecord import Layout

if TYPE_CHECKING:
    from analysis.sequential import SequentialDesign


@dataclass(frozen=True)
class AdaptiveConfig:
    """A checked [adaptive] table (or the defaults of `harness run --until-decided`)."""

    first_seeds: int = 3
    batch_seeds: int = 2
    max_seeds: int = 9
    alpha: float = 0.05
    spending: str = "obrien-fleming"
    verdicts: tuple[str, ...] = ("equivalence",)
    reference: str | None = None
    """The gate's fixed reference: a folder of run records (absolute, or relative to the
    project root); None when the sweep has no gate."""

    def design(self) -> SequentialDesign:
        from analysis.sequential import SequentialDesign

        return SequentialDesign(first_seeds=self.first_seeds, batch_seeds=self.batch_seeds,
                                max_seeds=self.max_seeds, alpha=self.alpha,
                                spending=self.spending)

    def seeds_at_looks(self) -> list[int]:
        """Seeds per side at each look, e.g. [3, 5, 7, 9]."""
        return list(self.design().seeds_at_looks())

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "verdicts": list(self.verdicts)}


def adaptive_seeds(listed: Sequence[int], max_seeds: int) -> tuple[int, ...]:
    """The seeds of an adaptive matrix, in the order its looks take them: the first
    max_seeds of the listed seeds, and when the list is shorter, the integers after its
    largest (seeds [1, 2, 3] with max_seeds 5 are 1, 2, 3, 4, 5)."""
    seeds = list(dict.fromkeys(listed))[:max_seeds]
    nxt = max(seeds, default=0) + 1
    while len(seeds) < max_seeds:
        seeds.append(nxt)
        nxt += 1
    return tuple(seeds)


class SweepError(ValueError):
    """A sweep file (or scale-down option) that is wrong; the message says where and why."""


@dataclass(frozen=True)
class Resources:
    cpus_per_process: int = 1
    accelerator: str = "cpu"
    timeout_min: float | None = None


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep: everything needed to start it and to name it."""

    sweep: str
    system: str
    architecture: str
    env_id: str
    seed: int
    layout: Layout
    preset: str | None
    frames: int
    total_timesteps: int
    overrides: dict[str, Any]
    resources: Resources
    entry: str
    takes_preset: bool
    baseline: bool
    matrix: str = ""
    run_id: str = ""
    # XLA virtual CPU devices per process for accelerator 'cpu' (0: the layout's count).
    # A sweep gives all its CPU runs one count, its largest layout's: on CPU, XLA splits
    # matrix products and convolutions by its thread pool and device count, so layouts
    # compared bit for bit (--deterministic) must run with the same XLA configuration.
    cpu_devices: int = 0
    # Where the sweep file sets this run's keys ('layouts', 'frames', 'games', each
    # hyperparameter): for error messages about the run (harness.validate).
    key_lines: Mapping[str, int] = field(default_factory=dict, compare=False, hash=False)
    key_source: str = field(default="", compare=False)
    # Position of its seed in its matrix's seed list: an adaptive sweep's look k takes the
    # runs whose rank is below the seeds per side at look k (harness.adaptive.run).
    seed_rank: int = field(default=0, compare=False)
    # The Atari backend the sweep asks for ('envpool', 'ale'); None: the trainer's default
    # (not passed, and not in the definition, so sweeps without env_backends keep their ids).
    env_backend: str | None = None

    def definition(self) -> dict[str, Any]:
        """What defines the run (hashed into run_id); where and how it runs is not part of it."""
        return {
            "system": self.system,
            "architecture": self.architecture,
            "env_id": self.env_id,
            "seed": self.seed,
            "preset": self.preset,
            "hyperparameters": dict(sorted(self.overrides.items())),
            "frames": self.frames,
            "total_timesteps": self.total_timesteps,
            "layout": self.layout.name,
            **({"env_backend": self.env_backend} if self.env_backend else {}),
        }

    @property
    def num_processes(self) -> int:
        return self.layout.num_processes

    @property
    def cpus_needed(self) -> int:
        return self.resources.cpus_per_process * self.num_processes

    @property
    def gpus_needed(self) -> int:
        if self.resources.accelerator != "gpu":
            return 0
        return self.layout.devices_per_process * self.num_processes

    def command(
        self,
        run_dir: Path | str,
        process_id: int = 0,
        coordinator: str = "127.0.0.1:<port>",
        python: str = sys.executable,
    ) -> list[str]:
        """argv of process `process_id` of this run."""
        if self.entry.endswith(".py"):
            argv = [python, self.entry]
        else:
            argv = [python, "-m", self.entry]
        if self.takes_preset and self.preset:
            argv.append(self.preset)
        argv += ["--env-id", self.env_id, "--seed", str(self.seed),
                 "--total-timesteps", str(self.total_timesteps)]
        if not self.baseline:
            argv += ["--architecture", self.architecture]
            argv += flag_args("actor-device-ids", list(self.layout.actor_device_ids))
            argv += flag_args("learner-device-ids", list(self.layout.learner_device_ids))
        if self.env_backend:
            argv += ["--env-backend", self.env_backend]
        for k, v in sorted(self.overrides.items()):
            argv += flag_args(k, v)
        if self.num_processes > 1:
            argv += ["--distributed", "--coordinator-address", coordinator,
                     "--num-processes", str(self.num_processes), "--process-id", str(process_id)]
        argv += ["--run-dir", str(run_dir), "--sweep", self.sweep, "--run-id", self.run_id]
        return argv

    def label(self) -> str:
        arch = "" if self.baseline else f" {self.architecture}"
        backend = f" on {self.env_backend}" if self.env_backend else ""  # no [..]: rich markup
        return f"{self.system}{arch} {self.env_id} s{self.seed} {self.layout.name}{backend}"


@dataclass
class Sweep:
    name: str
    description: str
    runs: list[RunSpec]
    slurm: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)
    regression: dict[str, Any] = field(default_factory=dict)
    source: Path | None = None
    source_text: str = ""
    notes: list[str] = field(default_factory=list)
    # Scale-down options this sweep was loaded with ({"games": "...", "seeds": "...",
    # "frames": N}), so the report can say what was run; empty: the whole file.
    filters: dict[str, Any] = field(default_factory=dict)
    # The [adaptive] table (or --until-decided's defaults); None: every run at once.
    adaptive: AdaptiveConfig | None = None


def report_options(report: Mapping[str, Any], *, delta: float | None = None,
                   reps: int | None = None, allow_protocol_mismatch: bool = False
                   ) -> dict[str, Any]:
    """The analysis options of `harness report` from a sweep's [report] table (a flag
    given on the command line wins): what the report shows, and so what a certificate's
    default claims run again (harness.certify.claims). Absent keys keep analysis' defaults."""
    opts: dict[str, Any] = {"group_by": str(report.get("group_by", "layout.name"))}
    if delta is not None or "delta" in report:
        opts["delta"] = float(delta if delta is not None else report["delta"])
    if reps is not None or "reps" in report:
        r = int(reps if reps is not None else report["reps"])
        opts["reps"] = r
        opts["aggregate_reps"] = max(r, min(50_000, 10 * r))
    if "seed" in report:
        opts["seed"] = int(report["seed"])
    if "reference" in report:
        opts["reference"] = str(report["reference"])
    if allow_protocol_mismatch:  # the report's warnings then say which protocols differ
        opts["allow_protocol_mismatch"] = True
    return opts


@dataclass(frozen=True)
class ScaleDown:
    """Command-line options that replace a sweep file's values (plan/run --frames ...).

    None (or empty) keeps the file's value. `games` keeps only the listed games; a matrix
    left without games makes no runs and is not checked beyond its games.
    """

    frames: int | None = None
    games: tuple[str, ...] | None = None
    seeds: tuple[int, ...] | None = None


@dataclass(frozen=True)
class MatrixSystem:
    """A system of a matrix and the architectures it runs there (the first one by default)."""

    system: System
    architectures: tuple[str, ...]


@dataclass(frozen=True)
class MatrixGame:
    """A game of a matrix and what it decides for every run on it."""

    env_id: str
    preset: str
    """Trainer preset for systems that take one ('auto' already resolved)."""
    total_timesteps: int
    """The matrix's frame budget in agent steps of this game (>= 1)."""


@dataclass(frozen=True)
class ValidatedMatrix:
    """One matrix of a sweep file with every value checked: expansion cannot fail.

    Its runs are the product systems x architectures x layouts x games x seeds x grid.
    """

    sweep: str
    label: str
    systems: tuple[MatrixSystem, ...]
    layouts: tuple[Layout, ...]
    games: tuple[MatrixGame, ...]
    seeds: tuple[int, ...]
    frames: int
    overrides: Mapping[str, Any]
    """hyperparameter (kebab-case) -> value, the same for every run"""
    grid: Mapping[str, Sequence[Any]]
    """hyperparameter (kebab-case) -> the values swept (cartesian product)"""
    resources: Resources
    env_backends: tuple[str | None, ...] = (None,)
    """The Atari backends swept; (None,): the trainers' default, not named."""
    key_lines: Mapping[str, int] = field(default_factory=dict)
    """Where the file sets 'layouts', 'frames', 'games' and each hyperparameter."""
    key_source: str = ""
