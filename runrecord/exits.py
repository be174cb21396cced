"""Process exit codes: the one contract every entry point of the project keeps.

A trainer, a baseline adapter, the harness and the analysis CLI all exit with these, and
the harness reads a child's code back with the same names.
"""

EXIT_OK = 0  # completed; a verdict that passed
EXIT_FAILED = 1  # the run failed; a verdict that failed (regression, DIFFERENT, not reproduced)
EXIT_BAD_INPUT = 2  # bad arguments or input: nothing was written
EXIT_UNAVAILABLE = 3  # a baseline's checkout or build is not usable here
EXIT_INTERRUPTED = 130  # SIGINT/SIGTERM: the record says interrupted, naming the signal
