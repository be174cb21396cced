"""The trainer core: the config and its checks, the device layout, the run record, the
actor and learner threads and how they meet (control, channel, context), the runtime that
starts them, and the process setup (stopping, xla_flags) that `cleanba/__init__.py` runs
before any JAX import; so this file imports nothing (docs/architecture.md)."""
