"""Reading a sweep file: parse the TOML, check it (with line numbers), expand it into runs
with stable ids; the presets; the scale-down options' lists.

A sweep file is TOML. Top-level keys give defaults; each `[[matrix]]` table is a
cartesian product systems x architectures x layouts x games x seeds x grid values, with
its own values overriding the defaults. Without `[[matrix]]` the top level is the one
matrix. See docs/harness.md for every key.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypedDict, Unpack

from harness.sweep.checker import Checker, toml_message
from harness.sweep.checks import validate_sweep
from harness.sweep.expand import expand_all, with_accelerator, with_shared_cpu_devices
from harness.sweep.model import ScaleDown, Sweep, SweepError
from harness.sweep.tomlpos import KeyLines

PRESET_DIR = Path(__file__).resolve().parent.parent / "presets"


def preset_path(name: str) -> Path:
    path = PRESET_DIR / f"{name}.toml"
    if not path.exists():
        raise SweepError(f"unknown preset {name!r}; valid: {', '.join(list_presets())}")
    return path


def list_presets() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))


class ReadOptions(TypedDict, total=False):
    """The options of load_sweep, passed on to parse_sweep (which documents them)."""

    frames: int | None
    games: Sequence[str] | None
    seeds: Sequence[int] | None
    name: str | None
    check_games: bool
    accelerator: str | None
    until_decided: bool


def load_sweep(path: Path | str, **options: Unpack[ReadOptions]) -> Sweep:
    """Read, validate and expand a sweep file (parse_sweep, with the same options)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise SweepError(f"{path}: cannot read the sweep file ({e.strerror})") from e
    return parse_sweep(text, path, **options)


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
    until_decided: bool = False,
) -> Sweep:
    """Validate and expand the sweep file `text` (read from `path`, for messages).
    Scale-down options replace the file's frames and seeds and keep only the listed
    games; `accelerator` replaces every run's (e.g. 'cpu' to try a GPU preset, scaled
    down, on a laptop); until_decided: adaptive seeds with the default design when the
    file has no [adaptive] table."""
    path = Path(path)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SweepError(toml_message(path, str(e))) from e
    scale = ScaleDown(frames=frames, games=tuple(games) if games else None,
                      seeds=tuple(seeds) if seeds else None)
    sweep, matrices = validate_sweep(doc, Checker(path, KeyLines(text)), scale, name=name,
                                     check_games=check_games, until_decided=until_decided)
    runs, notes = expand_all(matrices)
    if not runs:
        raise SweepError(f"{path}: the sweep expands to no runs")
    if accelerator is not None:
        if accelerator not in ("cpu", "gpu"):
            raise SweepError(f"--accelerator {accelerator!r}: valid: cpu, gpu")
        runs = with_accelerator(runs, accelerator)
    return replace(sweep, runs=with_shared_cpu_devices(runs), source=path, source_text=text,
                   notes=notes)


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


def filter_flags(filters: Mapping[str, Any]) -> str:
    """Scale-down options as the flags that give them: `--frames 2000 --games Pong-v5`."""
    return " ".join(f"--{k} {v}" for k, v in sorted(filters.items()))
