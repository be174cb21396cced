"""`python -m harness {plan,run,status,report,regress,certify,verify}`: sweeps from one
file to a report, and a certificate anyone can check.

Exit codes: runrecord.exits.EXIT_CODES, shown at the end of this help and of every
deciding subcommand's (DECIDING): `run` 0 every run completed (adaptive: every verdict
passed), 1 a run failed, 4 UNDECIDED AT CAP, 130 interrupted; `status` 0 unless a run
failed; `regress` 0 PASS, 1 REGRESSION, 4 UNDECIDED; `verify` 0 VERIFIED, 1 MISMATCH,
4 NOT CHECKABLE; 2 bad input (sweep file, options, data).
"""

from __future__ import annotations

import inspect
import json
import signal
import sys
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import tyro

from cleanba.tools.determinism_check import CheckConfig
from cleanba.tools.determinism_check import check as check_determinism
from harness.execute import ALREADY_COMPLETED, BUSY, EXHAUSTED, NOT_RETRIED, STOPPED, Outcome
from harness.retry import failed_state_text
from harness.store import CORRUPT, PENDING, STALE, Store, run_state
from harness.sweep import (
    PROJECT_ROOT,
    RunSpec,
    Sweep,
    SweepError,
    load_sweep,
    parse_list,
    parse_seeds,
)
from harness.sweep import preset_path as _preset_path
from runrecord import atomic_write_json, schema, utc_now
from runrecord.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, command_help


