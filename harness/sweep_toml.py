"""Sweep file validation: every key and value of the TOML, with the line of each error.

`validate_sweep(doc, checker, ...)` checks a parsed sweep file and returns ValidatedSweep:
plain values (harness.sweep_model) that harness.expand multiplies out without further
checks. Line numbers come from harness.tomlpos (tomllib gives none).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchenv import EnvError, frames_per_step, is_atari
from harness.adaptive_design import (
    AdaptiveConfig,
    adaptive_seeds,
    check_adaptive,
    default_adaptive,
)
from harness.games import check_game
from harness.sweep_keys import (
    ENTRY_POINT_KEYS,
    MATRIX_KEYS,
    PUBLISHED_KEYS,
    REGRESSION_KEYS,
    REPORT_KEYS,
    RESOURCE_KEYS,
    SLURM_KEYS,
    TOP_KEYS,
)
from harness.sweep_model import (
    MatrixGame,
    MatrixSystem,
    Resources,
    ScaleDown,
    SweepError,
    ValidatedMatrix,
    published_table_path,
)
from harness.systems import (
    BASELINE_LAYOUT,
    BUILTIN_SYSTEMS,
    PRESETS,
    RESERVED_FLAGS,
    System,
    known_hyperparameters,
)
from harness.tomlpos import KeyLines
from runrecord import Layout, LayoutError, parse_layout, schema

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


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
        from analysis.reproduce import published_column

        try:
            published_column(published_table_path(str(pub["table"])), str(pub["column"]))
        except AnalysisError as e:
            raise self.error((*where, "column"), str(e)) from None

    def gate_metric(self, metric: object) -> None:
        """[regression] metric: one of the gate's metrics (the gate, not the sweep, owns them)."""
        # Imported here: the gate loads SciPy (seconds) and few sweeps name a metric.
        from analysis.verdicts.gate import GATE_METRICS

        if metric not in GATE_METRICS:
            raise self.error(("regression", "metric"), f"unknown gate metric {metric!r}; "
                             f"valid: {', '.join(GATE_METRICS)}")

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

    def positive_int(self, table: Mapping, key: str, where: tuple) -> int:
        val = table[key]
        if not isinstance(val, int) or isinstance(val, bool) or val < 1:
            raise self.error((*where, key), f"{key} must be an integer >= 1, got {val!r}")
        return val

    # -- sections ------------------------------------------------------------------
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
            res = replace(res, cpus_per_process=self.positive_int(table, "cpus_per_process", where))
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


# --------------------------------------------------------------------------- the sweep


@dataclass(frozen=True)
class ValidatedSweep:
    """A checked sweep file: its name, its sections and its matrices (not yet expanded)."""

    name: str
    description: str
    matrices: tuple[ValidatedMatrix, ...]
    slurm: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)
    regression: dict[str, Any] = field(default_factory=dict)
    adaptive: AdaptiveConfig | None = None


@dataclass(frozen=True)
class MatrixTable:
    """One matrix as written: the top-level defaults merged with its own [[matrix]] table."""

    values: Mapping[str, Any]
    source: Mapping[str, tuple]
    """key -> path of the table its value comes from (for error lines)"""
    where: tuple
    """the matrix's own table: ('matrix', i), or () when the top level is the one matrix"""

    @property
    def label(self) -> Any:
        if "name" in self.values:
            return self.values.get("name", "")
        return f"matrix {self.where[1] + 1}" if self.where else ""

    def at(self, key: str) -> tuple:
        """Path of `key` in the file, where its value was written."""
        return (*self.source.get(key, ()), key)


@dataclass(frozen=True)
class SweepContext:
    """What each matrix of one sweep file is checked against."""

    checker: Checker
    sweep: str
    systems: Mapping[str, System]
    scale: ScaleDown
    check_games: bool


