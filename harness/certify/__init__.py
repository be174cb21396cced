"""Certificates: `harness certify` binds a sweep's records (SHA-256 Merkle tree), its plan,
the code, each run's device and stack and every claim into one JSON file; `harness
verify` checks it in two tiers (docs/certificate.md).

Modules, lowest first: merkle, facts (pure) -> claims, bind -> certificate -> tier1 ->
replay -> verify, report_section.
"""

from harness.certify.certificate import DEFAULT_NAME, certify, load_certificate
from harness.certify.report_section import certificate_section
from harness.certify.verify import Verify, verify

__all__ = ["DEFAULT_NAME", "Verify", "certificate_section", "certify",
           "load_certificate", "verify"]
