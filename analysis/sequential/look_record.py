"""One interim decision of one verdict on one subject: what the harness stores per look
and shows in the report (JSON round trip)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from analysis.errors import AnalysisError
from analysis.sequential.rci import CONTINUE


@dataclass(frozen=True)
class Look:
    verdict: str  # "equivalence" | "gate"
    subject: str  # stable key of what is judged, e.g. "CartPole-v1: a0-l1-d1 vs a0-l0-d1"
    look: int  # 1-based index of the look
    seeds: dict[str, int]  # independent seeds per side at this look
    statistic: float  # the test statistic (`text` says which)
    boundary: float  # what it is compared with at this look
    decision: str  # CONTINUE | a verdict word (PASS, DIFFERENT, REGRESSION) | UNDECIDED
    text: str  # one human line for console and report
    needs: str = ""  # at the cap: the planner's estimate of what a decision would need
    fixed_design_seeds: int | None = None  # seeds per growing side of the fixed design
    # of equal power (analysis.verdicts.seedplan, spread seen at this look); None: unknown
    detail: str = ""  # the design's internals behind `text` (t, df, boundaries): --verbose

    @property
    def decided(self) -> bool:
        return self.decision != CONTINUE

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict: an undefined statistic (nan) is null."""
        d = asdict(self)
        for key in ("statistic", "boundary"):
            if not math.isfinite(d[key]):
                d[key] = None
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> Look:
        """The Look `to_json` wrote; AnalysisError naming what is missing or unknown."""
        names = [f.name for f in fields(Look)]
        required = names[:8]
        missing = [k for k in required if k not in d]
        unknown = sorted(set(d) - set(names))
        if missing or unknown:
            raise AnalysisError(f"not a stored look: missing {missing}, unknown {unknown}")
        fixed = d.get("fixed_design_seeds")
        return Look(str(d["verdict"]), str(d["subject"]), int(d["look"]),
                    {str(k): int(v) for k, v in dict(d["seeds"]).items()},
                    _number(d["statistic"]), _number(d["boundary"]), str(d["decision"]),
                    str(d["text"]), str(d.get("needs", "")),
                    None if fixed is None else int(fixed), str(d.get("detail", "")))


def _number(value: Any) -> float:
    return math.nan if value is None else float(value)
