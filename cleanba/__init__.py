"""Cleanba trainers (PPO and IMPALA) in JAX: `python -m cleanba.ppo`, `python -m cleanba.impala`.

See docs/cleanba.md. Importing the package sets an XLA flag for fast CPU convolutions
(cleanba/xla_flags.py); it takes effect if no JAX computation has run yet.

When Python runs a trainer (`python -m cleanba.ppo|impala`), runpy imports this package
before the trainer module and its seconds of JAX imports; the stop-signal watcher
(cleanba/stopping.py) is installed here, first, so a signal at any moment exits 130.
"""

import sys

from cleanba import stopping
from cleanba.xla_flags import apply_cpu_conv_flag

TRAINER_MODULES = ("cleanba.ppo", "cleanba.impala")


def _launched_as_trainer(argv: list[str]) -> bool:
    """`python [options] -m cleanba.ppo|impala ...` (argv: sys.orig_argv)."""
    for i, word in enumerate(argv[1:], start=1):
        if word == "-m":
            return i + 1 < len(argv) and argv[i + 1] in TRAINER_MODULES
        if word.startswith("-m"):
            return word[2:] in TRAINER_MODULES
    return False


# While runpy imports the package of `-m pkg.mod`, sys.argv[0] is "-m".
if sys.argv[:1] == ["-m"] and _launched_as_trainer(sys.orig_argv):
    stopping.install()

apply_cpu_conv_flag()
