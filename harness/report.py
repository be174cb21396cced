"""`harness report` and `harness regress`: hand a sweep's records to analysis/, through
its public API (analysis/__init__.py) only.

The report is analysis.build_report_assets (figures, tables, verdicts) plus one
self-contained HTML page built here: figures embedded as base64 PNG, tables as HTML,
verdict lines, runs left out, warnings and the sweep's provenance. The page has no
external references, so it opens from disk or as an e-mail attachment; each table's CSV
and LaTeX files are also written to tables/ beside it (harness/page.py).
"""

from __future__ import annotations

import html
import json
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from analysis import (
    DEFAULT_GATE_METRIC,
    ONE_SEED,
    UNDECIDED,
    AnalysisError,
    TooFewSeeds,
    build_report_assets,
    load_records,
    reproduce_report_assets,
    resolve_published_table,
    suite_gates,
)
from harness.adaptive.curves import Regressed
from harness.adaptive.looks import adaptive_section, needed_runs, status_lines
from harness.certify.report_section import certificate_section
from harness.hardware import hardware_section
from harness.page import (
    CSS,
    kv_table_html,
    png_data_uri,
    table_html,
    table_links,
    verdict_details,
    verdict_table,
    write_table_files,
)
from harness.store import Store, run_state
from harness.sweep import Sweep, filter_flags, report_options
from runrecord import PROJECT_ROOT, Run, atomic_write_json, project_path, schema, utc_now
from runrecord.exits import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNDECIDED,
    strict_exit,
)
from runrecord.provenance import DISTRIBUTION, collect, git_state
from runrecord.words import counted
from runrecord.writer import atomic_write_text

REPORT_PAGE = "index.html"

WHY_NO_INTERVAL = ("n/a (1 seed): with one seed per group there is no spread between "
                   "seeds to estimate, so no confidence interval (and no equivalence PASS) "
                   "exists; run two or more seeds.")
WHY_BITWISE = ("PASS (bitwise identical): every paired record of the two groups matches "
               "bit for bit, so the difference is exactly 0 on every seed and its interval "
               "is [0, 0]; no test against the margin is needed.")


def verdict_text(v: dict) -> tuple[str, set[str]]:
    """A verdict's line as the report and console show it, and which footnotes it needs
    ('one_seed', 'bitwise'), read from the verdict's own fields (analysis writes an
    undefined interval as "n/a (1 seed)" itself: analysis.verdicts.equivalence.ci_text)."""
    notes = {key for key in ("one_seed", "bitwise") if v.get(key)}
    return str(v.get("line", "")), notes


def run_description(sweep: Sweep) -> str:
    """What this report's runs are: counts per axis, and the filters that scaled the sweep
    file down (the file's own description speaks of the whole sweep)."""
    runs = sweep.runs

    def axis(values: list[Any], what: str) -> str:
        uniq = sorted(set(values), key=str)
        shown = ", ".join(map(str, uniq[:6])) + (", ..." if len(uniq) > 6 else "")
        return f"{len(uniq)} {what}{'' if len(uniq) == 1 else 's'} ({shown})"

    frames = sorted({s.frames for s in runs})
    parts = [axis([s.system for s in runs], "system"), axis([s.layout.name for s in runs],
             "layout"), axis([s.env_id for s in runs], "game"),
             axis([s.seed for s in runs], "seed"),
             "frames per run " + ", ".join(f"{f:,}" for f in frames)]
    text = f"This report covers {counted(len(runs), 'run')}: " + "; ".join(parts) + "."
    if sweep.filters:
        text += (f" Scaled down from the sweep file with {filter_flags(sweep.filters)}: the file's description "
                 "below is of the whole sweep, not of what ran here.")
    return text


def _anchor(title: str) -> str:
    """An HTML id from a section title: 'Adaptive seeds' -> 'adaptive-seeds'."""
    return "-".join("".join(c if c.isalnum() else " " for c in title.lower()).split())


