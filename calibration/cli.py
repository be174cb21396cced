"""`python -m calibration`: its flags, and the run that prints the calibration table."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from analysis.errors import AnalysisError
from runrecord import RecordError
from runrecord.cli_dispatch import flags_refused
from runrecord.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK

PROG = "python -m calibration"


@dataclass(kw_only=True)
class Calibrate:
    """The calibration suite: every verdict through a seeded Monte Carlo grid; prints per
    verdict and scenario the false-pass rate at the margin, the false-alarm rate at no
    difference and the power at half the margin, each with its Monte Carlo SE and bound
    (nominal + 3 MC SE). Exit 0 when every cell keeps its bound
    (or the verdict refuses that case), 1 otherwise."""

    reduced: bool = False
    """The reduced grid (CI: fewer scenarios, 4,000 draws per cell, seconds)."""
    seed: int = 0
    """Seed of every draw (one seed gives the same table every time on one machine)."""
    markdown_out: Path | None = None
    """Also write the table as markdown here."""
    paper_data: Path | None = None
    """The published tables' folder for the real-column rows (default: the Cleanba paper's
    tables the project ships, analysis/data/published/cleanba)."""
    curves: tuple[Path, ...] = ()
    """Folders of run records (ours, or imported) whose learning curves the looks over
    training time are calibrated on (default: results/reference/smoke-cartpole and
    results/curve-shapes)."""
    figures: Path | None = None
    """Also write the figures of the looks over training time here (PNG)."""

    def run(self) -> int:
        # Imported here: the suite pulls in scipy.stats (~1.4 s), which --help and a
        # refused flag need not pay.
        from calibration.grid import calibrate

        if self.paper_data is not None and not self.paper_data.is_dir():
            print(f"error: --paper-data {self.paper_data}: no such folder (the published "
                  "tables, e.g. analysis/data/published/cleanba)", file=sys.stderr)
            return EXIT_BAD_INPUT
        missing = [str(p) for p in self.curves if not p.is_dir()]
        if missing:
            print(f"error: --curves {', '.join(missing)}: no such folder (run records)",
                  file=sys.stderr)
            return EXIT_BAD_INPUT
        res = calibrate(reduced=self.reduced, seed=self.seed, paper_data=self.paper_data,
                        curve_folders=list(self.curves) or None)
        table = res.markdown()
        print(table)
        for line in res.real_column_summary():
            print(line)
        curve_lines: list[str] = []
        if res.curve is not None:
            from calibration.curve_figures import markdown_sections, write_figures

            curve_lines = markdown_sections(res.curve)
            print("\n".join(curve_lines))
            if self.figures is not None:
                for path in write_figures(res.curve, self.figures):
                    print(f"figure: {path}")
        print(res.summary())
        for c in res.failures:
            print(f"OUT: {c.verdict}, {c.scenario}: {c.rate} {c.value:.3f} > "
                  f"{c.bound:.3f}", file=sys.stderr)
        if self.markdown_out:
            self.markdown_out.write_text(table + "\n\n" + "\n".join(
                [*res.real_column_summary(), *curve_lines, res.summary()]) + "\n")
        return EXIT_OK if not res.failures else EXIT_FAILED


def main(argv: list[str] | None = None) -> int:
    from runrecord.cli_help import parse_config

    cmd = parse_config(Calibrate, args=argv, prog=PROG,
                   description=Calibrate.__doc__, decides=True)
    refused = flags_refused(cmd)  # before the grid runs
    if refused is not None:
        return refused
    try:
        return cmd.run()
    except (AnalysisError, RecordError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
