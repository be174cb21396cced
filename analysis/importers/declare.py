"""What an import cannot read from the files and the user must declare (env protocol,
frames per logged step, task and seed where no path or file gives them), and the parsing
every importer shares. A missing fact is an AnalysisError naming the flag that supplies it.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.errors import AnalysisError
from analysis.inputs.protocol import NAMED_PROTOCOLS

UNKNOWN_PROTOCOL = "unknown"
"""`--protocol unknown`: the user says they do not know it. The records then carry a
marker that matches no other import's and no trainer's protocol, so the protocol guard
refuses every comparison across it (runs of the same import still pool together)."""

SEED_PATTERN = r"(?:^|[/_.-])seed[_=-]?(?P<seed>\d+)(?:$|[/_.-])"
"""Finds a seed in a path such as runs/seed_3/, seed-3, ppo_seed3.csv (case-insensitive)."""
CLEANRL_RUN_NAME = (r"(?:^|/)(?P<task>[^/]+?)__(?P<system>[^/]+?)__(?P<seed>\d+)__\d+(?:/|$)")
"""CleanRL's run folder name f"{env_id}__{exp_name}__{seed}__{int(time.time())}"."""
IMPORTED_LAYOUT_PREFIX = "imported:"
"""Layout names of imported runs start so, unless the user names one."""
STEP_KEY, RETURN_KEY, LENGTH_KEY = "global_step", "charts/episodic_return", "charts/episodic_length"
"""What CleanRL logs its step, episode returns and lengths as (W&B history keys and
exports' columns, TensorBoard tags): every importer's default."""
RUNTIME_KEY = "_runtime"
"""W&B's seconds since the run's start (history key, export column)."""
MAX_SEED_VALUES = 300
"""More distinct seeds than this for one task and system are refused: such a column is
almost surely episodes or steps, and treating episodes as seeds shrinks every CI."""


@dataclass(frozen=True)
class Declared:
    """What the user vouches for, applied to every run of one import."""

    protocol: Mapping[str, Any] | None  # None: undeclared (openrlbenchmark runs)
    protocol_text: str
    frames_per_step: float | None = None
    frames: float | None = None  # the frame budget, for the budget guard; None = unknown
    seed: int | None = None
    task: str | None = None
    system: str | None = None
    layout: str | None = None
    path_pattern: str | None = None
    allow_many_seeds: bool = False
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        fps = "" if self.frames_per_step is None else f", {self.frames_per_step:g} frames per step"
        budget = "unknown" if self.frames is None else f"{self.frames:,.0f}"
        return f"protocol {self.protocol_text}{fps}, frame budget {budget} (declared on import)"

    def hyperparameters(self) -> dict[str, Any]:
        """An imported record's `hyperparameters`: only the declared frame budget, which
        the budget guard reads (the files hold no other setting we could vouch for)."""
        return {} if self.frames is None else {"total_frames": self.frames}


def parse_protocol(spec: Sequence[str], source_label: str, flag: str = "--protocol"
                   ) -> tuple[dict[str, Any], str]:
    """The env protocol from `--protocol` words: a preset name (e.g. `paper`), a JSON file
    of settings, or KEY=VALUE pairs (values read as JSON: 0.25, true, 27000), a preset or
    file first and pairs after it overriding its keys; `unknown` alone marks it unknown.
    Returns (protocol, how it was declared); an error names `flag`."""
    words = [w for w in spec if w.strip()]
    if not words:
        raise AnalysisError(
            "missing fact: the env protocol the runs were made under. Declare it with "
            f"{flag}: a preset ({', '.join(NAMED_PROTOCOLS)}), a JSON file of env "
            f"settings, or KEY=VALUE pairs (e.g. {flag} repeat_action_probability=0.25 "
            f"frame_skip=4); or {flag} unknown (the protocol guard then refuses to "
            "compare these runs with any other)")
    if words == [UNKNOWN_PROTOCOL]:
        return ({"declared": UNKNOWN_PROTOCOL, "import": source_label},
                f"unknown (import {source_label})")
    proto: dict[str, Any] = {}
    text: list[str] = []
    first = words[0]
    if "=" not in first:
        words = words[1:]
        if first in NAMED_PROTOCOLS:
            proto = NAMED_PROTOCOLS[first]()
        elif first.endswith(".json") and Path(first).is_file():
            proto = read_json_object(Path(first), "a JSON object of settings", f"{flag} {first}")
        else:
            raise AnalysisError(
                f"{flag} {first!r}: not a preset ({', '.join(NAMED_PROTOCOLS)}), a JSON "
                f"file, {UNKNOWN_PROTOCOL!r} or KEY=VALUE")
        text.append(first)
    for w in words:
        key, eq, value = w.partition("=")
        if not eq or not key.strip():
            raise AnalysisError(f"{flag} {w!r}: expected KEY=VALUE after the preset "
                                f"(e.g. frame_skip=4)")
        try:
            proto[key.strip()] = json.loads(value.strip())
        except json.JSONDecodeError:
            proto[key.strip()] = value.strip()  # a bare word, e.g. obs_type=grayscale
        text.append(f"{key.strip()}={value.strip()}")
    return proto, " ".join(text)


