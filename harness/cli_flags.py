"""The flags of `python -m harness`: one dataclass per subcommand (tyro; verify's is
harness.certify.flags.Verify, which verify takes as it is), and how a
subcommand finds its sweep (`Select.load`, `Inspect.load`: the filters of the sweep's last
run). harness/cli.py parses them and calls the commands."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from harness.store import Store
from harness.sweep import (
    PROJECT_ROOT,
    Sweep,
    SweepError,
    filter_flags,
    load_sweep,
    parse_list,
    parse_seeds,
)
from harness.sweep import preset_path as _preset_path
from runrecord.writer import read_json_or_none


@dataclass
class Select:
    """Which sweep, where its results live, and how to scale it down."""

    sweep: Path | None = None
    """Sweep file (TOML). Give this or --preset."""
    preset: str | None = None
    """Name of a preset under harness/presets/ (smoke, deterministic, section3, base,
    workstation, scaling, sync-vs-cleanba, atari5, backends, hardware)."""
    results_root: Path = PROJECT_ROOT / "results"
    """Root of the results store; a sweep's runs go to <root>/<sweep name>/runs/<run id>/."""
    frames: int | None = None
    """Scale down: frame budget per run (replaces the file's frames)."""
    games: str | None = None
    """Scale down: keep only these games, comma-separated (e.g. Breakout-v5,Pong-v5)."""
    seeds: str | None = None
    """Scale down: these seeds, comma-separated (replaces the file's seeds)."""
    name: str | None = None
    """Sweep name (results folder); default: the file's name."""
    accelerator: Literal["cpu", "gpu"] | None = None
    """Run every run on this accelerator instead of the file's (cpu: XLA virtual devices),
    e.g. to try a scaled-down GPU preset here. Not part of the run ids."""

    def filters(self) -> dict[str, str | int]:
        """The scale-down options given (--frames, --games, --seeds), as the flags' values."""
        given = {"frames": self.frames, "games": self.games, "seeds": self.seeds}
        return {k: v for k, v in given.items() if v is not None}

    def load(self, until_decided: bool = False) -> Sweep:
        """The sweep, scaled down; until_decided: adaptive (the default design when the
        file has no [adaptive] table)."""
        if (self.sweep is None) == (self.preset is None):
            raise SweepError("give exactly one of --sweep FILE or --preset NAME")
        path = self.sweep if self.sweep is not None else _preset_path(str(self.preset))
        sweep = load_sweep(path, frames=self.frames, games=parse_list(self.games),
                           seeds=parse_seeds(self.seeds), name=self.name,
                           accelerator=self.accelerator, until_decided=until_decided)
        sweep.filters = self.filters()
        return sweep

    def store(self, sweep: Sweep) -> Store:
        return Store(self.results_root, sweep.name)


@dataclass
class Inspect(Select):
    """A command that looks at a sweep's runs: by default the runs of its last `run`."""

    last_filters: bool = True
    """With no --frames/--games/--seeds, use those of the sweep's last `harness run`
    (kept in <root>/<sweep>/plan.json); --no-last-filters: the whole sweep file."""

    def load(self, until_decided: bool = False) -> Sweep:
        sweep = super().load(until_decided)
        if not self.last_filters:
            return sweep
        # the plan.json of the sweep's last `harness run` (cli.save_plan)
        last = read_json_or_none(self.store(sweep).sweep_dir / "plan.json")
        last = last if isinstance(last, dict) else {}
        # A sweep last run with --until-decided is looked at as the adaptive sweep it was.
        until_decided = sweep.adaptive is None and bool(last.get("until_decided"))
        stored = {} if self.filters() else {k: v for k, v in (last.get("filters") or {}).items()
                                            if k in ("frames", "games", "seeds")}
        if not stored and not until_decided:
            return sweep
        scaled = replace(self, frames=stored.get("frames"), games=stored.get("games"),
                         seeds=stored.get("seeds")) if stored else self
        if stored:
            print(f"harness: using the filters of the sweep's last run: "
                  f"{filter_flags(stored)} (--no-last-filters: the whole sweep file)",
                  file=sys.stderr)
        return Select.load(scaled, until_decided)


@dataclass
class Plan(Select):
    """Print the runs a sweep expands to, and each one's command, without starting anything."""

    commands: bool = True
    """Also print the command line of each run."""
    sbatch: bool = False
    """Also print the sbatch script `run --backend slurm` would submit for each job shape."""