def build_html(assets: dict, sweep: Sweep, store: Store, extra: dict | None = None,
               sections: Sequence[tuple[str, str]] = (),
               leading: Sequence[tuple[str, str]] = (),
               report_dir: Path | None = None) -> str:
    """The report page: everything inline (no network, no files beside it needed).

    `extra`: more provenance rows (key -> value). `sections`: more report sections, each
    (title, inner HTML), placed after the tables and before the run list; other report
    parts (e.g. an Atari-5 estimate, a reproduction check) add theirs here. `leading`:
    sections placed right after the verdicts, before the figures (an adaptive sweep's
    looks: its decisions are theirs). `report_dir`: where the page goes; each table's
    CSV and LaTeX files are written to its tables/ and linked under the table."""
    title = f"Sweep {sweep.name}: report"
    parts = [
        "<!DOCTYPE html>", "<html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p id='what-ran'>{html.escape(run_description(sweep))}</p>",
    ]
    if sweep.description:
        label = "Sweep file's description (whole sweep)" if sweep.filters else "Description"
        parts.append(f"<p><b>{label}:</b> {html.escape(sweep.description)}</p>")
    runs = assets.get("runs", {})
    parts.append(
        f"<p class='muted'>{int(runs.get('included', 0))} completed runs analysed, "
        f"{len(runs.get('left_out', []))} left out. Generated {utc_now()}.</p>"
    )

    parts.append("<h2 id='verdicts'>Verdicts</h2>")
    verdicts = assets.get("verdicts", [])
    if not verdicts:
        parts.append("<p class='muted'>No verdict could be computed (see warnings).</p>")
    footnotes: set[str] = set()
    lines = []
    for v in verdicts:
        # The line names its kind and subject already ("equivalence A vs B: PASS ...").
        text, notes = verdict_text(v)
        footnotes |= notes
        lines.append(text)
    if verdicts:
        parts.append(verdict_table(verdicts))
        parts.append("<h3 id='verdict-details'>Verdict details</h3>")
        parts.append(verdict_details(verdicts, lines))
    for key, note in (("one_seed", WHY_NO_INTERVAL), ("bitwise", WHY_BITWISE)):
        if key in footnotes:
            parts.append(f"<p class='muted'>{html.escape(note)}</p>")

    for sec_title, sec_html in leading:
        parts.append(f"<h2 id='{_anchor(sec_title)}'>{html.escape(sec_title)}</h2>")
        parts.append(sec_html)

    parts.append("<h2 id='figures'>Figures</h2>")
    for fig in assets.get("figures", []):
        parts.append(
            f"<figure id='fig-{html.escape(fig['name'])}'>"
            f"<img src='{png_data_uri(fig['png'])}' alt='{html.escape(fig['title'])}'>"
            f"<figcaption><b>{html.escape(fig['title'])}.</b> "
            f"{html.escape(fig.get('caption', ''))}</figcaption></figure>"
        )
    if not assets.get("figures"):
        parts.append("<p class='muted'>No figures (see warnings).</p>")

    parts.append("<h2 id='tables'>Tables</h2>")
    for t in assets.get("tables", []):
        parts.append(f"<h3>{html.escape(t['title'])}</h3>")
        parts.append(table_html(t["header"], t["cells"], "data") if t["cells"]
                     else "<p class='muted'>(no rows)</p>")
        if report_dir is not None:
            parts.append(table_links(write_table_files(t, report_dir)))
    if any(ONE_SEED in t["markdown"] for t in assets.get("tables", [])):
        parts.append("<p class='muted'>n/a (1 seed): a bootstrap over one seed resamples the "
                     "same run, so it gives no interval; run two or more seeds.</p>")

    for sec_title, sec_html in sections:
        parts.append(f"<h2>{html.escape(sec_title)}</h2>")
        parts.append(sec_html)

    left_out = runs.get("left_out", [])
    if left_out:
        parts.append("<h2 id='left-out'>Runs left out</h2>")
        parts.append(table_html(["run id", "status", "reason"],
                                 [[r.get("run_id"), r.get("status"), r.get("reason")]
                                  for r in left_out]))
    warnings = assets.get("warnings", [])
    if warnings:
        parts.append("<h2 id='warnings'>Warnings</h2><ul>")
        parts += [f"<li>{html.escape(str(w))}</li>" for w in warnings]
        parts.append("</ul>")

    parts.append("<h2 id='runs'>Runs of the sweep</h2>")
    rows = []
    for s in sweep.runs:
        st = run_state(store.run_dir(s.run_id))
        rows.append([s.run_id, s.label(), st.state,
                     f"{st.wall_time_s:.1f}" if st.wall_time_s else "-", st.attempts,
                     st.error[:80] or "-"])
    parts.append(table_html(["run id", "run", "state", "training wall time (s)", "attempts",
                              "error"], rows))
    parts.append("<p class='muted'>Training wall time: the trainer's own clock from its "
                 "first step to its final record. The console's per-run time is the "
                 "harness's clock for the whole attempt, so it also counts process start-up, "
                 "imports and compilation.</p>")

    parts.append("<h2 id='provenance'>Provenance</h2>")
    prov = collect(packages=("jax", "jaxlib", "flax", "optax", "envpool", "numpy", "scipy",
                             "matplotlib", "submitit"))
    git = git_state(PROJECT_ROOT)
    items = [
        ("sweep", sweep.name), ("sweep file", str(sweep.source) if sweep.source else "-"),
        ("filters", filter_flags(sweep.filters) or "none (the whole sweep file)"),
        ("results", str(store.sweep_dir)),
        ("project git", f"{git['sha']} (dirty: {git['dirty']})" if git.get("sha") else
         f"{git.get('checkout', 'not a checkout')}; {DISTRIBUTION} {git.get('version')}"),
        ("report built on", f"{prov['host']}, {prov['cpu_model']}, python {prov['python']}"),
        ("packages", ", ".join(f"{k} {v}" for k, v in prov["packages"].items() if v)),
        *((k, str(v)) for k, v in (extra or {}).items()),
    ]
    parts.append(kv_table_html(items))
    if sweep.source_text:
        parts.append("<details><summary>sweep file</summary><pre>"
                     f"{html.escape(sweep.source_text)}</pre></details>")
    parts.append("</body></html>")
    return "\n".join(parts)


