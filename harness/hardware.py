"""The report's "Hardware evidence" section: what the GPU campaign's leases have shown so far
(benchmarks/campaign.py; results/hardware/README.md). `harness report` adds it for a sweep
whose [report] names the campaign's store (`hardware = "results/hardware"`, as the
`hardware` preset does); harness.report only calls `hardware_section`.

- (a) equivalence of each device kind with the CPU, and between device kinds, per system:
  the project's one equivalence verdict (analysis.equivalence_verdicts: PASS, DIFFERENT,
  INCONCLUSIVE) on the records of one software stack, with the seeds so far and, at the
  per-seed spread seen, the seeds per side an 80%-power design needs
  (analysis.equivalence_seeds_needed) and how many each side still lacks;
- (b) ours against the reference Cleanba on Breakout PPO: learning at equal frames (the
  reference's own statistic, computed on our record at the frames it logged) and speed,
  host and device memory, every lease's figures (and the suite's earlier calls);
- (c) the speed-bound table: actor alone, learner alone, both, and the share;
- (d) --deterministic run to run on each device kind;
- the leases.
Records of different stacks are never pooled: each stack's verdicts are its own.
"""

from __future__ import annotations

import csv
import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from analysis import (
    AnalysisError,
    analyse,
    equivalence_seeds_needed,
    equivalence_verdicts,
    spread_from_analysis,
)
from analysis.verdicts.seedplan import beyond_cap
from harness.page import table_html, verdict_class
from runrecord.hardware import record_place
from runrecord.words import counted, signed
from runrecord.writer import read_json_lines, read_json_or_none

TITLE = "Hardware evidence"
CPU = "cpu"


def _num(x: Any, digits: int = 0) -> str:
    if not isinstance(x, int | float) or x != x:
        return "-"
    return f"{x:,.{digits}f}"


def folders(store: Path) -> list[tuple[str, str, Path]]:
    """(kind, stack, folder) of every (device kind, stack) folder of the store."""
    if not store.is_dir():
        return []
    return [(k.name, s.name, s) for k in sorted(store.iterdir()) if k.is_dir()
            for s in sorted(k.iterdir()) if s.is_dir()]


def leases(store: Path) -> list[dict[str, Any]]:
    out = [lease for _, _, folder in folders(store)
           for lease in read_json_lines(folder / "leases.jsonl")]
    return sorted(out, key=lambda lease: str(lease.get("started_at")))


# --------------------------------------------------------------------------------------
# (a) equivalence


def equivalence_rows(store: Path) -> tuple[list[list[Any]], list[tuple[str, str]], list[str]]:
    """Table rows, verdict lines (class, text) and notes of chunk (a), stack by stack."""
    by_stack: dict[str, list[Path]] = {}
    kinds_of: dict[str, set[str]] = {}
    for kind, stack, folder in folders(store):
        runs = folder / "equivalence" / "runs"
        dirs = sorted(d for d in runs.iterdir() if d.is_dir()) if runs.is_dir() else []
        if dirs:
            by_stack.setdefault(stack, []).extend(dirs)
            kinds_of.setdefault(stack, set()).add(kind)
    rows: list[list[Any]] = []
    lines: list[tuple[str, str]] = []
    notes: list[str] = []
    for stack, dirs in sorted(by_stack.items()):
        if len(kinds_of[stack]) < 2:
            notes.append(f"stack {stack}: records of {', '.join(sorted(kinds_of[stack]))} only; "
                         "nothing to compare with yet")
            continue
        try:
            a = analyse(dirs, group_by="layout.devices")
            spread = spread_from_analysis(a)
        except AnalysisError as e:
            notes.append(f"stack {stack}: no verdict ({e})")
            continue
        needed: dict[float, int | None] = {}  # per margin: the stack's spread is one
        groups = {g: gs for suite in a.suites for g, gs in suite.items()}
        kind_of = {g: record_place(next(iter(gs.runs.values())).manifest)[0]
                   for g, gs in groups.items()}
        for group, reference in pairs(groups, kind_of):
            try:
                found = equivalence_verdicts(a, group=group, reference=reference)
            except AnalysisError as e:
                notes.append(f"{group} vs {reference}: no verdict ({e})")
                continue
            for res in found.results:
                delta = float(res["delta"])
                if delta not in needed:
                    needed[delta] = equivalence_seeds_needed(spread, delta)
                rows.append(verdict_row(res, kind_of[group], kind_of[reference], stack,
                                        needed[delta]))
                lines.append((verdict_class(res["verdict"]),
                              f"{res['line']}; {res['stack_line']}"))
    return rows, lines, notes


