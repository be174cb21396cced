"""Sequential (adaptive-seed) verdicts: a sweep adds seeds in batches and decides after
each batch on repeated confidence intervals from an alpha-spending function, so the error
rates hold over all interim looks (docs/analysis.md, "Sequential designs").

Layer: above verdicts (it may import analysis.stats, scoring, verdicts); only the
calibration suite, the CLI and the harness import it.
"""

from analysis.sequential.design import CONTINUE, UNDECIDED, Look, SequentialDesign
from analysis.sequential.looks import VERDICTS, sweep_looks
from analysis.sequential.spending import SPENDING, boundaries, spent_alpha

__all__ = ["CONTINUE", "SPENDING", "UNDECIDED", "VERDICTS", "Look", "SequentialDesign",
           "boundaries", "spent_alpha", "sweep_looks"]