def declaration(protocol: Sequence[str] | str | None = None, frames: float | None = None, *,
                source_label: str = "openrlbenchmark", flag: str = "--protocol",
                frames_per_step: float | None = None, **facts: Any) -> Declared:
    """What the user declares for one import: the env protocol (parse_protocol's words;
    None: undeclared, which the guards refuse, as openrlbenchmark's runs are without
    --orb-protocol), the frame budget and frames per step (each > 0), and Declared's
    other facts (seed, task, system, layout, path_pattern, allow_many_seeds)."""
    check_positive(frames_per_step, "--frames-per-step")
    check_positive(frames, "declared frame budget")
    frames = None if frames is None else float(frames)
    if protocol is None:
        return Declared(None, "unknown", frames_per_step, frames, **facts)
    proto, text = parse_protocol([protocol] if isinstance(protocol, str) else list(protocol),
                                 source_label, flag)
    return Declared(proto, text, frames_per_step, frames, **facts)


def read_json_object(path: Path, what: str, label: str | None = None) -> dict[str, Any]:
    """The JSON object in `path`; AnalysisError naming `label` (default: the file)."""
    label = label or str(path)
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise AnalysisError(f"{label}: not valid JSON ({e})") from None
    if not isinstance(loaded, dict):
        raise AnalysisError(f"{label}: expected {what}")
    return loaded


def config_value(config: Mapping[str, Any], key: str | None) -> Any:
    """A wandb config value: run files wrap it as {"value": v, "desc": ...}."""
    value = config.get(key) if key else None
    if isinstance(value, dict) and "value" in value and set(value) <= {"value", "desc"}:
        return value["value"]
    return value


def int_seed(value: Any, where: str) -> int:
    """A seed from a config or a table cell: an integer, or text or a float holding one
    ("3", "3.0"); AnalysisError otherwise (the seed identifies the replicate)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        number = math.nan if isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not (math.isfinite(number) and number.is_integer()):
        raise AnalysisError(f"{where}: seed {value!r} is not an integer (the seed identifies "
                            "the replicate)")
    return int(number)


def check_positive(value: float | None, flag: str) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise AnalysisError(f"{flag} must be a number > 0, got {value}")


def require_frames_per_step(declared: Declared, what: str) -> float:
    """frames per step, or an AnalysisError naming --frames-per-step."""
    if declared.frames_per_step is None:
        raise AnalysisError(
            f"missing fact: how many frames one {what} is. Declare --frames-per-step "
            "(CleanRL's global_step on Atari counts agent steps: 4 frames each with the "
            "usual frame skip; 1 when the steps are already frames, or for envs without "
            "frame skip)")
    return declared.frames_per_step


@dataclass(frozen=True)
class PathFacts:
    """task/seed/system/layout a run's path gave (None where it gave none)."""

    task: str | None = None
    seed: int | None = None
    system: str | None = None
    layout: str | None = None


def path_facts(rel_path: str, patterns: Sequence[str]) -> PathFacts:
    """The named groups (task, seed, system, layout) of the first pattern that matches
    `rel_path` (posix, relative to the import's SRC)."""
    for pattern in patterns:
        try:
            m = re.search(pattern, rel_path, flags=re.IGNORECASE)
        except re.error as e:
            raise AnalysisError(f"--path-pattern {pattern!r}: not a regular expression ({e})"
                                ) from None
        if m:
            g = m.groupdict()
            seed = g.get("seed")
            if seed is not None and not seed.isdigit():
                raise AnalysisError(f"{rel_path}: the pattern {pattern!r} gives seed {seed!r}, "
                                    "not an integer >= 0 (the seed identifies the replicate)")
            return PathFacts(g.get("task"), int(seed) if seed is not None else None,
                             g.get("system"), g.get("layout"))
    return PathFacts()


