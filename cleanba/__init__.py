"""Cleanba trainers (PPO and IMPALA) in JAX: `python -m cleanba.ppo`, `python -m cleanba.impala`.

See docs/cleanba.md.
"""
