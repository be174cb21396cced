"""Sweep files: parse, validate (with line numbers), expand into runs with stable ids.

A sweep file is TOML. Top-level keys give defaults; each `[[matrix]]` table is a
cartesian product systems x architectures x layouts x games x seeds x grid values, with
its own values overriding the defaults. Without `[[matrix]]` the top level is the one
matrix. See docs/harness.md for every key.
"""

from __future__ import annotations

import itertools
import re
import sys
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.systems import (
    BASELINE_LAYOUT,
    BUILTIN_SYSTEMS,
    PRESETS,
    RESERVED_FLAGS,
    System,
    flag_args,
    known_hyperparameters,
)
from harness.tomlpos import KeyLines
from runrecord import Layout, LayoutError, parse_layout, run_id, schema

PRESET_DIR = Path(__file__).resolve().parent / "presets"
PROJECT_ROOT = Path(__file__).resolve().parent.parent

MATRIX_KEYS = {
    "name": "label of this matrix (shown by plan and status)",
    "systems": "list of systems, e.g. ['cleanba-ppo', 'cleanba-impala']",
    "architectures": "list of 'sync', 'cleanba', 'async' (cleanba systems)",
    "layouts": "list of layouts in the paper's notation, e.g. ['a0-l0-d1', 'a0-l1,2,3-d1']",
    "games": "list of env ids, e.g. ['Breakout-v5'] or ['CartPole-v1']",
    "seeds": "list of integer seeds",
    "frames": "frame budget per run (env steps x frame skip)",
    "preset": "trainer preset: 'auto' (atari for -v5 games, else cartpole), 'atari', 'cartpole'",
    "overrides": "table of hyperparameters passed to the trainer, e.g. {learning-rate = 3e-4}",
    "grid": "table of hyperparameters to sweep: each key a list of values (cartesian product)",
    "resources": "table: cpus_per_process, accelerator ('cpu' or 'gpu'), timeout_min",
}
TOP_KEYS = {
    "name": "sweep name (folder under the results root)",
    "description": "free text",
    "matrix": "array of tables [[matrix]], each a product of systems, layouts, games, seeds",
    "slurm": "table of Slurm job parameters (partition, gpus_per_node, ...)",
    "report": "table of report options (group_by, delta, reps, seed)",
    "regression": "table for `harness regress` (reference, delta, systems, games)",
    "entry_points": "table of extra systems: name = {entry, takes_preset, architectures, baseline}",
    **{k: v for k, v in MATRIX_KEYS.items() if k != "name"},
}
RESOURCE_KEYS = {
    "cpus_per_process": "CPU cores each trainer process gets (default 1)",
    "accelerator": "'cpu' (virtual XLA devices) or 'gpu' (one GPU per layout device)",
    "timeout_min": "wall-clock limit per run in minutes (local and Slurm)",
}
SLURM_KEYS = {
    "partition": "Slurm partition",
    "account": "Slurm account",
    "qos": "Slurm QOS",
    "constraint": "Slurm constraint",
    "gpus_per_node": "GPUs per job (default: the layout's devices per process if accelerator=gpu)",
    "cpus_per_task": "CPUs per Slurm task (default: resources.cpus_per_process)",
    "mem_gb": "memory per node in GB",
    "timeout_min": "job time limit in minutes (default: resources.timeout_min or 60)",
    "array_parallelism": "how many jobs of an array run at once",
    "use_array": "submit runs as job arrays (true) or one job per run (false)",
    "setup": "list of shell lines run before the job (module load ..., source venv)",
    "additional_parameters": "table of extra sbatch parameters",
}
REPORT_KEYS = {
    "group_by": "manifest key that splits runs into compared groups (default layout.name)",
    "delta": "equivalence margin (HNS units) fixed before the runs",
    "reps": "bootstrap replicates",
    "seed": "bootstrap seed",
    "reference": "group every other group is compared with, e.g. a0-l0-d1 (default: the "
                 "smallest hardware)",
    "published": "table {table = FILE, column = NAME}: a 'Did it reproduce?' section "
                 "against that published column (docs/reproduce.md)",
}
PUBLISHED_KEYS = {
    "table": "published mean ± std CSV (relative to the project root), e.g. "
             "'../shared/paper-data/main_10CPU.csv'",
    "column": "its column, e.g. 'Cleanba IMPALA, 1 A100, 10 CPU'",
    "relative_margin": "per-game margin as a share of the published HNS (default 0.25)",
    "absolute_margin": "smallest per-game margin in HNS (default 0.1)",
    "allow_budget_mismatch": "compare runs shorter than the paper's 200M frames (true/false)",
    "allow_protocol_mismatch": "compare runs made under another env protocol (true/false)",
}
REGRESSION_KEYS = {
    "metric": "per-seed value: iqm (IQM over games, default) or atari5-median (docs/atari5.md)",
    "reference": "folder of reference run records (relative to the project root)",
    "delta": "allowed drop of the score (normalised units)",
    "systems": "only runs of these systems are compared",
    "games": "only runs on these games are compared",
    "layouts": "only runs on these layouts are compared (one verdict per system and layout)",
}
ENTRY_POINT_KEYS = {
    "entry": "module (pkg.mod) or path to a .py script that follows the trainer CLI contract",
    "takes_preset": "whether it takes the PRESET positional",
    "architectures": "architectures it implements",
    "baseline": "one device only, no layout or architecture flags",
}

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def published_table_path(text: str) -> Path:
    """A [report] published table path: absolute, or relative to the project root."""
    path = Path(text)
    return path if path.is_absolute() else PROJECT_ROOT / path


