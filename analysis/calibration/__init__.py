"""The calibration suite (`python -m analysis calibrate`): every verdict through a
seeded Monte Carlo grid of the cases a reviewer would try, decided by the verdicts' own
vectorised cores; per verdict and scenario the false-pass rate at the margin, the
false-alarm rate at no difference and the power at half the margin, each with its
Monte Carlo SE and the bound it must keep (nominal + 3 MC SE) or the refusal (exit 2)
the verdict gives for that case.
"""

from analysis.calibration.grid import Calibration, calibrate

__all__ = ["Calibration", "calibrate"]
