"""Adapters that run the IMPALA baselines (torchbeast's monobeast, moolib) from checkouts
the user names, on the shared EnvPool protocol, into our run records (docs/baselines.md).

Nothing here imports torch at package import: monobeast needs OMP_NUM_THREADS=1 first.
"""
