"""Looks over training time while `harness run` runs (local backend): a thread takes each
gate's next look as soon as every one of its runs has passed the look's frame count
(harness.adaptive.curves), and when a gate is decided REGRESSION it stops that gate's
runs in flight (their records settle `interrupted`, error type Stopped, the decision as
message) and keeps its runs not yet started from starting. Other gates' runs go on.

A run that has passed the gate's next look while another of its runs has not waits
there, paused (SIGSTOP, then SIGCONT), so that each look, and a stop, come when all the
gate's seeds have reached it: a failed candidate spends the look's share of its budget,
not more (single-process runs; see harness.adaptive.curves.ahead).

`harness run` ends with the gates' three outcomes (0 PASS, 1 REGRESSION, 4 UNDECIDED at
the full budget; --strict: 1), or worse when a run failed or the analysis refused; a gate
its seeds cannot decide (a one-seed side) is UNDECIDED (4, --strict: 1) with the reason.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence

from analysis.errors import AnalysisError, TooFewSeeds
from analysis.inputs.load import load_runs
from harness.adaptive.curves import (
    CurveGate,
    ahead,
    batch_specs,
    curve_design,
    gate_options,
    gates_exit,
    look_lines,
    prepare,
    ready,
    recorded_gates,
    stop_reason,
    take_look,
    verdict_lines,
)
from harness.adaptive.looks import say
from harness.execute import LinkedStop
from harness.store import Store, run_state
from harness.sweep import RunSpec, Sweep
from runrecord import Run, project_path
from runrecord.exits import EXIT_BAD_INPUT, EXIT_INTERRUPTED, worst_exit


def poll_seconds(runs: int) -> float:
    """Seconds between looks at the runs' progress (the tail of each run's updates.csv):
    ~0.1 s for a few runs (a CartPole run makes up to 12 updates a second: the pause at
    a look must come within one or two; a poll reads each run's manifest and the tail of
    its updates.csv), up to 1 s for 48 runs and more (the smoke preset's 24 CartPole runs:
    0.53 s)."""
    return min(1.0, 0.05 + 0.02 * runs)


class CurveMonitor:
    """The gates of one `harness run` batch and the stops of their runs."""

    def __init__(self, sweep: Sweep, store: Store, gates: list[CurveGate],
                 reference_runs: Sequence[Run], stop: threading.Event,
                 strict: bool = False, verbose: bool = False) -> None:
        self.sweep, self.store, self.gates = sweep, store, gates
        self.verbose = verbose
        self.reference_runs = list(reference_runs)
        self.stop = stop
        self.strict = strict
        self.options = gate_options(sweep)
        self.stops: dict[str, LinkedStop] = {}
        self.states: dict[str, str] = {}
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.thread: threading.Thread | None = None

    def stop_for(self, spec: RunSpec) -> threading.Event:
        with self.lock:
            return self.stops.setdefault(spec.run_id, LinkedStop(self.stop))

    def cancelled(self, spec: RunSpec) -> str:
        """Why the run must not start: its gate is decided REGRESSION ('' otherwise)."""
        for gate in self.gates:
            d = gate.decision
            if d is not None and d.decision == "REGRESSION" and spec in gate.specs:
                return stop_reason(d)
        return ""

    def state(self, run_id: str) -> str:
        """A run's state, read once per poll (ready and ahead both ask)."""
        if run_id not in self.states:
            self.states[run_id] = run_state(self.store.run_dir(run_id)).state
        return self.states[run_id]

    def poll(self, final: bool = False) -> None:
        """Take every look that can be taken now; stop the runs of a failed gate.
        final: the pool is done (a run that is not completed now will not be)."""
        for gate in self.gates:
            self.states = {}
            while gate.decision is None and not gate.blocked:
                try:
                    if not ready(gate, self.store, self.state, final):
                        break
                    self._hold_all(gate)  # the runs wait at the look while it is taken
                    look = take_look(gate, self.store, self.reference_runs, self.options)
                except TooFewSeeds as e:  # no run failed: the gate stays UNDECIDED
                    gate.blocked = f"these seeds cannot decide it at look {gate.next_look}: {e}"
                    gate.too_few_seeds = True
                    break
                except AnalysisError as e:  # printed once, below
                    gate.blocked = f"the analysis refused look {gate.next_look}: {e}"
                    break
                for line in look_lines(look, self.verbose):
                    say(line)
                if look.decision == "REGRESSION":
                    self._stop_gate(gate, stop_reason(look))
            self._pace(gate)
            if gate.blocked and gate.decision is None and not gate.announced:
                say(f"looks over training time: {gate.subject}: {gate.blocked}")
                gate.announced = True

    def _hold_all(self, gate: CurveGate) -> None:
        """Pause every single-process run of the gate (its look is being taken)."""
        with self.lock:
            for s in gate.specs:
                if s.run_id in self.stops and s.num_processes == 1:
                    self.stops[s.run_id].set_hold(True)

    def _pace(self, gate: CurveGate) -> None:
        """Pause the gate's runs that are ahead of its next look; resume the others."""
        waiting = ahead(gate, self.store, self.state)
        with self.lock:
            for s in gate.specs:
                stop = self.stops.get(s.run_id)
                if stop is not None:
                    stop.set_hold(s.run_id in waiting)

    def release(self) -> None:
        """Resume every paused run (the monitor ends, or failed)."""
        with self.lock:
            for stop in self.stops.values():
                stop.set_hold(False)

    def _stop_gate(self, gate: CurveGate, reason: str) -> None:
        say(f"looks over training time: {reason}; stopping its runs")
        with self.lock:
            for s in gate.specs:
                if s.run_id in self.stops:
                    self.stops[s.run_id].request(reason, "Stopped")

    def _watch(self) -> None:
        every = poll_seconds(sum(len(g.specs) for g in self.gates))
        while not self.done.wait(every):
            try:
                self.poll()
            except Exception as e:  # a harness bug must not hang or kill the pool
                say(f"error: looks over training time: {type(e).__name__}: {e}")
                for gate in self.gates:
                    gate.blocked = gate.blocked or f"{type(e).__name__}: {e}"
                self.release()
                return

    def __enter__(self) -> CurveMonitor:
        self.poll()  # looks recorded and decided before: stop at once
        self.thread = threading.Thread(target=self._watch, name="curve-looks", daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        if self.thread is not None:
            self.thread.join()
        self.release()

    def finish(self, code: int) -> int:
        """After the pool: the last looks, the verdict lines, the exit code."""
        if code in (EXIT_BAD_INPUT, EXIT_INTERRUPTED):
            return code
        self.poll(final=True)
        for line in verdict_lines(self.gates):
            say(line)
        return worst_exit(code, gates_exit(self.gates, self.strict))


def start_monitor(sweep: Sweep, store: Store, batch: Sequence[RunSpec],
                  stop: threading.Event, strict: bool = False, verbose: bool = False
                  ) -> CurveMonitor | int | None:
    """The monitor of a batch of `harness run` (None: no looks over training time for
    it; an int: the exit code of a refusal, printed). A fixed sweep's gates cover all its
    runs; an adaptive sweep's, the runs of its first look over seeds only, with
    TIME_SHARE of the gate's alpha (analysis.sequential.curves)."""
    design = curve_design(sweep.regression)
    if design is None:
        return None
    specs, alpha = batch_specs(sweep)
    if sweep.adaptive is not None and any(s not in specs for s in batch):
        return None  # a later look over seeds: its runs go to the full budget
    ref = sweep.regression.get("reference")
    if not ref or not project_path(ref).is_dir():
        print(f"error: looks over training time need [regression] reference (a folder of "
              f"run records); got {ref!r}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        gates = recorded_gates(sweep, store, project_path(ref))
        reference_runs = load_runs([project_path(ref)]).included
        lines = prepare(gates, design, store, reference_runs, gate_options(sweep), alpha,
                        verbose)
    except AnalysisError as e:
        print(f"error: looks over training time: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not gates:
        return None
    if verbose:
        say(f"looks over training time: {design.describe()}")
    for line in lines:
        say(line)
    return CurveMonitor(sweep, store, gates, reference_runs, stop, strict, verbose)

