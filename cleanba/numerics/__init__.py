"""The maths of a learner step, below the trainer: the networks, the losses, the learner
mesh (parallel) and the layout-independent primitives of --deterministic. Pure JAX
functions; nothing here knows about threads, runs or records (docs/architecture.md)."""
