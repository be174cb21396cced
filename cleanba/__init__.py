"""Cleanba trainers (PPO and IMPALA) in JAX: `python -m cleanba.ppo`, `python -m cleanba.impala`.

See docs/cleanba.md. When Python runs a trainer (`python -m cleanba.ppo|impala`), runpy
imports this package before the trainer module and its seconds of JAX imports; the
stop-signal watcher (cleanba/core/stopping.py) is installed here, first, so a signal at any
moment exits 130.

A process started as one of cleanba's entry points (the trainers, `cleanba.bench`,
`cleanba.speed_bound`) also sets
the XLA flag for fast CPU convolutions here (cleanba/core/xla_flags.py), before any JAX
computation. Importing cleanba for anything else (the harness checking a run with
cleanba.core.checks) leaves the process's environment, and so its children's, as it was;
`cleanba.core.runtime.train` sets the flag for runs started from Python.
"""

import sys

from cleanba.core import stopping
from cleanba.core.xla_flags import apply_cpu_conv_flag

TRAINER_MODULES = ("cleanba.ppo", "cleanba.impala")
ENTRY_MODULES = (*TRAINER_MODULES, "cleanba.bench", "cleanba.speed_bound")


def _launched_as(argv: list[str], modules: tuple[str, ...]) -> bool:
    """`python [options] -m MODULE ...` for one of `modules` (argv: sys.orig_argv)."""
    for i, word in enumerate(argv[1:], start=1):
        if word == "-m":
            return i + 1 < len(argv) and argv[i + 1] in modules
        if word.startswith("-m"):
            return word[2:] in modules
    return False


# While runpy imports the package of `-m pkg.mod`, sys.argv[0] is "-m".
if sys.argv[:1] == ["-m"]:
    if _launched_as(sys.orig_argv, TRAINER_MODULES):
        stopping.install()
    if _launched_as(sys.orig_argv, ENTRY_MODULES):
        apply_cpu_conv_flag()