class SweepError(ValueError):
    """A sweep file (or scale-down option) that is wrong; the message says where and why."""


@dataclass(frozen=True)
class Resources:
    cpus_per_process: int = 1
    accelerator: str = "cpu"
    timeout_min: float | None = None


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep: everything needed to start it and to name it."""

    sweep: str
    system: str
    architecture: str
    env_id: str
    seed: int
    layout: Layout
    preset: str | None
    frames: int
    total_timesteps: int
    overrides: dict[str, Any]
    resources: Resources
    entry: str
    takes_preset: bool
    baseline: bool
    matrix: str = ""
    run_id: str = ""
    # XLA virtual CPU devices per process for accelerator 'cpu' (0: the layout's count).
    # A sweep gives all its CPU runs one count, its largest layout's: on CPU, XLA splits
    # matrix products and convolutions by its thread pool and device count, so layouts
    # compared bit for bit (--deterministic) must run with the same XLA configuration.
    cpu_devices: int = 0
    # Where the sweep file sets this run's keys ('layouts', 'frames', 'games', each
    # hyperparameter): for error messages about the run (harness.validate).
    key_lines: Mapping[str, int] = field(default_factory=dict, compare=False, hash=False)
    key_source: str = field(default="", compare=False)

    def definition(self) -> dict[str, Any]:
        """What defines the run (hashed into run_id); where and how it runs is not part of it."""
        return {
            "system": self.system,
            "architecture": self.architecture,
            "env_id": self.env_id,
            "seed": self.seed,
            "preset": self.preset,
            "hyperparameters": dict(sorted(self.overrides.items())),
            "frames": self.frames,
            "total_timesteps": self.total_timesteps,
            "layout": self.layout.name,
        }

    @property
    def num_processes(self) -> int:
        return self.layout.num_processes

    @property
    def cpus_needed(self) -> int:
        return self.resources.cpus_per_process * self.num_processes

    @property
    def gpus_needed(self) -> int:
        if self.resources.accelerator != "gpu":
            return 0
        return self.layout.devices_per_process * self.num_processes

    def command(
        self,
        run_dir: Path | str,
        process_id: int = 0,
        coordinator: str = "127.0.0.1:<port>",
        python: str = sys.executable,
    ) -> list[str]:
        """argv of process `process_id` of this run."""
        if self.entry.endswith(".py"):
            argv = [python, self.entry]
        else:
            argv = [python, "-m", self.entry]
        if self.takes_preset and self.preset:
            argv.append(self.preset)
        argv += ["--env-id", self.env_id, "--seed", str(self.seed),
                 "--total-timesteps", str(self.total_timesteps)]
        if not self.baseline:
            argv += ["--architecture", self.architecture]
            argv += flag_args("actor-device-ids", list(self.layout.actor_device_ids))
            argv += flag_args("learner-device-ids", list(self.layout.learner_device_ids))
        for k, v in sorted(self.overrides.items()):
            argv += flag_args(k, v)
        if self.num_processes > 1:
            argv += ["--distributed", "--coordinator-address", coordinator,
                     "--num-processes", str(self.num_processes), "--process-id", str(process_id)]
        argv += ["--run-dir", str(run_dir), "--sweep", self.sweep, "--run-id", self.run_id]
        return argv

    def label(self) -> str:
        arch = "" if self.baseline else f" {self.architecture}"
        return f"{self.system}{arch} {self.env_id} s{self.seed} {self.layout.name}"


@dataclass
class Sweep:
    name: str
    description: str
    runs: list[RunSpec]
    slurm: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)
    regression: dict[str, Any] = field(default_factory=dict)
    source: Path | None = None
    source_text: str = ""
    notes: list[str] = field(default_factory=list)
    # Scale-down options this sweep was loaded with ({"games": "...", "seeds": "...",
    # "frames": N}), so the report can say what was run; empty: the whole file.
    filters: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- loading


def preset_path(name: str) -> Path:
    path = PRESET_DIR / f"{name}.toml"
    if not path.exists():
        raise SweepError(f"unknown preset {name!r}; valid: {', '.join(list_presets())}")
    return path


def list_presets() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))


def load_sweep(
    path: Path | str,
    *,
    frames: int | None = None,
    games: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    name: str | None = None,
    check_games: bool = True,
    accelerator: str | None = None,
) -> Sweep:
    """Read, validate and expand a sweep file. Scale-down options replace the file's
    frames and seeds and keep only the listed games; `accelerator` replaces every run's
    (e.g. 'cpu' to try a GPU preset, scaled down, on a laptop)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise SweepError(f"{path}: cannot read the sweep file ({e.strerror})") from e
    return parse_sweep(text, path, frames=frames, games=games, seeds=seeds, name=name,
                       check_games=check_games, accelerator=accelerator)