@dataclass
class Select:
    """Which sweep, where its results live, and how to scale it down."""

    sweep: Path | None = None
    """Sweep file (TOML). Give this or --preset."""
    preset: str | None = None
    """Name of a preset under harness/presets/ (smoke, deterministic, section3, base,
    workstation, scaling, sync-vs-cleanba, atari5)."""
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
        if self.frames is not None and self.frames < 1:
            raise SweepError(f"--frames must be >= 1, got {self.frames}")
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
        # A sweep last run with --until-decided is looked at as the adaptive sweep it was.
        until_decided = sweep.adaptive is None and last_run_until_decided(self.store(sweep))
        stored = {} if self.filters() else last_run_filters(self.store(sweep))
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
    """Local: also retry runs whose last failure was deterministic (bad arguments, a
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

    def load(self, until_decided: bool = False) -> Sweep:
        return super().load(until_decided or self.until_decided)


def filter_flags(filters: dict) -> str:
    return " ".join(f"--{k} {v}" for k, v in sorted(filters.items()))


def last_plan(store: Store) -> dict:
    """The plan.json of the sweep's last `harness run` ({} if none or unreadable)."""
    try:
        plan = json.loads((store.sweep_dir / "plan.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return plan if isinstance(plan, dict) else {}


def last_run_filters(store: Store) -> dict:
    """The scale-down options of the sweep's last `harness run` ({} if none or unknown)."""
    stored = last_plan(store).get("filters")
    return {k: v for k, v in (stored or {}).items() if k in ("frames", "games", "seeds")}


def last_run_until_decided(store: Store) -> bool:
    """Whether the sweep's last `harness run` was adaptive by --until-decided."""
    return bool(last_plan(store).get("until_decided"))


@dataclass
class Status(Inspect):
    """Table of the sweep's runs by state, with progress and ETA. Exit 0 unless a run
    failed (pending, running or interrupted runs are not failures), 1 when one did."""

    all_runs: bool = False
    """List every run, not only the unfinished and failed ones."""
    max_attempts: int = 2
    """The cap `harness run --max-attempts` will use (says whether a failed run is retried)."""


# What `harness status` shows for the states that need words (the JSON line keeps the keys).
STATE_LABELS = {
    STALE: ("stale (its record was never settled: its harness died, or the disk was full; "
            "will be re-run, no attempt spent)"),
    CORRUPT: "corrupt (will be re-run; the broken copy is archived)",
    "interrupted": "interrupted (will be re-run, no attempt spent)",
    "stopped": "stopped by its gate's decision (not re-run)",
}


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


@dataclass
class Verify:
    """Check a certificate: tier 1 (hashes, Merkle root, completeness, every claim
    recomputed) and, with --replay K, tier 2 (K runs drawn with fresh randomness, their
    first --updates N re-run with --deterministic, params checksums compared bit for bit).
    Exit 0 VERIFIED, 1 MISMATCH, 4 NOT CHECKABLE, 2 bad input."""

    cert: tyro.conf.Positional[Path]
    """The certificate file."""
    records: Path | None = None
    """Folder of the certified run folders; default the path the certificate records."""
    input: tuple[str, ...] = ()
    """NAME=PATH: where a bound input of the claims is here (default: its recorded path)."""
    replay: int = 0
    """Tier 2: replay this many runs, drawn among the deterministic ones."""
    updates: int = 3
    """Tier 2: updates replayed per run (the first N)."""
    draw_seed: int | None = None
    """Tier 2: repeat a printed draw (default: fresh randomness from the OS)."""
    expect_root: str | None = None
    """The root you were given (a paper, a signature): a different root is a MISMATCH."""


Command = (
    Annotated[Plan, tyro.conf.subcommand("plan")]
    | Annotated[Run, tyro.conf.subcommand("run")]
    | Annotated[Status, tyro.conf.subcommand("status")]
    | Annotated[Report, tyro.conf.subcommand("report")]
    | Annotated[Regress, tyro.conf.subcommand("regress")]
    | Annotated[CheckConfig, tyro.conf.subcommand("determinism-check")]
    | Annotated[Certify, tyro.conf.subcommand("certify")]
    | Annotated[Verify, tyro.conf.subcommand("verify")]
)


DECIDING = ("run", "status", "regress", "determinism-check", "verify")
"""The subcommands whose exit code reports an outcome: their --help ends with the table."""
HELP = "`python -m harness <subcommand>`: sweeps from one file to a report."


def _subcommands() -> dict[str, type]:
    """{name: config class} of every subcommand in Command."""
    out = {}
    for member in get_args(Command):
        cls, *meta = get_args(member)
        out[next(m.name for m in meta if hasattr(m, "name"))] = cls
    return out


def _parse(argv: list[str] | None) -> object:
    """The subcommand's config; one subcommand is parsed on its own, with its description
    and (DECIDING) the exit codes, as `python -m analysis` does."""
    args = list(sys.argv[1:] if argv is None else argv)
    sub = _subcommands()
    if args and args[0] in sub:
        cls = sub[args[0]]
        return tyro.cli(cls, args=args[1:], prog=f"python -m harness {args[0]}",  # type: ignore[call-overload]
                        description=command_help(inspect.getdoc(cls) or "", args[0] in DECIDING))
    return tyro.cli(Command, args=args, prog="python -m harness",  # type: ignore[call-overload]
                    description=command_help(HELP, decides=True))


def main(argv: list[str] | None = None) -> int:
    cmd: Any = _parse(argv)
    if isinstance(cmd, CheckConfig):  # no sweep: what bit-identity this machine gives
        return check_determinism(cmd)
    if isinstance(cmd, Verify):  # no sweep: the certificate holds it
        from harness.certify import VerifyArgs, verify

        return verify(VerifyArgs(cmd.cert, cmd.records, cmd.input, cmd.replay, cmd.updates,
                                 cmd.draw_seed, cmd.expect_root))
    try:
        sweep = cmd.load()
    except SweepError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if isinstance(cmd, (Plan, Run)):
        from harness.validate import check_runs

        try:  # every run's command through its trainer's own parser, before anything starts
            check_runs(sweep.runs)
        except SweepError as e:
            print(f"error: {e}", file=sys.stderr)
            return EXIT_BAD_INPUT
    if isinstance(cmd, Plan):
        return do_plan(cmd, sweep)
    if isinstance(cmd, Run):
        return do_run(cmd, sweep)
    if isinstance(cmd, Status):
        return do_status(cmd, sweep)
    if isinstance(cmd, Report):
        from harness.report import do_report

        return do_report(cmd, sweep)
    if isinstance(cmd, Regress):
        from harness.report import do_regress

        return do_regress(cmd, sweep)
    if isinstance(cmd, Certify):
        from harness.certify import DEFAULT_NAME, certify

        store = cmd.store(sweep)
        options = {**{k: sweep.filters.get(k) for k in ("frames", "games", "seeds")},
                   "name": cmd.name, "accelerator": cmd.accelerator,
                   "until_decided": sweep.adaptive is not None}
        return certify(sweep, options, cmd.records or store.runs_dir,
                       cmd.out or store.sweep_dir / DEFAULT_NAME, cmd.claims,
                       cmd.include_unplanned)
    raise AssertionError(cmd)


# --------------------------------------------------------------------------- plan


def do_plan(cmd: Plan, sweep: Sweep) -> int:
    store = cmd.store(sweep)
    print(f"sweep {sweep.name}: {len(sweep.runs)} runs -> {store.runs_dir}")
    for note in sweep.notes:
        print(f"note: {note}")
    if sweep.adaptive is not None:
        print(f"adaptive: looks at {', '.join(map(str, sweep.adaptive.seeds_at_looks()))} "
              "seeds per side; the runs of a later look start only if it is needed")
    for s in sweep.runs:
        state = run_state(store.run_dir(s.run_id)).state
        print(f"{s.run_id}  {state:<11} {s.label()}  steps={s.total_timesteps} "
              f"frames={s.frames} cpus={s.cpus_needed}"
              + (f" gpus={s.gpus_needed}" if s.gpus_needed else ""))
        if cmd.commands:
            for pid in range(s.num_processes):
                print("    " + " ".join(s.command(store.run_dir(s.run_id), process_id=pid)))
    if cmd.sbatch:
        from harness.slurm import sbatch_script, slurm_parameters

        shapes: dict[str, list] = {}
        for s in sweep.runs:
            key = repr(sorted((k, str(v)) for k, v in slurm_parameters(s, sweep.slurm).items()
                              if k != "job_name"))
            shapes.setdefault(key, []).append(s)
        for runs in shapes.values():
            print(f"\n# sbatch script for {len(runs)} run(s) like {runs[0].label()}:")
            print(sbatch_script(runs[0], sweep.slurm, store.sweep_dir / "slurm",
                                array_size=len(runs) if len(runs) > 1 else None))
    return EXIT_OK


# --------------------------------------------------------------------------- run


def save_plan(sweep: Sweep, store: Store, until_decided: bool = False) -> None:
    """Keep the sweep file and its expansion next to the results (provenance), and
    whether it ran with --until-decided (status and report then look at it that way)."""
    store.sweep_dir.mkdir(parents=True, exist_ok=True)
    if sweep.source_text:
        (store.sweep_dir / "sweep.toml").write_text(sweep.source_text, encoding="utf-8")
    atomic_write_json(store.sweep_dir / "plan.json", {
        "sweep": sweep.name,
        "source": str(sweep.source) if sweep.source else None,
        "written_at": utc_now(),
        "filters": sweep.filters,
        "until_decided": until_decided,
        "adaptive": sweep.adaptive.as_dict() if sweep.adaptive is not None else None,
        "runs": [
            {"run_id": s.run_id, "label": s.label(), "definition": s.definition(),
             "command": s.command(store.run_dir(s.run_id))}
            for s in sweep.runs
        ],
    })


def do_run(cmd: Run, sweep: Sweep) -> int:
    if cmd.strict and sweep.adaptive is None and "looks_at" not in sweep.regression:
        print("error: --strict is for adaptive runs (--until-decided, or a sweep with an "
              "[adaptive] table): a fixed sweep's verdicts are `harness report` and "
              "`harness regress --strict`", file=sys.stderr)
        return EXIT_BAD_INPUT
    store = cmd.store(sweep)
    save_plan(sweep, store, cmd.until_decided)
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        print(f"\nharness: {signal.Signals(signum).name}: stopping the runs in flight "
              "(they record `interrupted`; run again to carry on)", file=sys.stderr)
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    if sweep.adaptive is not None:  # seeds in batches until the verdicts are decided
        from harness.adaptive.run import run_until_decided

        return run_until_decided(sweep, store, lambda runs: run_runs(cmd, sweep, store, runs,
                                                                     stop),
                                 stop, max_attempts=cmd.max_attempts, strict=cmd.strict)
    return run_runs(cmd, sweep, store, sweep.runs, stop)


def run_runs(cmd: Run, sweep: Sweep, store: Store, runs: list[RunSpec],
             stop: threading.Event) -> int:
    """Run `runs` of the sweep (all of them, or one adaptive batch), print the summary,
    log the invocation; the exit code of `harness run`."""
    t0 = time.time()
    from harness.curve_monitor import start_monitor

    monitor = start_monitor(sweep, store, runs, stop, cmd.strict) \
        if cmd.backend == "local" else None
    if isinstance(monitor, int):
        return monitor
    sweep = replace(sweep, runs=list(runs))
    if cmd.backend == "local":
        from harness.local import Pool, available_cpus

        cpus = available_cpus()
        if cmd.cpus is not None:
            if not 1 <= cmd.cpus <= len(cpus):
                print(f"error: --cpus {cmd.cpus}: this machine offers 1..{len(cpus)}",
                      file=sys.stderr)
                return EXIT_BAD_INPUT
            cpus = cpus[:cmd.cpus]
        gpus = None
        if cmd.gpus is not None:
            gpus = [int(g) for g in parse_list(cmd.gpus) or []]
        pool = Pool(sweep.runs, store, max_parallel=cmd.max_parallel,
                    max_attempts=cmd.max_attempts, retry_skipped=cmd.retry_skipped,
                    retry_failed=cmd.retry_failed, cpus=cpus, gpus=gpus, progress=cmd.progress, stop=stop,
                    stop_for=monitor.stop_for if monitor else None,
                    cancelled=monitor.cancelled if monitor else None,
                    share_cores=cmd.share_cores)
        try:
            with monitor or nullcontext():
                outcomes, stats = pool.run()
        except RuntimeError as e:
            print(f"error: {e}", file=sys.stderr)
            return EXIT_BAD_INPUT
        perf = stats.as_dict()
    else:
        from harness.slurm import run_slurm

        outcomes = run_slurm(sweep, store, cluster=cmd.slurm_cluster,
                             max_attempts=cmd.max_attempts, retry_skipped=cmd.retry_skipped,
                             progress=cmd.progress, stop=stop)
        perf = {"wall_time_s": round(time.time() - t0, 2),
                "run_wall_time_sum_s": round(sum(o.wall_time_s for o in outcomes), 2)}
    code = summarise(sweep, store, outcomes, perf, stopped=stop.is_set())
    if monitor is not None:
        code = monitor.finish(code)
    store.append_log({"started_at": t0, "backend": cmd.backend, "runs": len(sweep.runs),
                      "exit_code": code, **perf,
                      "outcomes": {o.run_id: o.status for o in outcomes}})
    return code


def summarise(sweep: Sweep, store: Store, outcomes: list[Outcome], perf: dict,
              stopped: bool) -> int:
    from collections import Counter

    counts = Counter(o.status for o in outcomes)
    print()
    print(f"sweep {sweep.name}: " + (", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
                                     or "no run ran"))
    if "wall_time_s" in perf:
        line = (f"wall time {perf['wall_time_s']:.1f} s; sum of run times "
                f"{perf.get('run_wall_time_sum_s', 0):.1f} s")
        # Nothing started (all runs done already): no slot or overhead figures to give.
        if "slot_utilisation" in perf and perf.get("runs_started"):
            line += (f"; CPU slots busy {100 * perf['slot_utilisation']:.1f}% of "
                     f"{perf['cpus']} x wall; harness CPU {perf['harness_cpu_s']:.1f} s "
                     f"= {100 * perf['harness_cpu_share']:.2f}% of all CPU time")
        print(line)
    bad = [o for o in outcomes if o.status in (schema.FAILED, EXHAUSTED, NOT_RETRIED)]
    for o in bad:
        what = {schema.FAILED: "failed",
                EXHAUSTED: "failed too often, not retried",
                NOT_RETRIED: "failed earlier with a deterministic error, not retried"}[o.status]
        kind = f" [{o.kind} error]" if o.kind else ""
        print(f"  {what}: {o.run_id} {o.label}{kind}: "
              f"{o.error.splitlines()[0] if o.error else ''}")
        print(f"    log: {store.run_dir(o.run_id) / 'stdout.log'}")
    if any(o.status == EXHAUSTED for o in outcomes):
        print("  (runs that exhausted their attempts run again with a larger --max-attempts)")
    if any(o.status == NOT_RETRIED or o.kind == "deterministic" for o in bad):
        print("  (a deterministic error comes back on a re-run: fix its cause, then "
              "`harness run --retry-failed`)")
    for o in outcomes:
        if o.status == schema.SKIPPED:
            print(f"  skipped: baseline unavailable: {o.run_id} {o.label}: "
                  f"{(o.error or '').splitlines()[0] if o.error else ''}")
    for o in outcomes:
        if o.status == STOPPED:  # its gate was decided (harness.curve_monitor)
            print(f"  stopped: {o.run_id} {o.label}: {o.error.removeprefix('Stopped: ')}")
    for o in outcomes:
        if o.status == BUSY:
            print(f"  busy: {o.run_id} {o.label}: {o.error or 'another harness holds it'}")
    not_started = len(sweep.runs) - len(outcomes)
    if stopped or counts.get(schema.INTERRUPTED):
        parts = []
        if counts.get(schema.INTERRUPTED):
            parts.append(f"{counts[schema.INTERRUPTED]} interrupted run(s) (no attempt spent)")
        if stopped and not_started > 0:
            parts.append(f"{not_started} run(s) not started")
        if parts:
            print(f"  {' and '.join(parts)}: the next `harness run` runs them")
        return 130 if stopped else EXIT_FAILED
    if bad or counts.get(BUSY):
        return EXIT_FAILED
    ok = {schema.COMPLETED, ALREADY_COMPLETED, schema.SKIPPED, STOPPED}
    return EXIT_OK if all(o.status in ok for o in outcomes) else EXIT_FAILED


# --------------------------------------------------------------------------- status


def _fmt_s(s: float) -> str:
    if s <= 0:
        return "-"
    h, rem = divmod(int(s), 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{sec:02d}s"


def do_status(cmd: Status, sweep: Sweep) -> int:
    from collections import Counter

    from rich.console import Console
    from rich.table import Table

    from harness.adaptive.curves import status_lines as curve_status
    from harness.adaptive.curves import stopped_label

    store = cmd.store(sweep)
    runs, title, adaptive_lines = sweep.runs, f"sweep {sweep.name}: {len(sweep.runs)} runs", []
    if sweep.adaptive is not None:  # only the runs of the looks it used or runs next
        from harness.adaptive.report import needed_runs, status_lines

        runs, adaptive_lines = needed_runs(sweep, store), status_lines(sweep, store)
        title = f"sweep {sweep.name}: {len(runs)} runs"
        adaptive_lines.insert(0, f"adaptive: the table shows the {len(runs)} runs of the looks "
                              f"so far and next, of {len(sweep.runs)} up to the cap")
    rows = [(s, run_state(store.run_dir(s.run_id))) for s in runs]
    counts = Counter("stopped" if stopped_label(st.error) else st.state for _, st in rows)
    console = Console(width=None if sys.stdout.isatty() else 200)
    summary = Table(title=title)
    summary.add_column("state")
    summary.add_column("runs", justify="right")
    for state in ("completed", "running", PENDING, CORRUPT, STALE, "interrupted", "stopped",
                  "failed", "skipped"):
        if counts.get(state):
            summary.add_row(STATE_LABELS.get(state, state), str(counts[state]))
    console.print(summary)
    done_walls = [st.wall_time_s for _, st in rows if st.state == "completed" and st.wall_time_s]
    table = Table()
    for col in ("run id", "run", "state", "progress", "elapsed", "ETA", "attempts", "error"):
        table.add_column(col)
    remaining_s = 0.0
    for spec, st in rows:
        frac = min(1.0, st.env_steps / spec.total_timesteps) if spec.total_timesteps else 0.0
        eta = 0.0
        if st.state == "running" and st.env_steps and st.wall_time_s:
            eta = (spec.total_timesteps - st.env_steps) * st.wall_time_s / st.env_steps
        elif st.state in (PENDING, CORRUPT, STALE, "interrupted") and done_walls:
            eta = sum(done_walls) / len(done_walls)
        if st.state != "completed":
            remaining_s += eta
        if not cmd.all_runs and st.state == "completed":
            continue
        shown = (failed_state_text(st.kind, st.failures, cmd.max_attempts)  # type: ignore[arg-type]
                 if st.state == "failed" else stopped_label(st.error)
                 or STATE_LABELS.get(st.state, st.state))
        table.add_row(spec.run_id, spec.label(), shown, f"{100 * frac:.0f}%",
                      _fmt_s(st.wall_time_s), _fmt_s(eta) if st.state != "completed" else "",
                      str(st.attempts), st.error[:60])
    if table.row_count:
        console.print(table)
    if remaining_s:
        console.print(f"estimated run time left (sum over runs, before parallelism): "
                      f"{_fmt_s(remaining_s)}")
    for line in adaptive_lines + curve_status(sweep, store):
        print(line)
    print(json.dumps({k: counts.get(k, 0) for k in sorted(counts)}))
    # What `status` decides is whether something failed: a fresh sweep (all pending) or
    # one still running is not a failure (it exited 1 before, which the docs said meant one).
    return EXIT_FAILED if counts.get("failed", 0) else EXIT_OK
