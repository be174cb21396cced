"""Bad input is refused before anything is written.

Generated: every subcommand of `python -m analysis` and `python -m harness`, `python -m
calibration`, and every numeric or choice flag it takes is read from the CLI definitions (a new flag is covered
without editing this file), given a value outside what it allows, and must exit 2 with a
message on stderr, no traceback, and every file under the results root byte-identical.
Then the cases a new user found: an unknown --group-by or --where key, `harness report
--delta -1` rewriting staleness.*, `harness regress` erring on stdout, certify's
"left out: ... error:" line and '{runs}', "1 independent seeds", and two --help oddities.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import shutil
import types
import typing
from pathlib import Path

import pytest
from harness_cli import ROOT
from synthetic_records import write_final_score_run
from test_help_texts import help_text

from runrecord.exits import EXIT_BAD_INPUT
from runrecord.flag_bounds import FLAG_BOUNDS, Bound

REFERENCE = ROOT / "results" / "reference" / "smoke-cartpole"

NO_BAD_VALUE: dict[str, str] = {
    # Every numeric flag today has a bound in runrecord.flag_bounds.FLAG_BOUNDS. A flag
    # that may take any number (none yet) goes here, with the reason, e.g.
    # "offset": "any shift of the x axis is meaningful",
}
"""Numeric flags for which no value is bad, and why."""

REQUIRED: dict[str, list[str]] = {
    # the arguments a subcommand cannot parse without ({root}: the results root)
    "analysis regression": ["--new", "{root}", "--reference", "{root}"],
    "analysis figures": ["{root}"],
    "analysis paper-tables": ["--table", "{root}"],
    "analysis reproduce": ["--runs", "{root}"],
    "analysis orb-import": ["{root}", "--out", "{root}/imported"],
    "analysis orb-fetch": ["--entity", "e", "--project", "p", "--cache", "{root}/cache"],
    "analysis import": ["{root}", "--out", "{root}/imported"],
    "harness verify": ["{root}/smoke/certificate.json"],
}
RECORD_COMMANDS_TAKE_INPUTS = "{root}"  # a RecordArgs subcommand's positional folder


def _numeric_or_choice(tp: object) -> str | None:
    """'number', 'choice' or None (other flags: paths, strings, booleans)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return _numeric_or_choice(args[0])
    if tp in (int, float):
        return "number"
    if origin is typing.Literal:
        return "choice"
    if origin in (typing.Union, types.UnionType):
        kinds = {_numeric_or_choice(a) for a in args if a is not type(None)} - {None}
        return next(iter(kinds)) if len(kinds) == 1 else None
    if origin is tuple and args:
        return _numeric_or_choice(args[0])
    return None


def _commands() -> list[tuple[str, list[str], type]]:
    """(prog name, argv prefix, config class) of every subcommand (each `import` format),
    and of `python -m calibration`."""
    from analysis.cli import Command as AnalysisCommand
    from calibration.cli import Calibrate
    from harness.cli import Command as HarnessCommand
    from runrecord.cli_dispatch import subcommands

    out: list[tuple[str, list[str], type]] = [("calibration", [], Calibrate)]
    for tool, subs in (("analysis", subcommands(AnalysisCommand)),
                       ("harness", subcommands(HarnessCommand))):
        for name, (cls, _) in subs.items():
            if dataclasses.is_dataclass(cls):
                out.append((f"{tool} {name}", [name], cls))
            else:  # a union of subcommands: `analysis import <format>`
                for member in typing.get_args(cls):
                    inner, *meta = typing.get_args(member)
                    fmt = next(m.name for m in meta if hasattr(m, "name"))
                    out.append((f"{tool} {name}", [name, fmt], inner))
    return out


def _bad_value(field: str, kind: str, tp: object) -> str:
    if kind == "choice":
        return "no-such-choice"
    bound: Bound = FLAG_BOUNDS[field]
    is_int = "int" in str(tp) and "float" not in str(tp)
    if bound.low is not None:
        bad = bound.low if bound.low_open else bound.low - 1
    else:
        assert bound.high is not None
        bad = bound.high if bound.high_open else bound.high + 1
    return str(int(bad)) if is_int else str(float(bad))


