"""Inputs of the analysis: run records, published per-game tables, openrlbenchmark CSVs.

Run records go through `runrecord` (the only reader). Only `completed` runs enter
aggregates; every other run is listed in `RunSet.left_out` with its status and reason.
openrlbenchmark-style CSV exports are turned into in-memory `runrecord.Run`s (status
`completed`, layout name `openrlbenchmark`), so they flow through the same code.
"""

from __future__ import annotations

import copy
import csv
import difflib
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from analysis.errors import AnalysisError
from analysis.inputs.cache import CACHE_DIR, episode_count, load_many
from analysis.inputs.published_data import resolve_published_table
from benchenv import LEGACY_BACKEND
from runrecord import RecordError, Run, find_run_dirs, schema
from runrecord.words import counted

DEFAULT_LAST_N = 100
NO_CACHE_ENV = "CLEANBA_ANALYSIS_NO_CACHE"
"""Set (to anything but empty): every command parses every record, as with --no-cache, and
neither reads nor writes a cache. `harness verify` recomputes claims so: a cache shipped
beside the records would otherwise answer for them."""
IMPORTED_PROTOCOL = {"recorded_by": "openrlbenchmark export (protocol not declared)"}
"""The env protocol given to openrlbenchmark imports, which record none."""


@dataclass
class LeftOut:
    """A run found but kept out of aggregates, and why."""

    run_id: str
    status: str
    reason: str
    run_dir: str = ""


@dataclass
class RunSet:
    """Completed runs (`included`), the rest (`left_out`), and reader warnings."""

    included: list[Run] = field(default_factory=list)
    left_out: list[LeftOut] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def extend(self, other: RunSet) -> None:
        self.included += other.included
        self.left_out += other.left_out
        self.warnings += other.warnings


BACKEND_KEY = "env_protocol.backend"
"""The manifest key of a run's env backend (`envpool`, `ale`): group by it to compare
backends (the protocol guard then lets the backend differ, and only it)."""


def manifest_get(manifest: dict[str, Any], dotted: str) -> Any:
    """`manifest_get(m, "layout.name")` -> m["layout"]["name"] (None when absent)."""
    return lookup_dotted(manifest, dotted)[1]


def lookup_dotted(manifest: dict[str, Any], dotted: str) -> tuple[bool, Any]:
    """(whether the manifest holds the dotted key (a null value counts as held), its value
    or None); a recorded env protocol without a backend holds EnvPool's
    (benchenv.LEGACY_BACKEND)."""
    if dotted == BACKEND_KEY and isinstance(manifest.get("env_protocol"), dict):
        return True, manifest["env_protocol"].get("backend", LEGACY_BACKEND)
    value: Any = manifest
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return False, None
        value = value[part]
    return True, value


def group_key(run: Run, group_by: str | Sequence[str]) -> str:
    """The group label of a run: manifest values of the dotted keys, joined by ' / ';
    a key the run does not have (an imported run's architecture) is left out, never
    printed as None."""
    keys = [group_by] if isinstance(group_by, str) else list(group_by)
    keys = [k.strip() for key in keys for k in key.split(",") if k.strip()]
    values = [manifest_get(run.manifest, k) for k in keys]
    return " / ".join(str(v) for v in values if v is not None) or "(no " + ", ".join(keys) + ")"


def is_seed(value: Any) -> bool:
    """A manifest seed is an integer (JSON int; not a bool, float or string)."""
    return isinstance(value, int) and not isinstance(value, bool)


