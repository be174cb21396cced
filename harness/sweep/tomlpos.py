"""Line numbers for keys of a TOML file, so that sweep errors can name the line.

tomllib returns plain dicts without positions. This scanner reads the same text line by
line and records where each key (as a path of table names, array-table indexes and keys)
is written. It understands what sweep files use: `[table]`, `[[array]]`, `key = value`,
dotted and quoted keys, comments and multi-line arrays. It only locates keys; tomllib
remains the parser of record.
"""

from __future__ import annotations

import re

Path_ = tuple[str | int, ...]

_ARRAY_HEADER = re.compile(r"^\s*\[\[\s*(?P<name>[^\]]+?)\s*\]\]")
_TABLE_HEADER = re.compile(r"^\s*\[\s*(?P<name>[^\]\[]+?)\s*\]")
_KEY_LINE = re.compile(r"^\s*(?P<key>(?:\"[^\"]*\"|'[^']*'|[A-Za-z0-9_-]+)"
                       r"(?:\s*\.\s*(?:\"[^\"]*\"|'[^']*'|[A-Za-z0-9_-]+))*)\s*=")


def _split_dotted(text: str) -> list[str]:
    parts = re.findall(r"\"([^\"]*)\"|'([^']*)'|([A-Za-z0-9_-]+)", text)
    return [a or b or c for a, b, c in parts]


class KeyLines:
    """Map key paths of a TOML document to 1-based line numbers."""

    def __init__(self, text: str):
        self.lines = text.splitlines()
        self._where: dict[Path_, int] = {}
        array_counts: dict[tuple[str, ...], int] = {}
        current: Path_ = ()
        depth = 0  # open brackets of a multi-line value: its lines hold no keys
        for lineno, raw in enumerate(self.lines, start=1):
            line = _strip_comment(raw)
            if depth > 0:
                depth += line.count("[") + line.count("{") - line.count("]") - line.count("}")
                continue
            m = _ARRAY_HEADER.match(line)
            if m:
                names = tuple(_split_dotted(m["name"]))
                index = array_counts.get(names, 0)
                array_counts[names] = index + 1
                current = (*names, index)
                self._where.setdefault(current, lineno)
                self._where.setdefault(tuple(names), lineno)
                continue
            m = _TABLE_HEADER.match(line)
            if m:
                current = tuple(_split_dotted(m["name"]))
                self._where.setdefault(current, lineno)
                continue
            m = _KEY_LINE.match(line)
            if m:
                keys = _split_dotted(m["key"])
                for i in range(1, len(keys) + 1):
                    self._where.setdefault((*current, *keys[:i]), lineno)
                value = line[m.end():]
                depth = value.count("[") + value.count("{") - value.count("]") - value.count("}")

    def line(self, path: Path_) -> int | None:
        """Line of the key at `path`, or of its nearest enclosing table."""
        p = tuple(path)
        while p:
            if p in self._where:
                return self._where[p]
            p = p[:-1]
        return None

    def value_line(self, path: Path_, value: object) -> int | None:
        """Line where `value` (a list element) is written inside the value of `path`."""
        start = self.line(path)
        if start is None:
            return None
        needles = [f'"{value}"', f"'{value}'"] if isinstance(value, str) else [str(value)]
        for i in range(start - 1, min(len(self.lines), start + 200)):
            text = _strip_comment(self.lines[i])
            if i > start - 1 and (_KEY_LINE.match(text) or _TABLE_HEADER.match(text)):
                break
            if any(n in text for n in needles):
                return i + 1
        return start


def _strip_comment(line: str) -> str:
    # A '#' outside quotes starts a comment.
    out, quote = [], None
    for ch in line:
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            break
        out.append(ch)
    return "".join(out)