def parse_sweep(
    text: str,
    path: Path | str = "<sweep>",
    *,
    frames: int | None = None,
    games: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    name: str | None = None,
    check_games: bool = True,
    accelerator: str | None = None,
) -> Sweep:
    path = Path(path)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SweepError(_toml_message(path, str(e))) from e
    v = _Validator(path, KeyLines(text))
    sweep = v.sweep(doc, frames=frames, games=games, seeds=seeds, name=name,
                    check_games=check_games)
    if accelerator is not None:
        if accelerator not in ("cpu", "gpu"):
            raise SweepError(f"--accelerator {accelerator!r}: valid: cpu, gpu")
        sweep.runs = [replace(r, resources=replace(r.resources, accelerator=accelerator))
                      for r in sweep.runs]
    cpu_runs = [r for r in sweep.runs if r.resources.accelerator == "cpu"]
    if cpu_runs:
        count = max(r.layout.devices_per_process for r in cpu_runs)
        sweep.runs = [replace(r, cpu_devices=count) if r.resources.accelerator == "cpu" else r
                      for r in sweep.runs]
    sweep.source = path
    sweep.source_text = text
    return sweep


def _toml_message(path: Path, msg: str) -> str:
    m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
    where = f"line {m[1]}" if m else "end of file"
    what = re.sub(r"\s*\(at .*?\)$", "", msg)
    if what.startswith("Cannot overwrite a value") or "twice" in what:
        what = (f"duplicate key or table ({what}); TOML allows each key once per table "
                "-- remove or rename the repeated one")
    return f"{path}: {where}: TOML syntax error: {what}"


