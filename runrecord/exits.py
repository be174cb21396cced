"""Process exit codes: the one contract every entry point of the project keeps.

A trainer, a baseline adapter, the harness and the analysis CLI all exit with these, and
the harness reads a child's code back with the same names.
"""

EXIT_OK = 0  # completed; a verdict that passed (PASS, REPRODUCED)
EXIT_FAILED = 1  # the run failed; a verdict that failed (REGRESSION, DIFFERENT, NOT
# REPRODUCED), or an undecided one under --strict
EXIT_BAD_INPUT = 2  # bad arguments or input: nothing was written
EXIT_UNAVAILABLE = 3  # a baseline's checkout or build is not usable here
EXIT_UNDECIDED = 4  # a verdict the evidence does not decide (UNDECIDED, NOT SHOWN,
# UNDECIDED AT CAP): neither a pass nor evidence of a failure; more seeds decide it
EXIT_INTERRUPTED = 130  # SIGINT/SIGTERM: the record says interrupted, naming the signal


def verdict_exit(passed: bool, failed: bool, strict: bool = False) -> int:
    """The exit code of a three-outcome verdict: 0 pass, 1 fail, EXIT_UNDECIDED otherwise
    (EXIT_FAILED under `strict`: a CI job that must not let an undecided gate through)."""
    if failed:
        return EXIT_FAILED
    if passed:
        return EXIT_OK
    return EXIT_FAILED if strict else EXIT_UNDECIDED


_PRECEDENCE = (EXIT_BAD_INPUT, EXIT_FAILED, EXIT_UNDECIDED)
"""Several verdicts in one command: an error outranks a failure, a failure an undecided
verdict, and an undecided verdict a pass."""


def worst_exit(*codes: int) -> int:
    """The one exit code of several verdicts' codes (_PRECEDENCE; other codes as the
    largest)."""
    for code in _PRECEDENCE:
        if code in codes:
            return code
    return max(codes, default=EXIT_OK)
