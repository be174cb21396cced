"""`harness verify CERT`: tier 1 (hashes, root, completeness, every claim recomputed) and,
with --replay K --updates N, tier 2 (K drawn runs' first N updates re-run, every column
of their updates.csv rows but wall-clock times, and the episodes that ended in them,
compared bit for bit). Prints what was checked and what was not, the replay's cost, one
verdict and its exit code: 0 VERIFIED, 1 MISMATCH, 4 NOT CHECKABLE, 2 bad input (nothing
written). Each verification is appended to `<CERT>.verify.jsonl` (the report reads it)."""

from __future__ import annotations

import json
import secrets
import signal
import socket
import sys
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from pathlib import Path
from typing import Any

from harness.certify.bind import code_state
from harness.certify.certificate import (
    CertificateError,
    eligible_runs,
    load_certificate,
    verify_log,
)
from harness.certify.flags import Verify
from harness.certify.replay import (
    NOT_REPRODUCED,
    VERIFIED,
    CorePool,
    Replay,
    draw,
    run_replay,
)
from harness.certify.segments import (
    Segment,
    covered_share,
    escape_probability,
    parse_count,
    pick,
    run_segments,
)
from harness.certify.tier1 import MISMATCH, NOT_CHECKABLE, Findings, same_code, tier1
from runrecord import resolve_path, utc_now
from runrecord.exits import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNDECIDED,
)
from runrecord.provenance import available_cpus
from runrecord.words import counted

EXIT_CODES = {VERIFIED: EXIT_OK, MISMATCH: EXIT_FAILED, NOT_CHECKABLE: EXIT_UNDECIDED}


def _locate(cert: Mapping[str, Any], args: Verify) -> tuple[Path, dict[str, Path]]:
    """The records folder and the bound inputs here (CertificateError when absent)."""
    given: dict[str, Path] = {}
    for item in args.input:
        name, sep, path = item.partition("=")
        if not sep or name not in cert["inputs"]:
            raise CertificateError(f"--input {item!r}: expected NAME=PATH with NAME one of "
                                   f"{', '.join(cert['inputs']) or '(none: no inputs bound)'}")
        given[name] = Path(path)
    try:
        records = args.records or resolve_path(cert["records"]["path"])
    except ValueError as e:
        raise CertificateError(f"the records' path is relative to a results root ({e}): "
                               "give --records DIR") from e
    if not records.is_dir():
        raise CertificateError(f"records {records}: no such folder; give --records DIR (the "
                               "certified runs, one folder per run id)")
    inputs: dict[str, Path] = {}
    for name, spec in cert["inputs"].items():
        where = given.get(name) or resolve_path(spec["path"])
        if not where.exists():
            raise CertificateError(f"input {name}: {where} does not exist; give --input "
                                   f"{name}=PATH")
        certified_name = Path(spec["path"]).name
        if spec.get("kind") == "file" and where.name != certified_name:
            raise CertificateError(f"--input {name}: the certified file was named "
                                   f"{certified_name} (claims print file names); give a path "
                                   f"ending in {certified_name}")
        inputs[name] = where
    return records, inputs


def cannot_check(out: Findings, text: str) -> None:
    """A tier-2 NOT CHECKABLE finding: printed as it is found, and recorded in `out`."""
    print(f"  {NOT_CHECKABLE}: {text}")
    out.cannot(text)