def pairs(groups: dict[str, Any], kind_of: dict[str, str]) -> list[tuple[str, str]]:
    """(group, reference) of one stack: each device kind against the CPU, and each device
    kind against every other (the one sorted first is the reference), per system."""
    def family(g: str) -> str:
        return g.rsplit(" / ", 1)[0]

    out = []
    for g in sorted(groups):
        for ref in sorted(groups):
            if g == ref or family(g) != family(ref):
                continue
            kg, kr = kind_of[g], kind_of[ref]
            if kr == CPU and kg != CPU or CPU not in (kg, kr) and kr < kg:
                out.append((g, ref))
    return out


def verdict_row(res: dict[str, Any], kind: str, ref_kind: str, stack: str,
                needed: int | None) -> list[Any]:
    """One verdict's row: the seeds so far, and with `needed` seeds per side (80% power
    at the stack's spread) how many each side still lacks."""
    seeds = (len(res["seeds_a"]), len(res["seeds_b"]))
    if res["verdict"] in ("PASS", "DIFFERENT"):
        still = "0 (decided)"
    elif needed is None:
        still = f"{beyond_cap(seeds='seeds per side')}: widen the margin"
    else:
        still = f"{max(0, needed - seeds[0])} / {max(0, needed - seeds[1])}"
    final, auc = res["final"], res["auc"]

    def ci(w: dict[str, Any]) -> str:
        lo, hi = w["ci90"]
        return "n/a (1 seed)" if lo != lo else f"{signed(w['diff'])} [{signed(lo)}, {signed(hi)}]"

    return [res["group_a"].split(" / ")[0], f"{kind} vs {ref_kind}", stack,
            f"{seeds[0]} / {seeds[1]}", res["label"], ci(final), ci(auc),
            res.get("margin") or res["delta"], "-" if needed is None else needed, still]


# --------------------------------------------------------------------------------------
# (b) ours and the reference


def first_thread_mean(episodes_csv: Path, frames: float, envs: int) -> float | None:
    """The reference's `avg_episodic_return` computed on our record: the mean, over the
    first actor thread's `envs` envs, of each env's last episode that ended by `frames`
    (0 for an env with none, as the reference's zero-initialised array gives)."""
    last: dict[int, float] = {}
    try:
        with open(episodes_csv, newline="") as f:
            for row in csv.DictReader(f):
                if float(row["frames"]) <= frames and int(row["env_index"]) < envs:
                    last[int(row["env_index"])] = float(row["episode_return"])
    except (OSError, KeyError, ValueError):
        return None
    return sum(last.values()) / envs if envs else None


def learning_rows(store: Path, suite_calls: Path) -> list[list[Any]]:
    rows = []
    by_lease = {lease["lease"]: lease for lease in leases(store)}
    for kind, _, folder in folders(store):
        learning = folder / "learning"
        for seed_dir in sorted(learning.iterdir()) if learning.is_dir() else []:
            fig = read_json_or_none(seed_dir / "figures.json")
            if isinstance(fig, dict):
                manifest = read_json_or_none(seed_dir / "ours" / "manifest.json") or {}
                lease = by_lease.get(fig.get("lease"), {})
                rows.append(ours_vs_reference(
                    f"{lease.get('started_at', '?')[:10]} {fig.get('lease', '')}", kind,
                    fig.get("seed"), fig.get("ours") or {}, fig.get("reference") or {},
                    seed_dir / "ours" / "episodes.csv", manifest))
    for path in sorted(suite_calls.glob("*/*results.json")) if suite_calls.is_dir() else []:
        res = read_json_or_none(path) or {}
        steps = res.get("steps") or {}
        if isinstance(steps.get("reference-ppo"), dict) and "steady_sps" in steps["reference-ppo"]:
            devices = (steps.get("environment") or {}).get("devices") or [{}]
            rows.append(ours_vs_reference(
                f"{path.parent.name}/{path.name} (suite call)", str(devices[0].get("kind", "?")),
                1, steps.get("ours-ppo") or {}, steps["reference-ppo"], None, {}))
    return rows


