"""Parsing a subcommand of `python -m analysis` or `python -m harness`: one way for both.

A command line naming a subcommand is parsed by that subcommand's config alone, so an
unknown flag's "perhaps you meant" suggestions come from the flags it accepts, not from
the other subcommands'. Its --help shows its own description (a subcommand marker's,
else the config's docstring), ending with the exit codes where its exit code is an
outcome (`deciding`). Every flag's value is checked (runrecord.flag_bounds) before the
command reads or writes anything.
"""

from __future__ import annotations

import inspect
import os
import sys
import typing
from collections.abc import Sequence
from typing import Annotated, Any

from runrecord.cli_help import command_help, described, flow_field_help, flowed, wants_help
from runrecord.exits import EXIT_BAD_INPUT
from runrecord.flag_bounds import FlagValueError, check_flags


def subcommands(command: Any) -> dict[str, tuple[type, str | None]]:
    """{name: (config class, the marker's description or None)} of a union of
    `Annotated[Config, tyro.conf.subcommand(name, ...)]` members."""
    out: dict[str, tuple[type, str | None]] = {}
    for member in typing.get_args(command):
        cls, *meta = typing.get_args(member)
        name = next(m.name for m in meta if hasattr(m, "name"))
        out[name] = (cls, next((m.description for m in meta
                                if getattr(m, "description", None)), None))
    return out


def parse_command(command: Any, prog: str, help_text: str, deciding: Sequence[str],
                  argv: Sequence[str] | None = None) -> Any:
    """The parsed config of the command line `argv` (default: sys.argv[1:]); tyro exits 2
    with its message on a bad flag, 0 after --help."""
    import tyro

    args = list(sys.argv[1:] if argv is None else argv)
    help_asked = wants_help(args)
    if help_asked:
        flow_field_help(command)
    sub = subcommands(command)
    if args and args[0] in sub:
        cls, description = sub[args[0]]
        text = description_of(cls, description)
        if help_asked and not isinstance(cls, type):
            cls = help_union(cls, args[1:])
        return tyro.cli(cls, args=args[1:], prog=f"{prog} {args[0]}",  # type: ignore[call-overload]
                        description=command_help(text, args[0] in deciding))
    return tyro.cli(help_union(command, []) if help_asked else command,  # type: ignore[call-overload]
                    args=args, prog=prog, description=command_help(help_text, decides=True))


def description_of(cls: Any, marker_description: str | None) -> str:
    """A subcommand's description: its marker's, else its config's docstring."""
    return marker_description or (inspect.getdoc(cls) if isinstance(cls, type) else None) or ""


def help_union(command: Any, args: Sequence[str]) -> Any:
    """`command`, a union of subcommands, with the descriptions --help shows: flowed for
    the subcommand list (it wraps them itself); for the subcommand `args` names, whose own
    help this is, as runrecord.cli_help.described. A member that is a union of its own
    (`analysis import`) likewise."""
    import tyro

    members = []
    for name, (cls, text) in subcommands(command).items():
        chosen = bool(args) and args[0] == name
        doc = description_of(cls, text)
        if not isinstance(cls, type):
            cls = help_union(cls, args[1:] if chosen else [])
        members.append(Annotated[cls, tyro.conf.subcommand(  # type: ignore[valid-type]
            name, description=described(doc) if chosen else flowed(doc))])
    return typing.Union[tuple(members)]  # noqa: UP007 (a union built at run time)


def flags_refused(config: Any) -> int | None:
    """EXIT_BAD_INPUT, with the message on stderr, where a flag's value is outside what it
    allows; None where every value is valid."""
    try:
        check_flags(config)
    except FlagValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return None


def exit_with(main: Any) -> None:
    """sys.exit(main()), with stdout line-buffered (so that logs follow a long sweep into
    files and pipes as it goes) and a closed pipe (`... | head`) ending the command quietly
    with 0, not a traceback."""
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        discard_output(sys.stdout)
        code = 0
    sys.exit(code)


def discard_output(stream: Any) -> None:
    """Point `stream` at /dev/null: its reader has gone (`| head` closed the pipe), so later
    writes, and the interpreter's own flush at exit, drop the text instead of raising again.
    A stream without a file descriptor (a test's capture) is left as it is."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
