"""Sweeps of runs: describe them in one TOML file, run them locally or on Slurm,
resume after a crash, and hand the records to analysis/ for the report.

Entry point: `python -m harness {plan,run,status,report,regress}` (see docs/harness.md).
"""
