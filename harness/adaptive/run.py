"""`harness run` of an adaptive sweep: seeds in batches until every verdict is decided.

Look k takes each matrix's first n_k seeds (n_k = first_seeds + (k-1) * batch_seeds, up
to max_seeds). For each look not recorded yet: run the runs of look k that are not
completed (the pool of `harness run`, with its retry policy), check that every run of
looks 1..k is completed, load them (analysis.inputs.load, through the results root's
cache), call analysis.sequential.sweep_looks and record its Looks in the store
(harness.adaptive.looks) before printing them. A look recorded by an earlier `harness
run` is read back, never recomputed, so a killed sweep resumes at the first look not
recorded: its completed runs are not redone (the pool skips them) and no look is
recorded twice. The sweep stops when every Look of the latest look is decided, or at
the cap (the last look always decides).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from analysis.errors import AnalysisError
from analysis.inputs.load import load_runs
from harness.adaptive.curves import curve_regressions
from harness.adaptive.looks import (
    adaptive_lock,
    analysis_options,
    append_look,
    decisions_exit,
    look_lines,
    other_plans,
    progress,
    runs_of_look,
    say,
    stop_reason,
    sweep_plan,
)
from harness.store import Store, failed_state_text, lock_holder, run_state
from harness.sweep.model import AdaptiveConfig, RunSpec, Sweep
from runrecord import Run, project_path, schema
from runrecord.exits import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNAVAILABLE,
)
from runrecord.words import counted

if TYPE_CHECKING:
    from analysis.sequential import Look

RunBatch = Callable[[list[RunSpec]], int]
"""Runs the given runs with the pool of `harness run`; returns its exit code."""


def run_until_decided(sweep: Sweep, store: Store, run_batch: RunBatch,
                      stop: threading.Event, max_attempts: int = 2,
                      strict: bool = False, verbose: bool = False) -> int:
    """Run the sweep's looks from the first one not recorded; the exit code says why it
    stopped. Stopped on its looks: the verdicts' own three outcomes (decisions_exit: 0
    every verdict passed, 1 one failed, 4 UNDECIDED AT CAP, 1 under `strict`). Else 1 a
    run failed, 3 a run was skipped (unavailable), 2 the analysis refused the runs, 130
    interrupted. `verbose`: each look's line with its design's internals."""
    assert sweep.adaptive is not None
    lock = adaptive_lock(store)
    if not lock.acquire():
        print(f"error: another harness runs the looks of sweep {sweep.name} "
              f"({lock_holder(lock.path.parent)}); wait for it", file=sys.stderr)
        return EXIT_FAILED
    try:
        return _looks(_Adaptive(sweep, store, run_batch, stop, max_attempts, strict,
                                verbose))
    finally:
        lock.release()


@dataclass(frozen=True)
class _Adaptive:
    """One `harness run` of an adaptive sweep: what every look needs."""

    sweep: Sweep
    store: Store
    run_batch: RunBatch
    stop: threading.Event
    max_attempts: int
    strict: bool = False
    verbose: bool = False

    @property
    def config(self) -> AdaptiveConfig:
        assert self.sweep.adaptive is not None
        return self.sweep.adaptive


def _looks(ad: _Adaptive) -> int:
    cfg = ad.config
    prog = progress(ad.sweep, ad.store)
    total = len(prog.at_looks)
    say(f"adaptive: looks at {', '.join(map(str, prog.at_looks))} seeds per side "
        f"(alpha {cfg.alpha}, {cfg.spending} spending; verdicts {', '.join(cfg.verdicts)})")
    if other_plans(ad.store, sweep_plan(ad.sweep)):
        say("adaptive: looks recorded under another design or scale-down are kept and not "
            "used; this one starts from its own look 1")
    reference_runs = _reference_runs(ad.sweep)
    if reference_runs == []:
        print(f"error: the gate's reference {cfg.reference} has no completed run of this "
              "sweep's systems and games", file=sys.stderr)
        return EXIT_BAD_INPUT
    for index, seeds in enumerate(prog.at_looks, start=1):
        if index in prog.looks:
            say(f"adaptive: look {index} of {total} ({seeds} seeds per side) was recorded "
                "by an earlier run; reused:")
            looks = prog.looks[index]
        else:
            if ad.stop.is_set():
                return _interrupted(index)
            earlier = [look for i in sorted(prog.looks) for look in prog.looks[i]]
            code, looks = _new_look(ad, index, seeds, reference_runs, earlier)
            if code != EXIT_OK:
                return code
            prog = progress(ad.sweep, ad.store)
        for look in looks:
            for line in look_lines(look, ad.verbose):
                say(line)
        if all(look.decided for look in looks) or index == total:
            say(stop_reason(ad.sweep, prog))
            return decisions_exit(looks, ad.strict)
        if ad.stop.is_set():
            return _interrupted(index + 1)
    raise AssertionError("unreachable: the last look always ends the loop")


def _new_look(ad: _Adaptive, index: int, seeds: int, reference_runs: list[Run] | None,
              earlier: list[Look]) -> tuple[int, list[Look]]:
    """Run look `index`'s batch, then compute and record its Looks: (EXIT_OK, Looks), or
    the exit code of why it cannot be decided now (printed) and no Looks."""
    runs = runs_of_look(ad.sweep, seeds)
    todo = [s for s in runs if run_state(ad.store.run_dir(s.run_id)).state != schema.COMPLETED]
    new_seeds = ", ".join(map(str, sorted({s.seed for s in todo})))
    say(f"adaptive: look {index} of {len(ad.config.seeds_at_looks())}: {seeds} seeds per "
        f"side; {counted(len(todo), 'run')} to run" + (f" (seeds {new_seeds})" if todo else ""))
    if todo:
        code = ad.run_batch(todo)
        if ad.stop.is_set() or code == EXIT_INTERRUPTED:
            return _interrupted(index), []
        if code == EXIT_BAD_INPUT:  # the batch could not start (e.g. --cpus)
            return code, []
    failed_over_time = curve_regressions(ad.sweep, ad.store) if index == 1 else []
    if failed_over_time:  # the looks over training time failed the gate: no more seeds
        for line in failed_over_time:
            say(line)
        say("adaptive: the gate was decided REGRESSION along training time in the first "
            "batch; no look over seeds is taken")
        return EXIT_FAILED, []
    code, completed = _completed(runs, ad.store, ad.max_attempts)
    if code != EXIT_OK:
        return code, []
    try:
        looks = _compute(ad.sweep, completed, index, reference_runs, earlier)
    except AnalysisError as e:
        print(f"error: look {index}: the analysis refused the runs: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT, []
    append_look(ad.store, sweep_plan(ad.sweep), index, [look.to_json() for look in looks],
                [s.run_id for s in runs])
    return EXIT_OK, looks


def _interrupted(index: int) -> int:
    say(f"adaptive: interrupted before look {index} was recorded; the next `harness run` "
        f"resumes at look {index} (its completed runs are kept)")
    return EXIT_INTERRUPTED


def _completed(runs: Sequence[RunSpec], store: Store, max_attempts: int
               ) -> tuple[int, list[Run]]:
    """(EXIT_OK, the loaded runs) when every run of the look is completed; else the exit
    code and, printed, why the look cannot be decided."""
    states = {s.run_id: run_state(store.run_dir(s.run_id)) for s in runs}
    missing = [(s, states[s.run_id]) for s in runs if states[s.run_id].state != schema.COMPLETED]
    if not missing:
        loaded = load_runs([store.run_dir(s.run_id) for s in runs])
        if len(loaded.included) == len(runs):
            return EXIT_OK, loaded.included
        say("adaptive: a look is decided only from completed runs with episodes; left out:")
        for left in loaded.left_out:
            say(f"  {left.run_id}: {left.reason}")
        return EXIT_FAILED, []
    say(f"adaptive: this look cannot be decided: {len(missing)} of its {counted(len(runs), 'run')} "
        "did not complete (a look is decided only from completed runs):")
    for spec, st in missing:
        shown = (failed_state_text(st.kind, st.failures, max_attempts)  # type: ignore[arg-type]
                 if st.state == schema.FAILED else st.state)
        say(f"  {spec.run_id} {spec.label()}: {shown}")
    say("  the next `harness run` resumes at this look")
    if all(st.state == schema.SKIPPED for _, st in missing):
        return EXIT_UNAVAILABLE, []
    return EXIT_FAILED, []


def _reference_runs(sweep: Sweep) -> list[Run] | None:
    """The gate's fixed reference: its completed runs of the sweep's systems and games."""
    cfg = sweep.adaptive
    if cfg is None or "gate" not in cfg.verdicts or cfg.reference is None:
        return None
    systems = {s.system for s in sweep.runs}
    games = {s.env_id for s in sweep.runs}
    return [r for r in load_runs([project_path(cfg.reference)]).included
            if r.manifest.get("system") in systems and r.manifest.get("env_id") in games]


def _compute(sweep: Sweep, runs: list[Run], index: int, reference_runs: list[Run] | None,
             earlier: list[Look]) -> list[Look]:
    """The Looks of look `index`; a subject decided at an earlier look keeps that
    decision (analysis.sequential.sweep_looks, `previous`)."""
    from analysis.sequential import sweep_looks

    cfg = sweep.adaptive
    assert cfg is not None
    regression_alpha = None
    if "looks_at" in sweep.regression:  # the looks over training time took their share
        from analysis.sequential.curves import TIME_SHARE

        regression_alpha = (1 - TIME_SHARE) * cfg.alpha
    return sweep_looks(runs, cfg.design(), index, verdicts=cfg.verdicts,
                       reference_runs=reference_runs, previous=earlier,
                       regression_alpha=regression_alpha, **analysis_options(sweep))
