"""Probability of improvement for chosen pairs: by default against the reference group,
the named pairs, or every pair when asked; vectorised across pairs."""

import shutil
from pathlib import Path

import numpy as np
import pytest

from analysis.cli import main
from analysis.errors import AnalysisError
from analysis.stats import metrics
from analysis.stats.metrics import probability_of_improvement_ci, probability_of_improvement_pairs

REFERENCE = Path(__file__).resolve().parent.parent / "results" / "reference"


def test_pairs_points_and_cis():
    rng = np.random.default_rng(0)
    finals = {g: rng.normal(i * 0.3, 1.0, (5, 3)) for i, g in enumerate("abcd")}
    finals["e"] = rng.normal(0, 1.0, (4, 3))  # another shape: its own stacked batch
    pairs = [("b", "a"), ("c", "a"), ("d", "a"), ("e", "a"), ("a", "e")]
    ivs = probability_of_improvement_pairs(finals, pairs, reps=3000, seed=2)
    assert list(ivs) == pairs
    for (x, y), iv in ivs.items():
        assert iv.point == pytest.approx(metrics.probability_of_improvement(finals[x], finals[y]))
        assert iv.low <= iv.point <= iv.high
        single = probability_of_improvement_ci(finals[x], finals[y], reps=3000, seed=2)
        # other draws, same distribution: the CIs agree to within bootstrap noise
        assert abs(float(iv.low) - float(single.low)) < 0.08
        assert abs(float(iv.high) - float(single.high)) < 0.08
    again = probability_of_improvement_pairs(finals, pairs, reps=3000, seed=2)
    assert all(np.array_equal(again[p].low, ivs[p].low) for p in pairs)
    assert probability_of_improvement_pairs(finals, [], reps=10) == {}
    with pytest.raises(AnalysisError, match="same tasks"):
        probability_of_improvement_pairs({"a": np.ones((2, 3)), "b": np.ones((2, 4))},
                                         [("a", "b")], reps=10)


@pytest.fixture(scope="module")
def reference_copy(tmp_path_factory):
    ref = tmp_path_factory.mktemp("ref") / "reference"
    shutil.copytree(REFERENCE, ref)
    return ref


def _poi_lines(out):
    table = out.split("P(X > Y) computed for")[1]
    return [ln for ln in table.splitlines() if ln.startswith("| cleanba")]


def test_aggregate_pairs_default_named_and_all(reference_copy, capsys):
    base = ["aggregate", str(reference_copy), "--reps", "200"]
    assert main(base) == 0
    out = capsys.readouterr().out
    # two systems x four layouts: each layout against its system's a0-l0-d1
    assert "P(X > Y) computed for 6 pairs, each group against its reference " \
           "(cleanba-impala / cleanba / a0-l0-d1, cleanba-ppo / cleanba / a0-l0-d1;" in out
    rows = [[c.strip() for c in ln.split("|")[1:3]] for ln in _poi_lines(out)]
    assert len(rows) == 6 and all(y.endswith("a0-l0-d1") and x.split(" / ")[0] ==
                                  y.split(" / ")[0] for x, y in rows)
    assert main([*base, "--reference", "a0-l1-d1"]) == 0
    out = capsys.readouterr().out
    assert len(_poi_lines(out)) == 6
    assert all(ln.split("|")[2].strip().endswith("a0-l1-d1") for ln in _poi_lines(out))
    pair = "cleanba-ppo / cleanba / a0-l0-d2 vs cleanba-impala / cleanba / a0-l1-d1"
    assert main([*base, "--pair", pair]) == 0
    out = capsys.readouterr().out
    assert "the 1 pair named with --pair" in out and len(_poi_lines(out)) == 1
    assert main([*base, "--all-pairs"]) == 0
    out = capsys.readouterr().out
    assert "all 56 ordered pairs (--all-pairs)" in out and len(_poi_lines(out)) == 56
    assert main([*base, "--pair", "a0-l0-d2 a0-l1-d1"]) == 2
    assert "expected 'X vs Y'" in capsys.readouterr().err
    assert main([*base, "--pair", "a0-l0-d2 vs a0-l1-d1"]) == 2  # two systems: ambiguous
    assert "ambiguous" in capsys.readouterr().err
