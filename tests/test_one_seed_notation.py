"""One notation for the interval of a one-seed group in every command and
format: "n/a (1 seed)" in console, Markdown and LaTeX, empty (null) bounds in CSV
and JSON; never a degenerate [x, x] bootstrap of one seed, never nan."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from synthetic_records import write_synthetic_run

from analysis.cli import main
from analysis.scoring.tables import ONE_SEED

DEGENERATE = re.compile(r"\[([-+]?\d+\.\d+), \1\]")  # [0.759, 0.759]


@pytest.fixture(scope="module")
def one_seed(tmp_path_factory):
    root = tmp_path_factory.mktemp("one-seed")
    for layout, skill in (("a0-l0-d1", 0.8), ("a0-l1-d1", 0.78)):
        write_synthetic_run(root, seed=1, layout=layout, skill=skill)
    return root


def _out(argv: list[str], capsys) -> str:
    main(argv)
    return capsys.readouterr().out


@pytest.mark.parametrize("command", ["aggregate", "equivalence"])
@pytest.mark.parametrize("fmt", ["console", "markdown", "latex"])
def test_a_one_seed_interval_reads_n_a_1_seed_in_text(one_seed, capsys, command, fmt):
    out = _out([command, str(one_seed), "--no-cache", "--format", fmt], capsys)
    assert ONE_SEED in out, out
    assert not DEGENERATE.search(out), out
    assert "nan" not in out.lower().replace("n/a", ""), out
    assert "1 independent seeds" not in out and "1 vs 1 independent seeds" not in out


@pytest.mark.parametrize("command", ["aggregate", "equivalence"])
def test_a_one_seed_interval_is_empty_in_csv_and_null_in_json(one_seed, capsys, command):
    rows = list(csv.DictReader(io.StringIO(
        _out([command, str(one_seed), "--no-cache", "--format", "csv"], capsys))))
    lows = [k for k in rows[0] if k.endswith("_low")]
    assert lows and all(r[k] == "" and r[k.replace("_low", "_high")] == ""
                        for r in rows for k in lows), rows
    assert all(r[k.removesuffix("_low")] != "" for r in rows for k in lows)  # the point
    table = json.loads(_out([command, str(one_seed), "--no-cache", "--format", "json"],
                            capsys))
    got = table["rows"] if isinstance(table, dict) else table
    assert all(r[k] is None for r in got for k in lows), got
