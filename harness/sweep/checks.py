"""Sweep file validation: every key and value of the TOML, with the line of each error.

`validate_sweep(doc, checker, ...)` checks a parsed sweep file and returns the Sweep without
its runs and its ValidatedMatrix values (harness.sweep.model), which harness.sweep.expand
multiplies out without further checks. The checker (harness.sweep.checker) names the line of each error (tomllib gives
none). The [adaptive] table's checks make AdaptiveConfig, or the default design of
`--until-decided`; its statistics are analysis.sequential's, imported only when a sweep
has the table (SciPy takes seconds to import).
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchenv import BACKENDS, EnvError, frames_per_step, is_atari
from harness.sweep.checker import Checker
from harness.sweep.keys import (
    ADAPTIVE_KEYS,
    MATRIX_KEYS,
    REGRESSION_KEYS,
    REPORT_KEYS,
    SLURM_KEYS,
    TOP_KEYS,
)
from harness.sweep.model import (
    AdaptiveConfig,
    MatrixGame,
    MatrixSystem,
    ScaleDown,
    Sweep,
    SweepError,
    ValidatedMatrix,
    adaptive_seeds,
)
from harness.sweep.systems import (
    BASELINE_LAYOUT,
    PRESETS,
    RESERVED_FLAGS,
    System,
    known_hyperparameters,
)
from runrecord import Layout, LayoutError, parse_layout, schema
from runrecord.paths import project_path
from runrecord.writer import atomic_write_text

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


# --------------------------------------------------------------------------- the sweep


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
                   until_decided: bool = False) -> tuple[Sweep, tuple[ValidatedMatrix, ...]]:
    """Check a parsed sweep file: the sweep without its runs, and its matrices (not yet
    expanded). `name` replaces its name, `scale` its frames, games and seeds;
    check_games=False skips asking EnvPool whether each game exists; until_decided:
    adaptive with the default design when the file has no [adaptive]."""
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
    if isinstance(doc.get("report"), dict):
        checker.report(doc["report"])
    if isinstance(doc.get("regression"), dict):
        checker.regression(doc["regression"])

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
    return Sweep(name=sweep_name, description=str(doc.get("description", "")), runs=[],
                 slurm=dict(doc.get("slurm", {})), report=dict(doc.get("report", {})),
                 regression=dict(doc.get("regression", {})), adaptive=adaptive), matrices


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
    backends = _env_backends(table, checker, systems)
    games = _games(table, context, backends)
    if scale.games:
        games = [g for g in games if g in scale.games]
        if not games:
            return None
    seeds = list(scale.seeds) if scale.seeds else checker.int_list(values, "seeds",
                                                                    source["seeds"])
    frames = scale.frames if scale.frames else checker.whole_number(values, "frames",
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
        env_backends=backends,
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


def _env_backends(table: MatrixTable, checker: Checker, systems: list[System],
                  ) -> tuple[str | None, ...]:
    """The matrix's env backends ((None,): the trainers' default, not named). Baselines run
    on EnvPool only (docs/baselines.md)."""
    if "env_backends" not in table.values:
        return (None,)
    backends = checker.str_list(table.values, "env_backends", table.source["env_backends"])
    for b in backends:
        if b not in BACKENDS:
            raise checker.error(table.at("env_backends"), f"unknown env backend {b!r}; "
                                f"valid: {', '.join(BACKENDS)}", b)
    baselines = [s.name for s in systems if s.baseline]
    if baselines and set(backends) != {"envpool"}:
        raise checker.error(table.at("env_backends"), f"{', '.join(baselines)} run on EnvPool "
                            "only (docs/baselines.md); put them in a [[matrix]] with "
                            "env_backends = ['envpool'] or none")
    return tuple(dict.fromkeys(backends))


def _games(table: MatrixTable, context: SweepContext,
           backends: tuple[str | None, ...] = (None,)) -> list[str]:
    games = context.checker.str_list(table.values, "games", table.source["games"])
    if context.check_games:
        for g in games:
            for backend in backends:
                try:
                    check_game(g, backend)
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


# --------------------------------------------------------------------------- [adaptive]


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
    ints = {k: checker.whole_number(table, k, where) for k in
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


# --------------------------------------------------------------------------- games
# Fast game-id checks for `plan`: EnvPool's env list, cached per EnvPool version (the
# ALE backend's list comes from ale-py's ROM list, which needs no cache).
#
# Importing envpool takes seconds; the list of its env ids only changes with its version,
# so a cached copy answers `is this id valid` without the import. Unknown ids still go
# through benchenv.check_env_id, whose error names close matches.


def _cache_path() -> Path | None:
    try:
        version = importlib.metadata.version("envpool")
    except importlib.metadata.PackageNotFoundError:
        return None
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "cleanba-bench" / f"envpool-{version}-env-ids.json"


@functools.cache
def known_env_ids() -> frozenset[str]:
    path = _cache_path()
    if path is not None:
        try:
            return frozenset(json.loads(path.read_text()))
        except (OSError, ValueError):
            pass
    import envpool

    ids = sorted(envpool.list_all_envs())
    if path is not None:
        try:
            atomic_write_text(path, json.dumps(ids))
        except OSError:
            pass  # a read-only home: no cache, just slower
    return frozenset(ids)


def check_game(env_id: str, backend: str | None = None) -> None:
    """Raise benchenv.EnvError (with suggestions) when `backend` (default: the trainers'
    default, benchenv.default_backend) has no such env or is not installed."""
    from benchenv import check_env_id, default_backend

    backend = backend or default_backend()
    if backend == "envpool" and _cache_path() is not None and env_id in known_env_ids():
        return
    check_env_id(env_id, backend)
