"""The fenced blocks of README.md, docs/*.md and results/README.md, and the markers that
say how tests/test_doc_commands.py treats each (the convention: docs/architecture.md,
"Documented commands").

A command block is a block labelled bash, sh, shell or console, or an unlabelled block
whose first line is a shell command (COMMAND_START). Markers are HTML comments on the lines
just above the fence:

    <!-- doc-commands: skip REASON -->            the block is not run here
    <!-- doc-commands: skip "TEXT" REASON -->     its commands containing TEXT are not run
    <!-- doc-commands: run-by FILE REASON -->     FILE runs it: every command of the block
                                                  appears in FILE, or FILE names this doc
    <!-- doc-commands: exit N "TEXT" -->          commands containing TEXT exit N

A reason is required and every "TEXT" must match a command of its block.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from harness_cli import ROOT

DOCS = ("README.md", *sorted(p.relative_to(ROOT).as_posix()
                             for p in (ROOT / "docs").glob("*.md")), "results/README.md")
SHELL_LANGS = ("bash", "sh", "shell", "console")
COMMAND_START = re.compile(r"^(\$ )?(python[0-9.]*|\./|scripts/|pip|uv|git|curl|conda|apt-get|sudo|bash|\.venv/|"
                           r"export|rm|mkdir|cd|nvidia-smi|for|\. )")
MARKER = re.compile(r"<!-- doc-commands: (skip|run-by|exit)\b\s*(.*?)\s*-->")


@dataclass
class Marker:
    kind: str  # skip, run-by, exit
    text: str | None  # the quoted TEXT (commands it applies to); None: the whole block
    arg: str  # skip: the reason; run-by: FILE and reason; exit: the code
    line: int


@dataclass
class Block:
    doc: str
    line: int  # of the opening fence, 1-based
    lang: str
    body: list[str]
    markers: list[Marker] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"

    @property
    def is_commands(self) -> bool:
        if self.lang in SHELL_LANGS:
            return True
        first = next((ln for ln in self.body if ln.strip()), "")
        return self.lang == "" and bool(COMMAND_START.match(first))

    def commands(self) -> list[str]:
        """The logical commands: continuation lines joined, a for/while loop with its body
        as one; console blocks: the `$ ` lines only."""
        lines = self.body
        if self.lang == "console":
            lines = [ln[2:] for ln in lines if ln.startswith("$ ")]
        out: list[str] = []
        buf = ""
        depth = 0  # open for/while loops
        for ln in lines:
            if not buf and (not ln.strip() or ln.lstrip().startswith("#")):
                continue
            buf = f"{buf}\n{ln}" if buf else ln
            if ln.rstrip().endswith("\\"):
                continue
            words = code(ln).replace(";", " ; ").split()
            depth += bool(words) and words[0] in ("for", "while", "until")
            depth -= words.count("done")
            if depth > 0:
                continue
            out.append(buf)
            buf, depth = "", 0
        if buf:
            out.append(buf)
        return out

    def expected_output(self) -> list[str]:
        """A console block's output lines (those without `$ `)."""
        return [ln for ln in self.body if ln.strip() and not ln.startswith("$ ")] \
            if self.lang == "console" else []

    def skips_whole(self) -> Marker | None:
        return next((m for m in self.markers if m.kind in ("skip", "run-by") and m.text is None),
                    None)

    def applies(self, m: Marker, command: str) -> bool:
        return m.text is not None and squash(m.text) in squash(code(command))


def code(command: str) -> str:
    """A command without its comments (a `#` after whitespace, outside quotes)."""
    out = []
    for ln in command.split("\n"):
        blanked = re.sub(r"\"[^\"]*\"|'[^']*'", lambda m: " " * len(m.group()), ln)
        m = re.search(r"(^|\s)#", blanked)
        out.append(ln[:m.start()].rstrip() if m else ln.rstrip())
    return "\n".join(out)


def squash(text: str) -> str:
    return " ".join(text.replace("\\\n", " ").split())


def _parse_marker(m: re.Match, line: int) -> Marker:
    kind, rest = m.group(1), m.group(2)
    text = None
    q = re.match(r'"([^"]+)"\s*(.*)', rest)
    if kind == "exit":
        code_text, _, tail = rest.partition(" ")
        q = re.match(r'"([^"]+)"\s*(.*)', tail.strip())
        return Marker(kind, q.group(1) if q else None, code_text, line)
    if q:
        text, rest = q.group(1), q.group(2)
    return Marker(kind, text, rest, line)


def doc_blocks(doc: str) -> list[Block]:
    """Every fenced block of `doc`, with the markers above it."""
    lines = (ROOT / doc).read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        block = Block(doc, i + 1, m.group(1), lines[i + 1:j])
        k = i - 1
        while k >= 0 and lines[k].strip().startswith("<!--"):
            for mm in MARKER.finditer(lines[k]):
                block.markers.insert(0, _parse_marker(mm, k + 1))
            k -= 1
        out.append(block)
        i = j + 1
    return out


def all_blocks() -> list[Block]:
    return [b for doc in DOCS for b in doc_blocks(doc)]
