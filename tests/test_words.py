"""The words and numbers the commands print (runrecord.words)."""

from __future__ import annotations

import pytest

from runrecord.words import counted, signed


@pytest.mark.parametrize("x, places, text", [
    (0.0123, 3, "+0.012"), (-0.0123, 3, "-0.012"), (0.0, 3, "+0.000"),
    (-0.0, 3, "+0.000"), (-2e-17, 3, "+0.000"), (-0.0004, 3, "+0.000"),
    (-0.0005001, 3, "-0.001"), (-0.00004, 4, "+0.0000"), (-0.00006, 4, "-0.0001"),
    (float("nan"), 3, "+nan"), (float("-inf"), 3, "-inf"),
])
def test_a_difference_that_rounds_to_zero_never_reads_as_a_loss(x, places, text):
    assert signed(x, places) == text


def test_one_seed_stays_singular():
    assert (counted(1, "seed"), counted(3, "seed")) == ("1 seed", "3 seeds")
    assert counted(2, "independent seed") == "2 independent seeds"


def test_no_printed_line_hedges_a_plural():
    """No f-string prints "{n} noun(s)": a count says "1 seed" or "3 seeds" (counted)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    hedge = re.compile(r"\{[^{}]+\} ?[A-Za-z][A-Za-z ]*\((s|es)\)")
    found = [f"{path.relative_to(root)}:{i}: {line.strip()}"
             for package in ("analysis", "harness", "runrecord", "cleanba", "baselines",
                             "benchenv", "benchmarks", "calibration")
             for path in sorted((root / package).rglob("*.py"))
             for i, line in enumerate(path.read_text().splitlines(), start=1)
             if hedge.search(line) and not line.lstrip().startswith("#")]
    assert found == [], "\n".join(found)
