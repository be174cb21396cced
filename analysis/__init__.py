"""Analysis: run records and published tables -> normalised scores, aggregate metrics with
stratified bootstrap CIs, verdicts (equivalence, regression, staleness) and figures.

See docs/analysis.md. Entry points: `python -m analysis --help`,
`analysis.report.build_report_assets`, `analysis.verdicts.regression`.
"""

from analysis.errors import AnalysisError

__all__ = ["AnalysisError"]