def tier2(cert: Mapping[str, Any], records: Path, args: Verify, out: Findings,
          ) -> list[Replay]:
    """Draw, replay and compare; findings into `out` (which holds tier 1's)."""
    eligible, not_apply = eligible_runs(cert)
    out.not_applied("tier 2 n/a", not_apply)
    if not eligible:
        cannot_check(out, "tier 2: no run of the certificate was made with --deterministic "
                     "(with an update): nothing can be replayed bit for bit")
        return []
    seed = args.draw_seed if args.draw_seed is not None else secrets.randbits(63)
    drawn = draw(eligible, args.replay, seed)
    print(f"tier 2: draw seed {seed} (fresh randomness{' given' if args.draw_seed is not None else ''}"
          f"): {len(drawn)} of {counted(len(eligible), 'deterministic run')}: {', '.join(drawn)}")
    what = (f"--segments {args.segments}" if args.segments is not None
            else f"--updates {args.updates}")
    print(f"  repeat this draw: python -m harness verify {args.cert} --replay {args.replay} "
          f"{what} --draw-seed {seed}")
    todo: list[tuple[str, Segment]] = []
    for rid in drawn:
        if rid in out.changed_runs:
            cannot_check(out, f"tier 2: run {rid}: {out.changed_runs[rid]} since certified: "
                         "not replayed")
        elif args.segments is None:
            todo.append((rid, Segment(0, args.updates)))
        else:
            todo += [(rid, s) for s in drawn_segments(cert, records, rid, args, seed, out)]
    pool = CorePool(available_cpus())

    stop = threading.Event()

    def one(rid: str, segment: Segment) -> Replay:  # concurrent where the cores allow
        run = cert["runs"][rid]
        device = cert["devices"].get(run.get("device"), {})
        cores = pool.take(pool.need(device, int(run.get("processes") or 1)))
        try:
            return run_replay(rid, run, cert, records, segment.last, checkout=args.checkout,
                              cores=cores, stop=stop, first=segment.first)
        finally:
            pool.give(cores)

    with ThreadPoolExecutor(max_workers=max(1, len(todo))) as ex:
        try:
            futures = [ex.submit(one, rid, segment) for rid, segment in todo]
            # Waited for in short slices: a signal may land on a replay's thread, and the
            # main thread runs Python's handler only once its wait returns.
            while futures_wait(futures, timeout=0.2).not_done:
                pass
            replays = [f.result() for f in futures]
        except KeyboardInterrupt:  # SIGINT/SIGTERM: kill the replays, then say so
            stop.set()
            ex.shutdown(wait=True, cancel_futures=True)
            raise
    for r in replays:
        rid, run = r.run_id, cert["runs"][r.run_id]
        line = f"run {rid} ({run['label']}): {r.outcome}: {r.text} [{r.seconds:.1f} s]"
        print(f"  {line}")
        if r.outcome == MISMATCH:
            out.mismatch(f"tier 2: {line}")
        elif r.outcome == NOT_CHECKABLE:
            out.cannot(f"tier 2: {line}")
    done = [r for r in replays if r.outcome == VERIFIED]
    if args.segments is not None:
        if done:
            out.checked.append(f"tier 2: {counted(len(done), 'segment')} replayed bit for bit (every "
                               f"updates.csv column but {', '.join(NOT_REPRODUCED)}; the "
                               "episodes that ended in them), each from its certified "
                               "checkpoint")
        if len(eligible) > len(drawn):
            out.not_checked.append(f"tier 2: the "
                                   f"{counted(len(eligible) - len(drawn), 'deterministic run')} "
                                   "not drawn (a later draw may pick them)")
        return replays
    if done:
        out.checked.append(f"tier 2: {counted(len(done), 'run')} replayed, updates 1-{args.updates} "
                           "bit for bit (every updates.csv column but "
                           f"{', '.join(NOT_REPRODUCED)}; the episodes that ended in them): "
                           f"{', '.join(r.run_id for r in done)}")
    total_updates = sum(int(cert["runs"][r.run_id].get("updates") or 0) for r in done)
    if done:
        out.not_checked.append(f"tier 2: the updates after {args.updates} of the replayed "
                               f"runs ({total_updates - args.updates * len(done)} of "
                               f"{total_updates} updates)")
    if len(eligible) > len(done):
        out.not_checked.append(f"tier 2: the "
                               f"{counted(len(eligible) - len(done), 'deterministic run')} "
                               "not replayed (a later draw may pick them)")
    return replays


def drawn_segments(cert: Mapping[str, Any], records: Path, rid: str, args: Verify,
                   seed: int, out: Findings) -> list[Segment]:
    """The segments of run `rid` this draw replays (the last always), with what they
    cover printed; none (NOT CHECKABLE) for a run without checkpoints."""
    updates = int(cert["runs"][rid].get("updates") or 0)
    segments = run_segments(records / rid, updates)
    if not segments:
        cannot_check(out, f"tier 2: run {rid}: no checkpoint in its record (made without "
                     "--checkpoint-every): no segment to replay; --updates N replays its "
                     "first N")
        return []
    picked = pick(segments, parse_count(str(args.segments)), seed, rid)
    escape = escape_probability(len(segments), len(picked))
    share = covered_share(picked, updates)
    print(f"  run {rid}: {len(picked)} of its {counted(len(segments), 'segment')}: "
          f"{'; '.join(s.text() for s in picked)}: {share:.0%} of "
          f"its {updates} updates; a forgery confined to one other segment escapes this draw "
          f"with probability {escape:.2f}")
    if share < 1:
        out.not_checked.append(f"tier 2: run {rid}: the updates outside its replayed "
                               f"segment{'s' if len(picked) > 1 else ''}")
    return picked


def cost_lines(cert: Mapping[str, Any], replays: list[Replay], wall: float) -> list[str]:
    """The replay's cost in seconds and as a fraction of the original compute
    (process-seconds of training of every certified run)."""
    original = sum(float(r.get("wall_time_s") or 0) * int(r.get("processes") or 1)
                   for r in cert["runs"].values())
    spent = sum(r.seconds * r.processes for r in replays)
    frac = f"{100 * spent / original:.2f}%" if original > 0 else "n/a (no training time recorded)"
    return [f"replay cost: {wall:.1f} s wall ({counted(len(replays), 'replay')}, concurrent where the "
            f"cores allow), {spent:.1f} process-seconds = {frac} of the original compute "
            f"({original:.1f} process-seconds of training over {counted(len(cert['runs']), 'run')}; "
            "a replay's seconds include start-up and compilation, the records' do not)"]


