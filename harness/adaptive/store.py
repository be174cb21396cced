"""Where an adaptive sweep keeps its looks: <root>/<sweep>/adaptive/looks.jsonl.

One line per Look (analysis.sequential.Look), tagged with the plan it belongs to: a hash
of the design, the analysis options and the sweep's run ids, so a sweep scaled down
differently (--frames gives other run ids) or a changed design starts its own looks
instead of reusing another's. The file is replaced as a whole (temp file, fsync,
rename) with all the Looks of one look at once, so a kill leaves either the looks before
it or those and the new one, never half a look; a line that does not parse (a file
edited by hand) is not read as a look. An flock on adaptive/.lock keeps a second harness
from running the same adaptive sweep at the same time.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.store import RunLock, Store
from harness.sweep.model import RunSpec, Sweep
from runrecord import utc_now
from runrecord.writer import atomic_write_text

LOOKS_FILE = "looks.jsonl"


def adaptive_dir(store: Store) -> Path:
    return store.sweep_dir / "adaptive"


def plan_key(design: Mapping[str, Any], options: Mapping[str, Any],
             run_ids: Sequence[str]) -> str:
    """What a look's numbers depend on, hashed: the design, the analysis options (margins,
    groups) and the sweep's runs."""
    text = json.dumps({"design": dict(design), "options": dict(options),
                       "runs": sorted(run_ids)}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


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
    try:
        text = (adaptive_dir(store) / name).read_text(encoding="utf-8")
    except OSError:
        return []
    out = []
    for line in text.split("\n")[:-1]:  # what follows the last newline is not a line
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("look"), dict):
            out.append(entry)
    return out


def recorded_looks(store: Store, plan: str) -> dict[int, list[dict[str, Any]]]:
    """{look index: its Looks as JSON} recorded for `plan`, in recording order."""
    out: dict[int, list[dict[str, Any]]] = {}
    for entry in read_lines(store):
        if entry.get("plan") == plan:
            out.setdefault(int(entry["index"]), []).append(entry["look"])
    return out


def other_plans(store: Store, plan: str) -> int:
    """How many recorded look lines belong to another plan (an earlier design or scale)."""
    return sum(entry.get("plan") != plan for entry in read_lines(store))


def append_look(store: Store, plan: str, index: int, looks: Sequence[Mapping[str, Any]],
                run_ids: Sequence[str]) -> None:
    """Record the Looks (as JSON) of look `index`, all at once, by replacing the file."""
    folder = adaptive_dir(store)
    folder.mkdir(parents=True, exist_ok=True)
    kept = [json.dumps(e, sort_keys=True) for e in read_lines(store)
            if not (e.get("plan") == plan and e.get("index") == index)]
    new = [json.dumps({"plan": plan, "index": index, "written_at": utc_now(),
                       "runs": sorted(run_ids), "look": dict(look)}, sort_keys=True)
           for look in looks]
    atomic_write_text(folder / LOOKS_FILE, "".join(line + "\n" for line in [*kept, *new]))


def adaptive_lock(store: Store) -> RunLock:
    """The lock one harness holds while it runs the sweep's looks."""
    return RunLock(adaptive_dir(store))
