"""Run records (and runs already read from elsewhere) in one RunSet, filtered by manifest
values: what every subcommand of `python -m analysis` (and a notebook) starts from.

Manifest keys named on the command line (--group-by, --where) are checked against the
runs: a key that no run has is a typo, refused with the keys there are. Unchecked, a typo
passes silently: `--group-by layout.nam` groups every run under no value and the groups
are then dropped, and `--where layout.nam=x` keeps no run. A key that some runs have and
others lack is not refused: an imported run has no architecture, an older record no
env_protocol.backend. Those runs group without the key (--group-by) or do not match
(--where), and a warning says how many.
"""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from analysis.errors import AnalysisError
from analysis.inputs.load import BACKEND_KEY, RunSet, load_runs, lookup_dotted, manifest_get
from runrecord import Run
from runrecord.words import counted


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
    (analysis.inputs.records); the warnings say which env-version rule was applied."""
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
