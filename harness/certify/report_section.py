"""The report's "Certificate" section: the root of `<sweep>/certificate.json` and its
last verification (`certificate.json.verify.jsonl`), when a certificate exists."""

from __future__ import annotations

import html
from collections import Counter
from pathlib import Path

from harness.certify.certificate import (
    DEFAULT_NAME,
    CertificateError,
    load_certificate,
    verify_log,
)
from runrecord.words import counted
from runrecord.writer import read_json_lines

TITLE = "Certificate"


def last_verification(cert_path: Path) -> dict | None:
    """The last line of the certificate's verification log (None: never verified)."""
    entries = read_json_lines(verify_log(cert_path))
    return entries[-1] if entries else None


def verification_text(cert: dict, entry: dict | None, cert_path: Path) -> str:
    if entry is None:
        return f"not verified yet: python -m harness verify {cert_path}"
    tier2 = entry.get("tier2") or {}
    tiers = "tier 1"
    if tier2.get("replay"):
        outcomes = Counter((tier2.get("runs") or {}).values())
        tiers += (f" + tier 2: first {tier2.get('updates')} updates of "
                  f"{counted(sum(outcomes.values()), 'drawn run')}: "
                  + (", ".join(f"{n} {o}" for o, n in sorted(outcomes.items())) or "none"))
    text = f"{entry.get('verdict')} ({tiers}) at {entry.get('verified_at')} on {entry.get('host')}"
    if entry.get("root") != cert["root"]:
        text += " -- of another certificate (root differs): verify this one"
    return text


def certificate_section(sweep_dir: Path) -> tuple[str, str] | None:
    """(title, HTML) of the section, or None when the sweep has no certificate."""
    cert_path = Path(sweep_dir) / DEFAULT_NAME
    if not cert_path.exists():
        return None
    try:
        cert = load_certificate(cert_path)
    except CertificateError as e:
        return TITLE, f"<p class='muted'>{html.escape(str(e))}</p>"
    entry = last_verification(cert_path)
    comp = cert["completeness"]
    code = cert["code"]
    rows = [
        ("root (SHA-256 Merkle, RFC 6962)", cert["root"]),
        ("verification", verification_text(cert, entry, cert_path)),
        ("certified", f"{cert.get('created_at')}, commit {code.get('git_sha')}"
                      + (" (dirty)" if code.get("dirty") else "")),
        ("binds", f"{cert['merkle']['leaves']} files of {len(cert['runs'])} runs; "
                  f"{len(cert['claims'])} claims"),
        ("planned runs", ", ".join(f"{n} {s}" for s, n in comp["statuses"].items())),
        ("missing / unplanned", f"{len(comp['missing'])} / {len(comp['unplanned'])}"),
        ("file", str(cert_path)),
    ]
    body = "".join(f"<tr><th scope='row'>{html.escape(k)}</th><td><code>{html.escape(v)}"
                   "</code></td></tr>" for k, v in rows)
    return TITLE, (f"<div class='scroll'><table class='kv' id='certificate'><tbody>{body}"
                   "</tbody></table></div><p class='muted'>What the certificate proves and "
                   "what it does not: docs/certificate.md.</p>")
