"""Counted nouns in the lines the commands print: "1 independent seed", "3 seeds"."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`counted(1, "seed")` -> "1 seed"; `counted(3, "seed")` -> "3 seeds"; a
    multi-word noun takes the plural on its last word ("independent seeds")."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"