def _cases() -> list[tuple[str, list[str], str]]:
    """(case id, argv with {root}, tool) for every numeric/choice flag of every command."""
    cases = []
    for prog, prefix, cls in _commands():
        tool = prog.split()[0]
        hints = typing.get_type_hints(cls, include_extras=True)
        base = REQUIRED.get(prog)
        if base is None:
            base = (["--preset", "smoke", "--results-root", "{root}"] if tool == "harness"
                    and any(f.name == "preset" for f in dataclasses.fields(cls))
                    else [RECORD_COMMANDS_TAKE_INPUTS] if "inputs" in hints else [])
        for f in dataclasses.fields(cls):
            kind = _numeric_or_choice(hints[f.name])
            if kind is None or f.name in NO_BAD_VALUE:
                continue
            assert kind == "choice" or f.name in FLAG_BOUNDS, (
                f"{prog} --{f.name.replace('_', '-')}: a numeric flag with no bound in "
                "runrecord.flag_bounds.FLAG_BOUNDS (add one, or list it in NO_BAD_VALUE)")
            bad = _bad_value(f.name, kind, hints[f.name])
            flag = "--" + f.name.replace("_", "-")
            cases.append((f"{' '.join([tool, *prefix])} {flag} {bad}",
                          [*prefix, *base, flag, bad], tool))
    return cases


