"""The GPU campaign's store and plan: what is done for a device kind and software stack,
and what a lease does next (benchmarks/campaign.py; results/hardware/README.md).

The store (committed, small):

    results/hardware/<device kind>/<stack>/
      stack.json                  the stack (device, jax, jaxlib, EnvPool, Python, CUDA)
      leases.jsonl                one line per merged lease: who, when, what it did
      equivalence/runs/<id>/      chunk (a): run records (harness store: root <kind>/<stack>)
      learning/seed-<s>/          chunk (b): ours/ (run record) and figures.json
      speed-bound/<lease>.json    chunk (c)
      deterministic/<lease>/      chunk (d): run-1/, run-2/ (run records), figures.json

A record's folder comes from its own manifest (`record_place`: the device kind of its
layout and the versions in its provenance), never from the lease that brought it, so a
record made under a different stack is kept apart. The plan of a (kind, stack) is one
sequence of items (`plan_items`); a lease runs the first ones not done that fit its time.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runrecord.hardware import kind_folder, record_place, stack_folder  # noqa: E402
from runrecord.writer import read_json_lines, read_json_or_none  # noqa: E402

STORE = ROOT / "results" / "hardware"
EQUIVALENCE = "equivalence"  # the chunk (a) sweep's name (harness/presets/hardware.toml)
PRESET = "hardware"
RECORD_FILES = ("manifest.json", "episodes.csv", "updates.csv")
CHUNKS = {
    "a": "cross-hardware equivalence: CartPole PPO and IMPALA, seeds added lease after lease",
    "b": "learning at equal frames: ours (in the actor mode chunk (c) found faster) and the "
         "reference Cleanba, Breakout PPO, one seed per lease",
    "c": "what bounds our speed at the paper's settings: actor alone, learner alone, both, "
         "in each actor mode (serial, double-buffer), and which mode is faster",
    "d": "--deterministic run to run: two runs, their records compared bit for bit",
}
# The lent machines' kinds as the device tool names them, and how their JAX device kind
# reads ("NVIDIA H100 80GB HBM3" -> nvidia-h100-80gb-hbm3).
TOOL_KINDS = {"nvidia-h100-x1": "h100", "nvidia-h200": "h200"}
# Seconds per item on a GPU before a lease of that kind has measured it: from the first
# H100 call (docs/performance.md): our PPO 4.5 s per update after a 56 s first one, the
# reference 72 s then ~4.5 s (the suite's shares, 125 + 135 s), one --deterministic run of
# 5 updates ~40 s (90 s for two), the actor alone ~35 s and the learner alone ~45 s
# (compilation included, judged from the first-update times); a CartPole run ~30 s
# (process start, CUDA, compilation; 6,250 policy steps and 48 updates are seconds).
GPU_ESTIMATE_S = {"a": 70.0, "b": 270.0, "c": 90.0, "d": 95.0}
CPU_ESTIMATE_S = {"a": 150.0, "b": 600.0, "c": 300.0, "d": 200.0}
TINY_ESTIMATE_S = {"a": 60.0, "b": 200.0, "c": 120.0, "d": 150.0}
# Chunk (c) measures every actor mode (docs/cleanba.md, "Actor modes"), serial first: the
# default, and the mode of every record before the comparison. The faster mode is named by
# the together runs' SPS; double-buffer must beat serial by more than MODE_MARGIN, because
# a together window of a few updates moves by about that much run to run, and a mode
# picked on noise would change chunk (b)'s runs for nothing.
ACTOR_MODES = ("serial", "double-buffer")
MODE_MARGIN = 0.05


__all__ = ["record_place"]  # also the merge's: where a record belongs (runrecord.hardware)


def probe_place(env: Mapping[str, Any]) -> tuple[str, str]:
    """(device kind folder, stack folder) of the machine a lease runs on, from the suite's
    environment probe (benchmarks/measured_run.py, task `environment`); the same names
    `record_place` gives its records."""
    kind = kind_folder([str(d["kind"]) for d in env.get("devices") or []])
    return kind, stack_folder(str(env.get("python", "?")), str(env.get("jax", "?")),
                              str(env.get("jaxlib", "?")), str(env.get("envpool", "?")))


def tool_kind(kind: str) -> str | None:
    """The device tool's name of a device kind folder (None: not a lent kind)."""
    return next((tool for tool, mark in TOOL_KINDS.items() if mark in kind), None)


# --------------------------------------------------------------------------------------
# what a (kind, stack) folder holds


