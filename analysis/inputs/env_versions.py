"""One rule for env versions in every command: runs on different env ids are different
tasks, even when the ids are versions of one game (BreakoutNoFrameskip-v4 from a Stable
Baselines3 import, Breakout-v5 from EnvPool or CleanRL: other frame skip, sticky
actions, action set), unless the user maps one id onto another with --env-map
FROM=TO. Then the mapped runs are scored as the target's task (its normaliser, its
protocol guard: a mapped run whose recorded protocol differs is still refused unless
allowed). Every command that meets two versions of one game, or a mapping, says which
rule it applied (`rule_lines`, printed with the warnings). Names the user types for a
game (`--games Breakout`) are lookups, not runs, and still match any version.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence

from analysis.errors import AnalysisError
from runrecord import Run

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