@dataclass
class Run(Select):
    """Run every run of the sweep that is not completed yet (resumable, lock per run)."""

    backend: Literal["local", "slurm"] = "local"
    """local: a process pool on this machine; slurm: one job (or array task) per run."""
    max_parallel: int | None = None
    """Local: at most this many runs at once (default: as many as the CPUs/GPUs allow)."""
    max_attempts: int = 2
    """A run that failed this many times is not retried (reported as exhausted)."""
    retry_skipped: bool = False
    """Retry runs recorded as skipped (e.g. after installing a missing baseline)."""
    retry_failed: bool = False
    """Also retry runs whose last failure was deterministic (bad arguments, a
    non-finite loss, a programming error), e.g. after fixing its cause; transient failures
    are retried anyway while attempts are left."""
    cpus: int | None = None
    """Local: use only the first N CPU cores (default: all this process may use)."""
    gpus: str | None = None
    """Local: GPU ids to use, comma-separated (default: CUDA_VISIBLE_DEVICES or all)."""
    slurm_cluster: Literal["slurm", "local", "debug"] = "slurm"
    """Slurm backend: 'slurm' submits to the cluster; 'local' runs the same jobs through
    submitit's local executor (for testing); 'debug' runs them in this process."""
    progress: bool = True
    """Show a live progress display and one line per finished run."""
    until_decided: bool = False
    """Run seeds in batches until the verdicts are decided (harness.adaptive.run): the
    sweep's [adaptive] table, or by default 3 seeds per side, then 2 more at each look, up
    to 9; equivalence (and the gate when [regression] names a reference). A sweep with
    an [adaptive] table runs this way without the flag."""

    strict: bool = False
    """Adaptive, or looks over training time ([regression] looks_at): exit 1 when it
    stops UNDECIDED (default: exit 4, runrecord.exits.EXIT_UNDECIDED; 0 only when every
    verdict passed)."""
    share_cores: bool = False
    """Local: start every CPU run at once (--max-parallel still caps), unpinned, the cores
    shared by the OS, so that the looks over training time ([regression] looks_at) see
    every seed early (a gate looks only when all its seeds have passed the look)."""
    verbose: bool = False
    """Also print the designs' internals (alpha spent, joint law, boundaries, each look's
    contrast with its t and df); the JSON records keep them either way."""

    def load(self, until_decided: bool = False) -> Sweep:
        return super().load(until_decided or self.until_decided)


@dataclass
class Status(Inspect):
    """Table of the sweep's runs by state, with progress and ETA. Exit 0 unless a run
    failed (pending, running or interrupted runs are not failures), 1 when one did."""

    all_runs: bool = False
    """List every run, not only the unfinished and failed ones."""
    max_attempts: int = 2
    """The cap `harness run --max-attempts` will use (says whether a failed run is retried)."""


@dataclass
class Report(Inspect):
    """Build <root>/<sweep>/report/ (figures, tables, verdicts, index.html) via analysis/."""

    delta: float | None = None
    """Equivalence margin; default: the sweep's [report] delta."""
    reps: int | None = None
    """Bootstrap replicates; default: the sweep's [report] reps or the analysis default."""
    allow_protocol_mismatch: bool = False
    """Compare runs whose recorded env protocols differ (the report warns); without it a
    benchmark whose runs differ in protocol gets no figures or verdicts, with a warning."""


@dataclass
class Regress(Inspect):
    """Compare the sweep's runs with a committed reference (the CI gate): per system and
    suite, the gate of `python -m analysis regression` (analysis.verdicts.gate)."""

    reference: Path | None = None
    """Reference run records (folder); default: the sweep's [regression] reference."""
    delta: float | None = None
    """Allowed drop of the normalised score; default: the sweep's [regression] delta, else
    the suite's default margin (analysis.verdicts.margins)."""
    allow_protocol_mismatch: bool = False
    """Compare runs whose recorded env protocols differ (a note says so)."""
    strict: bool = False
    """Exit 1 on UNDECIDED too (default: exit 4, runrecord.exits.EXIT_UNDECIDED)."""
    assume_equal_spread: bool = False
    """A side with one seed borrows the other side's spread, which you vouch both sides
    share (the gate's error rate holds only then); default: the sweep's [regression]
    assume_equal_spread, else such a side is UNDECIDED."""
    verbose: bool = False
    """Also print the designs' internals (the gate's pairing and unit; a sequential
    design's alpha spent, joint law, boundaries, each look's contrast with its t and df);
    the JSON records keep them either way."""


@dataclass
class Certify(Inspect):
    """Write a certificate of the sweep's runs (docs/certificate.md): every record file by
    SHA-256 in a Merkle tree (its root printed), the plan with each run's status, the code,
    each run's device and stack, and every claim as a query over the records."""

    out: Path | None = None
    """Certificate file; default <root>/<sweep>/certificate.json (the report shows it)."""
    records: Path | None = None
    """Folder of the run folders to certify; default <root>/<sweep>/runs."""
    claims: Path | None = None
    """Claims file (TOML, docs/certificate.md); default: what `harness report` shows."""
    include_unplanned: tuple[str, ...] = ()
    """Run ids in the records folder that the plan does not hold, certified as unplanned
    (any other unplanned run folder is refused)."""