class _Validator:
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
        from analysis.errors import AnalysisError
        from analysis.reproduce import published_column

        try:
            published_column(published_table_path(str(pub["table"])), str(pub["column"]))
        except AnalysisError as e:
            raise self.error((*where, "column"), str(e)) from None

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

    def sweep(self, doc: Mapping, *, frames, games, seeds, name, check_games) -> Sweep:
        self.check_keys(doc, TOP_KEYS, ())
        sweep_name = name or doc.get("name")
        if not isinstance(sweep_name, str) or not _NAME_RE.match(sweep_name):
            raise self.error(("name",), f"name must be a folder-safe string (letters, digits, "
                             f"_ . -), got {sweep_name!r}")
        systems = self.entry_points(doc)
        defaults = {k: v for k, v in doc.items() if k in MATRIX_KEYS}
        matrices = doc.get("matrix")
        if matrices is None:
            tables: list[tuple[tuple, Mapping]] = [((), {})]
        elif isinstance(matrices, list) and matrices:
            tables = [(("matrix", i), m) for i, m in enumerate(matrices)]
        else:
            raise self.error(("matrix",), "matrix must be one or more [[matrix]] tables")
        for where, m in tables:
            self.check_keys(m, MATRIX_KEYS, where)
        for section, valid in (("slurm", SLURM_KEYS), ("report", REPORT_KEYS),
                               ("regression", REGRESSION_KEYS)):
            if section in doc:
                if not isinstance(doc[section], dict):
                    raise self.error((section,), f"{section} must be a table")
                self.check_keys(doc[section], valid, (section,))
        if isinstance(doc.get("report"), dict) and "published" in doc["report"]:
            self.published(doc["report"]["published"])

        wanted_games = list(games) if games else None
        games_seen: set[str] = set()
        runs: list[RunSpec] = []
        notes: list[str] = []
        seen_ids: dict[str, RunSpec] = {}
        for where, m in tables:
            merged = {**defaults, **m}
            # Where a key's value came from, for error lines.
            src = {k: (where if k in m else ()) for k in merged}
            runs_m = self.matrix(merged, src, systems, sweep_name, where, frames, seeds,
                                 wanted_games, games_seen, check_games)
            for r in runs_m:
                if r.run_id in seen_ids:
                    notes.append(f"{r.label()} appears in more than one matrix; run once")
                    continue
                seen_ids[r.run_id] = r
                runs.append(r)
        if wanted_games:
            missing = [g for g in wanted_games if g not in games_seen]
            if missing:
                raise SweepError(f"{self.path}: --games {','.join(missing)}: not in this sweep; "
                                 f"its games are {', '.join(sorted(games_seen_all(doc)))}")
        if not runs:
            raise SweepError(f"{self.path}: the sweep expands to no runs")
        return Sweep(
            name=sweep_name, description=str(doc.get("description", "")), runs=runs,
            slurm=dict(doc.get("slurm", {})), report=dict(doc.get("report", {})),
            regression=dict(doc.get("regression", {})), notes=notes,
        )

    def matrix(self, m, src, systems, sweep_name, where, frames_opt, seeds_opt,
               wanted_games, games_seen, check_games) -> list[RunSpec]:
        label = m.get("name", "") if "name" in m else (f"matrix {where[1] + 1}" if where else "")
        for key in ("systems", "layouts", "games", "seeds", "frames"):
            if key not in m:
                raise self.error(where, f"{label or 'sweep'}: missing {key!r} "
                                 f"({MATRIX_KEYS[key]}); set it here or at the top level")
        sys_names = self.str_list(m, "systems", src["systems"])
        for s in sys_names:
            if s not in systems:
                raise self.error((*src["systems"], "systems"), f"unknown system {s!r}; valid: "
                                 f"{', '.join(systems)} (or add one under [entry_points])", s)
        layouts: list[Layout] = []
        for text in self.str_list(m, "layouts", src["layouts"]):
            try:
                layouts.append(parse_layout(text))
            except LayoutError as e:
                raise self.error((*src["layouts"], "layouts"), str(e), text) from e
        game_list = self.str_list(m, "games", src["games"])
        if check_games:
            from benchenv import EnvError
            from harness.games import check_game

            for g in game_list:
                try:
                    check_game(g)
                except EnvError as e:
                    raise self.error((*src["games"], "games"), str(e), g) from e
        games_seen.update(game_list)
        if wanted_games is not None:
            game_list = [g for g in game_list if g in wanted_games]
            if not game_list:
                return []
        seed_list = list(seeds_opt) if seeds_opt else self.int_list(m, "seeds", src["seeds"])
        frame_budget = frames_opt if frames_opt else self.positive_int(m, "frames", src["frames"])
        preset = m.get("preset", "auto")
        if preset not in PRESETS:
            raise self.error((*src["preset"], "preset"),
                             f"unknown preset {preset!r}; valid: {', '.join(PRESETS)}")
        archs_given = (self.str_list(m, "architectures", src["architectures"])
                       if "architectures" in m else None)
        overrides = self.hyperparameters(m.get("overrides", {}), (*src.get("overrides", ()),
                                         "overrides"), is_grid=False)
        grid = self.hyperparameters(m.get("grid", {}), (*src.get("grid", ()), "grid"),
                                    is_grid=True)
        both = set(overrides) & set(grid)
        if both:
            raise self.error((*src["grid"], "grid"), f"{sorted(both)} are both in overrides "
                             "and grid; give each hyperparameter in one place")
        res = self.resources(m.get("resources", {}), (*src.get("resources", ()), "resources"))

        from benchenv import frames_per_step, is_atari

        if overrides or grid:
            for s in sys_names:
                presets = {preset} if systems[s].takes_preset else {None}
                if preset == "auto" and systems[s].takes_preset:
                    presets = {"atari" if is_atari(g) else "cartpole" for g in game_list}
                for p in presets:
                    known = known_hyperparameters(systems[s], p)
                    if known is None:
                        continue
                    for table, src_key in ((overrides, "overrides"), (grid, "grid")):
                        for key in table:
                            if key not in known:
                                raise self.error(
                                    (*src.get(src_key, ()), src_key, key),
                                    f"{s} has no hyperparameter {key!r}; valid: "
                                    f"{', '.join(sorted(known - set(RESERVED_FLAGS)))}")

        out: list[RunSpec] = []
        grid_keys = sorted(grid)
        for s in sys_names:
            system = systems[s]
            if archs_given is None:
                archs = [system.architectures[0]]
            else:
                archs = []
                for a in archs_given:
                    if a not in schema.ARCHITECTURES:
                        raise self.error((*src["architectures"], "architectures"),
                                         f"unknown architecture {a!r}; valid: "
                                         f"{', '.join(schema.ARCHITECTURES)}", a)
                    if a in system.architectures:
                        archs.append(a)
                if not archs:
                    raise self.error((*src["architectures"], "architectures"),
                                     f"system {s} implements {list(system.architectures)}, "
                                     f"none of {archs_given}")
            for arch, layout, game, seed, combo in itertools.product(
                archs, layouts, game_list, seed_list,
                itertools.product(*(grid[k] for k in grid_keys)),
            ):
                if system.baseline and layout.name != BASELINE_LAYOUT:
                    raise self.error((*src["layouts"], "layouts"),
                                     f"{s} is a baseline and runs only on layout "
                                     f"{BASELINE_LAYOUT}, not {layout.name}; put baselines "
                                     "in their own [[matrix]]", layout.name)
                steps = frame_budget // frames_per_step(game)
                if steps < 1:
                    raise self.error((*src["frames"], "frames"),
                                     f"frames {frame_budget} is less than one step of {game}")
                run_preset = None
                if system.takes_preset:
                    run_preset = preset if preset != "auto" else (
                        "atari" if is_atari(game) else "cartpole")
                hp = {**overrides, **dict(zip(grid_keys, combo, strict=True))}
                key_lines = {k: self.lines.line((*src[k], k))
                             for k in ("layouts", "frames", "games") if k in src}
                for table, kind in ((overrides, "overrides"), (grid, "grid")):
                    key_lines.update({k: self.lines.line((*src.get(kind, ()), kind, k))
                                      for k in table})
                spec = RunSpec(
                    sweep=sweep_name, system=s, architecture=arch, env_id=game, seed=seed,
                    layout=layout, preset=run_preset, frames=frame_budget,
                    total_timesteps=steps, overrides=hp, resources=res, entry=system.entry,
                    takes_preset=system.takes_preset, baseline=system.baseline,
                    matrix=str(label),
                    key_lines={k: v for k, v in key_lines.items() if v is not None},
                    key_source=str(self.path),
                )
                out.append(replace(spec, run_id=run_id(spec.definition())))
        return out


def games_seen_all(doc: Mapping) -> set[str]:
    out: set[str] = set()
    for m in [doc, *doc.get("matrix", [])]:
        g = m.get("games", [])
        out.update([g] if isinstance(g, str) else g)
    return out


def parse_list(text: str | None) -> list[str] | None:
    """'a,b c' -> ['a', 'b', 'c'] (the scale-down options)."""
    if text is None:
        return None
    items = [x for x in re.split(r"[,\s]+", text.strip()) if x]
    return items or None


def parse_seeds(text: str | None) -> list[int] | None:
    items = parse_list(text)
    if items is None:
        return None
    try:
        seeds = [int(x) for x in items]
    except ValueError as e:
        raise SweepError(f"--seeds {text!r}: expected integers like 1,2,3") from e
    if any(s < 0 for s in seeds):
        raise SweepError(f"--seeds {text!r}: seeds must be >= 0")
    return seeds
