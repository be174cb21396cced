"""An adaptive sweep's looks over seeds: where they are kept, and what they say (the
console of `harness run`, `harness status` and the report's "Adaptive seeds" section;
harness.report only calls `adaptive_section`). The statistics are analysis.sequential's
(docs/analysis.md).

They are kept in <root>/<sweep>/adaptive/looks.jsonl, one line per Look
(analysis.sequential.Look), tagged with the plan it belongs to: a hash of the design, the
analysis options and the sweep's run ids, so a sweep scaled down differently (--frames
gives other run ids) or a changed design starts its own looks instead of reusing
another's. The file is replaced as a whole (temp file, fsync,
rename) with all the Looks of one look at once, so a kill leaves either the looks before
it or those and the new one, never half a look; a line that does not parse (a file
edited by hand) is not read as a look. An flock on adaptive/.lock keeps a second harness
from running the same adaptive sweep at the same time.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.page import table_html
from harness.store import RunLock, Store
from harness.sweep.model import RunSpec, Sweep
from runrecord import utc_now
from runrecord.exits import EXIT_OK, verdict_exit, worst_exit
from runrecord.ids import digest
from runrecord.words import counted
from runrecord.writer import atomic_write_text, read_json_lines

if TYPE_CHECKING:
    from analysis.sequential import Look

LOOKS_FILE = "looks.jsonl"


def say(text: str) -> None:
    """A look's line, printed at once (a sweep's log shows each look as it is taken)."""
    print(text, flush=True)


def adaptive_dir(store: Store) -> Path:
    return store.sweep_dir / "adaptive"


def plan_key(design: Mapping[str, Any], options: Mapping[str, Any],
             run_ids: Sequence[str]) -> str:
    """What a look's numbers depend on, hashed: the design, the analysis options (margins,
    groups) and the sweep's runs."""
    return digest({"design": dict(design), "options": dict(options), "runs": sorted(run_ids)},
                  16, spaced=True)


def analysis_options(sweep: Sweep) -> dict[str, Any]:
    """The sweep file's settings that analysis.sequential.sweep_looks takes as options
    (docs/harness.md, "Adaptive seeds"); absent ones keep the analysis defaults."""
    report, regression = sweep.report, sweep.regression
    opts: dict[str, Any] = {}
    if "delta" in report:
        opts["delta"] = float(report["delta"])
    for key in ("reference", "group_by"):
        if key in report:
            opts[key] = str(report[key])
    if sweep.adaptive is not None and "gate" in sweep.adaptive.verdicts:
        if "delta" in regression:
            opts["gate_delta"] = float(regression["delta"])
        if "metric" in regression:
            opts["gate_metric"] = str(regression["metric"])
        if "layouts" in regression:
            opts["layouts"] = list(regression["layouts"])
    return opts


def sweep_plan(sweep: Sweep) -> str:
    """The plan key of an adaptive sweep as loaded (its design, options and runs)."""
    assert sweep.adaptive is not None
    return plan_key(sweep.adaptive.as_dict(), analysis_options(sweep),
                    [s.run_id for s in sweep.runs])


def runs_of_look(sweep: Sweep, seeds: int) -> list[RunSpec]:
    """The runs a look with `seeds` seeds per side decides from (those of every earlier
    look too): each matrix's first `seeds` seeds."""
    return [s for s in sweep.runs if s.seed_rank < seeds]


def read_lines(store: Store, name: str = LOOKS_FILE) -> list[dict[str, Any]]:
    """Every recorded look line (of every plan) that parses, in file order (`name`: the
    looks over seeds, or those over training time: harness.adaptive.curves)."""
    return [entry for entry in read_json_lines(adaptive_dir(store) / name)
            if isinstance(entry.get("look"), dict)]


def recorded_looks(store: Store, plan: str, name: str = LOOKS_FILE
                   ) -> dict[int, list[dict[str, Any]]]:
    """{look index: its Looks as JSON} recorded for `plan`, in recording order (`name`:
    as read_lines; over training time, index 0 holds the gate's plan)."""
    out: dict[int, list[dict[str, Any]]] = {}
    for entry in read_lines(store, name):
        if entry.get("plan") == plan:
            out.setdefault(int(entry["index"]), []).append(entry["look"])
    return out


def other_plans(store: Store, plan: str) -> int:
    """How many recorded look lines belong to another plan (an earlier design or scale)."""
    return sum(entry.get("plan") != plan for entry in read_lines(store))


