"""Exec shim for trainer processes: die with the supervisor, pin CPUs, then exec.

Usage: python -m harness._child [--cpus 0,1] -- ARGV...

PR_SET_PDEATHSIG makes the kernel kill this process (and, after exec, the trainer) when
the harness thread that started it dies -- also on kill -9 of the harness -- so no
orphan keeps writing into a run folder that the next `harness run` will redo. It is
done here rather than in subprocess's preexec_fn, which is unsafe with threads.
Imports only the standard library so that the exec costs milliseconds.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> None:
    cpus = None
    if argv and argv[0] == "--cpus":
        cpus = {int(c) for c in argv[1].split(",") if c}
        argv = argv[2:]
    if not argv or argv[0] != "--":
        sys.exit("usage: python -m harness._child [--cpus 0,1] -- ARGV...")
    argv = argv[1:]
    expected_parent = int(os.environ.pop("HARNESS_PARENT_PID", "0"))
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The parent may have died between fork and prctl: then we are already orphaned.
        if expected_parent and os.getppid() != expected_parent:
            os._exit(137)
        if cpus:
            os.sched_setaffinity(0, cpus)
    # Slurm signals every process of a job step: USR2 (`scancel --signal=USR2`, as submitit
    # preempts; before the time limit) would kill the trainer by default, before it could
    # record anything. Ignored here (inherited through exec): the supervising harness
    # gets it too and stops the trainer with SIGINT, saying why.
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