NEVER_CHECKED = (
    "the environment's code (EnvPool) and the trainer's correctness: a replay runs the "
    "same code, so it shows the records came from this code, not that the code is right",
    "wall times, SPS and host names: self-reported by the records",
    "that the sweep file was fixed before the runs: publish its SHA-256 beforehand",
)


def worst_per_run(replays: list[Replay]) -> dict[str, str]:
    """Each replayed run's outcome over its segments: MISMATCH, else NOT CHECKABLE, else
    VERIFIED."""
    rank = {VERIFIED: 0, NOT_CHECKABLE: 1, MISMATCH: 2}
    out: dict[str, str] = {}
    for r in replays:
        if rank[r.outcome] >= rank.get(out.get(r.run_id, VERIFIED), 0):
            out[r.run_id] = r.outcome
    return out


def verdict(found: Findings) -> str:
    if found.count(MISMATCH):
        return MISMATCH
    return NOT_CHECKABLE if found.count(NOT_CHECKABLE) else VERIFIED


def _log(cert_path: Path, entry: dict[str, Any]) -> None:
    try:
        with open(verify_log(cert_path), "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
    except OSError as e:  # a read-only download: the verdict stands, unlogged
        print(f"note: could not append to {verify_log(cert_path)} ({e.strerror})")


def verify(args: Verify) -> int:
    """Verify a certificate; the exit code (EXIT_INTERRUPTED on SIGINT/SIGTERM: replays
    killed, nothing logged)."""
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        return _verify(args)
    except KeyboardInterrupt:
        print("verify: interrupted (replays stopped, nothing logged)", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        signal.signal(signal.SIGTERM, previous)


def _verify(args: Verify) -> int:
    if args.replay < 0 or args.updates < 1:
        print("error: --replay K needs K >= 0 and --updates N needs N >= 1", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.segments is not None:
        try:
            parse_count(args.segments)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return EXIT_BAD_INPUT
    try:
        cert = load_certificate(args.cert)
        records, inputs = _locate(cert, args)
    except CertificateError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    code = cert["code"]
    print(f"certificate {args.cert}: sweep {cert['sweep']['name']}, "
          f"{counted(len(cert['runs']), 'run')}, {counted(len(cert['claims']), 'claim')}, made {cert.get('created_at')} at commit "
          f"{code.get('git_sha')}{' (dirty)' if code.get('dirty') else ''}")
    print(f"root: {cert['root']}")
    here = code_state(args.checkout)
    same = same_code(code, here)
    print(f"code here: {here.get('git_sha')}{' (dirty)' if here.get('dirty') else ''}: "
          + ("the certified code" if same else "not the certified code (claims and replays "
             "run the code here; a difference they show may come from it)"))
    found = tier1(cert, records, inputs, args.expect_root, here)
    print(f"tier 1: {counted(len(found.found), 'finding')} in {found.seconds:.2f} s")
    for outcome, text in found.found:
        print(f"  {outcome}: {text}")
    replays: list[Replay] = []
    if args.replay > 0:
        t0 = time.perf_counter()
        replays = tier2(cert, records, args, found)
        if replays:
            for line in cost_lines(cert, replays, time.perf_counter() - t0):
                print(line)
    else:
        found.not_checked.append("tier 2: no run replayed (--replay K --updates N replays "
                                 "K drawn runs' first N updates)")
    print("checked:")
    for line in found.checked:
        print(f"  {line}")
    print("not checked:")
    for line in [*found.not_checked, *NEVER_CHECKED]:
        print(f"  {line}")
    result = verdict(found)
    print(f"verdict: {result}" + (f" ({counted(found.count(MISMATCH), 'mismatch', 'mismatches')}, "
                                  f"{found.count(NOT_CHECKABLE)} not checkable)"
                                  if result != VERIFIED else ""))
    _log(args.cert, {"verified_at": utc_now(), "root": cert["root"], "verdict": result,
                     "exit_code": EXIT_CODES[result], "host": socket.gethostname(),
                     "tier2": {"replay": args.replay, "updates": args.updates,
                               "segments": args.segments,
                               "runs": worst_per_run(replays)},
                     "findings": [f"{o}: {t}" for o, t in found.found][:20],
                     "tier1_seconds": round(found.seconds, 3),
                     "replay_seconds": round(sum(r.seconds for r in replays), 3)})
    return EXIT_CODES[result]
