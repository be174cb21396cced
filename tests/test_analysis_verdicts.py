"""Verdicts: Welch TOST equivalence, bitwise identity, regression gate, exit codes."""

import json

import numpy as np
import pytest
from scipy import stats
from synthetic_records import write_synthetic_run

from analysis.cli import main
from analysis.errors import AnalysisError
from analysis.inputs.load import load_runs
from analysis.scoring.grouping import analyse
from analysis.stats.welch import welch_interval
from analysis.verdicts.equivalence import (
    ATARI_DEFAULT_DELTA,
    DIFFERENT,
    INCONCLUSIVE,
    PASS,
    REGRESSION,
    equivalence,
    tost_verdict,
)
from analysis.verdicts.regression import ReferenceSpread, regression

DELTA = 0.1


def test_welch_interval_matches_scipy():
    """Equal seed counts: scipy's Welch interval. Unequal counts: Hsu's df min(n, m) - 1
    (Welch-Satterthwaite is liberal there), with Welch's se."""
    a, b = [1.0, 1.2, 0.9, 1.1], [0.8, 1.0, 0.7, 0.75]
    w = welch_interval(a, b)
    res = stats.ttest_ind(a, b, equal_var=False)
    lo, hi = res.confidence_interval(0.95)
    assert w.ci95 == pytest.approx((lo, hi))
    assert w.diff == pytest.approx(np.mean(a) - np.mean(b))
    lo90, hi90 = res.confidence_interval(0.90)
    assert w.ci90 == pytest.approx((lo90, hi90))
    b3 = b[:3]
    w = welch_interval(a, b3)
    se = np.sqrt(np.var(a, ddof=1) / 4 + np.var(b3, ddof=1) / 3)
    assert w.df == 2
    assert w.ci95[1] - w.diff == pytest.approx(stats.t.ppf(0.975, 2) * se)


def test_identical_groups_pass():
    vals = [0.5, 0.6, 0.55]
    assert tost_verdict([welch_interval(vals, vals)], DELTA) == PASS
    flat = welch_interval([0.5, 0.5, 0.5], [0.5, 0.5, 0.5])  # zero variance
    assert flat.ci90 == (0.0, 0.0) and tost_verdict([flat], DELTA) == PASS


def test_shift_of_two_delta_is_different():
    a = np.array([0.50, 0.52, 0.48])
    assert tost_verdict([welch_interval(a + 2 * DELTA, a)], DELTA) == DIFFERENT
    # zero variance and a shift beyond delta: different, not a crash
    assert tost_verdict([welch_interval([0.7] * 3, [0.5] * 3)], DELTA) == DIFFERENT


def test_three_noisy_seeds_near_delta_are_inconclusive():
    a = np.array([0.40, 0.55, 0.47])
    b = np.array([0.50, 0.68, 0.52])  # mean shift 0.093 ~ delta, sd ~ 0.08
    w = welch_interval(b, a)
    assert w.ci95[0] < 0 < w.ci95[1]  # cannot say different
    assert w.ci90[1] > DELTA  # cannot say equivalent
    assert tost_verdict([w], DELTA) == INCONCLUSIVE


def test_both_metrics_must_pass():
    ok = welch_interval([0.5, 0.51, 0.49], [0.5, 0.5, 0.5])
    bad = welch_interval([0.5, 0.9, 0.1], [0.5, 0.5, 0.5])
    assert tost_verdict([ok], DELTA) == PASS
    assert tost_verdict([ok, bad], DELTA) == INCONCLUSIVE


def test_one_seed_cannot_pass():
    assert tost_verdict([welch_interval([0.5], [0.52])], DELTA) == INCONCLUSIVE


def test_regression_flags_a_drop():
    ref = [1.00, 1.02, 0.98]
    assert regression([0.99, 1.01, 1.00], ref, delta=0.05).verdict == PASS
    drop = regression([0.80, 0.82, 0.78], ref, delta=0.05)
    assert drop.verdict == REGRESSION and drop.exit_code == 1
    assert drop.diff == pytest.approx(-0.2)
    # one-sided 95% Welch bound by hand
    se = np.sqrt(np.var([0.8, 0.82, 0.78], ddof=1) / 3 + np.var(ref, ddof=1) / 3)
    assert drop.lower_bound == pytest.approx(-0.2 - stats.t.ppf(0.95, 4) * se)


def test_regression_against_a_published_number():
    new = [1.00, 1.04, 0.96]
    # A bare number is refused: it is the mean of a few noisy seeds.
    with pytest.raises(AnalysisError, match="--reference-sd"):
        regression(new, 1.0, delta=0.1)
    exact = ReferenceSpread(exact=True)  # a fixed threshold: the one-sample bound
    r = regression(new, 1.0, delta=0.1, spread=exact)
    se = np.std(new, ddof=1) / np.sqrt(3)
    assert r.lower_bound == pytest.approx(0.0 - stats.t.ppf(0.95, 2) * se)
    assert r.verdict == PASS and r.n_reference == 0
    assert regression(new, 1.3, delta=0.1, spread=exact).verdict == REGRESSION
    # With its sd and seed count, the published mean's own noise widens the bound.
    pub = regression(new, 1.0, delta=0.1, spread=ReferenceSpread(sd=0.04, seeds=3))
    se_pub = np.sqrt(np.var(new, ddof=1) / 3 + 0.04**2 / 3)
    assert pub.lower_bound == pytest.approx(0.0 - stats.t.ppf(0.95, pub.df) * se_pub)
    assert pub.n_reference == 3 and pub.lower_bound < r.lower_bound
    with pytest.raises(AnalysisError):
        regression([], 1.0, delta=0.1)


