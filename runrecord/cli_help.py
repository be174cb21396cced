"""Flag help as flowed text: every command line of the project is parsed by tyro through
`parse_config` (or after `flow_field_help`), so that `--help` wraps each flag's docstring
to the terminal instead of at the source's line breaks (done only when --help is asked
for: `wants_help`).

tyro (1.0) reads a field's docstring with the source's indentation still on its
continuation lines, so it keeps every line break of the source, and the help table then
wraps those lines a second time: ragged paragraphs. A field's `help` metadata is shown
as given, so each field gets its docstring flowed there: one paragraph per blank-line
block, a line starting "- " (a list item) kept on its own line. A command's description
(its docstring) is flowed too: tyro joins its lines only where the next one starts with
a letter, so a line starting "(", "--" or a digit broke the paragraph there.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import typing
from collections.abc import Sequence
from typing import Any

from runrecord.exits import exit_code_text


def flowed(doc: str) -> str:
    """`doc` (a docstring as written) as paragraphs of single lines."""
    paragraphs = []
    for block in inspect.cleandoc(doc).split("\n\n"):
        lines: list[str] = []
        for line in block.strip().split("\n"):
            if lines and not line.lstrip().startswith("- "):
                lines[-1] += " " + line.strip()
            else:
                lines.append(line.strip())
        paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs)


def field_docstrings(cls: type) -> dict[str, str]:
    """{field name: its description} as tyro finds it: an attribute docstring or an entry
    of a class docstring's parameter list, of `cls` or else the nearest base that has one
    (docstring_parser, which tyro itself reads them with)."""
    import docstring_parser

    out: dict[str, str] = {}
    for c in reversed(cls.__mro__):
        if c.__module__ != "builtins":
            out.update({p.arg_name: p.description
                        for p in docstring_parser.parse_from_object(c).params
                        if p.description is not None})
    return out


def _dataclasses_in(hint: Any) -> list[type]:
    """The dataclasses a type hint names (itself, or inside a union, Annotated, ...)."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return [hint]
    return [c for arg in typing.get_args(hint) for c in _dataclasses_in(arg)]


def flow_field_help(command: Any, _seen: set[type] | None = None) -> None:
    """Give every field of the dataclasses `command` names (a config class, a union of
    subcommands, an instance), and of the dataclasses their fields hold, its docstring
    flowed as `help` metadata. A field that has `help` metadata keeps it."""
    seen = set() if _seen is None else _seen
    classes = ([type(command)] if dataclasses.is_dataclass(command)
               and not isinstance(command, type) else _dataclasses_in(command))
    for cls in classes:
        if cls in seen:
            continue
        seen.add(cls)
        docs = field_docstrings(cls)
        try:
            hints = typing.get_type_hints(cls, include_extras=True)
        except (NameError, TypeError):  # a forward reference this module cannot resolve
            hints = {}
        for f in dataclasses.fields(cls):
            if f.name in docs and "help" not in f.metadata:
                f.metadata = {**f.metadata, "help": flowed(docs[f.name])}  # type: ignore[assignment,misc]
            if f.name in hints:
                flow_field_help(hints[f.name], seen)


def wants_help(args: Sequence[str] | None = None) -> bool:
    """Whether the command line `args` (default: sys.argv[1:]) asks for --help, the one
    output that shows every flag's help. Flowing reads the source of every config class
    (0.1-0.3 s for a CLI's subcommands), so a command that only runs does not pay it."""
    return any(a in ("-h", "--help") for a in (sys.argv[1:] if args is None else args))


def described(doc: str) -> str:
    """A command's description as --help shows it: `doc` flowed, each paragraph wrapped to
    the terminal (at most 100 columns) and indented by two spaces. tyro shows an indented
    line as it is, but joins a plain paragraph's lines into one that it does not wrap."""
    import shutil
    import textwrap

    width = min(shutil.get_terminal_size().columns, 100)
    lines = []
    for line in flowed(doc).split("\n"):
        item = "  " if line.startswith("- ") else ""
        lines += textwrap.wrap(line, width, initial_indent="  ",
                               subsequent_indent="  " + item) or [""]
    return "\n".join(lines)


def command_help(doc: str, decides: bool) -> str:
    """A command's --help description: its docstring (`described`), then, for a command
    whose exit code reports an outcome, the exit-code table (indented: tyro keeps its
    lines)."""
    return described(doc) + ("\n\n" + exit_code_text() if decides else "")


def parse_config(command: Any, *, decides: bool = False, **kwargs: Any) -> Any:
    """tyro.cli(command, **kwargs), with flowed flag help when --help is asked for, and
    the description (`description`, else a config class's docstring) as `described`,
    ending with the exit codes where the command's exit code is an outcome (`decides`)."""
    import tyro

    if wants_help(kwargs.get("args")):
        flow_field_help(command)
    doc = kwargs.get("description") or (inspect.getdoc(command) if isinstance(command, type)
                                        else None)
    if doc:
        kwargs["description"] = command_help(doc, decides)
    return tyro.cli(command, **kwargs)
