"""Tier 1 of `harness verify` (seconds): every bound file's SHA-256 and the Merkle root,
the plan and each run's status (completeness), each run's facts against its record, each
record's internal consistency (harness/certify/consistency.py), and every claim
recomputed from the records; each finding names the file, run or claim."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.certify.bind import (
    INPUTS,
    MISSING,
    RECORDS,
    BindError,
    RunEntry,
    code_state,
    folder_leaves,
    input_leaves,
    record_status,
    run_folders,
    run_section,
)
from harness.certify.certificate import Interner, analysis_stack, sweep_leaf
from harness.certify.claims import RUNS, ClaimOutput, input_runs, placeholders, run_claim
from harness.certify.consistency import check_record
from harness.certify.merkle import Leaf, merkle_root
from harness.sweep import SweepError, parse_list, parse_seeds, parse_sweep
from runrecord import read_manifest_or_none, run_id, schema
from runrecord.digest import DIGEST_COLUMN, last_digest, record_chain_break
from runrecord.reader import read_table
from runrecord.words import counted
from runrecord.writer import RecordError

MISMATCH = "MISMATCH"
NOT_CHECKABLE = "NOT CHECKABLE"


@dataclass
class Findings:
    """What a verification found (each (outcome, text)) and what it checked."""

    found: list[tuple[str, str]] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    not_checked: list[str] = field(default_factory=list)
    seconds: float = 0.0
    changed_runs: dict[str, str] = field(default_factory=dict)  # run id -> how (tier 1)

    def mismatch(self, text: str) -> None:
        self.found.append((MISMATCH, text))

    def cannot(self, text: str) -> None:
        self.found.append((NOT_CHECKABLE, text))

    def count(self, outcome: str) -> int:
        return sum(o == outcome for o, _ in self.found)

    def not_applied(self, what: str, rids_by_reason: Mapping[str, list[str]]) -> None:
        """One not-checked line per reason a check did not apply: `what`, the reason and
        the runs (the first 12 named)."""
        for why, rids in rids_by_reason.items():
            shown = ", ".join(rids[:12]) + (f", ... ({len(rids)} in all)" if len(rids) > 12 else "")
            self.not_checked.append(f"{what}, {why}: {shown}")


@dataclass
class FileCheck:
    """Per run: what happened to its files since certification."""

    changed: dict[str, str] = field(default_factory=dict)  # run id -> how
    inputs: set[str] = field(default_factory=set)  # bound inputs with a file changed


def _input_of(path: str) -> str | None:
    parts = path.split("/")
    return parts[1] if parts[0] == INPUTS and len(parts) > 1 else None


def _by_run(path: str) -> str | None:
    parts = path.split("/")
    return parts[1] if parts[0] == RECORDS and len(parts) > 2 else None


def check_files(cert: Mapping[str, Any], folders: Mapping[str, Path],
                inputs: Mapping[str, Path], out: Findings) -> FileCheck:
    """Every bound file now against the certificate, and the run folders (bind.run_folders)
    the certificate does not hold."""
    fc = FileCheck()
    certified = {f["path"]: f for f in cert["files"]}
    runs = cert["runs"]
    now: dict[str, Leaf] = {}
    for rid, folder in folders.items():
        if rid not in runs:
            planned = any(p["run_id"] == rid for p in cert["plan"])
            why = ("planned, but it had no record when certified" if planned
                   else "the plan never held it")
            out.mismatch(f"run {rid}: a run folder the certificate does not hold ({why})")
            fc.changed[rid] = "added"
            continue
        now.update({leaf.path: leaf for leaf in folder_leaves(folder, f"{RECORDS}/{rid}")})
    for name, where_input in inputs.items():
        now.update({leaf.path: leaf for leaf in input_leaves(name, where_input)})
    now[sweep_leaf(cert["sweep"]["text"]).path] = sweep_leaf(cert["sweep"]["text"])
    for rid, entry in runs.items():
        if rid not in folders and entry["files"]:
            fc.changed[rid] = "deleted"
            out.mismatch(f"run {rid} ({entry['label']}, {entry['status']}): its folder is "
                         f"gone ({counted(len(entry['files']), 'bound file')})")
    for cert_path, f in certified.items():
        owner = _by_run(cert_path)
        if owner is not None and fc.changed.get(owner) == "deleted":
            continue
        leaf = now.get(cert_path)
        where = f" (run {owner})" if owner else ""
        if leaf is None:
            out.mismatch(f"file {cert_path}: missing{where}")
        elif leaf.sha256 != f["sha256"] or leaf.size != f["bytes"]:
            out.mismatch(f"file {cert_path}: SHA-256 differs{where}: certified "
                         f"{f['sha256'][:16]}.., now {leaf.sha256[:16]}..")
        else:
            continue
        if owner is not None:
            fc.changed.setdefault(owner, "files changed")
        if _input_of(cert_path) is not None:
            fc.inputs.add(str(_input_of(cert_path)))
    for new_path in sorted(set(now) - set(certified)):
        owner = _by_run(new_path)
        if owner is not None and fc.changed.get(owner) == "added":
            continue
        out.mismatch(f"file {new_path}: not in the certificate"
                     + (f" (run {owner})" if owner else ""))
        if owner is not None:
            fc.changed.setdefault(owner, "files added")
        if _input_of(new_path) is not None:
            fc.inputs.add(str(_input_of(new_path)))
    out.checked.append(f"{counted(len(certified), 'bound file')}: SHA-256 of each "
                       f"({counted(len(runs), 'run')}, {counted(len(inputs), 'input')}, the sweep file)")
    return fc


def check_root(cert: Mapping[str, Any], expect_root: str | None, out: Findings) -> None:
    leaves = [Leaf(f["path"], f["sha256"], int(f["bytes"])) for f in cert["files"]]
    root = merkle_root(leaves)
    if root != cert["root"]:
        out.mismatch(f"root: the certificate's file list gives {root}, its root field says "
                     f"{cert['root']} (the certificate was edited)")
    if expect_root is not None and expect_root.lower() != cert["root"]:
        out.mismatch(f"root: the certificate's root {cert['root']} is not the published "
                     f"{expect_root}")
    out.checked.append(f"Merkle root {cert['root']} (RFC 6962) recomputed from the file list"
                       + (" and compared with the published root" if expect_root else ""))


def same_code(certified: Mapping[str, Any], here: Mapping[str, Any]) -> bool:
    return (certified.get("git_sha"), certified.get("diff_sha256")) == \
        (here.get("git_sha"), here.get("diff_sha256"))


def check_plan(cert: Mapping[str, Any], folders: Mapping[str, Path],
               code_here: Mapping[str, Any], out: Findings) -> None:
    """The sweep file's hash, the plan's run ids, the plan as the file expands to it now,
    and each run's status and facts against its record (`folders`: bind.run_folders)."""
    sweep = cert["sweep"]
    if sweep_leaf(sweep["text"]).sha256 != sweep["sha256"]:
        out.mismatch("sweep: the sweep file's text does not have the certified SHA-256")
    plan = {p["run_id"]: p for p in cert["plan"]}
    for rid, p in plan.items():
        if run_id(p["definition"]) != rid:
            out.mismatch(f"plan: run {rid}: its definition hashes to {run_id(p['definition'])}")
    opts = sweep.get("options") or {}
    try:
        now = parse_sweep(sweep["text"], sweep.get("source") or "<certified sweep>",
                          frames=opts.get("frames"), games=parse_list(opts.get("games")),
                          seeds=parse_seeds(opts.get("seeds")), name=opts.get("name"),
                          accelerator=opts.get("accelerator"), check_games=False,
                          until_decided=bool(opts.get("until_decided")))
        expanded = {s.run_id for s in now.runs}
    except SweepError as e:
        expanded = None
        out.cannot(f"plan: the certified sweep file does not expand here ({e})")
    if expanded is not None and expanded != set(plan):
        text = (f"plan: the sweep file expands here to {counted(len(expanded), 'run')}, the "
                f"certificate's plan holds {len(plan)} ({len(expanded - set(plan))} not in "
                f"it, {len(set(plan) - expanded)} not expanded)")
        if same_code(cert["code"], code_here):
            out.mismatch(text)
        else:
            out.cannot(text + "; the harness here is at another commit")
    runs = cert["runs"]
    for rid in plan:
        if rid not in runs or not runs[rid].get("planned"):
            out.mismatch(f"completeness: planned run {rid} is not listed as a planned run")
    comp = cert["completeness"]
    missing = sorted(r for r, v in runs.items() if v["status"] == MISSING)
    if sorted(comp.get("missing", [])) != missing or comp.get("planned") != len(plan) or \
            sorted(comp.get("unplanned", [])) != sorted(r for r, v in runs.items()
                                                        if not v.get("planned")):
        out.mismatch("completeness: the summary (planned, missing, unplanned) does not "
                     "match the runs listed")
    intern = Interner()
    for rid, entry in runs.items():
        folder = folders.get(rid)
        status = record_status(folder)
        if folder is not None and status != entry["status"]:
            out.mismatch(f"run {rid}: certified {entry['status']}, its record says {status}")
        manifest = read_manifest_or_none(folder) if folder is not None else None
        if manifest is None:
            continue
        fresh = run_section(RunEntry(rid, entry["label"], entry["planned"], entry["status"],
                                     manifest, []), intern)
        for key in ("deterministic", "command", "updates", "wall_time_s", "device", "stack"):
            was, new = entry.get(key), fresh.get(key)
            if key in ("device", "stack"):
                was = cert[f"{key}s"].get(was) if isinstance(was, str) else was
                new = intern.tables[key].get(str(new))
            if was != new:
                out.mismatch(f"run {rid}: the certificate's {key} differs from its record")
    out.checked.append(f"completeness: the sweep file (SHA-256) expands to the plan's "
                       f"{counted(len(plan), 'run')}; each run's status and facts as its record says")


