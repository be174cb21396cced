"""Process exit codes: the one contract every entry point of the project keeps.

A trainer, a baseline adapter, the harness and the analysis CLI all exit with these, and
the harness reads a child's code back with the same names.
"""

from runrecord import schema

EXIT_OK = 0  # completed; a verdict that passed (PASS, REPRODUCED)
EXIT_FAILED = 1  # the run failed; a verdict that failed (REGRESSION, DIFFERENT, NOT
# REPRODUCED), or an undecided one under --strict
EXIT_BAD_INPUT = 2  # bad arguments or input: nothing was written
EXIT_UNAVAILABLE = 3  # a baseline's checkout or build is not usable here
EXIT_UNDECIDED = 4  # a verdict the evidence does not decide (UNDECIDED, NOT SHOWN,
# UNDECIDED AT CAP): neither a pass nor evidence of a failure; more seeds decide it
EXIT_INTERRUPTED = 130  # SIGINT/SIGTERM: the record says interrupted, naming the signal


def run_exit(status: str) -> int:
    """The exit code of a trainer or adapter whose record ended with `status`: 0
    completed, EXIT_INTERRUPTED interrupted, EXIT_FAILED otherwise."""
    codes = {schema.COMPLETED: EXIT_OK, schema.INTERRUPTED: EXIT_INTERRUPTED}
    return codes.get(status, EXIT_FAILED)


def verdict_exit(passed: bool, failed: bool, strict: bool = False) -> int:
    """The exit code of a three-outcome verdict: 0 pass, 1 fail, EXIT_UNDECIDED otherwise
    (EXIT_FAILED under `strict`: a CI job that must not let an undecided gate through)."""
    if failed:
        return EXIT_FAILED
    if passed:
        return EXIT_OK
    return EXIT_FAILED if strict else EXIT_UNDECIDED


def strict_exit(code: int, strict: bool) -> int:
    """`code`, with an undecided verdict turned into a failure under --strict."""
    return EXIT_FAILED if strict and code == EXIT_UNDECIDED else code


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


# The one exit-code table: `python -m analysis --help`, `python -m harness --help`, every
# deciding command's --help, README.md and the docs show it as these functions render it
# (tests/test_exit_codes.py compares them).
EXIT_CODES: tuple[tuple[int, str, str], ...] = (
    (EXIT_OK, "PASS or done",
     "a verdict passed (PASS, REPRODUCED, IDENTICAL, VERIFIED), or the command did what it "
     "was asked"),
    (EXIT_FAILED, "FAIL",
     "a verdict failed (DIFFERENT, REGRESSION, NOT REPRODUCED, NOT IDENTICAL, MISMATCH, a "
     "staleness violation), or a run failed; also an UNDECIDED verdict under --strict"),
    (EXIT_BAD_INPUT, "usage or data error",
     "bad arguments or input, or data a verdict refuses (different games or protocols): "
     "the message on stderr, nothing written"),
    (EXIT_UNAVAILABLE, "baseline unavailable",
     "a baseline's checkout or build is not usable here (recorded as skipped)"),
    (EXIT_UNDECIDED, "UNDECIDED",
     "the evidence decides neither way (INCONCLUSIVE, UNDECIDED, NOT SHOWN, UNDECIDED AT "
     "CAP; a staleness audit that checked no run; a replay NOT CHECKABLE on this machine): "
     "more seeds, or a machine that can check, decide it; --strict makes it 1"),
    (EXIT_INTERRUPTED, "interrupted",
     "SIGINT/SIGTERM: the record says interrupted, naming the signal"),
)
"""(code, outcome, when) for every exit code the project's commands use."""


def exit_code_text(width: int = 79) -> str:
    """The table as plain text, for --help screens (lines of at most `width`)."""
    import textwrap

    width_outcome = max(len(outcome) for _, outcome, _ in EXIT_CODES)
    lines = ["Exit codes:"]
    for code, outcome, when in EXIT_CODES:
        head = f"  {code:>3}  {outcome:<{width_outcome}}  "
        lines += textwrap.wrap(when, width, initial_indent=head,
                               subsequent_indent=" " * len(head))
    return "\n".join(lines)


def exit_code_markdown() -> str:
    """The table as markdown, for README.md and the docs."""
    return "\n".join(["| exit | outcome | when |", "|---|---|---|",
                      *(f"| {code} | {outcome} | {when} |" for code, outcome, when in EXIT_CODES)])
