"""The one error the analysis raises for bad input: the CLI prints it and exits 2."""

from __future__ import annotations


class AnalysisError(ValueError):
    """Input the analysis cannot use (missing normaliser, empty data, bad table...).

    The message says what was wrong and what would be valid.
    """


class TooFewSeeds(AnalysisError):
    """A verdict these seeds cannot compute (a side without a spread of its own): more
    seeds decide it. The analysis CLI refuses it like any bad input (exit 2: the user
    chose the seeds); a harness that ran every run says UNDECIDED (exit 4) with this
    reason instead, since no run failed and no verdict did."""
