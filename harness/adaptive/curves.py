"""The regression gate looked at along training time, as a sweep runs it: `[regression]
looks_at` (docs/harness.md, "Looks over training time"); the statistics are
analysis.sequential.curves'.

One gate per system and suite of the [regression] selection. Before its runs start its
plan is fixed from the reference (boundaries, margins) and recorded; look k is taken as
soon as every run of the gate has passed its frame count, and recorded before it is
printed, in <sweep>/adaptive/curve-looks.jsonl (one line per gate and look, replaced
whole by an atomic rename: a kill leaves the looks before it or those and the new one).
A recorded plan and recorded looks are read back, never recomputed: a resumed sweep
goes on from the first look not recorded, and a gate decided REGRESSION stays decided
(its stopped runs are not run again). The record of the plan is keyed by what its
numbers depend on (design, options, the gate's runs, the reference), so a changed
candidate or reference starts afresh.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.adaptive.looks import append_look, decisions_exit, recorded_looks, runs_of_look
from harness.store import Store, last_progress
from harness.sweep.model import RunSpec, Sweep
from runrecord import Run, load_run, project_path
from runrecord.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, verdict_exit, worst_exit
from runrecord.ids import digest
from runrecord.writer import RecordError

if TYPE_CHECKING:
    from analysis.sequential import Look
    from analysis.sequential.curves import CurveDesign, CurvePlan, GateOptions

CURVE_FILE = "curve-looks.jsonl"
STOPPED_TYPE = "Stopped"
"""The error type of a run the harness stopped because its gate was decided."""


def curve_design(regression: Mapping[str, Any]) -> CurveDesign | None:
    """The sweep's looks over training time ([regression] looks_at), or None."""
    if "looks_at" not in regression:
        return None
    from analysis.sequential.curves import DEFAULT_SPENDING, CurveDesign

    return CurveDesign(tuple(regression["looks_at"]),
                       spending=str(regression.get("look_spending", DEFAULT_SPENDING)),
                       correlation=str(regression.get("look_correlation", "reference")))


def gate_options(sweep: Sweep, delta: float | None = None,
                 allow_protocol_mismatch: bool = False) -> GateOptions:
    from analysis.sequential.curves import GateOptions
    from analysis.verdicts.gate import DEFAULT_GATE_METRIC

    cfg = sweep.regression
    if delta is None and "delta" in cfg:
        delta = float(cfg["delta"])
    return GateOptions(delta=delta, metric=str(cfg.get("metric", DEFAULT_GATE_METRIC)),
                       layouts=cfg.get("layouts"),
                       allow_protocol_mismatch=allow_protocol_mismatch)


@dataclass
class CurveGate:
    """One gate (a system on a suite) of a sweep: its runs, plan and looks so far."""

    system: str
    suite: str
    specs: list[RunSpec]
    budget: float  # frames per run
    key: str = ""
    plan: CurvePlan | None = None
    looks: list[Look] = field(default_factory=list)
    layouts: list[str] = field(default_factory=list)  # the layouts its runs cover
    blocked: str = ""  # why no further look can be taken (a run did not complete)
    announced: bool = False  # `blocked` was printed
    too_few_seeds: bool = False  # blocked as the seeds cannot decide it: UNDECIDED, not failed

    @property
    def subject(self) -> str:
        return f"{self.system} {self.suite}"

    @property
    def decision(self) -> Look | None:
        from analysis.sequential.curves import first_decision

        return first_decision(self.looks)

    @property
    def next_look(self) -> int:
        return len(self.looks) + 1

    def options(self, options: GateOptions) -> GateOptions:
        """The sweep's gate options on this gate's layouts (the layouts it planned)."""
        return replace(options, layouts=self.layouts)

    def reference(self, runs: Sequence[Run]) -> list[Run]:
        """The reference runs of this gate's system and suite."""
        from analysis.scoring.scores import suite_name

        return [r for r in runs if r.manifest.get("system") == self.system
                and suite_name(str(r.manifest.get("env_id"))) == self.suite]


def selected_specs(sweep: Sweep, specs: Sequence[RunSpec]) -> list[RunSpec]:
    """The runs the [regression] selection gates (systems, games, layouts)."""
    cfg = sweep.regression
    return [s for s in specs if s.system in (cfg.get("systems") or [s.system])
            and s.env_id in (cfg.get("games") or [s.env_id])
            and s.layout.name in (cfg.get("layouts") or [s.layout.name])]