def planned_run_dirs(sweep: Sweep, store: Store) -> list[Path]:
    return [store.run_dir(s.run_id) for s in sweep.runs
            if (store.run_dir(s.run_id) / schema.MANIFEST_FILE).exists()]


def build_report(sweep: Sweep, store: Store, *, delta: float | None = None,
                 reps: int | None = None, allow_protocol_mismatch: bool = False
                 ) -> tuple[Path, dict]:
    """Write <sweep>/report/ and its index.html; return (page path, assets)."""
    adaptive = adaptive_section(sweep, store)  # None for a fixed sweep
    if sweep.adaptive is not None:  # the runs of its looks, not every seed up to the cap
        sweep = replace(sweep, runs=needed_runs(sweep, store))
    out_dir = store.report_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    opts = report_options(sweep.report, delta=delta, reps=reps,
                          allow_protocol_mismatch=allow_protocol_mismatch)
    # One call: analysis splits runs into suites (Atari; each other env) before grouping,
    # and writes each suite into its own subfolder when there are several.
    assets = build_report_assets(planned_run_dirs(sweep, store), out_dir, **opts)
    if "published" in sweep.report:  # [report] published = {table, column}: reproduce section
        pub = dict(sweep.report["published"])
        pub["allow_protocol_mismatch"] = bool(pub.get("allow_protocol_mismatch")
                                              or allow_protocol_mismatch)
        extra_assets = reproduce_report_assets(planned_run_dirs(sweep, store), out_dir,
                                     table=resolve_published_table(pub.pop("table"), base=PROJECT_ROOT),
                                     column=pub.pop("column"),
                                     reps=opts.get("aggregate_reps", 50_000), **pub)
        for key, entries in extra_assets.items():
            assets[key] = [*entries, *assets.get(key, [])]
    assets["verdicts"] = [*gate_verdicts(sweep, store, delta, allow_protocol_mismatch),
                          *assets.get("verdicts", [])]
    states = Counter(run_state(store.run_dir(s.run_id)).state for s in sweep.runs)
    extra = {"report options": json.dumps(opts), "run states": json.dumps(dict(states))}
    page = out_dir / REPORT_PAGE
    certificate = certificate_section(store.sweep_dir)  # None: the sweep has no certificate
    hardware = ([hardware_section(project_path(str(sweep.report["hardware"])))]
                if "hardware" in sweep.report else [])  # the GPU campaign's evidence
    atomic_write_text(page, build_html(assets, sweep, store, extra, sections=hardware,
                                       leading=[s for s in (adaptive, certificate) if s],
                                       report_dir=out_dir))
    atomic_write_json(out_dir / "assets.json", assets)
    lines = [verdict_text(v)[0] for v in assets.get("verdicts", [])]
    (out_dir / "verdicts.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return page, assets


def gate_verdicts(sweep: Sweep, store: Store, delta: float | None,
                  allow_protocol_mismatch: bool) -> list[dict[str, Any]]:
    """The regression gate's verdicts for the report (what `harness regress` prints),
    when the sweep names a [regression] reference that is here; else none."""
    ref = sweep.regression.get("reference")
    if not ref or not project_path(ref).is_dir():
        return []
    shown = delta if delta is not None else sweep.regression.get("delta")
    return regress(sweep, store, project_path(ref), None if shown is None else float(shown),
                   allow_protocol_mismatch=allow_protocol_mismatch).verdicts


def do_report(cmd: Any, sweep: Sweep) -> int:
    store = cmd.store(sweep)
    if not store.runs_dir.exists():
        print(f"error: no runs of sweep {sweep.name} under {store.runs_dir}; "
              "run `python -m harness run` first", file=sys.stderr)
        return 2
    try:
        page, assets = build_report(sweep, store, delta=cmd.delta, reps=cmd.reps,
                                    allow_protocol_mismatch=cmd.allow_protocol_mismatch)
    except AnalysisError as e:  # e.g. a [report] group_by key no run has
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"report: {page}")
    for w in assets.get("warnings", []):
        print(f"warning: {w}")
    for v in assets.get("verdicts", []):
        # The line names its kind and subject already ("staleness: PASS; ...").
        print(f"verdict: {verdict_text(v)[0]}")
    if sweep.adaptive is not None:  # its decisions are its looks'
        for line in status_lines(sweep, store):
            print(line)
    return 0