def load_runs(inputs: Iterable[Path | str], *, use_cache: bool = True) -> RunSet:
    """Every run record under each input folder (a run folder, a sweep, or a results root).

    Records come from the results root's cache where current (analysis.inputs.cache;
    `use_cache=False` parses every record). Unreadable records and runs that are not `completed` (running, failed, interrupted,
    skipped) or have no finished episode are left out, with the reason.
    """
    use_cache = use_cache and not os.environ.get(NO_CACHE_ENV)
    out = RunSet()
    roots = [Path(r) for r in inputs]
    seen: set[str] = set()
    fresh: list[Path] = []
    named: list[Path] = []  # the input each run was found under
    for root in roots:
        if not root.exists():
            raise AnalysisError(f"{root}: no such folder (expected a run or sweep folder)")
        dirs = list(find_run_dirs(root, skip=(CACHE_DIR,)))  # not the cache's 100,000 files
        if not dirs:
            out.warnings.append(f"{root}: no run records (no manifest.json below it)")
        if len(roots) == 1:  # a run is listed once per input: nothing to drop
            fresh, named = dirs, [root] * len(dirs)
            break
        real = [os.path.realpath(d) for d in dirs]
        fresh += [d for d, r in zip(dirs, real, strict=True) if r not in seen]
        named += [root for r in real if r not in seen]
        seen.update(real)
    # One call for every input (a report names each run folder): each root's cache index
    # is read once.
    loaded = load_many(fresh, named, use_cache=use_cache)
    for run_dir, run in zip(fresh, loaded, strict=True):
        if isinstance(run, RecordError):
            out.left_out.append(LeftOut(run_dir.name, "unreadable", str(run), str(run_dir)))
            continue
        out.warnings += run.warnings
        err = run.manifest.get("error") or {}
        msg = err.get("message") if isinstance(err, dict) else str(err)
        if run.status == schema.RUNNING:
            reason = "still running, or killed without a final status"
        elif run.status != schema.COMPLETED:
            reason = f"status {run.status}" + (f": {msg}" if msg else "")
        elif episode_count(run) == 0:
            reason = "completed but no finished episode (episodes.csv empty)"
        elif not run.manifest.get("env_id"):
            reason = "manifest has no env_id"
        elif not is_seed(run.manifest.get("seed")):
            reason = (f"manifest seed {run.manifest.get('seed')!r} is not an integer (the "
                      "seed identifies the replicate; valid: e.g. 1)")
        else:
            out.included.append(run)
            continue
        out.left_out.append(LeftOut(run.run_id, run.status, reason, str(run_dir)))
    return out


# ---------------------------------------------------------------- runs filtered by manifest values
# Run records (and runs already read from elsewhere) in one RunSet, filtered by manifest
# values: what every subcommand of `python -m analysis` (and a notebook) starts from.
#
# Manifest keys named on the command line (--group-by, --where) are checked against the
# runs: a key that no run has is a typo, refused with the keys there are. Unchecked, a typo
# passes silently: `--group-by layout.nam` groups every run under no value and the groups
# are then dropped, and `--where layout.nam=x` keeps no run. A key that some runs have and
# others lack is not refused: an imported run has no architecture, an older record no
# env_protocol.backend. Those runs group without the key (--group-by) or do not match
# (--where), and a warning says how many.

def dotted_keys(manifest: dict[str, Any], prefix: str = "") -> set[str]:
    """Every dotted key of a manifest's values (not of the tables that hold them)."""
    out: set[str] = set()
    for k, v in manifest.items():
        key = f"{prefix}{k}"
        out |= dotted_keys(v, key + ".") if isinstance(v, dict) and v else {key}
    return out


def check_keys(runs: Sequence[Run], keys: Iterable[str], flag: str) -> list[str]:
    """Warnings for keys some runs lack; AnalysisError naming the first key no run has,
    with close matches and the valid keys."""
    warnings: list[str] = []
    for key in keys:
        lacking = sum(not lookup_dotted(r.manifest, key)[0] for r in runs)
        if not runs or lacking < len(runs):
            if lacking:
                what = "grouped without it" if flag == "--group-by" else "they do not match"
                warnings.append(f"{flag} {key}: {lacking} of {counted(len(runs), 'run')} lack this key "
                                f"({what})")
            continue
        valid = sorted({k for r in runs for k in dotted_keys(r.manifest)}
                       | {BACKEND_KEY for r in runs
                          if isinstance(r.manifest.get("env_protocol"), dict)})
        close = difflib.get_close_matches(key, valid, n=3, cutoff=0.6)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        raise AnalysisError(f"{flag} {key}: no run's manifest has this key{hint}; keys the "
                            f"{counted(len(runs), 'run')} {'has' if len(runs) == 1 else 'have'}: {key_summary(valid)}")
    return warnings


# The manifest's tables of many keys: named by their prefix, not key by key, in an error
BULKY_TABLES = ("hyperparameters", "provenance", "summary", "error")


def key_summary(valid: Sequence[str]) -> str:
    """The keys one by one, except those under a bulky table, which are counted under its
    name (`hyperparameters.* (61 keys)`): a message a reader can scan."""
    out = [k for k in valid if k.split(".", 1)[0] not in BULKY_TABLES]
    for table in BULKY_TABLES:
        under = [k for k in valid if k == table or k.startswith(table + ".")]
        out += under if len(under) == 1 else [f"{table}.* ({len(under)} keys)"] if under else []
    return ", ".join(out)