def curve_gates(sweep: Sweep, specs: Sequence[RunSpec]) -> list[CurveGate]:
    """One CurveGate per system and suite of the selected runs; AnalysisError when the
    runs of one gate have different frame budgets (a look is a share of ONE budget)."""
    from analysis.errors import AnalysisError
    from analysis.scoring.scores import suite_name

    groups: dict[tuple[str, str], list[RunSpec]] = {}
    for s in selected_specs(sweep, specs):
        groups.setdefault((s.system, suite_name(s.env_id)), []).append(s)
    out = []
    for (system, suite), mine in sorted(groups.items()):
        budgets = sorted({s.frames for s in mine})
        if len(budgets) > 1:
            raise AnalysisError(f"looks over training time: {system} on {suite} has runs of "
                                f"{budgets} frames; a gate's looks are shares of one budget")
        out.append(CurveGate(system, suite, list(mine), float(budgets[0]),
                             layouts=sorted({s.layout.name for s in mine})))
    return out


def gate_key(gate: CurveGate, design: CurveDesign, options: GateOptions, reference: Path,
             alpha: float | None) -> str:
    """What a gate's plan and looks depend on, hashed."""
    return digest({"design": [list(design.looks_at), design.alpha, design.spending,
                              design.correlation], "alpha": alpha,
                   "options": [options.delta, options.metric, options.layouts],
                   "runs": sorted(s.run_id for s in gate.specs),
                   "reference": str(reference)}, 16, spaced=True)


def read_back(gate: CurveGate, store: Store, key: str) -> None:
    """Key the gate, and give it the plan (None: not fixed yet) and looks recorded under
    that key."""
    from analysis.sequential import Look
    from analysis.sequential.curves import CurvePlan

    gate.key = key
    done = recorded_looks(store, key, CURVE_FILE)
    gate.plan = CurvePlan.from_json(done[0][-1]) if 0 in done else None
    gate.looks = [Look.from_json(done[i][-1]) for i in sorted(done) if i > 0]


def prepare(gates: Sequence[CurveGate], design: CurveDesign, store: Store,
            reference_runs: Sequence[Run], options: GateOptions,
            alpha: float | None = None, verbose: bool = False) -> list[str]:
    """Fix and record the plan of every gate read back (recorded_gates) without one; the
    lines to print (`verbose`: with the design's internals).
    AnalysisError (exit 2) when the reference cannot be read at the looks."""
    from analysis.sequential.curves import curve_plan, plan_lines

    out = []
    for gate in gates:
        if gate.plan is None:
            gate.plan = curve_plan(design, gate.reference(reference_runs), gate.budget,
                                   len({s.seed for s in gate.specs}), gate.suite,
                                   gate.options(options), alpha)
            append_look(store, gate.key, 0, [gate.plan.to_json()], name=CURVE_FILE)
        out += plan_lines(gate.plan, gate.subject, verbose)
        out += [f"  {x.text} (recorded by an earlier run)" for x in gate.looks]
    return out


def ready(gate: CurveGate, store: Store, states: Callable[[str], str],
          final: bool = False) -> bool:
    """Whether the gate's next look can be taken now: every run has passed the look's
    frames (the last look: every run completed). `final` (the pool is done): a run that
    did not get there sets `blocked` (before, a failed or interrupted run may still be
    run again)."""
    assert gate.plan is not None
    k = gate.next_look - 1
    last = k == len(gate.plan.frames) - 1
    for s in gate.specs:
        state = states(s.run_id)
        if state == "completed":
            continue
        if final or state not in ("running", "pending"):
            if final:
                gate.blocked = (f"run {s.run_id} ({s.label()}) is {state}: look "
                                f"{gate.next_look} cannot be taken")
            return False
        if last or progress_frames(store, s) < gate.plan.frames[k]:
            return False
    return True


def progress_frames(store: Store, spec: RunSpec) -> float:
    """Frames a run has trained on so far (its last complete line of updates.csv)."""
    steps, _ = last_progress(store.run_dir(spec.run_id))
    return steps * spec.frames / max(1, spec.total_timesteps)


def ahead(gate: CurveGate, store: Store, states: Callable[[str], str]) -> set[str]:
    """Runs of the gate that have passed its next look while another run of the gate
    has not: they wait there (paused) so that the look, and a stop, come when the
    gate's seeds have all reached it, not after some ran on. Empty when not every run
    is in flight (a run not started could wait on a paused one for a slot), at the
    last look, and for runs of several processes (jax.distributed's heartbeats)."""
    if gate.plan is None or gate.decision is not None or gate.blocked:
        return set()
    k = gate.next_look - 1
    if k >= len(gate.plan.frames) - 1:
        return set()
    state = {s.run_id: states(s.run_id) for s in gate.specs}
    if any(st not in ("running", "completed") for st in state.values()):
        return set()
    at = {s.run_id: progress_frames(store, s) for s in gate.specs
          if state[s.run_id] == "running"}
    if all(f >= gate.plan.frames[k] for f in at.values()):
        return set()
    return {s.run_id for s in gate.specs if s.run_id in at and s.num_processes == 1
            and at[s.run_id] >= gate.plan.frames[k]}


