"""Tables for a paper: the rows of `equivalence` and `regression` as typed `TableData`
(analysis.scoring.tables writes them as Markdown, LaTeX, CSV or JSON and builds
`aggregate`'s; `reproduce`'s rows are in analysis.reproduce.section, a layer up). The
row builders read the commands' results, never their printed lines, so every format
carries the numbers the verdict used.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from analysis.scoring.tables import ONE_SEED, Column, Estimate, TableData
from analysis.verdicts.regression import RegressionResult

EQUIVALENCE_COLUMNS = (
    Column("group", "group"), Column("reference", "reference"), Column("metric", "metric"),
    Column("mean", "mean", "number"), Column("reference_mean", "reference mean", "number"),
    Column("diff", "difference [90% CI]", "estimate", signed=True),
    Column("delta", "margin", "number"), Column("seeds", "seeds", "count"),
    Column("reference_seeds", "reference seeds", "count"), Column("design", "test"),
    Column("verdict", "verdict"))
BITWISE_COLUMNS = (Column("group", "group"), Column("reference", "reference"),
                    Column("verdict", "bitwise"), Column("determinism", "determinism"))


def equivalence_rows(results: Sequence[Mapping[str, Any]]) -> TableData:
    """Two rows per verdict (final score and AUC: the TOST tests both), from the verdicts'
    JSON (EquivalenceResult.as_dict, what --json-out writes); a suite column when the
    verdicts name suites. --bitwise-only results: one row per pair."""
    if results and "final" not in results[0]:
        return TableData.keyed(BITWISE_COLUMNS, [
            {"group": r["group_a"], "reference": r["reference"],
             "verdict": "IDENTICAL" if r["identical"] else "NOT IDENTICAL",
             "determinism": r.get("determinism", "")} for r in results])
    rows = []
    for r in results:
        metric = "IQM" if r["metric"] == "iqm" else r["metric"]
        fewest = min(len(r["seeds_a"]), len(r["seeds_b"]))
        for name in ("final", "auc"):
            w = r[name]
            # The difference with its 90% CI; none with one seed on a side (its JSON holds
            # NaN or null there: no spread to estimate).
            lo, hi = (math.nan if x is None else float(x) for x in w["ci90"])
            diff = (Estimate(w["diff"], missing=ONE_SEED if fewest < 2 else "n/a")
                    if fewest < 2 or math.isnan(lo) or math.isnan(hi)
                    else Estimate(w["diff"], lo, hi))
            rows.append({"suite": r.get("suite"), "group": r["group_a"],
                         "reference": r["reference"],
                         "metric": f"{metric} {'final' if name == 'final' else 'AUC'}",
                         "mean": w["mean_a"], "reference_mean": w["mean_b"],
                         "diff": diff,
                         "delta": r["delta"], "seeds": len(r["seeds_a"]),
                         "reference_seeds": len(r["seeds_b"]),
                         "design": "paired" if w.get("paired") else "Welch",
                         "verdict": r["label"]})
    suites = any(row["suite"] for row in rows)
    columns = (Column("suite", "suite"),) * suites + EQUIVALENCE_COLUMNS
    return TableData.keyed(columns, rows)


def regression_rows(res: RegressionResult) -> TableData:
    """One row: the gate's means, new - reference with its one-sided bounds (the lower
    one is what PASS reads, at res.confidence), the margin, the seeds and the verdict."""
    return TableData.keyed(regression_columns(res.confidence), [{
        "subject": res.subject, "metric": res.metric, "new_mean": res.new_mean,
        "reference_mean": res.reference_mean,
        "diff": Estimate(res.diff, res.lower_bound, res.upper_bound), "delta": res.delta,
        # a published number taken as exact has no seeds: n/a, not 0
        "new_seeds": res.n_new, "reference_seeds": res.n_reference or None,
        "verdict": res.verdict}])


def regression_columns(confidence: float) -> tuple[Column, ...]:
    """The gate's columns; the bounds are one-sided at `confidence` (the gate's level)."""
    level = f"{confidence:.0%}"
    return (Column("subject", "subject"), Column("metric", "metric"),
            Column("new_mean", "new", "number", 4),
            Column("reference_mean", "reference", "number", 4),
            Column("diff", f"new - reference [{level} bounds]", "estimate", 4, signed=True),
            Column("delta", "margin", "number", 4),
            Column("new_seeds", "new seeds", "count"),
            Column("reference_seeds", "reference seeds", "count"),
            Column("verdict", "verdict"))