def patterns_for(declared: Declared, defaults: Sequence[str]) -> list[str]:
    """The user's --path-pattern alone, else the format's defaults."""
    if declared.path_pattern is not None:
        if "(?P<" not in declared.path_pattern:
            raise AnalysisError(f"--path-pattern {declared.path_pattern!r} names no group; "
                                "use (?P<seed>\\d+), (?P<task>...), (?P<system>...) or "
                                "(?P<layout>...)")
        return [declared.path_pattern]
    return list(defaults)


def identify(declared: Declared, facts: PathFacts, where: str, runs_in_src: int, fmt: str,
             task: Any = None, seed: int | None = None, system: Any = None) -> dict[str, Any]:
    """ImportedRun's env_id, seed, system and layout: each as declared, else as the run's
    path gave it (`facts`), else as its file did (task, seed, system), else the format's
    default. An unknown task or seed is refused, and so is one --seed for several runs."""
    task = declared.task or facts.task or task
    if not task:
        raise AnalysisError(
            f"missing fact: the task (env id) of the run at {where}. Declare it with --task "
            "(e.g. Breakout-v5), or name it with --path-pattern ((?P<task>[^/]+))")
    seed = seed if facts.seed is None else facts.seed
    if declared.seed is not None:
        if runs_in_src > 1:
            raise AnalysisError(
                f"--seed {declared.seed} names one run's seed, but the source holds "
                f"{runs_in_src} runs (they would all be one seed). Import one run at a time, "
                "or let the paths give the seeds (--path-pattern with (?P<seed>\\d+))")
        seed = declared.seed
    elif seed is None:
        raise AnalysisError(
            f"missing fact: the seed of the run at {where}: its path does not give one. "
            "Declare it with --seed N (one run per import), or name it with --path-pattern "
            "(a regular expression with (?P<seed>\\d+), e.g. 'run(?P<seed>\\d+)')")
    return {"env_id": str(task), "seed": seed,
            "system": str(declared.system or facts.system or system or fmt),
            "layout": declared.layout or facts.layout or f"{IMPORTED_LAYOUT_PREFIX}{fmt}"}


def run_path_facts(src: Path, run_dir: Path, patterns: Sequence[str]) -> tuple[str, PathFacts]:
    """(the run folder relative to `src`, what the patterns find in it). When the relative
    path gives nothing (e.g. SRC is the run folder itself), SRC's own name is searched."""
    base = src.resolve() if src.is_dir() else src.resolve().parent
    rel = run_dir.resolve().relative_to(base).as_posix()
    facts = path_facts(rel, patterns) if rel != "." else PathFacts()
    if facts == PathFacts():
        facts = path_facts(f"{base.name}/{rel}" if rel != "." else base.name, patterns)
    return (rel if rel != "." else base.name), facts


def require_library(module: str, fmt: str) -> None:
    """AnalysisError (exit 2) naming the install when `module`, which reads `fmt`, is
    absent: the core install holds none of the formats' libraries."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise AnalysisError(f"importing {fmt} needs the {module} package: pip install "
                            f"'cleanba-bench[imports]' (or pip install {module})")


def find_files(src: Path, pattern: str, what: str) -> list[Path]:
    """`src` itself when it is a file, else the files below it matching the glob
    `pattern`, sorted; AnalysisError naming `what` when there is none."""
    if src.is_file():
        return [src]
    files = sorted(p for p in src.rglob(pattern) if p.is_file()) if src.is_dir() else []
    if not files:
        raise AnalysisError(f"{src}: no {what} below it")
    return files


def files_by_folder(src: Path, pattern: str, what: str,
                    order: Callable[[Path], Any] | None = None) -> list[tuple[Path, list[Path]]]:
    """(folder, its files of find_files, sorted by `order` or by name) for every folder
    holding such files, folders in name order: one run each."""
    by_dir: dict[Path, list[Path]] = defaultdict(list)
    for p in find_files(src, pattern, what):
        by_dir[p.parent].append(p)
    return [(d, sorted(files, key=order)) for d, files in sorted(by_dir.items())]