# --------------------------------------------------------------------------- regression


def summary_verdict(code: int, outcomes: Sequence[tuple[str, int]]) -> str:
    """The word of `harness regress`'s last line: the exit code's verdict, except that an
    exit 1 that only --strict UNDECIDED gates made reads as such (no gate regressed)."""
    failing = [verdict for verdict, gate_code in outcomes if gate_code == EXIT_FAILED]
    if code == EXIT_FAILED and failing and all(v == UNDECIDED for v in failing):
        return "UNDECIDED (--strict: exit 1)"
    return {EXIT_OK: "PASS", EXIT_FAILED: "REGRESSION", EXIT_BAD_INPUT: "ERROR",
            EXIT_UNDECIDED: "UNDECIDED"}[code]


# The gate's one-seed refusal names its flag; a sweep vouches in its file too.
SWEEP_KEY_HINT = " (or, in the sweep file, [regression] assume_equal_spread = true)"


def regress(sweep: Sweep, store: Store, reference: Path, delta: float | None,
            allow_protocol_mismatch: bool = False, strict: bool = False,
            verbose: bool = False, assume_equal_spread: bool | None = None) -> Regressed:
    """One regression verdict per system and suite of the [regression] selection: the
    sweep's runs against `reference`, through analysis.suite_gates (the gate of
    `python -m analysis regression`, suite by suite: same checks, metrics and lines). Each (system, suite)
    is one gate over the layouts the sweep planned for it; a check that fails is an
    "regression: ERROR <system>: ..." line (exit 2), one its seeds cannot decide (a
    one-seed side) an "regression: UNDECIDED for <system>: ..." line (exit 4), and the
    other systems are still gated. assume_equal_spread (None: the sweep's [regression]
    assume_equal_spread): a one-seed side borrows the other side's spread."""
    if "looks_at" in sweep.regression:  # gated along training time: its looks decide
        from harness.adaptive.curves import curve_regress

        return curve_regress(sweep, store, reference, delta, allow_protocol_mismatch, strict,
                             verbose)
    cfg = sweep.regression
    systems = cfg.get("systems") or sorted({s.system for s in sweep.runs})
    games = cfg.get("games") or sorted({s.env_id for s in sweep.runs})
    layouts = cfg.get("layouts") or sorted({s.layout.name for s in sweep.runs})
    metric = str(cfg.get("metric", DEFAULT_GATE_METRIC))
    if assume_equal_spread is None:
        assume_equal_spread = bool(cfg.get("assume_equal_spread", False))
    new_runs = load_records(planned_run_dirs(sweep, store)).included
    ref_runs = load_records([reference]).included
    found = Regressed()

    def sel(runs: list[Run], system: str) -> list[Run]:
        return [r for r in runs if r.manifest.get("system") == system
                and r.manifest.get("env_id") in games]

    for system in systems:
        mine = sorted({s.layout.name for s in sweep.runs
                       if s.system == system and s.env_id in games and s.layout.name in layouts})
        if not mine:
            continue
        try:
            for out in suite_gates(sel(new_runs, system), sel(ref_runs, system), delta=delta,
                                   metric=metric, layouts=mine,
                                   allow_protocol_mismatch=allow_protocol_mismatch,
                                   strict=strict,
                                   assume_equal_spread=assume_equal_spread):
                for w in out.warnings:
                    print(f"warning: {w}", file=sys.stderr)
                found.lines += out.lines(verbose=verbose)
                found.decided(out.result.verdict, out.exit_code, gate_verdict(out.result))
        except TooFewSeeds as e:  # every run completed; these seeds cannot decide it
            found.lines.append(f"regression: UNDECIDED for {system}: these seeds cannot decide "
                               f"it: {e}{SWEEP_KEY_HINT if '--assume-equal-spread' in str(e) else ''}")
            found.decided(UNDECIDED, strict_exit(EXIT_UNDECIDED, strict),
                          {"kind": "regression", "subject": system, "verdict": UNDECIDED,
                           "line": found.lines[-1]})
        except AnalysisError as e:
            found.error(system, f"regression: ERROR {system}: {e}")
    if not found.lines:
        found.lines.append("regression: ERROR: the [regression] selection matches no run of "
                           "this sweep")
        found.code = EXIT_BAD_INPUT
    return found