def check_consistency(cert: Mapping[str, Any], folders: Mapping[str, Path],
                      out: Findings) -> None:
    """Each certified run's record against itself (consistency.check_record): a broken
    rule is a MISMATCH naming the run, the file and the row; a check the record gives no
    ground for is listed as not checked, with why (it is no finding: the record never
    claimed what it would check)."""
    checked = 0
    why_not: dict[str, list[str]] = {}
    for rid in cert["runs"]:
        folder = folders.get(rid)
        manifest = read_manifest_or_none(folder) if folder is not None else None
        if folder is None or manifest is None:
            continue  # check_files and check_plan name a run folder gone or torn
        try:
            episodes = read_table(folder / schema.EPISODES_FILE)
            updates = read_table(folder / schema.UPDATES_FILE)
        except RecordError as e:
            out.mismatch(f"run {rid}: its record does not read ({e})")
            continue
        found = check_record(manifest, episodes, updates)
        for f in found.findings:
            out.mismatch(f"run {rid}: {f.line()}")
        broken = record_chain_break(folder)
        if broken is not None:
            out.mismatch(f"run {rid}: {schema.UPDATES_FILE} row {broken[0]}: {broken[1]}")
        bound, last = (cert["runs"][rid] or {}).get(DIGEST_COLUMN), last_digest(folder)
        if bound is not None and bound != last:
            out.mismatch(f"run {rid}: the last {DIGEST_COLUMN} is {last!r}, "
                         f"the certificate binds {bound!r}")
        if last is None:
            why_not.setdefault(f"the {DIGEST_COLUMN} chain: none in the record (a baseline, "
                               "an import, or written before the column)", []).append(rid)
        for why in found.not_applied:
            why_not.setdefault(why, []).append(rid)
        checked += 1
    out.checked.append(f"consistency of {counted(checked, 'record')}: frames in order and env_steps "
                       "x frame skip, episode lengths within their env's steps, CartPole "
                       "returns equal to lengths (each row of updates.csv and episodes.csv), "
                       f"the {DIGEST_COLUMN} chain over params checksums and episodes")
    out.not_applied("tier 1 consistency n/a", why_not)