def validate_sweep(doc: Mapping[str, Any], checker: Checker, scale: ScaleDown,
                   name: str | None = None, check_games: bool = True,
                   until_decided: bool = False) -> ValidatedSweep:
    """Check a parsed sweep file; `name` replaces its name, `scale` its frames, games and
    seeds; check_games=False skips asking EnvPool whether each game exists;
    until_decided: adaptive with the default design when the file has no [adaptive]."""
    checker.check_keys(doc, TOP_KEYS, ())
    sweep_name = name or doc.get("name")
    if not isinstance(sweep_name, str) or not _NAME_RE.match(sweep_name):
        raise checker.error(("name",), f"name must be a folder-safe string (letters, digits, "
                            f"_ . -), got {sweep_name!r}")
    systems = checker.entry_points(doc)
    tables = matrix_tables(doc, checker)
    for section, valid in (("slurm", SLURM_KEYS), ("report", REPORT_KEYS),
                           ("regression", REGRESSION_KEYS)):
        if section in doc:
            if not isinstance(doc[section], dict):
                raise checker.error((section,), f"{section} must be a table")
            checker.check_keys(doc[section], valid, (section,))
    if isinstance(doc.get("report"), dict) and "published" in doc["report"]:
        checker.published(doc["report"]["published"])
    if isinstance(doc.get("regression"), dict) and "metric" in doc["regression"]:
        checker.gate_metric(doc["regression"]["metric"])

    adaptive = check_adaptive(doc, checker)
    if adaptive is None and until_decided:
        adaptive = default_adaptive(doc)

    context = SweepContext(checker, sweep_name, systems, scale, check_games)
    matrices = tuple(m for t in tables if (m := validate_matrix(t, context)) is not None)
    if adaptive is not None:  # its looks take seeds in this order, up to the cap
        matrices = tuple(replace(m, seeds=adaptive_seeds(m.seeds, adaptive.max_seeds))
                         for m in matrices)
    if scale.games:
        in_matrices = {g for t in tables for g in _listed(t.values["games"])}
        missing = [g for g in scale.games if g not in in_matrices]
        if missing:
            raise SweepError(f"{checker.path}: --games {','.join(missing)}: not in this sweep; "
                             f"its games are {', '.join(sorted(games_written(doc)))}")
    return ValidatedSweep(
        name=sweep_name, description=str(doc.get("description", "")), matrices=matrices,
        slurm=dict(doc.get("slurm", {})), report=dict(doc.get("report", {})),
        regression=dict(doc.get("regression", {})), adaptive=adaptive,
    )


def matrix_tables(doc: Mapping[str, Any], checker: Checker) -> list[MatrixTable]:
    """The file's matrices, each merged with the top-level defaults; without [[matrix]]
    the top level is the one matrix."""
    defaults = {k: v for k, v in doc.items() if k in MATRIX_KEYS}
    matrices = doc.get("matrix")
    if matrices is None:
        own: list[tuple[tuple, Mapping[str, Any]]] = [((), {})]
    elif isinstance(matrices, list) and matrices:
        own = [(("matrix", i), m) for i, m in enumerate(matrices)]
    else:
        raise checker.error(("matrix",), "matrix must be one or more [[matrix]] tables")
    for where, table in own:
        checker.check_keys(table, MATRIX_KEYS, where)
    return [MatrixTable(values={**defaults, **table},
                        source={k: (where if k in table else ()) for k in {**defaults, **table}},
                        where=where)
            for where, table in own]


def games_written(doc: Mapping) -> set[str]:
    """Every game the file names (top level and each matrix), for the --games error."""
    out: set[str] = set()
    for m in [doc, *doc.get("matrix", [])]:
        out.update(_listed(m.get("games", [])))
    return out


