"""Claims: every number a user reports, as a `python -m analysis` command over the bound
records, with its input run ids and its output (docs/certificate.md, "Claims").

A claims file (TOML) lists them:

    [inputs]                 # optional: more files or folders the claims read (bound)
    reference = "results/reference/smoke-cartpole"

    [[claim]]
    name = "Table 1: IQM per layout, 95% CIs"
    command = "aggregate {runs} --group-by layout.name --reps 2000 --seed 0"

`{runs}` is the certified run folders; `{NAME}` an input of [inputs]. Without a file,
`default_claims` lists what `harness report` shows. A claim is run in this process through
`analysis.cli.main` with no analysis cache (`CLEANBA_ANALYSIS_NO_CACHE`), its stdout,
stderr and exit code captured, and the bound paths written back as their placeholders,
so the same command gives the same text on another machine's copy of the records.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.inputs.load import NO_CACHE_ENV
from harness.sweep import report_options
from runrecord import find_run_dirs, project_path
from runrecord.exits import EXIT_BAD_INPUT

RUNS = "runs"
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_-]*)\}")
SUBCOMMANDS = ("summary", "aggregate", "equivalence", "regression", "staleness", "atari5",
               "reproduce")
"""Subcommands that print their numbers (the others draw figures or write records)."""
WRITING_FLAGS = ("--out", "--json-out")


class ClaimError(ValueError):
    """A claims file or claim that cannot be certified (exit 2, nothing written)."""


@dataclass(frozen=True)
class ClaimSpec:
    name: str
    args: tuple[str, ...]  # `python -m analysis` arguments, placeholders unresolved
    source: str  # "claims file" or "report"


@dataclass(frozen=True)
class ClaimOutput:
    exit_code: int
    stdout: str
    stderr: str

    def as_dict(self) -> dict[str, Any]:
        return {"exit_code": self.exit_code, "stdout": self.stdout, "stderr": self.stderr}

    def first_difference(self, other: ClaimOutput) -> str | None:
        """Where `other` (recomputed) departs from this (recorded), in words; None: same."""
        if self.exit_code != other.exit_code:
            return f"exit code {self.exit_code} recorded, {other.exit_code} recomputed"
        for stream in ("stdout", "stderr"):
            mine, theirs = getattr(self, stream), getattr(other, stream)
            if mine == theirs:
                continue
            a, b = mine.splitlines(), theirs.splitlines()
            for i in range(max(len(a), len(b))):
                x = a[i] if i < len(a) else "<no line>"
                y = b[i] if i < len(b) else "<no line>"
                if x != y:
                    return f"{stream} line {i + 1}: recorded {x!r}, recomputed {y!r}"
            return f"{stream} differs in line endings"
        return None


def placeholders(args: Sequence[str]) -> list[str]:
    return sorted({m for a in args for m in PLACEHOLDER.findall(a)})


def _command_args(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        args = shlex.split(value)
    elif isinstance(value, list) and all(isinstance(a, str) for a in value):
        args = list(value)
    else:
        raise ClaimError(f"{where}: command must be a string or a list of strings")
    if args[:3] == ["python", "-m", "analysis"]:
        args = args[3:]
    if not args or args[0] not in SUBCOMMANDS:
        raise ClaimError(f"{where}: command must start with one of {', '.join(SUBCOMMANDS)} "
                         f"(`python -m analysis` subcommands that print numbers); got "
                         f"{args[0] if args else 'nothing'!r}")
    for a in args:
        if a.split("=", 1)[0] in WRITING_FLAGS:
            raise ClaimError(f"{where}: {a.split('=', 1)[0]} writes files; a claim's output "
                             "is what it prints")
    return tuple(args)


def read_claims_file(path: Path) -> tuple[list[ClaimSpec], dict[str, Path]]:
    """The claims and the named inputs of a claims file (paths relative to the project);
    ClaimError naming the problem otherwise."""
    try:
        doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise ClaimError(f"{path}: cannot read the claims file ({e.strerror})") from e
    except tomllib.TOMLDecodeError as e:
        raise ClaimError(f"{path}: not TOML: {e}") from e
    unknown = sorted(set(doc) - {"inputs", "claim"})
    if unknown:
        raise ClaimError(f"{path}: unknown key(s) {', '.join(unknown)}; valid: [inputs], "
                         "[[claim]]")
    inputs: dict[str, Path] = {}
    for name, value in (doc.get("inputs") or {}).items():
        if name == RUNS or not PLACEHOLDER.fullmatch("{" + name + "}"):
            raise ClaimError(f"{path}: [inputs] {name!r}: a name of letters, digits, _ "
                             f"and -, not {RUNS!r} (the certified runs)")
        if not isinstance(value, str):
            raise ClaimError(f"{path}: [inputs] {name}: a path (string)")
        target = project_path(value)
        if not target.exists():
            raise ClaimError(f"{path}: [inputs] {name}: {target} does not exist")
        inputs[name] = target
    claims = []
    entries = doc.get("claim") or []
    if not entries:
        raise ClaimError(f"{path}: no [[claim]] entries")
    for i, entry in enumerate(entries, 1):
        where = f"{path}: claim {i}"
        if not isinstance(entry, dict) or set(entry) - {"name", "command"} \
                or "command" not in entry:
            raise ClaimError(f"{where}: needs `command` (and optionally `name`), nothing else")
        args = _command_args(entry["command"], where)
        names = placeholders(args)
        missing = [n for n in names if n != RUNS and n not in inputs]
        if missing:
            raise ClaimError(f"{where}: {{{missing[0]}}} is not a name of [inputs] (valid: "
                             f"{', '.join(['runs', *inputs])})")
        for a in args:
            if not PLACEHOLDER.search(a) and a not in SUBCOMMANDS and "/" in a \
                    and project_path(a).exists():
                raise ClaimError(f"{where}: reads {a} directly; bind it under [inputs] and "
                                 "write {name}, so that verify recomputes it from bound files")
        claims.append(ClaimSpec(str(entry.get("name") or " ".join(args)), args, "claims file"))
    return claims, inputs


def default_claims(report: Mapping[str, Any]) -> tuple[list[ClaimSpec], dict[str, Path]]:
    """What `harness report` shows, from the sweep's [report] table: per-group summary,
    aggregates with bootstrap CIs, equivalence verdicts, the staleness audit, Atari-5 and a
    reproduction check against [report] published, on the report's own options."""
    opts = report_options(report)
    group = ["--group-by", opts["group_by"]]
    seed = ["--seed", str(opts.get("seed", 0))]
    reps = opts.get("reps", 2_000)
    agg_reps = opts.get("aggregate_reps", 50_000)
    ref = ["--reference", opts["reference"]] if "reference" in opts else []
    delta = ["--delta", str(opts["delta"])] if "delta" in opts else []
    out = [
        ClaimSpec("per-group final scores", ("summary", "{runs}", *group), "report"),
        ClaimSpec("aggregates with bootstrap CIs",
                  ("aggregate", "{runs}", *group, "--reps", str(agg_reps), *seed, *ref),
                  "report"),
        ClaimSpec("equivalence verdicts", ("equivalence", "{runs}", *group, *delta, *ref),
                  "report"),
        ClaimSpec("staleness audit", ("staleness", "{runs}", *group), "report"),
        ClaimSpec("Atari-5 estimates", ("atari5", "{runs}", *group, "--reps", str(reps),
                                        *seed), "report"),
    ]
    inputs: dict[str, Path] = {}
    if "published" in report:
        pub = dict(report["published"])
        inputs["published"] = project_path(pub.pop("table"))
        args = ["reproduce", "--runs", "{runs}", "--published", "{published}",
                "--column", str(pub.pop("column")), "--reps", str(agg_reps), *seed]
        for key, value in sorted(pub.items()):
            flag = "--" + key.replace("_", "-")
            if value is True:
                args.append(flag)
            elif value is not False:
                args += [flag, str(value)]
        out.append(ClaimSpec("reproduction of the published column", tuple(args), "report"))
    return out, inputs