def ours_vs_reference(lease: str, kind: str, seed: Any, mine: dict[str, Any],
                      theirs: dict[str, Any], episodes: Path | None,
                      manifest: dict[str, Any]) -> list[Any]:
    ref_learning = theirs.get("learning") or {}
    at = ref_learning.get("frames")
    hyper = manifest.get("hyperparameters") or {}
    envs = int(hyper.get("num_envs", 0)) // max(1, int(hyper.get("num_actor_threads", 1)))
    same_stat = first_thread_mean(episodes, at, envs) if episodes and at else None
    ours_last = (mine.get("learning") or {}).get("last_episodes_mean_return")
    sps, ref_sps = mine.get("steady_sps"), theirs.get("steady_sps")
    return [lease, kind, seed, _num(at), _num(same_stat, 2),
            _num(ref_learning.get("avg_episodic_return"), 2), _num(ours_last, 2), _num(sps),
            _num(ref_sps), _num(sps / ref_sps, 2) if sps and ref_sps else "-",
            f"{_num(mine.get('first_update_s'), 1)} / {_num(theirs.get('first_update_s'), 1)}",
            f"{_num(mine.get('peak_rss_gb'), 2)} / {_num(theirs.get('peak_rss_gb'), 2)}",
            f"{_num(mine.get('device_peak_gb'), 2)} / {_num(theirs.get('device_peak_gb'), 2)}"]


# --------------------------------------------------------------------------------------
# (c), (d), the leases


def speed_rows(store: Path) -> list[list[Any]]:
    """One row per lease and actor mode: a record that compared the modes keeps each under
    `modes` and names the faster by its together SPS; one made before keeps the serial
    mode's figures alone, at its top level."""
    rows = []
    for kind, stack, folder in folders(store):
        for path in sorted((folder / "speed-bound").glob("*.json")):
            record = read_json_or_none(path) or {}
            modes = record.get("modes") or {str(record.get("actor_mode", "serial")): record}
            faster = record.get("faster_mode")
            for mode, f in modes.items():
                both = f.get("together") or {}
                share = f.get("share")
                mark = " (faster)" if mode == faster and len(modes) > 1 else ""
                rows.append([path.stem, kind, stack, mode + mark,
                             f"{f.get('num_envs', '?')} x {f.get('num_steps', '?')}, "
                             f"{counted(f.get('num_actor_threads', '?'), 'thread')}",
                             _num((f.get("actor_alone") or {}).get("sps")),
                             _num((f.get("learner_alone") or {}).get("sps")),
                             f"{_num(f.get('bound_sps'))} ({f.get('bound_by', '?')})",
                             _num(both.get("sps")), _num(share, 2),
                             "-" if share is None else "met" if share >= 0.9 else "not met"])
    return rows


def deterministic_rows(store: Path) -> list[list[Any]]:
    rows = []
    for kind, stack, folder in folders(store):
        det = folder / "deterministic"
        for d in sorted(det.iterdir()) if det.is_dir() else []:
            f = read_json_or_none(d / "figures.json") or {}
            runs = f.get("runs") or []
            rows.append([d.name, kind, stack, f.get("updates_compared", "-"),
                         "identical" if f.get("checksums_identical") else
                         f"differ from update {f.get('first_mismatch_update')}",
                         " / ".join(_num(r.get("steady_sps")) for r in runs) or "-"])
    return rows


def lease_rows(store: Path) -> list[list[Any]]:
    return [[lease.get("lease"), lease.get("tool_kind") or lease.get("kind"), lease.get("stack"),
             lease.get("mode"), _num(lease.get("budget_s")), _num(lease.get("wall_s")),
             ", ".join(str(d.get("item")) for d in lease.get("done") or []) or "-",
             ", ".join(str(d.get("item")) for d in lease.get("deferred") or [])[:120] or "-"]
            for lease in leases(store)]


