"""Adaptive sweeps: the looks of `harness run --until-decided`, their store (looks.jsonl
beside the runs) and their section of the report.

Lowest first: `store` (the looks as recorded), `report` (their lines and report section),
`run` (take seeds in batches until every verdict is decided). The statistics are
analysis.sequential's.
"""