def check_claims(cert: Mapping[str, Any], bindings: Mapping[str, Path], fc: FileCheck,
                 code_here: Mapping[str, Any], out: Findings) -> None:
    """Each claim recomputed from the records now: a difference names the claim and the
    run(s) that changed; with no run changed, the certificate's recorded output was edited
    (or, on another analysis stack, the claim is not checkable here)."""
    here = analysis_stack(code_here)
    stack_diff = [f"{k} {cert['analysis_stack'].get(k)} (certified) vs {v} (here)"
                  for k, v in here.items() if cert["analysis_stack"].get(k) != v]
    for claim in cert["claims"]:
        args = claim["command"][3:]
        recorded = ClaimOutput(**claim["output"])
        now = run_claim(args, bindings)
        inputs_now = input_runs(args, bindings)
        causes = [f"run {r} ({fc.changed[r]})" for r in sorted(
            {r for r in (*claim["inputs"], *inputs_now) if r in fc.changed})]
        causes += [f"input {n} (files changed)" for n in placeholders(args) if n in fc.inputs]
        label = f"claim {claim['id']} ({claim['name']})"
        diff = recorded.first_difference(now)
        if diff is None and inputs_now == claim["inputs"]:
            continue
        if causes:
            out.mismatch(f"{label}: {diff or 'same output'}; caused by {', '.join(causes)}")
        elif inputs_now != claim["inputs"]:
            out.mismatch(f"{label}: reads other runs than certified")
        elif stack_diff:
            out.cannot(f"{label}: {diff}; no input run changed, but the analysis ran on "
                       f"another stack here ({'; '.join(stack_diff)})")
        else:
            out.mismatch(f"{label}: {diff}; no input run changed: the certificate's "
                         "recorded output was edited")
    out.checked.append(f"{counted(len(cert['claims']), 'claim')} recomputed from the records "
                       "(output and input runs)")


def tier1(cert: Mapping[str, Any], records: Path, inputs: Mapping[str, Path],
          expect_root: str | None = None, code_here: Mapping[str, Any] | None = None,
          ) -> Findings:
    """Every tier-1 check of `cert` against the records and inputs found here
    (`code_here`: bind.code_state of this checkout, read when not given)."""
    out = Findings()
    t0 = time.perf_counter()
    code_here = code_here if code_here is not None else code_state()
    try:
        folders = run_folders(records)
        fc = check_files(cert, folders, inputs, out)
        check_root(cert, expect_root, out)
        check_plan(cert, folders, code_here, out)
        check_consistency(cert, folders, out)
    except BindError as e:
        out.mismatch(str(e))
        fc = FileCheck()
    check_claims(cert, {RUNS: records, **inputs}, fc, code_here, out)
    out.changed_runs = dict(fc.changed)
    out.seconds = time.perf_counter() - t0
    return out
