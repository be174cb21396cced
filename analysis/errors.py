"""The one error the analysis raises for bad input: the CLI prints it and exits 2."""

from __future__ import annotations


class AnalysisError(ValueError):
    """Input the analysis cannot use (missing normaliser, empty data, bad table...).

    The message says what was wrong and what would be valid.
    """