def completed_runs(runs_dir: Path) -> dict[str, dict[str, Any]]:
    """run id -> manifest of every completed run record in a runs/ folder."""
    out = {}
    if runs_dir.is_dir():
        for d in sorted(runs_dir.iterdir()):
            m = read_json_or_none(d / "manifest.json")
            if isinstance(m, dict) and m.get("status") == "completed" and all(
                    (d / f).is_file() for f in RECORD_FILES):
                out[d.name] = m
    return out


@dataclass
class Place:
    """What one (device kind, stack) folder holds."""

    kind: str
    stack: str
    equivalence: dict[str, dict[str, Any]] = field(default_factory=dict)  # run id -> manifest
    learning_seeds: list[int] = field(default_factory=list)
    speed_bound: list[str] = field(default_factory=list)  # lease ids
    # lease id -> {"mode", "why"}: the speed-bound records that compared the actor modes
    faster_modes: dict[str, dict[str, str]] = field(default_factory=dict)
    deterministic: list[str] = field(default_factory=list)  # lease ids
    leases: list[dict[str, Any]] = field(default_factory=list)

    def equivalence_seeds(self, expected: Mapping[int, set[str]]) -> list[int]:
        """Seeds whose runs (`expected`: seed -> the chunk (a) sweep's run ids of that
        seed, `sweep_run_ids`) are all completed here."""
        return sorted(s for s, ids in expected.items() if ids <= set(self.equivalence))

    def item_seconds(self, chunk: str, status: str = "done") -> list[float]:
        """Wall seconds of every item of `chunk` the merged leases ran here (status done,
        or failed)."""
        return [float(i["wall_s"]) for lease in self.leases for i in lease.get(status, [])
                if i.get("chunk") == chunk and isinstance(i.get("wall_s"), int | float)]


def read_place(store: Path, kind: str, stack: str) -> Place:
    base = store / kind / stack
    place = Place(kind, stack, completed_runs(base / EQUIVALENCE / "runs"))
    learning = base / "learning"
    if learning.is_dir():
        place.learning_seeds = sorted(
            int(d.name.removeprefix("seed-")) for d in learning.iterdir()
            if d.name.startswith("seed-") and d.name[5:].isdigit()
            and isinstance(read_json_or_none(d / "figures.json"), dict))
    if (base / "speed-bound").is_dir():
        place.speed_bound = sorted(p.stem for p in (base / "speed-bound").glob("*.json"))
        for lease in place.speed_bound:
            record = read_json_or_none(base / "speed-bound" / f"{lease}.json")
            if isinstance(record, dict) and record.get("faster_mode") in ACTOR_MODES:
                place.faster_modes[lease] = {"mode": record["faster_mode"],
                                             "why": str(record.get("faster_why", ""))}
    if (base / "deterministic").is_dir():
        place.deterministic = sorted(d.name for d in (base / "deterministic").iterdir()
                                     if isinstance(read_json_or_none(d / "figures.json"), dict))
    place.leases.extend(read_json_lines(base / "leases.jsonl"))
    return place


def places(store: Path) -> list[Place]:
    """Every (kind, stack) folder of the store."""
    out = []
    if store.is_dir():
        for kind in sorted(p for p in store.iterdir() if p.is_dir()):
            for stack in sorted(p for p in kind.iterdir() if p.is_dir()):
                out.append(read_place(store, kind.name, stack.name))
    return out


# --------------------------------------------------------------------------------------
# the plan


@dataclass(frozen=True)
class Item:
    """One unit of a lease's work: chunk a or b with its seed, or chunk c or d."""

    chunk: str
    seed: int | None = None

    @property
    def name(self) -> str:
        return f"{self.chunk}{'' if self.seed is None else f':seed-{self.seed}'}"


def sweep_run_ids(frames: int | None = None) -> dict[int, set[str]]:
    """Seed -> run ids of the chunk (a) sweep (harness/presets/hardware.toml; `frames`:
    scaled down, as a tiny lease runs it). Run ids cover system, game, layout, seed and
    frame budget, not the device, so every kind's runs of a seed have these ids."""
    from harness.sweep import load_sweep, preset_path

    out: dict[int, set[str]] = {}
    for spec in load_sweep(preset_path(PRESET), frames=frames).runs:
        out.setdefault(spec.seed, set()).add(spec.run_id)
    return out


