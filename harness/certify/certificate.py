"""`harness certify`: one JSON file that binds a sweep's records, its plan, the code and
every claim (docs/certificate.md). Everything is checked before anything is written; the
file is written atomically (temp file, fsync, rename)."""

from __future__ import annotations

import json
import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.certify.bind import (
    MISSING,
    BindError,
    RunEntry,
    code_state,
    gather_runs,
    input_leaves,
    run_section,
    status_counts,
)
from harness.certify.claims import (
    RUNS,
    ClaimError,
    ClaimSpec,
    default_claims,
    input_runs,
    read_claims_file,
    run_claim,
)
from harness.certify.merkle import Leaf, merkle_root
from harness.sweep import Sweep
from runrecord import portable_path, utc_now
from runrecord.exits import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK
from runrecord.provenance import package_versions
from runrecord.words import counted
from runrecord.writer import atomic_write_text

FORMAT = "cleanba-bench certificate"
VERSION = 1
DEFAULT_NAME = "certificate.json"
VERIFY_LOG_SUFFIX = ".verify.jsonl"
"""verify appends one line per verification beside the certificate (the report reads it)."""
SWEEP_LEAF = "sweep/sweep.toml"
ANALYSIS_PACKAGES = ("numpy", "scipy", "tyro")


class CertificateError(ValueError):
    """Bad input to certify or verify: exit 2, nothing written."""


def verify_log(cert_path: Path) -> Path:
    return cert_path.with_name(cert_path.name + VERIFY_LOG_SUFFIX)


def sweep_leaf(text: str) -> Leaf:
    import hashlib

    data = text.encode()
    return Leaf(SWEEP_LEAF, hashlib.sha256(data).hexdigest(), len(data))


def analysis_stack(code: Mapping[str, Any]) -> dict[str, Any]:
    """What a claim's printed output depends on besides the records."""
    return {"git_sha": code.get("git_sha"), "diff_sha256": code.get("diff_sha256"),
            "python": sys.version.split()[0], **package_versions(ANALYSIS_PACKAGES)}


@dataclass
class Interner:
    """Identical device or stack tables, stored once and referred to by id."""

    tables: dict[str, dict[str, dict[str, Any]]] = field(
        default_factory=lambda: {"device": {}, "stack": {}})

    def __call__(self, kind: str, facts: Mapping[str, Any]) -> str:
        table = self.tables[kind]
        for key, value in table.items():
            if value == facts:
                return key
        key = f"{kind[0]}{len(table) + 1}"
        table[key] = dict(facts)
        return key


