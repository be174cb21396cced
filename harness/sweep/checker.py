"""The checker of one sweep file: its errors name the file and the line (harness.sweep.tomlpos),
its typed getters, and the checks of the sections every sweep may have (entry points,
resources, hyperparameters, [report] and [regression], the published table, the gate
metric).

harness.sweep.checks calls it; it imports none of the check modules.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.sweep.keys import ENTRY_POINT_KEYS, PUBLISHED_KEYS, RESOURCE_KEYS
from harness.sweep.model import Resources, SweepError
from harness.sweep.systems import BUILTIN_SYSTEMS, RESERVED_FLAGS, System
from harness.sweep.tomlpos import KeyLines
from runrecord import schema
from runrecord.paths import PROJECT_ROOT


def toml_message(path: Path, msg: str) -> str:
    """A tomllib syntax error as the sweep error users see: file, line, what to do."""
    m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
    where = f"line {m[1]}" if m else "end of file"
    what = re.sub(r"\s*\(at .*?\)$", "", msg)
    if what.startswith("Cannot overwrite a value") or "twice" in what:
        what = (f"duplicate key or table ({what}); TOML allows each key once per table "
                "-- remove or rename the repeated one")
    return f"{path}: {where}: TOML syntax error: {what}"


class Checker:
    """Checks values of one sweep file; its errors name the file and the line."""

    def __init__(self, path: Path, lines: KeyLines):
        self.path = path
        self.lines = lines

    def error(self, where: tuple, msg: str, value: object = None) -> SweepError:
        line = self.lines.value_line(where, value) if value is not None else self.lines.line(where)
        loc = f"line {line}" if line else "top level"
        return SweepError(f"{self.path}: {loc}: {msg}")

    def published(self, pub: object) -> None:
        """[report] published = {table, column}: the table must exist and have the column."""
        where = ("report", "published")
        if not isinstance(pub, dict) or not {"table", "column"} <= set(pub):
            raise self.error(where, "published must be a table {table = FILE, column = NAME}")
        self.check_keys(pub, PUBLISHED_KEYS, where)
        # Imported here: analysis.reproduce loads SciPy (seconds) and few sweeps need it.
        from analysis.errors import AnalysisError
        from analysis.inputs.published_data import resolve_published_table
        from analysis.reproduce import published_column

        try:  # a shipped table's name (cleanba:main_10CPU), or a path from the project root
            table = resolve_published_table(str(pub["table"]), base=PROJECT_ROOT)
        except AnalysisError as e:
            raise self.error((*where, "table"), str(e)) from None
        try:
            published_column(table, str(pub["column"]))
        except AnalysisError as e:
            raise self.error((*where, "column"), str(e)) from None

    def gate_metric(self, metric: object) -> None:
        """[regression] metric: one of the gate's metrics (the gate, not the sweep, owns them)."""
        # Imported here: the gate loads SciPy (seconds) and few sweeps name a metric.
        from analysis.verdicts.gate import GATE_METRICS

        if metric not in GATE_METRICS:
            raise self.error(("regression", "metric"), f"unknown gate metric {metric!r}; "
                             f"valid: {', '.join(GATE_METRICS)}")

    def curve_looks(self, regression: Mapping) -> None:
        """[regression] looks_at, look_spending, look_correlation: the analysis's own
        checks of the design (analysis.sequential.curves), at the key's line."""
        from analysis.errors import AnalysisError
        from analysis.sequential.curves import DEFAULT_SPENDING, CurveDesign

        looks = regression.get("looks_at")
        if not isinstance(looks, list):
            raise self.error(("regression", "looks_at"), f"looks_at must be a list of "
                             f"fractions of the frame budget, e.g. [0.1, 0.2, 0.4, 0.7, 1.0]; "
                             f"got {looks!r}")
        design = CurveDesign(tuple(looks),
                             spending=regression.get("look_spending", DEFAULT_SPENDING),
                             correlation=regression.get("look_correlation", "reference"))
        try:
            design.validate()
        except AnalysisError as e:
            key = next((k for k in ("look_spending", "look_correlation") if k in str(e)),
                       "looks_at")
            raise self.error(("regression", key), str(e)) from None

    def check_keys(self, table: Mapping, valid: Mapping[str, str], where: tuple) -> None:
        for key in table:
            if key not in valid:
                listing = "; ".join(f"{k} ({d})" for k, d in valid.items())
                raise self.error((*where, key), f"unknown key {key!r}; valid: {listing}")

    # -- typed getters -------------------------------------------------------------
    def str_list(self, table: Mapping, key: str, where: tuple) -> list[str]:
        val = table[key]
        if isinstance(val, str):
            val = [val]
        if not isinstance(val, list) or not all(isinstance(x, str) for x in val) or not val:
            raise self.error((*where, key), f"{key} must be a non-empty list of strings, "
                             f"got {val!r}")
        return list(val)

    def int_list(self, table: Mapping, key: str, where: tuple) -> list[int]:
        val = table[key]
        if isinstance(val, int) and not isinstance(val, bool):
            val = [val]
        if (not isinstance(val, list) or not val
                or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                           for x in val)):
            raise self.error((*where, key), f"{key} must be a non-empty list of integers >= 0, "
                             f"got {val!r}")
        return list(val)

    def whole_number(self, table: Mapping, key: str, where: tuple, least: int = 1,
                     what: str = "") -> int:
        val = table[key]
        if not isinstance(val, int) or isinstance(val, bool) or val < least:
            raise self.error((*where, key), f"{key} must be an integer >= {least}"
                             f"{f' ({what})' if what else ''}, got {val!r}")
        return val

    def positive_number(self, table: Mapping, key: str, where: tuple, example: str) -> None:
        """A margin: a finite number > 0."""
        val = table[key]
        if (not isinstance(val, (int, float)) or isinstance(val, bool) or not math.isfinite(val)
                or val <= 0):
            raise self.error((*where, key), f"{key} must be a number > 0 ({example}), "
                             f"got {val!r}")

    def text(self, table: Mapping, key: str, where: tuple, what: str) -> None:
        if not isinstance(table[key], str) or not table[key]:
            raise self.error((*where, key), f"{key} must be a non-empty string ({what}), "
                             f"got {table[key]!r}")

    # -- sections ------------------------------------------------------------------
    def report(self, report: Mapping[str, Any]) -> None:
        """[report]: published, hardware, group_by, delta, reps, seed, reference; a margin
        of -1 or 0 replicates is refused at its line before any run starts, not found by
        the report after hours of training."""
        where = ("report",)
        if "published" in report:
            self.published(report["published"])
        if not isinstance(report.get("hardware", ""), str):
            raise self.error((*where, "hardware"), "hardware must be a folder (a string, "
                             "relative to the project root), e.g. 'results/hardware'")
        if "group_by" in report:
            self.text(report, "group_by", where, "a manifest key such as 'layout.name'")
        if "delta" in report:
            self.positive_number(report, "delta", where,
                                 "the equivalence margin in normalised units, e.g. 0.2")
        if "reps" in report:
            self.whole_number(report, "reps", where, 1, "bootstrap replicates, e.g. 2000")
        if "seed" in report:
            self.whole_number(report, "seed", where, 0, "the bootstrap's seed")
        if "reference" in report:
            self.text(report, "reference", where, "a group name such as 'a0-l0-d1'")

    def regression(self, regression: Mapping[str, Any]) -> None:
        """[regression]: reference, delta, systems, games, layouts, assume_equal_spread,
        metric and the looks over training time."""
        where = ("regression",)
        if "reference" in regression:
            self.text(regression, "reference", where, "a folder of reference run records")
        if "delta" in regression:
            self.positive_number(regression, "delta", where,
                                 "the allowed drop in normalised units, e.g. 0.3")
        for key in ("systems", "games", "layouts"):
            if key in regression:
                self.str_list(regression, key, where)
        if not isinstance(regression.get("assume_equal_spread", False), bool):
            raise self.error((*where, "assume_equal_spread"), "assume_equal_spread must be "
                             f"true or false, got {regression['assume_equal_spread']!r}")
        if "metric" in regression:
            self.gate_metric(regression["metric"])
        if any(k in regression for k in ("looks_at", "look_spending", "look_correlation")):
            self.curve_looks(regression)

    def entry_points(self, doc: Mapping) -> dict[str, System]:
        systems = dict(BUILTIN_SYSTEMS)
        table = doc.get("entry_points", {})
        if not isinstance(table, dict):
            raise self.error(("entry_points",), "entry_points must be a table")
        for sys_name, spec in table.items():
            where = ("entry_points", sys_name)
            if not isinstance(spec, dict):
                raise self.error(where, f"entry_points.{sys_name} must be a table")
            self.check_keys(spec, ENTRY_POINT_KEYS, where)
            if "entry" not in spec or not isinstance(spec["entry"], str):
                raise self.error(where, f"entry_points.{sys_name} needs entry = 'pkg.module' "
                                 "or 'path/to/script.py'")
            entry = spec["entry"]
            if entry.endswith(".py"):
                p = Path(entry)
                if not p.is_absolute():
                    p = (self.path.parent / p).resolve()
                if not p.exists():
                    raise self.error((*where, "entry"), f"entry script {str(p)!r} does not exist")
                entry = str(p)
            archs = tuple(spec.get("architectures", System.__dataclass_fields__["architectures"].default))
            for a in archs:
                if a not in schema.ARCHITECTURES:
                    raise self.error((*where, "architectures"), f"unknown architecture {a!r}; "
                                     f"valid: {', '.join(schema.ARCHITECTURES)}", a)
            systems[sys_name] = System(
                sys_name, entry, takes_preset=bool(spec.get("takes_preset", True)),
                architectures=archs, baseline=bool(spec.get("baseline", False)),
            )
        return systems

    def resources(self, table: Any, where: tuple) -> Resources:
        if not isinstance(table, dict):
            raise self.error(where, "resources must be a table")
        self.check_keys(table, RESOURCE_KEYS, where)
        res = Resources()
        if "cpus_per_process" in table:
            res = replace(res, cpus_per_process=self.whole_number(table, "cpus_per_process", where))
        if "accelerator" in table:
            acc = table["accelerator"]
            if acc not in ("cpu", "gpu"):
                raise self.error((*where, "accelerator"),
                                 f"accelerator must be 'cpu' or 'gpu', got {acc!r}")
            res = replace(res, accelerator=acc)
        if "timeout_min" in table:
            t = table["timeout_min"]
            if not isinstance(t, (int, float)) or isinstance(t, bool) or t <= 0:
                raise self.error((*where, "timeout_min"), f"timeout_min must be > 0, got {t!r}")
            res = replace(res, timeout_min=float(t))
        return res

    def hyperparameters(self, table: Any, where: tuple, is_grid: bool) -> dict[str, Any]:
        kind = "grid" if is_grid else "overrides"
        if not isinstance(table, dict):
            raise self.error(where, f"{kind} must be a table of hyperparameter = value")
        out: dict[str, Any] = {}
        for key, val in table.items():
            flag = key.replace("_", "-")
            if flag in RESERVED_FLAGS:
                raise self.error((*where, key), f"{kind} may not set {key!r}: the harness sets "
                                 f"it from {RESERVED_FLAGS[flag]}")
            if not re.fullmatch(r"[a-z][a-z0-9-]*", flag):
                raise self.error((*where, key), f"hyperparameter name {key!r} must be "
                                 "lower-case words joined by - or _ (e.g. learning-rate)")
            if flag in out:
                raise self.error((*where, key), f"hyperparameter {flag!r} is given twice "
                                 "(as kebab-case and snake_case)")
            if is_grid:
                if not isinstance(val, list) or not val:
                    raise self.error((*where, key), f"grid.{key} must be a non-empty list of "
                                     f"values, got {val!r}")
                for x in val:
                    self.scalar_or_list(x, (*where, key))
            else:
                self.scalar_or_list(val, (*where, key))
            out[flag] = val
        return out

    def scalar_or_list(self, val: Any, where: tuple) -> None:
        ok = (str, int, float, bool)
        if isinstance(val, ok) or (isinstance(val, list) and all(isinstance(x, ok) for x in val)):
            return
        raise self.error(where, f"hyperparameter values must be numbers, strings, booleans or "
                         f"lists of them, got {val!r}")