def provenance_rows(store: Path) -> list[list[Any]]:
    """Each folder's provenance-note.json (written on merging when a record's provenance
    says something other than what ran; the records themselves are never rewritten)."""
    rows = []
    for kind, stack, folder in folders(store):
        note = read_json_or_none(folder / "provenance-note.json")
        if isinstance(note, dict):
            project, ref = note.get("project") or {}, note.get("reference") or {}
            rows.append([f"{kind}/{stack}", project.get("recorded", "-"),
                         project.get("ran", "-"),
                         f"{ref.get('repository', '-')} {ref.get('commit', '')}".strip()])
    return rows


def hardware_section(store: Path, suite_calls: Path | None = None) -> tuple[str, str]:
    """(title, inner HTML) of the section, from the store alone."""
    suite_calls = suite_calls or store.parent / "gpu-suite"
    merged = leases(store)
    gpu = [lease for lease in merged if lease.get("kind") != CPU]
    parts = [f"<p>From the GPU campaign's records in <code>{html.escape(str(store))}</code> "
             f"(benchmarks/campaign.py): {counted(len(merged), 'lease')} merged, {len(gpu)} of them on a "
             "GPU. Records of different software stacks are never pooled.</p>"]
    if not gpu:
        parts.append("<p id='hardware-next'>No GPU lease merged yet; the next lease runs chunk "
                     "(a) first (<code>python benchmarks/campaign.py plan</code> names the "
                     "device kind and the call).</p>")
    rows, lines, notes = equivalence_rows(store)
    parts.append("<h3>(a) Cross-hardware equivalence on CartPole</h3>")
    if rows:
        parts.append(table_html(["system", "compared", "stack", "seeds (A / reference)",
                                 "verdict", "final diff, 90% CI", "AUC diff, 90% CI", "margin",
                                 "seeds per side for 80% power", "seeds still needed (A / ref)"],
                                rows))
        parts += [f"<div class='verdict {cls}'>{html.escape(text)}</div>" for cls, text in lines]
    parts += [f"<p class='muted'>{html.escape(n)}</p>" for n in notes]
    if not rows and not notes:
        parts.append("<p class='muted'>No chunk (a) records yet.</p>")
    sections: Sequence[tuple[str, list[str], list[list[Any]]]] = (
        ("(b) Ours and the reference Cleanba: learning at equal frames, speed, memory "
         "(Breakout PPO)",
         ["lease", "device", "seed", "frames compared", "ours (reference's statistic)",
          "reference avg_episodic_return", "ours, last 100 episodes", "ours steady SPS",
          "reference steady SPS", "SPS ours / ref", "first update s (ours / ref)",
          "host peak RSS GiB (ours / ref)", "device peak GiB (ours / ref)"],
         learning_rows(store, suite_calls)),
        ("(c) What bounds our speed (paper's settings)",
         ["lease", "device", "stack", "actor mode", "setting", "actor alone SPS",
          "learner alone SPS",
          "bound (set by)", "together SPS", "share of the bound", "goal share >= 0.9"],
         speed_rows(store)),
        ("(d) --deterministic run to run",
         ["lease", "device", "stack", "updates compared", "params checksums", "SPS (runs)"],
         deterministic_rows(store)),
        ("Leases", ["lease", "device", "stack", "mode", "budget s", "wall s", "items done",
                    "deferred"], lease_rows(store)),
    )
    notes_rows = provenance_rows(store)
    if notes_rows:
        sections = (*sections, ("Provenance notes: what the records say and what ran",
                                ["folder", "the records' provenance", "what ran",
                                 "reference Cleanba"], notes_rows))
    for title, header, table_rows in sections:
        parts.append(f"<h3>{html.escape(title)}</h3>")
        parts.append(table_html(header, table_rows) if table_rows else
                     "<p class='muted'>Nothing yet.</p>")
    parts.append("<p class='muted'>(b): ours is the reference's own statistic (the mean, over "
                 "the first actor thread's envs, of each env's last finished episode) computed "
                 "on our record at the frames the reference last logged; no verdict is drawn "
                 "from one seed per lease. (c): the bound is min(actor alone, learner alone); "
                 "the share is the together SPS over it; a lease that compared the actor modes "
                 "has a row per mode, and '(faster)' marks the one its chunk (b) runs, chosen "
                 "by the together SPS (a near tie goes to serial, the default).</p>")
    return TITLE, "\n".join(parts)