def _sweep(tmp_path, *, shift_b=0.0, noise_offset_b=0, seeds=(1, 2, 3),
           envs=("CartPole-v1",)):
    for layout, shift, off in (("a0-l0-d1", 0.0, 0), ("a0-l1-d1", shift_b, noise_offset_b)):
        for s in seeds:
            for env in envs:
                write_synthetic_run(tmp_path / layout, seed=s, layout=layout, env_id=env,
                                    shift=shift, noise_seed_offset=off,
                                    seconds_per_frame=1e-4 if layout == "a0-l0-d1" else 5e-5)
    return analyse(load_runs([tmp_path]), group_by="layout.name").suites[0]


def test_equivalence_on_records_bitwise_identical(tmp_path):
    suite = _sweep(tmp_path)
    a, b = suite.values()
    res = equivalence(a, b, ATARI_DEFAULT_DELTA)
    assert res.verdict == PASS and res.bitwise.identical
    assert res.label == "PASS (bitwise identical)" and res.exit_code == 0
    assert res.seeds_a == [1, 2, 3] and res.tasks == ["CartPole-v1"]
    assert res.final.diff == 0.0


IDENTITY_NOTE = "records are bitwise identical; verdict set to PASS"


@pytest.mark.parametrize("seeds", [1, 3])
def test_identity_note_only_where_the_intervals_shown_cannot_pass(seeds):
    """Identical records PASS. The note that the identity alone decided comes where the
    intervals shown do not pass (a NaN score), not where they do (width 0 at 0), at one
    seed as at three."""
    from test_equivalence_one_function import _group

    ids, tasks, ones = list(range(1, seeds + 1)), ["Pong-v5"], np.ones((seeds, 1))
    for final, note in ((0.5 * ones, []), (np.where(ones > 0, np.nan, 0.0), [IDENTITY_NOTE])):
        a, b = (_group(name, ids, tasks, final, 0.4 * ones, ones) for name in "ab")
        res = equivalence(a, b, DELTA)
        assert res.bitwise.identical and res.verdict == PASS
        assert res.notes == note
        assert (res.final.ci90 == (0.0, 0.0)) == (not note)


def test_equivalence_on_records_not_identical_but_equivalent(tmp_path):
    a, b = _sweep(tmp_path, noise_offset_b=1).values()
    res = equivalence(a, b, ATARI_DEFAULT_DELTA)
    assert not res.bitwise.identical and "differs" in res.bitwise.detail
    assert res.verdict == PASS and res.label.startswith("PASS (equivalent within ±0.16")


def test_equivalence_on_records_shifted_is_different(tmp_path):
    a, b = _sweep(tmp_path, shift_b=2 * ATARI_DEFAULT_DELTA).values()
    res = equivalence(b, a, ATARI_DEFAULT_DELTA)
    assert res.verdict == DIFFERENT and res.exit_code == 1
    assert res.final.diff == pytest.approx(2 * ATARI_DEFAULT_DELTA, abs=0.05)


def test_equivalence_cli_writes_json_and_exit_codes(tmp_path, capsys):
    _sweep(tmp_path / "runs", shift_b=2 * ATARI_DEFAULT_DELTA)
    out = tmp_path / "eq.json"
    rc = main(["equivalence", str(tmp_path / "runs"), "--a", "a0-l1-d1", "--reference",
               "a0-l0-d1", "--json-out", str(out)])
    assert rc == 1
    d = json.loads(out.read_text())
    # CartPole's default margin (analysis.verdicts.margins), printed with its return units
    assert d["verdict"] == "DIFFERENT" and d["delta"] == 0.2
    assert "0.2 normalised (= 95.58 CartPole-v1 return; default)" in d["line"]
    assert d["reference"].endswith("a0-l0-d1") and d["group_a"].endswith("a0-l1-d1")
    assert len(d["final"]["ci90"]) == 2 and d["seeds_a"] == [1, 2, 3]
    assert "DIFFERENT" in capsys.readouterr().out
    assert main(["equivalence", str(tmp_path / "runs"), "--a", "nope"]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["equivalence", str(tmp_path / "runs"), "--bitwise-only"]) == 1


def test_regression_cli(tmp_path, capsys):
    for s in (1, 2, 3):
        write_synthetic_run(tmp_path / "ref", seed=s)
        write_synthetic_run(tmp_path / "new", seed=s, shift=-0.3)
    rc = main(["regression", "--new", str(tmp_path / "new"), "--reference",
               str(tmp_path / "ref"), "--delta", "0.05", "--json-out", str(tmp_path / "r.json")])
    assert rc == 1 and "REGRESSION" in capsys.readouterr().out
    assert json.loads((tmp_path / "r.json").read_text())["verdict"] == "REGRESSION"
    assert main(["regression", "--new", str(tmp_path / "ref"), "--reference",
                 str(tmp_path / "ref"), "--delta", "0.05"]) == 0
    # A bare published number is refused (exit 2); with its sd and seeds, or vouched
    # exact, it is gated.
    assert main(["regression", "--new", str(tmp_path / "ref"), "--reference", "0.2",
                 "--delta", "0.05"]) == 2
    assert main(["regression", "--new", str(tmp_path / "ref"), "--reference", "0.2",
                 "--delta", "0.05", "--reference-exact"]) == 0
    assert main(["regression", "--new", str(tmp_path / "ref"), "--reference", "0.2",
                 "--delta", "0.05", "--reference-sd", "0.01", "--reference-seeds", "3"]) == 0
    assert main(["regression", "--new", str(tmp_path / "missing"), "--reference", "0.2",
                 "--delta", "0.05"]) == 2
