"""Every command's --help says only what we wrote.

`python -m analysis --help` once described `import` with typing.Union's docstring ("Union
type; Union[X, Y] means either X or Y ...", about 40 lines): tyro shows a type's
docstring where a subcommand or field has none of its own. Here every entry point with a
tyro config (analysis and harness with each subcommand, the trainers with each preset,
the baseline adapters, the tools and the benchmark scripts) prints its --help in this
process, and no line of the docstrings of Python's builtins, typing, pathlib, dataclasses,
enum, collections or NumPy may appear in it. A new entry point fails
test_every_entry_point_is_checked until it is added to HELP_COMMANDS (or to NOT_TYRO, with
the reason).
"""

from __future__ import annotations

import builtins
import collections
import collections.abc
import dataclasses
import enum
import pathlib
import re
import runpy
import sys
import typing
import warnings
from collections.abc import Callable

import numpy as np
import pytest
from harness_cli import ROOT

PACKAGES = ("runrecord", "benchenv", "cleanba", "baselines", "analysis", "calibration",
            "harness")


def _analysis(*args: str) -> Callable[[], object]:
    from analysis.cli import main

    return lambda: main([*args, "--help"])


def _harness(*args: str) -> Callable[[], object]:
    from harness.cli import main

    return lambda: main([*args, "--help"])


def _module_main(module: str, *args: str) -> Callable[[], object]:
    """`python -m module args --help`, in this process (sys.argv as Python sets it)."""
    def call() -> object:
        saved = sys.argv
        sys.argv = [module, *args, "--help"]
        try:
            return runpy.run_module(module, run_name="__main__", alter_sys=True)
        finally:
            sys.argv = saved
    return call


def _script(path: str) -> Callable[[], object]:
    """`python benchmarks/x.py --help`, in this process."""
    def call() -> object:
        saved = sys.argv
        sys.argv = [path, "--help"]
        try:
            return runpy.run_path(str(ROOT / path), run_name="__main__")
        finally:
            sys.argv = saved
    return call


def _baseline(module: str) -> Callable[[], object]:
    """An adapter's flags (run_as_main would os._exit; its parser is common.parse_cli)."""
    def call() -> object:
        import importlib

        from baselines.common import parse_cli

        b = importlib.import_module(module).BASELINE
        return parse_cli(b.args, ["--help"], b.prog)
    return call


def _analysis_subcommands() -> list[str]:
    from analysis.cli import Command
    from runrecord.cli_dispatch import subcommands

    return list(subcommands(Command))


def _harness_subcommands() -> list[str]:
    from harness.cli import Command
    from runrecord.cli_dispatch import subcommands

    return list(subcommands(Command))


IMPORT_FORMATS = ("table", "tensorboard", "monitor", "wandb", "wandb-csv")

HELP_COMMANDS: dict[str, Callable[[], Callable[[], object]]] = {
    "python -m analysis": lambda: _analysis(),
    **{f"python -m analysis {s}": (lambda s=s: _analysis(s)) for s in (
        "summary", "aggregate", "curves", "equivalence", "regression", "plan-seeds",
        "plan-sequential", "staleness", "figures", "paper-tables", "atari5", "reproduce",
        "orb-import", "orb-fetch", "import")},
    **{f"python -m analysis import {f}": (lambda f=f: _analysis("import", f))
       for f in IMPORT_FORMATS},
    "python -m analysis.atari5.fit": lambda: _module_main("analysis.atari5.fit"),
    "python -m calibration": lambda: _module_main("calibration"),
    "python -m harness": lambda: _harness(),
    **{f"python -m harness {s}": (lambda s=s: _harness(s)) for s in (
        "plan", "run", "status", "report", "regress", "determinism-check", "certify",
        "verify")},
    **{f"python -m cleanba.{a} {p}": (lambda a=a, p=p: _module_main(f"cleanba.{a}", p))
       for a in ("ppo", "impala") for p in ("atari", "cartpole")},
    "python -m cleanba.bench": lambda: _module_main("cleanba.bench"),
    "python -m cleanba.determinism_check": lambda: _module_main("cleanba.determinism_check"),
    "python -m cleanba.speed_bound": lambda: _module_main("cleanba.speed_bound"),
    "python -m baselines.monobeast": lambda: _baseline("baselines.monobeast"),
    "python -m baselines.moolib": lambda: _baseline("baselines.moolib"),
    "python -m baselines.bench": lambda: _module_main("baselines.bench"),
    **{f"python {p}": (lambda p=p: _script(p)) for p in (
        "benchmarks/bench_analysis.py", "benchmarks/bench_deterministic_primitives.py",
        "benchmarks/bench_imports.py", "benchmarks/bench_scale.py", "benchmarks/bench_certificate.py",
        "benchmarks/bench_checkpoint.py", "benchmarks/bench_ale_exact.py",
        "benchmarks/bench_backends.py", "benchmarks/bench_actor_modes.py",
        "benchmarks/backend_equivalence.py",
        "benchmarks/campaign.py", "benchmarks/host_memory.py",
        "benchmarks/device_kit.py", "benchmarks/gpu_suite.py")},
}
"""Every command a user runs, and how to print its --help here."""