def append_look(store: Store, plan: str, index: int, looks: Sequence[Mapping[str, Any]],
                run_ids: Sequence[str] | None = None, name: str = LOOKS_FILE) -> None:
    """Record the Looks (as JSON) of look `index`, all at once, by replacing the file
    (`name`: the looks over seeds, with the `run_ids` they decided from, or a gate's plan
    and looks over training time: harness.adaptive.curves)."""
    folder = adaptive_dir(store)
    folder.mkdir(parents=True, exist_ok=True)
    kept = [json.dumps(e, sort_keys=True) for e in read_lines(store, name)
            if not (e.get("plan") == plan and e.get("index") == index)]
    runs = {} if run_ids is None else {"runs": sorted(run_ids)}
    new = [json.dumps({"plan": plan, "index": index, "written_at": utc_now(), **runs,
                       "look": dict(look)}, sort_keys=True) for look in looks]
    atomic_write_text(folder / name, "".join(line + "\n" for line in [*kept, *new]))


def adaptive_lock(store: Store) -> RunLock:
    """The lock one harness holds while it runs the sweep's looks."""
    return RunLock(adaptive_dir(store))


ORDINARY_VERDICTS_NOTE = (
    "The Verdicts section above tests the final seeds once, as a fixed design would; it "
    "ignores that the sweep looked after every batch, so its error rate is not held over "
    "the looks. The decisions of this sweep are the ones in this section.")


@dataclass(frozen=True)
class Progress:
    """The looks an adaptive sweep has recorded for its current plan."""

    at_looks: list[int]
    """seeds per side at each planned look"""
    looks: dict[int, list[Look]]
    """look index -> its Looks, for the looks recorded so far"""

    @property
    def last(self) -> int:
        """Index of the latest recorded look (0: none yet)."""
        return max(self.looks, default=0)

    @property
    def latest(self) -> list[Look]:
        return self.looks.get(self.last, [])

    @property
    def finished(self) -> bool:
        """Every verdict decided at the latest look, or the cap reached."""
        return self.last > 0 and (all(look.decided for look in self.latest)
                                  or self.last == len(self.at_looks))

    @property
    def seeds(self) -> int:
        """Seeds per side the recorded looks used (0: none yet)."""
        return self.at_looks[self.last - 1] if self.last else 0


def progress(sweep: Sweep, store: Store) -> Progress:
    from analysis.sequential import Look

    assert sweep.adaptive is not None
    recorded = recorded_looks(store, sweep_plan(sweep))
    return Progress(sweep.adaptive.seeds_at_looks(),
                    {i: [Look.from_json(d) for d in ds] for i, ds in sorted(recorded.items())})


def spent_text(sweep: Sweep, seeds: int, latest: Sequence[Look]) -> str:
    """Compute of an adaptive sweep at `seeds` per side against its cap, and the fixed
    design of equal power (the seeds per side the verdicts of the `latest` look need: the
    largest)."""
    assert sweep.adaptive is not None
    cap = sweep.adaptive.max_seeds
    line = (f"spent {counted(len(runs_of_look(sweep, seeds)), 'run')}, {seeds} seeds per "
            f"side, of the cap's {len(sweep.runs)} ({cap} per side)")
    fixed = [look.fixed_design_seeds for look in latest if look.fixed_design_seeds is not None]
    if not fixed:
        return line + ("; the fixed design of equal power: not estimated (no spread "
                       "yet, or the design passes less than half the time at the "
                       "spread seen: see the looks)")
    fixed_runs = round(max(fixed) * (len(sweep.runs) / cap))
    return (line + f"; the fixed design of equal power: {max(fixed)} seeds per "
            f"side = {counted(fixed_runs, 'run')}")


def seeds_text(look: Look) -> str:
    return ", ".join(f"{side} {n}" for side, n in look.seeds.items())


def look_lines(look: Look, verbose: bool = False) -> list[str]:
    """A Look as the console shows it: its own line, with `verbose` its design's
    internals, and at the cap what it would need."""
    lines = [f"  look {look.look}: {look.text}"]
    if verbose and look.detail:
        lines.append(f"    design: {look.detail}")
    if look.needs:
        lines.append(f"    needs: {look.needs}")
    return lines


def decisions_exit(looks: list[Look], strict: bool = False) -> int:
    """The exit code of the last look's decisions, as each verdict's own command would
    give it: PASS 0, DIFFERENT or REGRESSION 1, UNDECIDED AT CAP (or a verdict still
    open) runrecord.exits.EXIT_UNDECIDED, EXIT_FAILED under `strict`; the worst wins."""
    from analysis.sequential import CONTINUE, UNDECIDED
    from analysis.verdicts.equivalence import DIFFERENT, PASS, REGRESSION

    assert all(look.decision in (PASS, DIFFERENT, REGRESSION, UNDECIDED, CONTINUE)
               for look in looks), [look.decision for look in looks]
    return worst_exit(EXIT_OK, *(verdict_exit(look.decision == PASS,
                                              look.decision in (DIFFERENT, REGRESSION),
                                              strict) for look in looks))


