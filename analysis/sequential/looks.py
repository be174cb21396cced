"""The interim analysis of a sweep: `sweep_looks` gives every verdict's Look at one look
index, from the sweep's COMPLETED runs (the harness owns batches, storage and resume).

A sweep stops when every Look of its latest look index is decided (decision !=
CONTINUE); the last planned look always decides (a verdict word or UNDECIDED). A subject
decided at an earlier look stays decided: pass the earlier Looks as `previous` and its
Look is repeated at the new index with the first decision (the error rates are those of
the first decision; later looks never overturn it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from analysis.errors import AnalysisError
from analysis.inputs.load import DEFAULT_LAST_N
from analysis.sequential.design import SequentialDesign
from analysis.sequential.equivalence_look import equivalence_looks
from analysis.sequential.gate_look import gate_looks
from analysis.sequential.look_record import Look
from analysis.sequential.rci import CONTINUE, UNDECIDED
from analysis.verdicts.gate import DEFAULT_GATE_METRIC
from analysis.verdicts.regression import ReferenceSpread
from runrecord import Run

__all__ = ["CONTINUE", "UNDECIDED", "VERDICTS", "Look", "sweep_looks"]

VERDICTS = ("equivalence", "gate")
"""The verdicts a sequential design decides (reproduce: not yet)."""


def sweep_looks(runs: Sequence[Run], design: SequentialDesign, look: int, *,
                verdicts: Sequence[str] = ("equivalence",),
                reference_runs: Sequence[Run] | None = None,
                delta: float | None = None, gate_delta: float | None = None,
                metric: str = "iqm", gate_metric: str = DEFAULT_GATE_METRIC,
                reference: str | None = None, layouts: Sequence[str] | None = None,
                group_by: str = "layout.name", last_n: int = DEFAULT_LAST_N,
                normalisers: Mapping[str, tuple[float, float]] | None = None,
                allow_protocol_mismatch: bool = False,
                spread: ReferenceSpread = ReferenceSpread(),
                previous: Sequence[Look] = (),
                regression_alpha: float | None = None) -> list[Look]:
    """All looks of one interim analysis of a sweep's COMPLETED runs at look index `look`
    (1-based; the caller guarantees every growing side has design.seeds_at_looks()[look-1]
    seeds, or the cap). Equivalence: one Look per pair of analysis.verdicts.pairing
    (margin `delta`, per-seed `metric`, reference group `reference`). Gate: one Look per
    (system, suite), new = `runs`, reference = `reference_runs` (fixed; margin
    `gate_delta`, else `delta`, else the suite's; `gate_metric`, `layouts`, `spread` as
    analysis.verdicts.gate.gate). `previous`: Looks of earlier indices; a subject decided
    there keeps its first decision. regression_alpha: the gate's REGRESSION alpha when
    the looks over training time spend part of it (analysis.sequential.curve_design:
    TIME_SHARE). AnalysisError (exit 2) for a bad design or input."""
    design.validate()
    if isinstance(look, bool) or not isinstance(look, int) or not 1 <= look <= design.looks:
        raise AnalysisError(f"look must be a whole number in 1..{design.looks} for "
                            f"{design.describe()}, got {look!r}")
    unknown = [v for v in verdicts if v not in VERDICTS]
    if unknown:
        raise AnalysisError(f"sequential verdicts {unknown}; valid: {', '.join(VERDICTS)}")
    out: list[Look] = []
    if "equivalence" in verdicts:
        out += equivalence_looks(runs, design, look, delta=delta, metric=metric,
                                 reference=reference, group_by=group_by, last_n=last_n,
                                 normalisers=normalisers,
                                 allow_protocol_mismatch=allow_protocol_mismatch)
    if "gate" in verdicts:
        if not reference_runs:
            raise AnalysisError("the sequential gate needs reference runs (the fixed "
                                "reference side); none given")
        out += gate_looks(runs, reference_runs, design, look,
                          delta=gate_delta if gate_delta is not None else delta,
                          metric=gate_metric, layouts=layouts, last_n=last_n,
                          normalisers=normalisers,
                          allow_protocol_mismatch=allow_protocol_mismatch, spread=spread,
                          regression_alpha=regression_alpha)
    return [_kept(x, previous) for x in out]


def _kept(new: Look, previous: Sequence[Look]) -> Look:
    """`new`, or the first earlier decision of the same verdict and subject, repeated."""
    earlier = sorted((p for p in previous if p.verdict == new.verdict
                      and p.subject == new.subject and p.look < new.look and p.decided
                      and p.decision != UNDECIDED), key=lambda p: p.look)
    if not earlier:
        return new
    first = earlier[0]
    return replace(first, look=new.look, seeds=new.seeds,
                   text=f"{first.text} (decided at look {first.look}; kept)")