NOT_TYRO = {
    "harness/_child.py": "the harness's own child process (one run), not a user command",
    "benchmarks/measured_run.py": "a GPU-suite step's child process (one JSON argument)",
}
"""Entry points without a tyro config, and why."""


def _entry_point_files() -> set[str]:
    """Every file that runs as a command: a package's __main__.py or a module or benchmark
    script with an `if __name__ == "__main__":` block."""
    out = set()
    for path in [*(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")),
                 *(ROOT / "benchmarks").glob("*.py")]:
        text = path.read_text(encoding="utf-8")
        if path.name == "__main__.py" or re.search(r'^if __name__ == "__main__":', text, re.M):
            out.add(path.relative_to(ROOT).as_posix())
    return out


def _command_file(command: str) -> str:
    words = command.split()
    if words[1] == "-m":
        mod = ROOT.joinpath(*words[2].split("."))
        return (mod / "__main__.py" if mod.is_dir() else mod.with_suffix(".py")) \
            .relative_to(ROOT).as_posix()
    return words[1]


def test_every_entry_point_is_checked():
    covered = {_command_file(c) for c in HELP_COMMANDS} | set(NOT_TYRO)
    missing = _entry_point_files() - covered
    assert not missing, (f"entry points whose --help nobody checks: {sorted(missing)}; add "
                         "them to HELP_COMMANDS (or NOT_TYRO with the reason)")
    assert not covered - _entry_point_files() - {"analysis/__main__.py"}, "stale entries"
    assert set(_analysis_subcommands()) == {c.split()[3] for c in HELP_COMMANDS
                                            if c.startswith("python -m analysis ")}
    assert set(_harness_subcommands()) == {c.split()[3] for c in HELP_COMMANDS
                                           if c.startswith("python -m harness ")}


def _foreign_lines() -> set[str]:
    """The first lines (25+ characters) of the docstrings of Python's and NumPy's public
    names: text tyro may show for a type with no docstring of ours."""
    out: set[str] = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # typing.io and friends warn when touched
        for mod in (builtins, typing, pathlib, dataclasses, enum, collections,
                    collections.abc, np):
            for obj in [mod, *(getattr(mod, n, None) for n in dir(mod) if not n.startswith("_"))]:
                doc = getattr(obj, "__doc__", None)
                if isinstance(doc, str):
                    out |= {" ".join(line.split()) for line in doc.strip().splitlines()[:3]
                            if len(line.strip()) >= 25}
    return out


def _flat(text: str) -> str:
    """Help text without rich's boxes and line wraps."""
    return " ".join(re.sub(r"[│╭╮╰╯─•]", " ", text).split())


def help_text(command: str, capsys) -> str:
    """The command's --help output (it exits 0)."""
    call = HELP_COMMANDS[command]()
    with pytest.raises(SystemExit) as e:
        call()
    assert e.value.code in (0, None), command
    out = capsys.readouterr()
    return out.out + out.err


def test_the_foreign_text_detector_finds_typing_union():
    """The check sees what finding 2 quoted."""
    foreign = _foreign_lines()
    assert "Union type; Union[X, Y] means either X or Y." in foreign
    assert any(line in _flat("│ • import  Union type; Union[X, Y] means │\n"
                             "│           either X or Y.                │") for line in foreign)


def test_every_help_text_is_ours(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    foreign = _foreign_lines()
    bad: dict[str, list[str]] = {}
    for command in HELP_COMMANDS:
        flat = _flat(help_text(command, capsys))
        assert "usage:" in flat, command
        found = sorted(line for line in foreign if line in flat)
        if found:
            bad[command] = found
    assert not bad, f"--help showing text that is not ours: {bad}"


def test_import_says_what_it_is(capsys):
    """The `import` subcommand (a union of formats) has its own description, at the top
    level and in its own --help."""
    for command in ("python -m analysis", "python -m analysis import"):
        flat = _flat(help_text(command, capsys))
        assert "Runs from other tools as run records" in flat, command
        assert "Union" not in flat, command


def test_preset_help_names_every_preset(capsys):
    """--preset's help lists every preset (it is the only listing a user of `--help`
    sees)."""
    from harness.cli import main as harness_main
    from harness.sweep import list_presets

    with pytest.raises(SystemExit):
        harness_main(["plan", "--help"])
    shown = " ".join(re.sub(r"[│╭╮╰╯─]", " ", capsys.readouterr().out).split())
    listed = re.search(r"Name of a preset under harness/presets/ \(([^)]*)\)", shown)
    assert listed, shown
    assert sorted(p.strip() for p in listed[1].split(",")) == sorted(list_presets())


@pytest.mark.parametrize("command, flag_text", [
    ("python -m harness run", "Also retry runs whose last failure was deterministic (bad "
     "arguments, a non-finite loss, a programming error), e.g. after fixing its cause; "
     "transient failures are retried anyway while attempts are left."),
    ("python -m cleanba.ppo atari", "Atari backend: envpool, ale (ale-py's vector env, "
     "EnvPool's semantics; Linux, macOS, Windows) or ale-exact (one ale-py game per env, "
     "slower; checkpoints restore its envs exactly)."),
    ("python -m analysis aggregate", "Keep only runs whose manifest matches KEY=VALUE "
     "(dotted keys), e.g. system=cleanba-ppo. Repeatable; all must match."),
])
def test_flag_help_wraps_at_the_terminal_not_at_source_lines(command, flag_text, capsys,
                                                               monkeypatch):
    """A flag whose docstring spans several source lines shows as one paragraph: on a
    terminal wide enough for it, on one line of the help table (tyro alone keeps the
    source's line breaks, runrecord.cli_help)."""
    monkeypatch.setenv("COLUMNS", "400")
    rows = [" ".join(re.sub(r"[│╭╮╰╯─•]", " ", line).split())
            for line in help_text(command, capsys).splitlines()]
    assert any(flag_text in row for row in rows), command


def test_flowed_keeps_paragraphs_and_list_items():
    from runrecord.cli_help import flowed

    doc = "First line\n    goes on.\n\n    Items:\n    - one\n      more\n    - two"
    assert flowed(doc) == "First line goes on.\n\nItems:\n- one more\n- two"


def test_every_help_line_fits_the_terminal(capsys, monkeypatch):
    """A command's description (its docstring) is flowed and wrapped to the terminal like
    its flags' help: tyro alone joins a paragraph's source lines into one line it does not
    wrap, and breaks it wherever a source line starts with "(", "--" or a digit
    (runrecord.cli_help.described). Only the usage line, which names every subcommand,
    may be wider."""
    monkeypatch.setenv("COLUMNS", "90")
    wide = {}
    for command in HELP_COMMANDS:
        lines = [line for line in help_text(command, capsys).splitlines()
                 if not line.startswith("usage:") and len(line) > 90]
        if lines:
            wide[command] = lines[0]
    assert not wide, f"--help lines wider than the terminal: {wide}"


def test_a_description_reads_as_its_paragraphs(capsys, monkeypatch):
    """`analysis regression`'s docstring has source lines starting "(" and "2 error": its
    --help shows the paragraph whole, its lines broken only to fit the terminal."""
    import inspect

    from analysis.cli.scores import Regression
    from runrecord.cli_help import flowed

    monkeypatch.setenv("COLUMNS", "90")
    text = help_text("python -m analysis regression", capsys)
    description = text.split("\n\n")[1]
    assert " ".join(description.split()) == flowed(inspect.getdoc(Regression))
    assert all(line.startswith("  ") and len(line) <= 90 for line in description.splitlines())
    assert len(description.splitlines()) > 1
