"""Layouts (or versions) that ran the same seeds are compared
paired by seed where the pairing holds, in equivalence and the gate, Welch otherwise, and
the line says which; the calibration keeps both tests' error rates and shows the gain."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from synthetic_records import write_synthetic_run

from analysis.inputs.load import load_runs
from analysis.scoring.grouping import analyse
from analysis.stats.welch import paired_stats, welch_interval
from analysis.verdicts.equivalence import equivalence
from analysis.verdicts.regression import regression_gate
from analysis.verdicts.seed_pairing import seed_design
from calibration.paired_cells import PAIRED, WELCH, paired_cells


def test_paired_stats_is_scipys_paired_t():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(7, 5))
    b = a + rng.normal(0.1, 0.2, size=(7, 5))
    diff, se, df = paired_stats(a, b)
    for i in range(7):
        t, _ = stats.ttest_rel(a[i], b[i])
        assert diff[i] / se[i] == pytest.approx(t) and df[i] == 4
    w = welch_interval(a[0], b[0], paired=True)
    half = stats.t.ppf(0.95, 4) * se[0]
    assert w.paired and w.ci90 == pytest.approx((diff[0] - half, diff[0] + half))
    same = welch_interval([1.0, 2.0, 3.0], [0.5, 1.5, 2.5], paired=True)  # a constant difference
    assert same.ci90 == (0.5, 0.5) and same.df == math.inf


def _layouts(root, *, seeds_b=(1, 2, 3), system_b="cleanba-ppo", offset_b=1, shift_b=0.0):
    for s in (1, 2, 3):
        write_synthetic_run(root, seed=s, layout="a0-l0-d1")
    for s in seeds_b:
        write_synthetic_run(root, seed=s, layout="a0-l1-d1", system=system_b,
                            noise_seed_offset=offset_b, shift=shift_b)
    groups = analyse(load_runs([root])).suites[0]
    a = next(g for name, g in groups.items() if name.endswith("a0-l0-d1"))
    return a, next(g for name, g in groups.items() if name.endswith("a0-l1-d1"))


def test_the_pairing_rule(tmp_path):
    a, b = _layouts(tmp_path / "same")
    runs_a, runs_b = list(a.runs.values()), list(b.runs.values())
    assert seed_design(runs_a, runs_b, a.seeds, b.seeds).paired
    why = seed_design(runs_a, runs_b, a.seeds, b.seeds, unpaired=True)
    assert not why.paired and "--unpaired" in why.text()
    assert "different seeds" in seed_design(runs_a, runs_b, a.seeds, [1, 2, 4]).why
    assert "one seed" in seed_design(runs_a[:1], runs_b[:1], [1], [1]).why
    other = list(runs_b)
    for r in other:
        r.manifest = {**r.manifest, "system": "cleanba-impala"}
    assert "different systems" in seed_design(runs_a, other, a.seeds, b.seeds).why
    for r in other:
        r.manifest = {k: v for k, v in r.manifest.items() if k != "env_protocol"}
        r.manifest["system"] = "cleanba-ppo"
    assert "recorded no env protocol" in seed_design(runs_a, other, a.seeds, b.seeds).why


def test_equivalence_and_gate_pair_where_it_holds(tmp_path):
    """Synthetic layouts whose seeds share most of their noise: the paired interval is the
    per-seed differences' (narrower than Welch's); other seeds fall back to Welch."""
    a, b = _layouts(tmp_path / "paired", shift_b=0.05)  # b: the layout a0-l1-d1
    res = equivalence(b, a, 0.2)
    welch = equivalence(b, a, 0.2, unpaired=True)
    assert res.final.paired and not welch.final.paired
    assert res.final.ci90[1] - res.final.ci90[0] < welch.final.ci90[1] - welch.final.ci90[0]
    assert "paired by seed (3 seeds on both sides" in res.design_line()
    assert "Welch (unpaired: --unpaired asked for it)" in welch.design_line()
    gate = regression_gate([b], [a], 0.2)
    d = b.final[np.argsort(b.seeds), 0] - a.final[np.argsort(a.seeds), 0]
    lower = d.mean() - stats.t.ppf(0.95, 2) * d.std(ddof=1) / math.sqrt(3)
    assert gate.lower_bound == pytest.approx(lower) and gate.df == 2
    assert "paired by seed" in "".join(gate.detail_lines())
    c, d2 = _layouts(tmp_path / "other", seeds_b=(4, 5, 6))
    assert "the sides ran different seeds" in equivalence(c, d2, 0.2).design_line()
    assert "Welch (unpaired: the sides ran different seeds" in \
        "".join(regression_gate([c], [d2], 0.2).detail_lines())


def test_calibration_keeps_both_rates_and_shows_the_gain():
    cells = paired_cells(4_000, (3,), seed=0)
    assert all(c.ok for c in cells)
    power = {(c.verdict, c.scenario.rsplit(" ", 1)[-1]): c.value for c in cells
             if c.rate.startswith("power")}
    for verdict in ("gate (per-seed value)", "equivalence (final + AUC)"):
        assert power[f"{verdict}, {PAIRED}", "0.9"] > 4 * power[f"{verdict}, {WELCH}", "0.9"]
        assert power[f"{verdict}, {PAIRED}", "0"] >= power[f"{verdict}, {WELCH}", "0"] - 0.03