def stop_reason(sweep: Sweep, prog: Progress) -> str:
    """Why the sweep stopped (or that it has not), with the compute it spent."""
    total = len(prog.at_looks)
    if not prog.last:
        return f"adaptive: no look recorded yet (look 1 of {total} needs {prog.at_looks[0]} " \
               "seeds per side)"
    from analysis.sequential import UNDECIDED

    used = spent_text(sweep, prog.seeds, prog.latest)
    open_ = [look.subject for look in prog.latest if look.decision == UNDECIDED]
    if prog.last == total and (open_ or not all(look.decided for look in prog.latest)):
        return (f"adaptive: reached the cap at look {total} without a decision for "
                f"{'; '.join(open_) or 'some verdict'}; {used}")
    if all(look.decided for look in prog.latest):
        early = " before the cap" if prog.last < total else " at the cap"
        return (f"adaptive: stopped at look {prog.last} of {total}: every verdict decided"
                f"{early}; {used}")
    return (f"adaptive: look {prog.last} of {total} recorded, not decided yet; the next "
            f"`harness run` runs look {prog.last + 1} ({prog.at_looks[prog.last]} seeds per "
            f"side); {used}")


def status_lines(sweep: Sweep, store: Store) -> list[str]:
    """`harness status` of an adaptive sweep: its looks so far and where it stands."""
    prog = progress(sweep, store)
    lines = [line for index in sorted(prog.looks) for look in prog.looks[index]
             for line in look_lines(look)]
    lines.append(stop_reason(sweep, prog))
    others = other_plans(store, sweep_plan(sweep))
    if others:
        lines.append(f"adaptive: {counted(others, 'look line')} of another design or scale-down are "
                     "kept in adaptive/looks.jsonl and not used")
    return lines


def needed_runs(sweep: Sweep, store: Store) -> list[RunSpec]:
    """The runs an adaptive sweep has used or will use next: those of its recorded looks
    when it has stopped, else those of its next look."""
    prog = progress(sweep, store)
    if prog.finished:
        return runs_of_look(sweep, prog.seeds)
    return runs_of_look(sweep, prog.at_looks[prog.last])


def adaptive_section(sweep: Sweep, store: Store) -> tuple[str, str] | None:
    """The report's "Adaptive seeds" section (title, HTML), or None for a fixed sweep."""
    if sweep.adaptive is None:
        return None
    cfg = sweep.adaptive
    prog = progress(sweep, store)
    parts = [f"<p>Seeds run in batches: {cfg.first_seeds} per side, then {cfg.batch_seeds} "
             f"more at each look, up to {cfg.max_seeds} (looks at "
             f"{', '.join(map(str, prog.at_looks))} seeds); overall error rate "
             f"{cfg.alpha} held over the looks ({html.escape(cfg.spending)} spending); "
             f"verdicts: {html.escape(', '.join(cfg.verdicts))}"
             + (f"; the gate's fixed reference: <code>{html.escape(cfg.reference)}</code>"
                if cfg.reference else "") + ".</p>"]
    rows = [[look.look, look.verdict, look.subject, seeds_text(look), f"{look.statistic:.4g}",
             f"{look.boundary:.4g}", look.decision,
             "-" if look.fixed_design_seeds is None else look.fixed_design_seeds]
            for index in sorted(prog.looks) for look in prog.looks[index]]
    if rows:
        parts.append(table_html(["look", "verdict", "subject", "seeds per side", "statistic",
                                 "boundary", "decision", "fixed design (seeds per side)"],
                                rows))
        parts += [f"<div class='verdict'>{html.escape(look.text)}</div>"
                  + (f"<details><summary>design</summary>{html.escape(look.detail)}</details>"
                     if look.detail else "") for look in prog.latest]
        parts += [f"<p>Needs: {html.escape(look.needs)}</p>" for look in prog.latest
                  if look.needs]
    why = stop_reason(sweep, prog).removeprefix("adaptive: ")
    parts.append(f"<p id='adaptive-stop'>{html.escape(why[:1].upper() + why[1:])}.</p>")
    parts.append(f"<p class='muted'>{html.escape(ORDINARY_VERDICTS_NOTE)}</p>")
    return "Adaptive seeds", "\n".join(parts)
