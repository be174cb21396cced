"""The calibration suite (`python -m calibration`): every verdict through a seeded Monte
Carlo grid of the cases a reviewer would try, decided by the verdicts' own vectorised
cores; per verdict and scenario the false-pass rate at the margin, the false-alarm rate at
no difference and the power at half the margin, each with its Monte Carlo SE and the bound
it must keep (nominal + 3 MC SE) or the refusal (exit 2) the verdict gives for that case.

A tool beside analysis, not part of it: it imports analysis's verdicts to measure them,
and analysis never imports it (tests/test_architecture.py). The names below are resolved
on first use (PEP 562), so `python -m calibration --help` does not load SciPy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from calibration.grid import Calibration, calibrate

__all__ = ["Calibration", "calibrate"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from calibration import grid

        return getattr(grid, name)
    raise AttributeError(f"module 'calibration' has no attribute {name!r}")
