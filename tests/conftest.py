"""The test process computes with cleanba in-process (networks, losses, whole runs through
cleanba.core.runtime.train): give it the XLA CPU configuration the trainers give themselves
(cleanba/core/xla_flags.py) before JAX creates its CPU backend, as `python -m cleanba.ppo` does
on import."""

from cleanba.core.xla_flags import apply_cpu_conv_flag

apply_cpu_conv_flag()