def claim_entries(specs: Sequence[ClaimSpec], bindings: Mapping[str, Path],
                  ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(claims, claims left out): each claim run now, with its inputs and output. A
    claims-file claim that errors (exit 2) is bad input; a report claim that does (e.g. no
    equivalence with one group) is left out with the reason."""
    claims: list[dict[str, Any]] = []
    left_out: list[dict[str, Any]] = []
    for spec in specs:
        out = run_claim(spec.args, bindings)
        if out.exit_code == EXIT_BAD_INPUT:
            reason = (out.stderr.strip().splitlines() or ["exit 2"])[-1].removeprefix("error: ")
            if spec.source == "claims file":
                raise CertificateError(f"claim {spec.name!r} ({command_text(spec.args, True)}) "
                                       f"failed: {reason}")
            left_out.append({"name": spec.name, "command": ["python", "-m", "analysis",
                                                            *spec.args], "reason": reason})
            continue
        claims.append({"id": f"C{len(claims) + 1}", "name": spec.name, "source": spec.source,
                       "command": ["python", "-m", "analysis", *spec.args],
                       "inputs": input_runs(spec.args, bindings), "output": out.as_dict()})
    return claims, left_out


def build(sweep: Sweep, options: Mapping[str, Any], records: Path,
          claims_file: Path | None, include_unplanned: Sequence[str]) -> dict[str, Any]:
    """The certificate of `sweep`'s runs in `records` (CertificateError on bad input)."""
    try:
        entries = gather_runs(records, sweep.runs, include_unplanned)
        specs, inputs = (read_claims_file(claims_file) if claims_file is not None
                         else default_claims(sweep.report))
    except (BindError, ClaimError) as e:
        raise CertificateError(str(e)) from e
    leaves: list[Leaf] = [leaf for e in entries for leaf in e.leaves]
    leaves.append(sweep_leaf(sweep.source_text))
    for name, path in inputs.items():
        leaves += input_leaves(name, path)
    bindings = {RUNS: records, **inputs}
    claims, left_out = claim_entries(specs, bindings)
    intern = Interner()
    runs = {e.run_id: run_section(e, intern) for e in entries}
    code = code_state()
    return {
        "certificate": FORMAT, "version": VERSION, "created_at": utc_now(),
        "root": merkle_root(leaves),
        "merkle": {"tree": "RFC 6962 Merkle tree hash over the leaves sorted by path",
                   "leaf": "UTF-8 of '<path>\\n<sha256 hex>\\n<bytes>'",
                   "leaves": len(leaves)},
        "records": {"path": portable_path(str(records.resolve())), "runs": len(entries)},
        "inputs": {name: {"path": portable_path(str(path.resolve())),
                          "kind": "folder" if path.is_dir() else "file"}
                   for name, path in inputs.items()},
        "sweep": {"name": sweep.name,
                  "source": portable_path(str(sweep.source)) if sweep.source else None,
                  "sha256": sweep_leaf(sweep.source_text).sha256,
                  "options": dict(options), "text": sweep.source_text},
        "plan": [{"run_id": s.run_id, "label": s.label(), "definition": s.definition()}
                 for s in sweep.runs],
        "completeness": completeness(entries),
        "runs": runs,
        "devices": intern.tables["device"], "stacks": intern.tables["stack"],
        "code": code,
        "claims": claims, "claims_left_out": left_out,
        "analysis_stack": analysis_stack(code),
        "signing": "sign this file with tools you trust (docs/certificate.md, Signing): "
                   "cosign sign-blob --bundle FILE.sigstore.json FILE, or minisign -Sm FILE",
        "files": [leaf.as_dict() for leaf in sorted(leaves, key=lambda leaf: leaf.path)],
    }


def completeness(entries: Sequence[RunEntry]) -> dict[str, Any]:
    return {"planned": sum(e.planned for e in entries), "statuses": status_counts(entries),
            "missing": [e.run_id for e in entries if e.status == MISSING],
            "unplanned": [e.run_id for e in entries if not e.planned]}


def write_certificate(cert: Mapping[str, Any], out: Path) -> int:
    """Write the file (atomic); its size in bytes."""
    text = json.dumps(cert, indent=1, allow_nan=False) + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, text)
    return len(text.encode())