def resolve(args: Sequence[str], bindings: Mapping[str, Path]) -> list[str]:
    return [PLACEHOLDER.sub(lambda m: str(bindings[m.group(1)]), a) for a in args]


def _unbind(text: str, bindings: Mapping[str, Path]) -> str:
    forms = []
    for name, path in bindings.items():
        for form in {str(path), str(Path(path).resolve()), os.path.abspath(path)}:
            forms.append((form, "{" + name + "}"))
    for form, placeholder in sorted(forms, key=lambda f: -len(f[0])):
        text = text.replace(form, placeholder)
    return text


def run_claim(args: Sequence[str], bindings: Mapping[str, Path]) -> ClaimOutput:
    """Run one claim's command in this process, without any analysis cache; its output
    with the bound paths written as placeholders."""
    from analysis.cli import main as analysis_main

    out, err = io.StringIO(), io.StringIO()
    before = os.environ.get(NO_CACHE_ENV)
    os.environ[NO_CACHE_ENV] = "1"
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = int(analysis_main(resolve(args, bindings)))
            except SystemExit as e:  # tyro's usage errors
                code = e.code if isinstance(e.code, int) else EXIT_BAD_INPUT
    finally:
        if before is None:
            os.environ.pop(NO_CACHE_ENV, None)
        else:
            os.environ[NO_CACHE_ENV] = before
    return ClaimOutput(code, _unbind(out.getvalue(), bindings), _unbind(err.getvalue(), bindings))


def input_runs(args: Sequence[str], bindings: Mapping[str, Path]) -> list[str]:
    """The run ids a claim reads: every run folder under the bound paths it names."""
    ids: set[str] = set()
    for name in placeholders(args):
        path = bindings[name]
        if path.is_dir():
            ids.update(d.name for d in find_run_dirs(path, skip=(".analysis-cache",)))
    return sorted(ids)
