"""`python -m analysis.atari5.fit`: fit the Atari-5 and Atari-3 models and store them.

Reads the paper's dataset (shipped: analysis/data/published/atari5/dataset.csv), fits both subsets (analysis.atari5.fit_model), validates them (held-out coverage,
out-of-sample error, reproduction of the paper's own fit) and writes
analysis/data/atari5.json, which analysis.atari5.load_model reads. Re-running it on the
same dataset writes the same file (up to the last bits of floating point on another
machine); tests/test_analysis_atari5.py checks that the stored model equals a fresh fit.
`--check` compares without writing (exit 1 when they differ beyond 1e-9 relative).
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.atari5.model import DATASET, MODEL_FILE, SUBSETS, fit_report, read_dataset
from analysis.errors import AnalysisError
from runrecord.cli_help import parse_config
from runrecord.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from runrecord.writer import atomic_write_text


@dataclass(kw_only=True)
class FitArgs:
    """Fit the Atari-5/Atari-3 models on the published dataset and store them."""

    data: Path = DATASET
    """The paper's dataset.csv."""
    out: Path = MODEL_FILE
    """Where the fitted models go (read by analysis.atari5.load_model)."""
    check: bool = False
    """Only compare a fresh fit with the stored file; exit 1 when they differ."""


def same_fit(a: Any, b: Any, rtol: float = 1e-9) -> bool:
    """Two fit reports agree: same keys, strings and counts, and numbers equal to `rtol`
    (least squares on another CPU or BLAS may differ in the last bits)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_fit(a[k], b[k], rtol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_fit(x, y, rtol) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(
            a, b, rel_tol=rtol, abs_tol=1e-12)
    return bool(a == b)


def main(argv: list[str] | None = None) -> int:
    args = parse_config(FitArgs, args=argv, prog="python -m analysis.atari5.fit",
                    description=__doc__, decides=True)
    try:
        report = fit_report(read_dataset(args.data))
    except AnalysisError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    text = json.dumps(report, indent=1, sort_keys=True) + "\n"
    # the fit's figures, one block per subset
    lines = [f"dataset {report['dataset']['file']} (sha256 {report['dataset']['sha256'][:12]}"
             f"..., {report['dataset']['rows']} rows, {report['dataset']['algorithms']} "
             f"algorithms)"]
    for subset in SUBSETS:
        m = report["models"][subset]
        v = report["validation"][subset]
        p = report["paper_reproduction"][subset]
        coef = ", ".join(f"{g.split('-')[0]} {c:.4f}"
                         for g, c in zip(m["env_ids"], m["coefficients"], strict=True))
        cov = v["holdout_coverage"]
        oos = v["out_of_sample_partial_algorithms"]
        lines += [
            f"{m['label']}: {m['n_algorithms']} algorithms with all 57 games; "
            f"intercept {'yes' if m['uses_intercept'] else 'no'} (LOO MSE without "
            f"{m['loo_mse']['without_intercept']:.5f}, with {m['loo_mse']['with_intercept']:.5f})",
            f"  coefficients: {coef}" + (f", intercept {m['intercept']:.4f}"
                                         if m["uses_intercept"] else ""),
            f"  residual RMSE {m['residual_rmse']:.4f}, LOO RMSE {m['loo_rmse']:.4f} (log10); "
            f"LOO error: mean {m['loo_relative_error_percent']:.1f}%, median "
            f"{m['loo_median_relative_error_percent']:.1f}% (paper: "
            f"{p['paper_relative_error_percent']}%, 10-fold CV mean, 44 algorithms with "
            ">= 40 games)",
            f"  held-out coverage ({cov['n']} algorithms): "
            + ", ".join(f"{k} interval {c:.0%} ({cov['covered'][k]}/{cov['n']})"
                        for k, c in cov["coverage"].items()),
            f"  out of sample ({oos['n']} algorithms with {min(oos['games'], default=0)}-"
            f"{max(oos['games'], default=0)} games): mean error "
            f"{oos['mae_relative_error_percent']:.1f}%, 90% coverage "
            f"{oos['coverage']['0.9']:.0%}",
            f"  paper's own fit reproduced ({p['n_algorithms']} algorithms, >= "
            f"{p['min_games']} games): " + ", ".join(f"{c:.4f}" for c in p["coefficients"])
            + " vs paper " + ", ".join(f"{c:.4f}" for c in p["paper_coefficients"])
            + f"; LOO error {p['loo_relative_error_percent']:.1f}%",
        ]
    print("\n".join(lines))
    if args.check:
        same = args.out.exists() and same_fit(
            json.loads(args.out.read_text(encoding="utf-8")), json.loads(text))
        print(f"{args.out}: {'matches a fresh fit' if same else 'DIFFERS from a fresh fit'}")
        return EXIT_OK if same else EXIT_FAILED
    atomic_write_text(args.out, text)
    print(f"wrote {args.out}")
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