def take_look(gate: CurveGate, store: Store, reference_runs: Sequence[Run],
              options: GateOptions) -> Look:
    """Take, record and return the gate's next look (the caller checked `ready`)."""
    from analysis.sequential.curves import curve_look

    assert gate.plan is not None
    new = [load_run(store.run_dir(s.run_id)) for s in gate.specs]
    look = curve_look(gate.plan, new, gate.reference(reference_runs), gate.next_look, gate.subject,
                      gate.options(options))
    append_look(store, gate.key, look.look, [look.to_json()], name=CURVE_FILE)
    gate.looks.append(look)
    return look


def stop_reason(look: Look) -> str:
    """What the records of a stopped candidate's runs say."""
    return (f"stopped: regression decided at {look.fraction:.0%} of the budget (look "
            f"{look.look} of {look.looks}, {look.frames:,.0f} frames: {look.subject})")


def gates_exit(gates: Sequence[CurveGate], strict: bool = False) -> int:
    """The gates' three outcomes as one exit code (the worst wins); a gate with no
    decision counts as failed (a run failed), or as UNDECIDED when its seeds cannot
    decide it (a one-seed side: no run and no verdict failed); a decided gate's code is
    its decision's, as over seeds (decisions_exit)."""
    codes = []
    for gate in gates:
        d = gate.decision
        if d is None:
            codes.append(verdict_exit(False, False, strict) if gate.too_few_seeds
                         else EXIT_FAILED)
        else:
            codes.append(decisions_exit([d], strict))
    return worst_exit(EXIT_OK, *codes)


def batch_specs(sweep: Sweep) -> tuple[list[RunSpec], float | None]:
    """The runs the looks over training time cover and the alpha they spend: every run
    of a fixed sweep (alpha None: the design's); an adaptive sweep's first look over
    seeds, with TIME_SHARE of its alpha (analysis.sequential.curves)."""
    if sweep.adaptive is None:
        return list(sweep.runs), None
    from analysis.sequential.curves import TIME_SHARE

    return (runs_of_look(sweep, sweep.adaptive.first_seeds),
            TIME_SHARE * sweep.adaptive.alpha)


def recorded_gates(sweep: Sweep, store: Store, reference: Path | None = None,
                   options: GateOptions | None = None) -> list[CurveGate]:
    """The sweep's gates with what an earlier `harness run` recorded (plan, looks); by
    default against its [regression] reference with its options. Empty without looks_at
    or a reference."""
    design = curve_design(sweep.regression)
    ref = sweep.regression.get("reference")
    reference = reference or (project_path(ref) if ref else None)
    if design is None or reference is None:
        return []
    options = options or gate_options(sweep)
    specs, alpha = batch_specs(sweep)
    gates = curve_gates(sweep, specs)
    for gate in gates:
        read_back(gate, store, gate_key(gate, design, gate.options(options), reference, alpha))
    return gates


def look_lines(look: Look, verbose: bool) -> list[str]:
    """A look's line, and with `verbose` the statistic the design tests."""
    return [look.text, look.detail] if verbose and look.detail else [look.text]


@dataclass
class Regressed:
    """What `harness regress` found: its exit code (the worst), the lines it prints, each
    decided gate's (verdict, exit code) and the report's verdict entries; a gate that
    could not be decided is an ERROR line and exit 2, with no outcome."""

    code: int = EXIT_OK
    lines: list[str] = field(default_factory=list)
    outcomes: list[tuple[str, int]] = field(default_factory=list)
    verdicts: list[dict[str, Any]] = field(default_factory=list)

    def decided(self, verdict: str, code: int, entry: dict[str, Any]) -> None:
        self.outcomes.append((verdict, code))
        self.verdicts.append(entry)
        self.code = worst_exit(self.code, code)

    def error(self, subject: str, line: str) -> None:
        self.lines.append(line)
        self.verdicts.append({"kind": "regression", "subject": subject, "verdict": "ERROR",
                              "line": line})
        self.code = worst_exit(self.code, EXIT_BAD_INPUT)