def gate_verdict(res: Any) -> dict[str, Any]:
    """A fixed gate's entry of the report's verdicts (its RegressionResult)."""
    return {"kind": "regression", "subject": res.subject, "verdict": res.verdict,
            "line": res.line(), "cells": res.cells(),
            "detail": [*res.detail_lines(), *res.why_lines()]}


def do_regress(cmd: Any, sweep: Sweep) -> int:
    store = cmd.store(sweep)
    ref = cmd.reference or sweep.regression.get("reference")
    if ref is None:
        print("error: no reference: give --reference DIR or set [regression] reference",
              file=sys.stderr)
        return 2
    ref = project_path(ref)
    if not ref.exists():
        print(f"error: reference {ref} does not exist", file=sys.stderr)
        return 2
    delta = cmd.delta if cmd.delta is not None else sweep.regression.get("delta")
    found = regress(sweep, store, ref, None if delta is None else float(delta),
                    allow_protocol_mismatch=getattr(cmd, "allow_protocol_mismatch", False),
                    strict=getattr(cmd, "strict", False),
                    verbose=getattr(cmd, "verbose", False),
                    assume_equal_spread=getattr(cmd, "assume_equal_spread", False) or None)
    for line in found.lines:  # the gate's own lines, as `python -m analysis regression` prints them
        print(line, file=sys.stderr if line.startswith("regression: ERROR") else sys.stdout)
    verdict = summary_verdict(found.code, found.outcomes)
    shown = delta if delta is not None else "suite default"
    print(f"regression verdict: {verdict} (reference {ref}, delta {shown})")
    return found.code
