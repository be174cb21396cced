"""Paths in a manifest without this machine's directories: relative where possible.

A manifest records the command line, the working directory and the run folder; written
as they are, they leak a home directory and mean nothing on another machine. The writer
rewrites every absolute path in `provenance` and `hyperparameters`:

- under the project checkout: relative to it (`cleanba/ppo.py`, `.venv/bin/python`,
  `results/smoke/runs/<id>`; `.` for the checkout itself). The harness starts trainers
  in the checkout, so such a command runs again as written from there.
- under the run's results root (`<root>` of `<root>/<sweep>/runs/<run_id>`):
  `<results>/<sweep>/runs/<run_id>`.
- under the home directory: `~/...`.
- anything else (the system's Python, /usr/...) as it is.

Old records hold absolute paths; `resolve_path` reads both forms.

This module also names the two places every part of the project locates things by: the
project root (PROJECT_ROOT, `project_path`) and the results layout (`run_folder`,
`split_run_folder`, `results_root_of`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from runrecord.schema import RUNS_DIR

PROJECT_ROOT = Path(__file__).resolve().parent.parent
"""The checkout: the folder that holds runrecord/, cleanba/, harness/, ..."""
RESULTS_TOKEN = "<results>"
# Manifest sections whose strings may hold paths (command words, cwd, run_dir, ...).
PATH_SECTIONS = ("provenance", "hyperparameters", "imported")


def project_path(text: str | Path) -> Path:
    """A path as a user writes it in a sweep file or on a command line: absolute, or
    relative to the project root."""
    path = Path(text)
    return path if path.is_absolute() else PROJECT_ROOT / path


def run_folder(results_root: Path | str, sweep: str | None, run_id: str) -> Path:
    """The results layout: <root>/<sweep>/runs/<run_id>; a run started outside any sweep
    (sweep None: a trainer or adapter without --sweep) goes under "standalone"."""
    return Path(results_root) / ("standalone" if sweep is None else sweep) / RUNS_DIR / run_id


def split_run_folder(run_dir: Path | str) -> tuple[str, str, str] | None:
    """(root, sweep, run_id) of a run folder laid out as <root>/<sweep>/runs/<run_id>
    (absolute, as strings), else None. String operations, not Path: the analysis cache
    calls this once per run."""
    path = os.path.abspath(run_dir)
    parent, run_id = os.path.split(path)
    sweep_dir, runs = os.path.split(parent)
    root, sweep = os.path.split(sweep_dir)
    if runs != RUNS_DIR or not sweep:
        return None
    return root, sweep, run_id


def results_root_of(run_dir: Path | str) -> Path | None:
    """<root> of a run folder laid out as <root>/<sweep>/runs/<run_id>, else None."""
    parts = split_run_folder(run_dir)
    return None if parts is None else Path(parts[0])


def _under(path: PurePosixPath, base: Path | None) -> str | None:
    if base is None:
        return None
    try:
        rel = path.relative_to(PurePosixPath(os.path.abspath(base)))
    except ValueError:
        return None
    return str(rel)


def portable_path(text: str, *, project_root: Path = PROJECT_ROOT,
                  results_root: Path | None = None, home: Path | None = None) -> str:
    """`text` rewritten by the rules above; a relative path or a non-path stays as it is."""
    if not text.startswith("/"):
        return text
    path = PurePosixPath(os.path.normpath(text))
    rel = _under(path, project_root)
    if rel is not None:
        return rel
    rel = _under(path, results_root)
    if rel is not None:
        return RESULTS_TOKEN if rel == "." else f"{RESULTS_TOKEN}/{rel}"
    home = home if home is not None else Path.home()
    rel = _under(path, home) if str(home) not in ("/", "") else None
    if rel is not None:
        return "~" if rel == "." else f"~/{rel}"
    return text


def _rewrite(value: Any, **roots: Any) -> Any:
    if isinstance(value, str):
        return portable_path(value, **roots)
    if isinstance(value, Mapping):
        return {k: _rewrite(v, **roots) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rewrite(v, **roots) for v in value]
    return value


def portable_manifest(manifest: Mapping[str, Any], run_dir: Path | str,
                      project_root: Path = PROJECT_ROOT) -> dict[str, Any]:
    """A copy of `manifest` with the paths of its PATH_SECTIONS made portable."""
    roots = {"project_root": project_root, "results_root": results_root_of(run_dir)}
    out = dict(manifest)
    for key in PATH_SECTIONS:
        if key in out and out[key] is not None:
            out[key] = _rewrite(out[key], **roots)
    return out


def resolve_path(text: str, *, project_root: Path = PROJECT_ROOT,
                 results_root: Path | None = None) -> Path:
    """A manifest's path as a path on this machine (new relative forms and old absolute
    ones). `<results>/...` needs the results root the record was read from."""
    if text == RESULTS_TOKEN or text.startswith(RESULTS_TOKEN + "/"):
        if results_root is None:
            raise ValueError(f"{text!r} is relative to the results root; give results_root")
        return Path(results_root) / text[len(RESULTS_TOKEN):].lstrip("/")
    if text == "~" or text.startswith("~/"):
        return Path(text).expanduser()
    p = Path(text)
    return p if p.is_absolute() else Path(project_root) / p
