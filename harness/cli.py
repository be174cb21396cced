"""`python -m harness {plan,run,status,report,regress,certify,verify}`: sweeps from one
file to a report, and a certificate anyone can check.

Exit codes: runrecord.exits.EXIT_CODES, shown at the end of this help and of every
deciding subcommand's (DECIDING): `run` 0 every run completed (adaptive: every verdict
passed), 1 a run failed, 4 UNDECIDED AT CAP, 130 interrupted; `status` 0 unless a run
failed; `regress` 0 PASS, 1 REGRESSION, 4 UNDECIDED; `verify` 0 VERIFIED, 1 MISMATCH,
4 NOT CHECKABLE; 2 bad input (sweep file, options, data).
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from contextlib import nullcontext
from dataclasses import replace
from typing import Annotated, Any

import tyro

from cleanba.tools.determinism_check import CheckConfig
from cleanba.tools.determinism_check import check as check_determinism
from harness.certify.flags import Verify
from harness.cli_flags import (
    Certify,
    Plan,
    Regress,
    Report,
    Run,
    Status,
)
from harness.execute import ALREADY_COMPLETED, BUSY, EXHAUSTED, NOT_RETRIED, STOPPED, Outcome
from harness.local import eta_text, fmt_duration, status_estimates
from harness.store import CORRUPT, PENDING, STALE, Store, failed_state_text, run_state
from harness.sweep import (
    RunSpec,
    Sweep,
    SweepError,
    parse_list,
)
from runrecord import atomic_write_json, schema, utc_now
from runrecord.cli_dispatch import flags_refused, parse_command
from runrecord.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from runrecord.words import counted

# What `harness status` shows for the states that need words (the JSON line keeps the keys).
STATE_LABELS = {
    STALE: ("stale (its record was never settled: its harness died, or the disk was full; "
            "will be re-run, no attempt spent)"),
    CORRUPT: "corrupt (will be re-run; the broken copy is archived)",
    "interrupted": "interrupted (will be re-run, no attempt spent)",
    "stopped": "stopped by its gate's decision (not re-run)",
}


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


def main(argv: list[str] | None = None) -> int:
    cmd: Any = parse_command(Command, "python -m harness", HELP, DECIDING, argv)
    refused = flags_refused(cmd)  # before the command reads or writes anything
    if refused is not None:
        return refused
    if isinstance(cmd, CheckConfig):  # no sweep: what bit-identity this machine gives
        return check_determinism(cmd)
    if isinstance(cmd, Verify):  # no sweep: the certificate holds it
        from harness.certify.verify import verify

        return verify(cmd)
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
        from harness.certify.certificate import DEFAULT_NAME, certify

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
        from harness.slurm import job_groups, sbatch_script

        for runs in job_groups(sweep.runs, sweep.slurm):
            print(f"\n# sbatch script for {counted(len(runs), 'run')} like {runs[0].label()}:")
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
                                 stop, max_attempts=cmd.max_attempts, strict=cmd.strict,
                                 verbose=cmd.verbose)
    return run_runs(cmd, sweep, store, sweep.runs, stop)


def run_runs(cmd: Run, sweep: Sweep, store: Store, runs: list[RunSpec],
             stop: threading.Event) -> int:
    """Run `runs` of the sweep (all of them, or one adaptive batch), print the summary,
    log the invocation; the exit code of `harness run`."""
    t0 = time.time()
    from harness.curve_monitor import start_monitor

    monitor = start_monitor(sweep, store, runs, stop, cmd.strict, cmd.verbose) \
        if cmd.backend == "local" else None
    if isinstance(monitor, int):
        return monitor
    sweep = replace(sweep, runs=list(runs))
    if cmd.backend == "local":
        from harness.local import Pool
        from runrecord.provenance import available_cpus

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
                             retry_failed=cmd.retry_failed, progress=cmd.progress, stop=stop)
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
        print(f"    log: {store.run_dir(o.run_id) / schema.LOG_FILE}")
    for o in outcomes:
        if o.resumed_from:
            print(f"  resumed: {o.run_id} {o.label} from {o.resumed_from} ({o.status})")
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
            parts.append(f"{counted(counts[schema.INTERRUPTED], 'interrupted run')} (no attempt spent)")
        if stopped and not_started > 0:
            parts.append(f"{counted(not_started, 'run')} not started")
        if parts:
            print(f"  {' and '.join(parts)}: the next `harness run` runs them")
        return 130 if stopped else EXIT_FAILED
    if bad or counts.get(BUSY):
        return EXIT_FAILED
    ok = {schema.COMPLETED, ALREADY_COMPLETED, schema.SKIPPED, STOPPED}
    return EXIT_OK if all(o.status in ok for o in outcomes) else EXIT_FAILED


# --------------------------------------------------------------------------- status


def do_status(cmd: Status, sweep: Sweep) -> int:
    from collections import Counter

    from rich.console import Console
    from rich.table import Table

    from harness.adaptive.curves import status_lines as curve_status
    from harness.adaptive.curves import stopped_label

    store = cmd.store(sweep)
    runs, title, adaptive_lines = sweep.runs, f"sweep {sweep.name}: {len(sweep.runs)} runs", []
    if sweep.adaptive is not None:  # only the runs of the looks it used or runs next
        from harness.adaptive.looks import needed_runs, status_lines

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
    per_run, total = status_estimates(rows)
    table = Table()
    for col in ("run id", "run", "state", "progress", "elapsed", "ETA", "attempts", "error"):
        table.add_column(col)
    for spec, st in rows:
        if not cmd.all_runs and st.state == "completed":
            continue
        frac = min(1.0, st.env_steps / spec.total_timesteps) if spec.total_timesteps else 0.0
        est = per_run.get(spec.run_id)
        eta = ("" if st.state == "completed" else "-" if spec.run_id not in per_run
               else "unknown" if est is None else fmt_duration(est.seconds, "-"))
        shown = (failed_state_text(st.kind, st.failures, cmd.max_attempts)  # type: ignore[arg-type]
                 if st.state == "failed" else stopped_label(st.error)
                 or STATE_LABELS.get(st.state, st.state))
        table.add_row(spec.run_id, spec.label(), shown, f"{100 * frac:.0f}%",
                      fmt_duration(st.wall_time_s, "-"), eta, str(st.attempts), st.error[:60])
    if table.row_count:
        console.print(table)
    if per_run:
        console.print(eta_text(total, "run time left, summed over runs (before parallelism):"),
                      highlight=False, soft_wrap=True)
    for line in adaptive_lines + curve_status(sweep, store):
        print(line)
    print(json.dumps({k: counts.get(k, 0) for k in sorted(counts)}))
    # What `status` decides is whether something failed: a fresh sweep (all pending) or
    # one still running is not a failure.
    return EXIT_FAILED if counts.get("failed", 0) else EXIT_OK
