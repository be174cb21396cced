"""Adaptive sweeps: the looks of `harness run --until-decided`, their store (looks.jsonl
beside the runs) and their section of the report.

Lowest first: `looks` (the looks as recorded, their lines and report section), `curves`
(the looks over training time), `run` (take seeds in batches until every verdict is
decided). The statistics are analysis.sequential's.
"""
