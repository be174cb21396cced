"""A sequential design: how many seeds each growing side has at each look, and the error
rate held over all looks (analysis.sequential.spending)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from analysis.errors import AnalysisError
from analysis.sequential.spending import SPENDING, normal_boundaries
from runrecord.words import counted

MAX_LOOKS = 20
"""More looks than this spend alpha too thinly to be useful (and are likely a typo)."""


@dataclass(frozen=True)
class SequentialDesign:
    """Seeds per growing side: `first_seeds` at look 1, then `batch_seeds` more at each
    look, up to `max_seeds` (the last look is at the cap). `alpha`: the error rate each
    verdict keeps over all looks: one-sided for equivalence's PASS (per side of the
    margin, as the fixed TOST's 90% CI) and the gate's bounds, two-sided for DIFFERENT
    (shared by the two metrics); 0.05 is the fixed verdicts' rate.
    `spending`: the alpha-spending function (analysis.sequential.spending.SPENDING)."""

    first_seeds: int = 3
    batch_seeds: int = 2
    max_seeds: int = 9
    alpha: float = 0.05
    spending: str = "obrien-fleming"

    def validate(self) -> None:
        """AnalysisError saying what is valid when the design is not."""
        for name in ("first_seeds", "batch_seeds", "max_seeds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise AnalysisError(f"sequential design: {name} must be a whole number, "
                                    f"got {value!r}")
        if self.first_seeds < 2:
            raise AnalysisError(f"sequential design: first_seeds must be >= 2 (one seed per "
                                f"side has no spread estimate), got {self.first_seeds}")
        if self.batch_seeds < 1:
            raise AnalysisError(f"sequential design: batch_seeds must be >= 1, got "
                                f"{self.batch_seeds}")
        if self.max_seeds < self.first_seeds:
            raise AnalysisError(f"sequential design: max_seeds ({self.max_seeds}) must be "
                                f">= first_seeds ({self.first_seeds})")
        looks = 1 + -(-(self.max_seeds - self.first_seeds) // self.batch_seeds)
        if looks > MAX_LOOKS:
            raise AnalysisError(f"sequential design: {looks} looks (first_seeds "
                                f"{self.first_seeds}, batch_seeds {self.batch_seeds}, max_seeds "
                                f"{self.max_seeds}); at most {MAX_LOOKS}: use larger batches")
        if not 0 < self.alpha < 0.5:
            raise AnalysisError(f"sequential design: alpha must be in (0, 0.5), got "
                                f"{self.alpha}")
        if self.spending not in SPENDING:
            raise AnalysisError(f"sequential design: unknown spending {self.spending!r}; "
                                f"valid: {', '.join(SPENDING)}")

    def seeds_at_looks(self) -> list[int]:
        """Seeds per growing side at each look, e.g. [3, 5, 7, 9]; the last is the cap."""
        self.validate()
        out = list(range(self.first_seeds, self.max_seeds, self.batch_seeds))
        return out + [self.max_seeds]

    @property
    def looks(self) -> int:
        return len(self.seeds_at_looks())

    def information_fractions(self, fixed_seeds: int | None = None) -> np.ndarray:
        """Information at each look over the information at the cap. The information of
        a difference of means with n and m seeds is 1 / (1/n + 1/m) (in units of the
        per-seed variance, equal spreads): both sides grow (equivalence, fixed_seeds
        None) or the other side stays at `fixed_seeds` (the gate's reference)."""
        n = np.array(self.seeds_at_looks(), dtype=np.float64)
        m = n if fixed_seeds is None else np.full_like(n, float(fixed_seeds))
        info = 1.0 / (1.0 / n + 1.0 / m)
        return info / info[-1]

    def boundaries(self, alpha: float | None = None, fixed_seeds: int | None = None
                   ) -> np.ndarray:
        """Normal-scale one-sided boundaries at every look spending `alpha` (default: the
        design's) over `information_fractions(fixed_seeds)`."""
        self.validate()
        fractions = tuple(float(t) for t in self.information_fractions(fixed_seeds))
        return np.array(_boundaries(fractions, self.alpha if alpha is None else alpha,
                                    self.spending))

    def boundary(self, look: int, alpha: float | None = None, fixed_seeds: int | None = None,
                 seeds: tuple[int, int] | None = None) -> float:
        """The normal-scale boundary at look `look` (1-based). `seeds`: the independent
        seeds each side actually has there (a failed run leaves fewer than planned); the
        spending function is then evaluated at the information they carry (Lan & DeMets:
        the earlier looks keep their planned fractions), except at the last look, which
        spends whatever is left. Without `seeds`, the planned schedule's boundary."""
        planned = self.information_fractions(fixed_seeds)
        k = look - 1
        if seeds is None or look >= len(planned):
            return float(self.boundaries(alpha, fixed_seeds)[min(k, len(planned) - 1)])
        cap = self.seeds_at_looks()[-1]
        full = 1.0 / (1.0 / cap + 1.0 / (cap if fixed_seeds is None else fixed_seeds))
        now = (1.0 / (1.0 / seeds[0] + 1.0 / seeds[1])) / full
        floor = planned[k - 1] if k > 0 else 0.0
        now = float(np.clip(now, floor + 1e-6, 1.0 - 1e-6))
        fractions = (*(float(t) for t in planned[:k]), now)
        return _boundaries(fractions, self.alpha if alpha is None else alpha,
                           self.spending)[-1]

    def describe(self) -> str:
        seeds = self.seeds_at_looks()
        return (f"{counted(len(seeds), 'look')} at {', '.join(map(str, seeds))} seeds per side, "
                f"{self.spending} alpha spending, alpha {self.alpha:g}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@lru_cache(maxsize=256)
def _boundaries(fractions: tuple[float, ...], alpha: float, spending: str
                ) -> tuple[float, ...]:
    """normal_boundaries, computed once per schedule (a sweep asks at every look)."""
    return tuple(float(c) for c in normal_boundaries(fractions, alpha, spending))