def tree_hash(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def results_root(tmp_path_factory) -> Path:
    """Records of two layouts x three seeds, and a smoke sweep's report and certificate
    files that a command must not touch."""
    root = tmp_path_factory.mktemp("results")
    for layout in ("a0-l0-d1", "a0-l1-d1"):
        for seed in (1, 2, 3):
            write_final_score_run(root, final=250 + seed, env_id="CartPole-v1", seed=seed,
                                  system="cleanba-ppo", layout=layout, total_frames=100_000)
    for name in ("report/staleness.json", "report/staleness.png", "certificate.json",
                 "plan.json"):
        (root / "smoke" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "smoke" / name).write_text("{}\n")
    return root


def _run(tool: str, argv: list[str], capsys) -> tuple[int, str, str]:
    from analysis.cli import main as analysis_main
    from calibration.cli import main as calibration_main
    from harness.cli import main as harness_main

    main = {"analysis": analysis_main, "calibration": calibration_main,
            "harness": harness_main}[tool]
    try:
        code = main(argv)
    except SystemExit as e:  # tyro's own refusals (an unknown choice) exit here
        code = e.code if isinstance(e.code, int) else 1
    out = capsys.readouterr()
    return code, out.out, out.err


def test_every_bad_flag_value_exits_2_and_writes_nothing(results_root, capsys, monkeypatch):
    monkeypatch.chdir(results_root)  # a default output folder would land here
    cases = _cases()
    assert len(cases) > 80  # every subcommand's flags, not a handful
    before = tree_hash(results_root)
    wrong = []
    for case, argv, tool in cases:
        code, out, err = _run(tool, [a.replace("{root}", str(results_root)) for a in argv],
                              capsys)
        if code != EXIT_BAD_INPUT or not err.strip() or "Traceback" in out + err:
            wrong.append(f"{case}: exit {code}, stderr {err.strip()[:120]!r}")
    assert not wrong, "\n".join(wrong)
    assert tree_hash(results_root) == before


def test_the_message_says_what_is_valid(results_root, capsys):
    code, out, err = _run("analysis", ["aggregate", str(results_root), "--confidence", "1.5"],
                          capsys)
    assert code == EXIT_BAD_INPUT and not out
    assert err.strip() == "error: --confidence 1.5: must be between 0 and 1, both excluded"


# ------------------------------------------------------------------ unknown manifest keys

@pytest.mark.parametrize("argv", [
    ["summary", "{root}", "--group-by", "layout.nam"],
    ["aggregate", "{root}", "--group-by", "system,layout.nam", "--reps", "10"],
    ["equivalence", "{root}", "--group-by", "layout.nam"],
    ["staleness", "{root}", "--group-by", "layout.nam", "--json-out", "{root}/s.json"],
    ["figures", "{root}", "--group-by", "layout.nam", "--out", "{root}/figs"],
    ["summary", "{root}", "--where", "layout.nam=a0-l0-d1"],
    ["regression", "--new", "{root}", "--reference", "{root}", "--where", "layout.nam=x"],
])
def test_an_unknown_key_is_refused_with_the_valid_ones(results_root, capsys, argv):
    before = tree_hash(results_root)
    code, out, err = _run("analysis", [a.replace("{root}", str(results_root)) for a in argv],
                          capsys)
    assert code == EXIT_BAD_INPUT, out + err
    assert "layout.nam: no run's manifest has this key (did you mean layout.name" in err
    assert "keys the 6 runs have: " in err and "env_id" in err
    # a table of many keys is counted under its name, not listed key by key
    assert "summary.* (5 keys)" in err and "summary.wall_time_s" not in err
    assert "completed run" not in out  # no summary line ("25 completed runs, 0 left out")
    assert tree_hash(results_root) == before


def test_a_key_some_runs_lack_is_a_warning(tmp_path, capsys):
    """A run without a key that others have groups without it, and a warning says so."""
    from analysis.cli import main

    for seed in (1, 2, 3):
        write_final_score_run(tmp_path, final=250, env_id="CartPole-v1", seed=seed,
                              system="cleanba-ppo", total_frames=100_000)
    run = next((tmp_path / "runs").iterdir())
    text = (run / "manifest.json").read_text()
    (run / "manifest.json").write_text(text.replace('"sweep": "synthetic-final"', '"x": 1'))
    assert main(["summary", str(tmp_path), "--group-by", "sweep", "--no-cache"]) == 0
    err = capsys.readouterr().err
    assert "--group-by sweep: 1 of 3 runs lack this key (grouped without it)" in err


# ------------------------------------------------------------------ harness

def _smoke_root(tmp_path: Path) -> Path:
    """A results root whose smoke sweep has runs and a report already written."""
    root = tmp_path / "results"
    shutil.copytree(REFERENCE, root / "smoke" / "runs",
                    ignore=shutil.ignore_patterns(".analysis-cache"))
    (root / "smoke" / "report").mkdir()
    (root / "smoke" / "report" / "staleness.json").write_text('{"old": true}\n')
    return root


@pytest.mark.parametrize("flags", [["--delta", "-1"], ["--reps", "0"]])
def test_harness_report_checks_before_rewriting_staleness(tmp_path, capsys, flags):
    root = _smoke_root(tmp_path)
    before = tree_hash(root)
    code, out, err = _run("harness", ["report", "--preset", "smoke", "--results-root",
                                      str(root), *flags], capsys)
    assert code == EXIT_BAD_INPUT and "Traceback" not in out + err
    assert err.strip().startswith(f"error: {flags[0]} ") and "must be" in err
    assert tree_hash(root) == before


def test_harness_regress_errs_on_stderr(tmp_path, capsys):
    root = _smoke_root(tmp_path)
    code, out, err = _run("harness", ["regress", "--preset", "smoke", "--results-root",
                                      str(root), "--reference", str(REFERENCE), "--delta",
                                      "-1"], capsys)
    assert code == EXIT_BAD_INPUT and not out and "error: --delta -1.0: must be >= 0" in err


def test_certify_summary_says_what_does_not_apply():
    from harness.certify.certificate import summary_lines

    cert = {"sweep": {"name": "smoke"},
            "completeness": {"planned": 1, "statuses": {"completed": 1}, "missing": [],
                             "unplanned": []},
            "merkle": {"leaves": 3}, "records": {"runs": 1}, "inputs": {},
            "code": {"git_sha": "abc", "dirty": False}, "runs": {},
            "claims": [{"id": "C1", "name": "per-group final scores", "inputs": ["r"],
                        "command": ["python", "-m", "analysis", "summary", "{runs}",
                                    "--group-by", "layout.name"],
                        "output": {"exit_code": 0}}],
            "claims_left_out": [{"name": "Atari-5 estimates",
                                 "reason": "error: no Atari-5 game among the runs"}]}
    text = "\n".join(summary_lines(cert))
    assert "summary <certified runs> --group-by layout.name (exit 0" in text
    assert "{runs}" not in text
    assert "error" not in text
    assert "not claimed (does not apply): Atari-5 estimates: no Atari-5 game" in text


# ------------------------------------------------------------------ words and help

def test_one_seed_is_singular(tmp_path, capsys):
    from analysis.cli import main

    for layout in ("a0-l0-d1", "a0-l1-d1"):
        write_final_score_run(tmp_path, final=250, env_id="CartPole-v1", seed=1,
                              system="cleanba-ppo", layout=layout, total_frames=100_000)
    main(["aggregate", str(tmp_path), "--reps", "20", "--no-cache"])
    out = capsys.readouterr().out
    assert re.search(r"/ a0-l0-d1 +\| 1 +\| 1 +\|", out), out  # the seeds and tasks columns
    assert not re.search(r"\b1 (independent )?seeds\b", out), out


def test_help_offers_only_what_is_valid(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert "--no-no-cache" not in help_text("python -m analysis summary", capsys)
    trainer = help_text("python -m cleanba.ppo cartpole", capsys)
    assert "{envpool,ale,ale-exact}" in trainer and "None,envpool" not in trainer
