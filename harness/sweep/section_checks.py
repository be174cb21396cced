"""The values of a sweep file's [report] and [regression] tables, checked when the file is
read: a margin of -1 or a bootstrap of 0 replicates is refused at its line before any run
starts, not found by the report after hours of training.

Each check gives the key, its valid values and what it got (harness.sweep.checker's
error: the file and the line).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from harness.sweep.checker import Checker


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def positive_number(checker: Checker, table: Mapping[str, Any], key: str,
                    where: tuple, example: str) -> None:
    """A margin: a finite number > 0."""
    if key not in table:
        return
    value = table[key]
    if not _is_number(value) or not math.isfinite(value) or value <= 0:
        raise checker.error((*where, key), f"{key} must be a number > 0 ({example}), "
                            f"got {value!r}")


def whole_number(checker: Checker, table: Mapping[str, Any], key: str, where: tuple,
                 least: int, what: str) -> None:
    if key not in table:
        return
    value = table[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise checker.error((*where, key), f"{key} must be an integer >= {least} ({what}), "
                            f"got {value!r}")


def text(checker: Checker, table: Mapping[str, Any], key: str, where: tuple,
         what: str) -> None:
    if key in table and (not isinstance(table[key], str) or not table[key]):
        raise checker.error((*where, key), f"{key} must be a non-empty string ({what}), "
                            f"got {table[key]!r}")


def flag(checker: Checker, table: Mapping[str, Any], key: str, where: tuple) -> None:
    if key in table and not isinstance(table[key], bool):
        raise checker.error((*where, key), f"{key} must be true or false, got "
                            f"{table[key]!r}")


def check_report(checker: Checker, report: Mapping[str, Any]) -> None:
    """[report]: group_by, delta, reps, seed, reference (published and hardware have their
    own checks)."""
    where = ("report",)
    text(checker, report, "group_by", where, "a manifest key such as 'layout.name'")
    positive_number(checker, report, "delta", where,
                    "the equivalence margin in normalised units, e.g. 0.2")
    whole_number(checker, report, "reps", where, 1, "bootstrap replicates, e.g. 2000")
    whole_number(checker, report, "seed", where, 0, "the bootstrap's seed")
    text(checker, report, "reference", where, "a group name such as 'a0-l0-d1'")


def check_regression(checker: Checker, regression: Mapping[str, Any]) -> None:
    """[regression]: reference, delta, systems, games, layouts, assume_equal_spread (metric
    and the looks over training time have their own checks)."""
    where = ("regression",)
    text(checker, regression, "reference", where, "a folder of reference run records")
    positive_number(checker, regression, "delta", where,
                    "the allowed drop in normalised units, e.g. 0.3")
    for key in ("systems", "games", "layouts"):
        if key in regression:
            checker.str_list(regression, key, where)
    flag(checker, regression, "assume_equal_spread", where)