def _listed(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


# --------------------------------------------------------------------------- one matrix


def validate_matrix(table: MatrixTable, context: SweepContext) -> ValidatedMatrix | None:
    """One matrix checked; None when the scale-down's games leave it none (its values
    after 'games' are then not checked: they make no runs)."""
    checker, scale = context.checker, context.scale
    values, source = table.values, table.source
    for key in ("systems", "layouts", "games", "seeds", "frames"):
        if key not in values:
            raise checker.error(table.where, f"{table.label or 'sweep'}: missing {key!r} "
                                f"({MATRIX_KEYS[key]}); set it here or at the top level")
    systems = _systems(table, context)
    layouts = _layouts(table, checker)
    games = _games(table, context)
    if scale.games:
        games = [g for g in games if g in scale.games]
        if not games:
            return None
    seeds = list(scale.seeds) if scale.seeds else checker.int_list(values, "seeds",
                                                                    source["seeds"])
    frames = scale.frames if scale.frames else checker.positive_int(values, "frames",
                                                                     source["frames"])
    preset = values.get("preset", "auto")
    if preset not in PRESETS:
        raise checker.error(table.at("preset"),
                            f"unknown preset {preset!r}; valid: {', '.join(PRESETS)}")
    archs_given = (checker.str_list(values, "architectures", source["architectures"])
                   if "architectures" in values else None)
    overrides = checker.hyperparameters(values.get("overrides", {}), table.at("overrides"),
                                        is_grid=False)
    grid = checker.hyperparameters(values.get("grid", {}), table.at("grid"), is_grid=True)
    both = set(overrides) & set(grid)
    if both:
        raise checker.error(table.at("grid"), f"{sorted(both)} are both in overrides "
                            "and grid; give each hyperparameter in one place")
    resources = checker.resources(values.get("resources", {}), table.at("resources"))

    matrix_games = tuple(MatrixGame(g, resolve_preset(preset, g), frames // frames_per_step(g))
                         for g in games)
    if overrides or grid:
        _check_known_hyperparameters(table, checker, systems, matrix_games, overrides, grid)
    matrix_systems = []
    for system in systems:
        archs = _architectures(table, checker, system, archs_given)
        _check_runs_fit(table, checker, system, layouts, matrix_games, frames)
        matrix_systems.append(MatrixSystem(system, archs))
    return ValidatedMatrix(
        sweep=context.sweep, label=str(table.label), systems=tuple(matrix_systems),
        layouts=tuple(layouts), games=matrix_games, seeds=tuple(seeds), frames=frames,
        overrides=overrides, grid=grid, resources=resources,
        key_lines=_key_lines(table, checker, overrides, grid), key_source=str(checker.path),
    )


def resolve_preset(preset: str, env_id: str) -> str:
    """The trainer preset of a run on `env_id`: 'auto' is atari for Atari games, else cartpole."""
    if preset != "auto":
        return preset
    return "atari" if is_atari(env_id) else "cartpole"


def _systems(table: MatrixTable, context: SweepContext) -> list[System]:
    names = context.checker.str_list(table.values, "systems", table.source["systems"])
    for s in names:
        if s not in context.systems:
            raise context.checker.error(
                table.at("systems"), f"unknown system {s!r}; valid: {', '.join(context.systems)}"
                " (or add one under [entry_points])", s)
    return [context.systems[s] for s in names]


def _layouts(table: MatrixTable, checker: Checker) -> list[Layout]:
    layouts: list[Layout] = []
    for text in checker.str_list(table.values, "layouts", table.source["layouts"]):
        try:
            layouts.append(parse_layout(text))
        except LayoutError as e:
            raise checker.error(table.at("layouts"), str(e), text) from e
    return layouts


def _games(table: MatrixTable, context: SweepContext) -> list[str]:
    games = context.checker.str_list(table.values, "games", table.source["games"])
    if context.check_games:
        for g in games:
            try:
                check_game(g)
            except EnvError as e:
                raise context.checker.error(table.at("games"), str(e), g) from e
    return games


def _check_known_hyperparameters(
    table: MatrixTable, checker: Checker, systems: list[System],
    games: tuple[MatrixGame, ...], overrides: Mapping[str, Any], grid: Mapping[str, Any],
) -> None:
    """Each override and grid key must be a flag of each system's config (for each preset
    its games run with), where the system can tell its flags."""
    for system in systems:
        presets = dict.fromkeys(g.preset for g in games) if system.takes_preset else {None: None}
        for preset in presets:
            known = known_hyperparameters(system, preset)
            if known is None:
                continue
            for kind, hyperparameters in (("overrides", overrides), ("grid", grid)):
                for key in hyperparameters:
                    if key not in known:
                        raise checker.error(
                            (*table.at(kind), key), f"{system.name} has no hyperparameter "
                            f"{key!r}; valid: {', '.join(sorted(known - set(RESERVED_FLAGS)))}")


def _architectures(table: MatrixTable, checker: Checker, system: System,
                   given: list[str] | None) -> tuple[str, ...]:
    """The architectures `system` runs in this matrix: those given that it implements,
    else its default (the first it lists)."""
    if given is None:
        return (system.architectures[0],)
    archs = []
    for a in given:
        if a not in schema.ARCHITECTURES:
            raise checker.error(table.at("architectures"), f"unknown architecture {a!r}; "
                                f"valid: {', '.join(schema.ARCHITECTURES)}", a)
        if a in system.architectures:
            archs.append(a)
    if not archs:
        raise checker.error(table.at("architectures"), f"system {system.name} implements "
                            f"{list(system.architectures)}, none of {given}")
    return tuple(archs)


def _check_runs_fit(table: MatrixTable, checker: Checker, system: System,
                    layouts: list[Layout], games: tuple[MatrixGame, ...], frames: int) -> None:
    """A baseline runs on one device only, and the budget must be at least one step."""
    for layout in layouts:
        for game in games:
            if system.baseline and layout.name != BASELINE_LAYOUT:
                raise checker.error(table.at("layouts"),
                                    f"{system.name} is a baseline and runs only on layout "
                                    f"{BASELINE_LAYOUT}, not {layout.name}; put baselines "
                                    "in their own [[matrix]]", layout.name)
            if game.total_timesteps < 1:
                raise checker.error(table.at("frames"),
                                    f"frames {frames} is less than one step of {game.env_id}")


def _key_lines(table: MatrixTable, checker: Checker, overrides: Mapping[str, Any],
               grid: Mapping[str, Any]) -> dict[str, int]:
    """Where the file sets the keys a run's launch errors can be about (harness.validate)."""
    lines = {k: checker.lines.line(table.at(k)) for k in ("layouts", "frames", "games")
             if k in table.source}
    for kind, hyperparameters in (("overrides", overrides), ("grid", grid)):
        lines.update({k: checker.lines.line((*table.at(kind), k)) for k in hyperparameters})
    return {k: v for k, v in lines.items() if v is not None}
