"""The test process computes with cleanba in-process (networks, losses, whole runs through
cleanba.core.runtime.train): give it the XLA CPU configuration the trainers give themselves
(cleanba/core/xla_flags.py) before JAX creates its CPU backend, as `python -m cleanba.ppo` does
on import.

Under pytest-xdist (scripts/test.sh runs `-n 2`) the `slurm` tests run on one worker, one
after the other: they share the one local cluster, its mode, its only node (one test drains
it) and its private folder (tests/test_slurm_local.py stops the cluster). The tests of a
file in SHARED_SETUP_FILES run on one worker too, so that their costly module fixture is
made once. The other tests are dealt one at a time, the slow ones first, so that the
workers end together."""

import os
import shutil
import signal
import tempfile

import pytest

from cleanba.core.xla_flags import apply_cpu_conv_flag


def share_compiled_programs() -> str | None:
    """Point JAX's persistent compilation cache at one folder for this test session (unless
    JAX_COMPILATION_CACHE_DIR is in the environment: a folder of one's own, or empty for no
    cache); the folder it made, to remove at the end, or None.

    Much of a tiny trainer run is compiling (on the 2-core CI box a CartPole run takes ~10 s,
    ~6 s with its programs in the cache; a Breakout run ~12 s, ~6 s), and the tests start
    the same programs again and again: the uninterrupted run, the killed one and its
    resumption compile one program three times. Set in the environment, the cache reaches
    every trainer, harness and doc command the tests start, and the xdist workers, which
    inherit the controller's environment. An entry is keyed by the program, the XLA flags
    (an ISA cap or a device count is another entry), the devices and the JAX version, and
    holds the executable a compile would give: the same bits, so no determinism or resume
    test compares against a program that differs. A fresh folder per session: nothing
    carries over between CI runs. A cache read that fails (another process still writing
    that entry) is a warning and a compile, never a wrong program. Every program is kept,
    however quick to compile (JAX's default keeps those over 1 s; CartPole's are under)."""
    if "JAX_COMPILATION_CACHE_DIR" in os.environ:
        return None
    folder = tempfile.mkdtemp(prefix="cleanba-test-jax-cache-")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = folder
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    return folder


COMPILATION_CACHE = share_compiled_programs()

apply_cpu_conv_flag()


def give_back_ignored_stop_signals() -> list[str]:
    """Make SIGINT and SIGQUIT default again in the test process if it was started with
    them ignored; the names of those it changed.

    A non-interactive shell starts a background job (`scripts/test.sh &`, a CI runner's
    step) with SIGINT and SIGQUIT ignored, and an ignored signal stays ignored across fork
    and exec. Every child a test starts then ignored the Ctrl-C the test sends it: the
    replay under `harness verify` ran on to exit 0 instead of 130 (in CI). A handled
    signal, unlike an ignored one, is reset to its default in a child at exec."""
    changed = []
    for signum, handler in ((signal.SIGINT, signal.default_int_handler),
                            (signal.SIGQUIT, signal.SIG_DFL)):
        if signal.getsignal(signum) == signal.SIG_IGN:
            signal.signal(signum, handler)
            changed.append(signal.Signals(signum).name)
    return changed


give_back_ignored_stop_signals()

# The files of the `slurm`-marked tests (a slurm test elsewhere is refused at collection:
# under xdist it would run beside the others on another worker).
SLURM_FILES = ("tests/test_harness_slurm_cluster.py", "tests/test_harness_slurm_resume.py",
               "tests/test_slurm_local.py")


# The files whose tests share a module-scoped fixture that trains, sweeps or certifies
# (~5-40 s on CI): one unit of work each, so that one worker makes the fixture once. Dealt
# one test at a time, each worker that got one of their tests made it (both, nearly
# always), and a worker made it again when another file's test came between two of them
# (pytest tears a module's fixtures down then). Fixtures of a few seconds or less are left
# out: their tests spread better over the workers than they would run together.
SHARED_SETUP_FILES = ("tests/test_certify_replay.py", "tests/test_certify_segments.py",
                      "tests/test_cleanba_checkpoint.py",
                      "tests/test_cleanba_checkpoint_processes.py",
                      "tests/test_cleanba_networks.py", "tests/test_cleanba_seeds.py",
                      "tests/test_harness_report.py", "tests/test_harness_report_verdicts.py")


def pytest_collection_modifyitems(config, items):
    stray = [item.nodeid for item in items if item.get_closest_marker("slurm")
             and item.nodeid.split("::")[0] not in SLURM_FILES]
    if stray:
        raise pytest.UsageError(f"slurm-marked tests outside tests/conftest.py's SLURM_FILES "
                                f"(add their file there): {', '.join(stray[:3])}")
    if os.environ.get("PYTEST_XDIST_WORKER"):  # (workers collect; the controller deals)
        items.sort(key=lambda item: not item.get_closest_marker("slow"))


def pytest_unconfigure(config):
    if COMPILATION_CACHE is not None:  # the process that made it: the controller, or -n 0
        shutil.rmtree(COMPILATION_CACHE, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, absent from a core-only venv
def pytest_xdist_make_scheduler(config, log):
    """One unit of work per test, except the slurm tests (one unit) and each file of
    SHARED_SETUP_FILES (one unit each; xdist's own --dist loadgroup would do it, but pytest
    9.2 ignores the nodeid suffix it groups by). xdist deals the units of several tests
    first, those of the most tests first, then the single tests in collection order (the
    slow ones first)."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedSetupTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::")[0]
            if path in SLURM_FILES:
                return "slurm"
            return path if path in SHARED_SETUP_FILES else nodeid

    return SharedSetupTogether(config, log)