def plan_items(place: Place, expected: Mapping[int, set[str]], chunks: str = "abcd",
               seeds_per_round: int = 2, rounds: int = 8) -> list[Item]:
    """The items not done yet for this (kind, stack), in the campaign's order: round 1 is
    (a) `seeds_per_round` seeds, (c), (b) one seed, (d); every later round (a)
    `seeds_per_round` more seeds and (b) one more (c and d are done once per kind and
    stack; c counts as done only with a record that compared the actor modes). Seeds are the smallest not done, so a cut lease's seed comes back first."""
    done_a = set(place.equivalence_seeds(expected))
    done_b = set(place.learning_seeds)
    items: list[Item] = []
    next_a = next_b = 1
    for r in range(rounds):
        if "a" in chunks:
            for _ in range(seeds_per_round):
                while next_a in done_a:
                    next_a += 1
                if next_a in expected:  # the sweep's seeds are the campaign's
                    items.append(Item("a", next_a))
                next_a += 1
        if r == 0 and "c" in chunks and not place.faster_modes:
            items.append(Item("c"))  # before (b): its faster actor mode is (b)'s
        if "b" in chunks:
            while next_b in done_b:
                next_b += 1
            items.append(Item("b", next_b))
            next_b += 1
        if r == 0 and "d" in chunks and not place.deterministic:
            items.append(Item("d"))
    return items


def faster_mode(together_sps: Mapping[str, float | None]) -> tuple[str, str]:
    """(the faster actor mode, why) from each mode's together SPS (chunk (c)'s own together
    runs: the same settings and window for both); a tie within MODE_MARGIN is serial."""
    serial, double = together_sps.get("serial"), together_sps.get("double-buffer")
    if not serial or not double:
        return "serial", "the modes were not both measured: serial, the default"
    ratio = double / serial
    figures = f"together double-buffer {double:,.0f} vs serial {serial:,.0f} SPS (x{ratio:.3f})"
    if ratio > 1 + MODE_MARGIN:
        return "double-buffer", figures
    if ratio < 1 - MODE_MARGIN:
        return "serial", figures
    return "serial", (f"{figures}: a tie within {MODE_MARGIN:.0%}, the together window's run-"
                      "to-run noise, so serial, the default (the simpler loop, and the mode of "
                      "the records before)")


def trainer_mode(place: Place, this_lease: tuple[str, str] | None) -> tuple[str, str]:
    """(the actor mode chunk (b) runs our trainer in, why): the faster mode of this lease's
    chunk (c) if it ran before, else of the latest merged lease's that compared the modes
    on this (kind, stack), else serial."""
    if this_lease is not None:
        return this_lease[0], f"this lease's chunk (c): {this_lease[1]}"
    if place.faster_modes:
        lease = max(place.faster_modes)  # lease ids start with their UTC start time
        found = place.faster_modes[lease]
        return found["mode"], f"chunk (c) of lease {lease}: {found['why']}"
    return "serial", ("no chunk (c) has compared the actor modes on this device kind and "
                      "stack yet: serial, the default")


def estimate_s(place: Place, chunk: str, defaults: Mapping[str, float]) -> float:
    """Seconds an item of `chunk` is expected to take here: the median of the merged
    leases' items of that chunk done; with none, the default, or 1.5 x the longest one
    that failed, if that is more (a cap too short for this machine is not tried again)."""
    seen = place.item_seconds(chunk)
    if seen:
        return statistics.median(seen)
    return max([defaults[chunk], *(1.5 * s for s in place.item_seconds(chunk, "failed"))])


def fit(items: list[Item], budget_s: float, estimate: Mapping[str, float]) -> list[Item]:
    """The items a lease of `budget_s` seconds starts, in order: each that fits in what the
    ones before it leave (an item that does not fit waits for the next lease; later,
    smaller ones may still go)."""
    left, out = budget_s, []
    for item in items:
        if estimate[item.chunk] <= left:
            out.append(item)
            left -= estimate[item.chunk]
    return out


def equivalence_seeds_by_kind(store: Path, expected: Mapping[int, set[str]]) -> dict[str, int]:
    """Lent device tool kind -> chunk (a) seeds done so far (all its stacks)."""
    out = dict.fromkeys(TOOL_KINDS, 0)
    for place in places(store):
        tool = tool_kind(place.kind)
        if tool is not None:
            out[tool] += len(place.equivalence_seeds(expected))
    return out


def next_tool_kind(store: Path, expected: Mapping[int, set[str]]) -> str:
    """The kind the next device call names: the one with fewer chunk (a) seeds so far (the
    first listed, the H100, on a tie: a call that names none gets it)."""
    seeds = equivalence_seeds_by_kind(store, expected)
    return min(TOOL_KINDS, key=lambda tool: (seeds[tool], list(TOOL_KINDS).index(tool)))