def parse_key_values(pairs: Sequence[str], flag: str) -> list[tuple[str, str]]:
    """KEY=VALUE strings as (key, value), stripped; AnalysisError names a bad one."""
    out = []
    for cond in pairs:
        if "=" not in cond:
            raise AnalysisError(f"bad {flag} {cond!r}: expected KEY=VALUE")
        key, value = cond.split("=", 1)
        out.append((key.strip(), value.strip()))
    return out


def select_where(runs: Sequence[Run], where: Sequence[str]) -> list[Run]:
    """The runs whose manifest matches every KEY=VALUE of `where` (dotted keys)."""
    out = list(runs)
    for key, value in parse_key_values(where, "--where"):
        out = [r for r in out if str(manifest_get(r.manifest, key)) == value]
    return out


def load_records(inputs: Sequence[Path | str] = (), *,
                 more: Sequence[Callable[[], RunSet]] = (), where: Sequence[str] = (),
                 use_cache: bool = True, env_map: Mapping[str, str] | None = None) -> RunSet:
    """Every run record under `inputs`, then the runs each of `more` reads (e.g.
    openrlbenchmark exports), keeping only completed runs that match `where` (KEY=VALUE,
    dotted manifest keys). `use_cache=False` parses every record instead of reading the
    record cache (analysis.inputs.cache). `env_map`: env ids scored as another
    (below); the warnings say which env-version rule was applied."""
    if not inputs and not more:
        raise AnalysisError("give at least one run/sweep folder (or --orb DIR)")
    rs = load_runs(inputs, use_cache=use_cache) if inputs else RunSet()
    for read in more:
        rs.extend(read())
    rs.warnings += check_keys(rs.included, [k for k, _ in parse_key_values(where, "--where")],
                              "--where")
    rs.included = apply_env_map(select_where(rs.included, where), env_map or {})
    rs.warnings += rule_lines(rs.included, env_map or {})
    return rs


# ---------------------------------------------------------------- env versions
# One rule for env versions in every command: runs on different env ids are different
# tasks, even when the ids are versions of one game (BreakoutNoFrameskip-v4 from a Stable
# Baselines3 import, Breakout-v5 from EnvPool or CleanRL: other frame skip, sticky
# actions, action set), unless the user maps one id onto another with --env-map
# FROM=TO. Then the mapped runs are scored as the target's task (its normaliser, its
# protocol guard: a mapped run whose recorded protocol differs is still refused unless
# allowed). Every command that meets two versions of one game, or a mapping, says which
# rule it applied (`rule_lines`, printed with the warnings). Names the user types for a
# game (`--games Breakout`) are lookups, not runs, and still match any version.

ENV_MAP_FLAG = "--env-map"
_VERSION = re.compile(r"(NoFrameskip|Deterministic)?(-v\d+)?$")


def game_stem(env_id: str) -> str:
    """The game an env id is a version of: BreakoutNoFrameskip-v4, Breakout-v5 and
    Breakout -> Breakout; CartPole-v0 and CartPole-v1 -> CartPole."""
    return _VERSION.sub("", env_id) or env_id


def parse_env_map(items: Iterable[str]) -> dict[str, str]:
    """`FROM=TO` texts -> {FROM: TO}; AnalysisError (exit 2) for a malformed or
    contradictory item."""
    out: dict[str, str] = {}
    for item in items:
        src, sep, dst = item.partition("=")
        src, dst = src.strip(), dst.strip()
        if not sep or not src or not dst or src == dst:
            raise AnalysisError(f"bad {ENV_MAP_FLAG} {item!r}: expected FROM=TO, two "
                                "different env ids, e.g. BreakoutNoFrameskip-v4=Breakout-v5")
        if out.get(src, dst) != dst:
            raise AnalysisError(f"{ENV_MAP_FLAG} maps {src} twice: to {out[src]} and {dst}")
        out[src] = dst
    return out


def apply_env_map(runs: Sequence[Run], mapping: Mapping[str, str]) -> list[Run]:
    """The runs with every env id in `mapping` replaced by its target (the recorded id
    kept as manifest["env_id_recorded"]); the records on disk are untouched."""
    if not mapping:
        return list(runs)
    out = []
    for r in runs:
        env = str(r.manifest.get("env_id"))
        if env in mapping:
            r = copy.copy(r)  # a cached run too: the same lazily read tables
            r.manifest = {**r.manifest, "env_id": mapping[env], "env_id_recorded": env}
        out.append(r)
    return out


