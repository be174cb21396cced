"""Cleanba trainers (PPO and IMPALA) in JAX: `python -m cleanba.ppo`, `python -m cleanba.impala`.

See docs/cleanba.md. Importing the package sets an XLA flag for fast CPU convolutions
(cleanba/xla_flags.py); it takes effect if no JAX computation has run yet.
"""

from cleanba.xla_flags import apply_cpu_conv_flag

apply_cpu_conv_flag()