def certify(sweep: Sweep, options: Mapping[str, Any], records: Path, out: Path,
            claims_file: Path | None = None, include_unplanned: Sequence[str] = ()) -> int:
    """Build, write and summarise a certificate; the exit code (0, or 2 with nothing
    written)."""
    if out.exists() and out.is_dir():
        print(f"error: --out {out} is a folder; give the certificate's file name",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        cert = build(sweep, options, records, claims_file, include_unplanned)
    except CertificateError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("certify: interrupted; nothing written", file=sys.stderr)
        return EXIT_INTERRUPTED
    size = write_certificate(cert, out)
    for line in summary_lines(cert):
        print(line)
    print(f"certificate: {out} ({size:,} bytes)")
    print(f"root: {cert['root']}")
    return EXIT_OK


def summary_lines(cert: Mapping[str, Any]) -> list[str]:
    comp = cert["completeness"]
    statuses = ", ".join(f"{n} {s}" for s, n in comp["statuses"].items())
    code = cert["code"]
    lines = [f"sweep {cert['sweep']['name']}: {counted(comp['planned'], 'planned run')}: {statuses}",
             f"bound: {counted(cert['merkle']['leaves'], 'file')} of {counted(cert['records']['runs'], 'run')}"
             + (f" and {counted(len(cert['inputs']), 'input')}" if cert["inputs"] else ""),
             f"code: {code['git_sha']}" + (f" (dirty: diff sha256 {code['diff_sha256'][:16]}..)"
                                         if code["dirty"] else " (clean)")]
    if comp["missing"]:
        lines.append(f"missing (planned, no record): {', '.join(comp['missing'])}")
    if comp["unplanned"]:
        lines.append(f"unplanned (named): {', '.join(comp['unplanned'])}")
    lines.append(f"runs tier 2 can replay (deterministic, with an update): "
                 f"{len(eligible_runs(cert)[0])} of {len(cert['runs'])}")
    for c in cert["claims"]:
        lines.append(f"claim {c['id']}: {c['name']}: {command_text(c['command'][3:])} "
                     f"(exit {c['output']['exit_code']}, {counted(len(c['inputs']), 'input run')})")
    for c in cert["claims_left_out"]:
        # A report claim that does not apply (Atari-5 of a CartPole sweep) is no error.
        reason = str(c["reason"]).removeprefix("error: ")
        lines.append(f"not claimed (does not apply): {c['name']}: {reason}")
    return lines


def command_text(args: Sequence[str], as_written: bool = False) -> str:
    """A claim's arguments for a person: shell-quoted, its placeholders said in words
    ({runs} -> <certified runs>, {published} -> <input published>), since a reader of the
    summary has no sweep file open to know what "{runs}" stands for; `as_written` keeps
    them as the claims file has them (for an error about that file)."""
    def word(arg: str) -> str:
        placeholder = re.fullmatch(r"\{(\w+)\}", arg)
        if placeholder is None:
            return shlex.quote(arg)
        if as_written:
            return arg
        name = placeholder[1]
        return "<certified runs>" if name == "runs" else f"<input {name}>"

    return " ".join(word(a) for a in args)


def eligible_runs(cert: Mapping[str, Any]) -> tuple[list[str], dict[str, list[str]]]:
    """(runs tier 2 may draw: made with --deterministic and with at least one update, a
    failed one included (its updates before the failure); {why tier 2 does not apply: the
    other runs with a record it does not apply to})."""
    ok: list[str] = []
    not_apply: dict[str, list[str]] = {}
    for rid, run in sorted(cert["runs"].items()):
        if "deterministic" not in run:
            continue  # no record
        if not run.get("deterministic"):
            why = ("not made with --deterministic" if run["deterministic"] is False
                   else "no determinism block (a baseline, an import, an older record)")
        elif not run.get("updates"):
            why = f"{run['status']} before its first update"
        else:
            ok.append(rid)
            continue
        not_apply.setdefault(why, []).append(rid)
    return ok, not_apply


def load_certificate(path: Path) -> dict[str, Any]:
    """A certificate file, checked for its format (CertificateError otherwise)."""
    try:
        cert = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise CertificateError(f"{path}: cannot read ({e.strerror})") from e
    except ValueError as e:
        raise CertificateError(f"{path}: not JSON ({e})") from e
    if not isinstance(cert, dict) or cert.get("certificate") != FORMAT:
        raise CertificateError(f"{path}: not a {FORMAT} (no \"certificate\": \"{FORMAT}\")")
    if cert.get("version") != VERSION:
        raise CertificateError(f"{path}: certificate version {cert.get('version')!r}; this "
                               f"harness reads version {VERSION}")
    needed = ("root", "files", "records", "inputs", "sweep", "plan", "completeness", "runs",
              "devices", "stacks", "code", "claims", "analysis_stack")
    missing = [k for k in needed if k not in cert]
    if missing:
        raise CertificateError(f"{path}: certificate lacks {', '.join(missing)}")
    return cert