def versions_of_one_game(env_ids: Iterable[str]) -> list[list[str]]:
    """Groups of two or more distinct env ids that are versions of one game."""
    by_stem: dict[str, set[str]] = {}
    for env in env_ids:
        by_stem.setdefault(game_stem(env), set()).add(env)
    return [sorted(v) for _, v in sorted(by_stem.items()) if len(v) > 1]


def map_hint(ids: Sequence[str]) -> str:
    """`--env-map BreakoutNoFrameskip-v4=Breakout-v5` for the versions `ids` (onto the
    highest version)."""
    target = max(ids, key=lambda e: (e.rsplit("-v", 1)[-1].isdigit()
                                     and int(e.rsplit("-v", 1)[-1]), e))
    return " ".join(f"{ENV_MAP_FLAG} {e}={target}" for e in ids if e != target)


def rule_lines(runs: Sequence[Run], mapping: Mapping[str, str]) -> list[str]:
    """What the rule did with these runs, in words: the mappings applied, and the
    versions of one game kept apart. Empty when neither happened."""
    recorded = {str(r.manifest.get("env_id_recorded")) for r in runs
                if r.manifest.get("env_id_recorded") is not None}
    out = [f"env versions: {src} runs scored as {dst} ({ENV_MAP_FLAG})"
           for src, dst in sorted(mapping.items()) if src in recorded]
    for ids in versions_of_one_game(str(r.manifest.get("env_id")) for r in runs):
        out.append(f"env versions: {', '.join(ids)} are versions of one game, kept apart as "
                   f"different tasks (one rule in every command; {map_hint(ids)} makes "
                   "them one task)")
    return out


def version_hint(a: Iterable[str], b: Iterable[str]) -> str:
    """For an error about two sides with different tasks: which of them are versions of
    one game, and the flag that maps them (empty when none are)."""
    only_a, only_b = set(a) - set(b), set(b) - set(a)
    pairs = [sorted({x, y}) for x in sorted(only_a) for y in sorted(only_b)
             if game_stem(x) == game_stem(y)]
    if not pairs:
        return ""
    return ("; " + "; ".join(f"{x} and {y} are versions of one game: different tasks "
                             f"unless mapped ({map_hint([x, y])})" for x, y in pairs))


# ---------------------------------------------------------------- published tables

@dataclass
class PublishedTable:
    """A published per-game table: rows games, columns systems/settings.

    mean/std: (games, columns) arrays (std NaN where the cell had no `± std`).
    """

    path: Path
    games: list[str]
    columns: list[str]
    mean: np.ndarray
    std: np.ndarray


_CELL_RE = re.compile(r"^\s*([-+0-9.eE]+)\s*(?:±|\+-|\+/-)\s*([-+0-9.eE]+)\s*$")


def _parse_cell(text: str, path: Path, game: str, column: str) -> tuple[float, float]:
    m = _CELL_RE.match(text)
    if m:
        return float(m[1]), float(m[2])
    try:
        return float(text), np.nan
    except ValueError:
        raise AnalysisError(
            f"{path}: cell ({game}, {column}) is {text!r}; expected 'mean ± std' or a number"
        ) from None


def load_published_table(path: Path | str) -> PublishedTable:
    """Read a `mean ± std` (or plain number) CSV: first column game ids, header systems.
    `path` may name a shipped table (`cleanba:main_10CPU`; analysis.inputs.published_data)."""
    path = resolve_published_table(path)
    with open(path, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.reader(f) if r]
    if len(rows) < 2 or len(rows[0]) < 2:
        raise AnalysisError(f"{path}: expected a header row of columns and one row per game")
    columns = rows[0][1:]
    games, means, stds = [], [], []
    for r in rows[1:]:
        if len(r) != len(columns) + 1:
            raise AnalysisError(
                f"{path}: row {r[0]!r} has {len(r) - 1} cells, header has {len(columns)}"
            )
        games.append(r[0])
        cells = [_parse_cell(c, path, r[0], col) for c, col in zip(r[1:], columns, strict=True)]
        means.append([c[0] for c in cells])
        stds.append([c[1] for c in cells])
    return PublishedTable(path, games, columns, np.array(means), np.array(stds))


def runtimes_twin(path: Path | str) -> Path:
    """`main_10CPU.csv` -> `main_10CPU_runtimes.csv`."""
    path = Path(path)
    return path.with_name(f"{path.stem}_runtimes{path.suffix}")
