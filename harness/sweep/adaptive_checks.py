"""The checks of a sweep file's [adaptive] table: they make its value
(harness.sweep.model.AdaptiveConfig), or the default design of `--until-decided`.

An adaptive sweep runs its seeds in batches (first_seeds per side, then batch_seeds more
at each look, up to max_seeds) and stops when every verdict is decided
(harness.adaptive.run). This module only checks the table; the statistics are
analysis.sequential's, imported only when a sweep has the table (SciPy takes seconds to
import).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.sweep.checker import Checker
from harness.sweep.keys import ADAPTIVE_KEYS
from harness.sweep.model import AdaptiveConfig
from runrecord.paths import project_path


def default_adaptive(doc: Mapping[str, Any]) -> AdaptiveConfig:
    """`harness run --until-decided` on a sweep without [adaptive]: the default design;
    equivalence, and the gate too when the sweep names a [regression] reference."""
    reference = (doc.get("regression") or {}).get("reference")
    if isinstance(reference, str) and project_path(reference).exists():
        return AdaptiveConfig(verdicts=("equivalence", "gate"), reference=reference)
    return AdaptiveConfig()


def check_adaptive(doc: Mapping[str, Any], checker: Checker) -> AdaptiveConfig | None:
    """The sweep's [adaptive] table checked (None without one); errors name the line."""
    if "adaptive" not in doc:
        return None
    where: tuple = ("adaptive",)
    table = doc["adaptive"]
    if not isinstance(table, dict):
        raise checker.error(where, "adaptive must be a table")
    checker.check_keys(table, ADAPTIVE_KEYS, where)
    cfg = AdaptiveConfig()
    ints = {k: checker.positive_int(table, k, where) for k in
            ("first_seeds", "batch_seeds", "max_seeds") if k in table}
    # Only the types here: the ranges are the design's own (SequentialDesign.validate).
    max_seeds = ints.get("max_seeds", max(cfg.max_seeds, ints.get("first_seeds", 0)))
    alpha = table.get("alpha", cfg.alpha)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        raise checker.error((*where, "alpha"), f"alpha must be a number, got {alpha!r}")
    spending = table.get("spending", cfg.spending)
    if not isinstance(spending, str):
        raise checker.error((*where, "spending"), f"spending must be a string, got {spending!r}")
    verdicts = tuple(checker.str_list(table, "verdicts", where)) if "verdicts" in table \
        else cfg.verdicts
    from analysis.sequential import VERDICTS

    for v in verdicts:
        if v not in VERDICTS:
            raise checker.error((*where, "verdicts"), f"unknown verdict {v!r}; valid: "
                                f"{', '.join(VERDICTS)}", v)
    if len(set(verdicts)) < len(verdicts):
        raise checker.error((*where, "verdicts"), f"verdicts {list(verdicts)} names one twice")
    cfg = AdaptiveConfig(first_seeds=ints.get("first_seeds", cfg.first_seeds),
                         batch_seeds=ints.get("batch_seeds", cfg.batch_seeds),
                         max_seeds=max_seeds, alpha=float(alpha), spending=spending,
                         verdicts=verdicts, reference=_gate_reference(doc, checker, verdicts))
    _check_design(cfg, table, checker)
    return cfg


def _gate_reference(doc: Mapping[str, Any], checker: Checker,
                    verdicts: Sequence[str]) -> str | None:
    """[adaptive] reference, else [regression] reference; it must exist for a gate."""
    table, regression = doc["adaptive"], doc.get("regression") or {}
    where = ("adaptive", "reference") if "reference" in table else ("regression", "reference")
    reference = table.get("reference", regression.get("reference"))
    if "gate" not in verdicts:
        if "reference" in table:
            raise checker.error(where, "reference is the gate's fixed reference; add "
                                "'gate' to verdicts or remove it")
        return None
    if reference is None:
        raise checker.error(("adaptive", "verdicts"), "the gate needs a fixed reference: "
                            "set [adaptive] reference = 'results/<sweep>' (a folder of run "
                            "records) or [regression] reference")
    if not isinstance(reference, str) or not project_path(reference).is_dir():
        raise checker.error(where, f"reference {reference!r}: no such folder (a folder of run "
                            "records, absolute or relative to the project root)")
    return reference


def _check_design(cfg: AdaptiveConfig, table: Mapping[str, Any], checker: Checker) -> None:
    """The analysis's own checks of the design (spending names, looks); its message at the
    line of the key it is about."""
    from analysis.errors import AnalysisError

    try:
        cfg.design().validate()
    except AnalysisError as e:  # at the line of the key the message names first
        named = sorted((str(e).find(k), k) for k in ADAPTIVE_KEYS if k in table and k in str(e))
        raise checker.error(("adaptive", named[0][1]) if named else ("adaptive",),
                            str(e)) from None
