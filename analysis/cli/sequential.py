"""`python -m analysis plan-sequential`: parses and calls
analysis.sequential.planning."""

from __future__ import annotations

from dataclasses import dataclass

from analysis.cli.scores import SpreadArgs
from analysis.scales.normalize import parse_normalisers
from runrecord.exits import EXIT_OK


@dataclass(kw_only=True)
class PlanSequential(SpreadArgs):
    """A sequential (adaptive-seed) design at the per-seed spread of pilot runs (folders)
    or a given --sd: its boundaries per look, and for equivalence and the gate the
    simulated P(PASS) by the cap and expected seeds per side when nothing differs, the
    seeds the fixed design of the same power needs, and the false-pass rate at the margin
    over all looks (docs/analysis.md, "Sequential designs")."""

    first_seeds: int = 3
    """Independent seeds per side at the first look (>= 2)."""
    batch_seeds: int = 2
    """Seeds added per side at each later look."""
    max_seeds: int = 9
    """The cap: seeds per side at the last look."""
    alpha: float = 0.05
    """One-sided error rate held over all looks."""
    spending: str = "obrien-fleming"
    """Alpha-spending function: obrien-fleming or pocock."""
    reference_seeds: int | None = None
    """The gate's fixed reference seeds (default: the cap)."""

    def run(self) -> int:
        # Imported here: the sequential package loads scipy.stats (~0.5 s), which the
        # other subcommands would otherwise pay at start-up.
        from analysis.sequential.design import SequentialDesign
        from analysis.sequential.planning import design_plan_lines

        design = SequentialDesign(self.first_seeds, self.batch_seeds, self.max_seeds,
                                  self.alpha, self.spending)
        design.validate()
        spread, suite = self.spread_and_suite()
        print("\n".join(design_plan_lines(
            design, spread, suite, delta=self.delta, gate_delta=self.gate_delta,
            reference_seeds=self.reference_seeds,
            normalisers=parse_normalisers(self.normaliser), sims=self.sims,
            seed=self.seed)))
        return EXIT_OK