def curve_regress(sweep: Sweep, store: Store, reference: Path, delta: float | None,
                  allow_protocol_mismatch: bool = False, strict: bool = False,
                  verbose: bool = False) -> Regressed:
    """`harness regress` of a sweep with looks over training time: per gate, the looks
    `harness run` recorded; the looks it did not take (a sweep run on Slurm, or records
    made elsewhere) taken now from the finished records, in order, up to the first
    decision (nothing recorded: regress only reads). An AnalysisError of one gate is its
    ERROR line (exit 2), a gate its seeds cannot decide (TooFewSeeds) its UNDECIDED line
    (4); the other gates are still decided. `verbose`: with the design's
    internals."""
    from analysis.errors import AnalysisError, TooFewSeeds
    from analysis.inputs.load import load_runs
    from analysis.sequential.curves import curve_look, curve_plan, plan_lines

    design = curve_design(sweep.regression)
    assert design is not None
    options = gate_options(sweep, delta, allow_protocol_mismatch)
    gates = recorded_gates(sweep, store, reference, options)
    reference_runs = load_runs([reference]).included
    found = Regressed(lines=[f"looks over training time: {design.describe()}"] if verbose
                      else [])
    lines = found.lines
    for gate in gates:
        mine = gate.options(options)
        ref = gate.reference(reference_runs)
        try:
            if gate.plan is None:
                _, alpha = batch_specs(sweep)
                gate.plan = curve_plan(design, ref, gate.budget,
                                       len({s.seed for s in gate.specs}), gate.suite, mine,
                                       alpha)
            lines += plan_lines(gate.plan, gate.subject, verbose)
            lines += [line for x in gate.looks for line in look_lines(x, verbose)]
            if gate.decision is None:
                new = [load_run(store.run_dir(s.run_id)) for s in gate.specs]
                unfinished = [r.run_id for r in new if r.status != "completed"]
                if unfinished:
                    raise AnalysisError(f"runs {', '.join(unfinished)} are not completed and "
                                        "no look decided the gate: run the sweep first")
                while gate.decision is None:
                    gate.looks.append(curve_look(gate.plan, new, ref, gate.next_look,
                                                 gate.subject, mine))
                    lines += look_lines(gate.looks[-1], verbose)
        except TooFewSeeds as e:  # no run failed: UNDECIDED, with the reason
            gate.blocked, gate.too_few_seeds = f"these seeds cannot decide it: {e}", True
            lines += verdict_lines([gate])
            found.decided("UNDECIDED", gates_exit([gate], strict), curve_verdict(gate))
            continue
        except (AnalysisError, RecordError, OSError) as e:
            found.error(gate.subject, f"regression over training time: ERROR {gate.subject}: {e}")
            gate.blocked = str(e)
            continue
        lines += verdict_lines([gate])
        assert gate.decision is not None  # the looks above ran to a decision
        found.decided(gate.decision.decision, gates_exit([gate], strict), curve_verdict(gate))
    return found


def curve_verdict(gate: CurveGate) -> dict[str, Any]:
    """A gate's entry of the report's verdicts: its verdict line, and the cells and
    design of its deciding look (an undecided gate: the why, no cells)."""
    d = gate.decision
    entry: dict[str, Any] = {"kind": "regression", "subject": gate.subject,
                             "verdict": d.decision if d else "UNDECIDED",
                             "line": verdict_lines([gate])[0]}
    if d is not None:
        entry |= {"cells": d.cells(), "detail": [d.text, *([d.detail.strip()] if d.detail else [])]}
    return entry


def status_lines(sweep: Sweep, store: Store) -> list[str]:
    """`harness status`: each gate's looks over training time so far."""
    try:
        gates = recorded_gates(sweep, store)
    except Exception as e:  # status shows what it can; `regress` says what is wrong
        return [f"looks over training time: cannot read them: {e}"]
    out = []
    for gate in gates:
        if gate.decision is not None or gate.plan is None:
            out += verdict_lines([gate])
        else:
            out.append(f"looks over training time: {gate.subject}: {len(gate.looks)} of "
                       f"{len(gate.plan.frames)} looks taken, not decided yet")
    return out


def curve_regressions(sweep: Sweep, store: Store) -> list[str]:
    """The verdict lines of the gates the looks over training time decided REGRESSION
    (empty without looks_at)."""
    gates = recorded_gates(sweep, store)
    failed = [g for g in gates if g.decision is not None and g.decision.decision ==
              "REGRESSION"]
    return verdict_lines(failed)


def stopped_label(error: str) -> str:
    """`harness status`'s state of a run stopped by its gate's decision ('' otherwise)."""
    prefix = f"{STOPPED_TYPE}: "
    if not error.startswith(prefix):
        return ""
    return f"stopped, not re-run ({error.removeprefix(prefix).split(' (look')[0]})"


def verdict_lines(gates: Sequence[CurveGate]) -> list[str]:
    """Per gate: its decision and what it saved, or why it has none."""
    out = []
    for gate in gates:
        d = gate.decision
        if d is None:
            why = gate.blocked or "its looks are not all taken yet"
            word = "UNDECIDED" if gate.too_few_seeds else "NONE"
            out.append(f"regression over training time: {word} for {gate.subject}: {why}")
            continue
        saved = (f"; {1 - d.fraction:.0%} of the frame budget not spent"
                 if d.fraction < 1 else "; ran to the full budget")
        out.append(f"regression over training time: {d.decision} for {gate.subject} at look "
                   f"{d.look} of {d.looks} ({d.fraction:.0%} of the budget){saved}")
    return out

