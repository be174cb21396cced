"""Words and numbers in the lines the commands print: counted nouns ("1 independent
seed", "3 seeds") and signed differences ("+0.012", never "-0.000")."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`counted(1, "seed")` -> "1 seed"; `counted(3, "seed")` -> "3 seeds"; a
    multi-word noun takes the plural on its last word ("independent seeds")."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


def signed(x: float, places: int = 3) -> str:
    """A difference with its sign, `places` decimals: `signed(0.0123)` -> "+0.012". A value
    that rounds to zero prints "+0.000": float noise around an exact 0 (two sides computed
    along different paths) would otherwise show "-0.000", which reads as a loss."""
    text = f"{x:+.{places}f}"
    return "+" + text[1:] if text.startswith("-") and float(text) == 0 else text
