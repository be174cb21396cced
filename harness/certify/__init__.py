"""Certificates: `harness certify` binds a sweep's records (SHA-256 Merkle tree), its plan,
the code, each run's device and stack and every claim into one JSON file; `harness
verify` checks it in two tiers (docs/certificate.md).

Modules, lowest first: merkle, facts (pure) -> claims, bind -> certificate -> tier1 ->
replay -> verify, report_section; flags (verify's flags, light: `python -m harness` parses
them at start-up). Import from the module that does the work: this package imports none of
them, so parsing `harness verify`'s flags does not load the certificate stack.
"""
