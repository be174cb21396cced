"""The analysis side of adaptive seeds: sequential designs (alpha spending, repeated confidence
intervals) and `sweep_looks` on synthetic run records."""

from __future__ import annotations

import json

import numpy as np
import pytest
from spending_checks import canonical_correlation, crossing_rates
from synthetic_records import synthetic_layout_runs

from analysis.errors import AnalysisError
from analysis.inputs.load import load_runs
from analysis.sequential import (
    CONTINUE,
    SPENDING,
    UNDECIDED,
    Look,
    SequentialDesign,
    boundaries,
    spent_alpha,
    sweep_looks,
)
from analysis.sequential.design import equivalence_decisions, gate_decisions
from analysis.sequential.spending import t_scale

# O'Brien-Fleming-type Lan-DeMets boundaries, one-sided alpha 0.025, K equally spaced
# looks: the values published with the method (DeMets & Lan 1994; gsDesign's sfLDOF).
OBF_0025 = {
    2: [2.963, 1.969],
    3: [3.710, 2.511, 1.993],
    4: [4.333, 2.963, 2.359, 2.014],
    5: [4.877, 3.357, 2.680, 2.290, 2.031],
}


@pytest.mark.parametrize("looks", sorted(OBF_0025))
def test_obrien_fleming_boundaries_match_published_values(looks):
    t = np.arange(1, looks + 1) / looks
    c = boundaries(t, 0.025, "obrien-fleming")
    assert c == pytest.approx(OBF_0025[looks], abs=2e-3)


def test_pocock_boundaries_are_nearly_flat_and_one_look_is_the_fixed_test():
    c = boundaries(np.arange(1, 6) / 5, 0.025, "pocock")
    assert c == pytest.approx([2.438, 2.427, 2.410, 2.397, 2.386], abs=2e-3)
    for name in SPENDING:  # one look spends everything at once: z_{1 - alpha}
        assert boundaries([1.0], 0.05, name)[0] == pytest.approx(1.6449, abs=1e-4)


@pytest.mark.parametrize("spending", sorted(SPENDING))
def test_spent_alpha_is_monotone_and_the_boundaries_spend_exactly_alpha(spending):
    t = np.linspace(0, 1, 51)
    spent = spent_alpha(t, 0.05, spending)
    assert spent[0] == 0 and spent[-1] == pytest.approx(0.05)
    assert np.all(np.diff(spent) >= 0)
    fractions = [3 / 9, 5 / 9, 7 / 9, 1.0]
    c = boundaries(fractions, 0.05, spending)
    crossed = crossing_rates(canonical_correlation(fractions), c, draws=400_000)
    increments = np.diff(np.concatenate([[0], spent_alpha(fractions, 0.05, spending)]))
    se = np.sqrt(0.05 * 0.95 / 400_000)
    assert crossed.sum() == pytest.approx(0.05, abs=4 * se)
    assert crossed == pytest.approx(increments, abs=4 * se)


def test_t_scale_keeps_the_tail_probability():
    assert float(t_scale(1.6449, np.inf)) == pytest.approx(1.6449, abs=1e-4)
    assert float(t_scale(1.6449, 4)) == pytest.approx(2.132, abs=1e-3)  # t_{0.95, 4}


def test_design_schedule_and_information():
    d = SequentialDesign()
    assert d.seeds_at_looks() == [3, 5, 7, 9]
    assert SequentialDesign(3, 4, 9).seeds_at_looks() == [3, 7, 9]
    assert SequentialDesign(4, 2, 4).seeds_at_looks() == [4]
    assert d.information_fractions() == pytest.approx([3 / 9, 5 / 9, 7 / 9, 1])
    # a fixed reference of 3 seeds: information 1 / (1/n + 1/3)
    info = 1 / (1 / np.array([3, 5, 7, 9]) + 1 / 3)
    assert d.information_fractions(fixed_seeds=3) == pytest.approx(info / info[-1])


@pytest.mark.parametrize("kwargs, says", [
    ({"first_seeds": 1}, "first_seeds must be >= 2"),
    ({"first_seeds": 5, "max_seeds": 4}, "must be >= first_seeds"),
    ({"batch_seeds": 0}, "batch_seeds must be >= 1"),
    ({"spending": "haybittle"}, "valid: obrien-fleming, pocock"),
    ({"alpha": 0.0}, "alpha must be in (0, 0.5)"),
    ({"alpha": 0.5}, "alpha must be in (0, 0.5)"),
    ({"first_seeds": 2, "batch_seeds": 1, "max_seeds": 40}, "at most 20"),
    ({"first_seeds": 2.5}, "whole number"),
])
def test_bad_designs_say_what_is_valid(kwargs, says):
    with pytest.raises(AnalysisError, match=None) as e:
        SequentialDesign(**kwargs).validate()
    assert says in str(e.value)


def test_decision_cores():
    # Two metrics, tight intervals near 0: PASS; a big shift: DIFFERENT; wide: CONTINUE.
    diff = np.array([[0.01, 0.5, 0.0], [0.0, 0.0, 0.0]])
    se = np.array([[0.01, 0.01, 0.5], [0.01, 0.01, 0.5]])
    df = np.full((2, 3), 10.0)
    dec, reach = equivalence_decisions(diff, se, df, 0.2, 2.0, 2.5, last=False)
    assert dec.tolist() == ["PASS", "DIFFERENT", CONTINUE]
    assert reach[0] < 0.2 < reach[2]
    dec, _ = equivalence_decisions(diff, se, df, 0.2, 2.0, 2.5, last=True)
    assert dec[2] == UNDECIDED
    dec, lower, upper = gate_decisions(np.array([0.0, -1.0, -0.2]), np.full(3, 0.05),
                                       np.full(3, 10.0), 0.2, 2.0, last=False)
    assert dec.tolist() == ["PASS", "REGRESSION", CONTINUE]
    assert np.all(lower < upper)


def test_look_json_round_trip():
    look = Look("gate", "cleanba-ppo CartPole-v1", 2, {"new": 5, "reference": 3}, -0.05,
                -0.2, CONTINUE, "gate look 2/4 ...", fixed_design_seeds=6)
    back = Look.from_json(look.to_json())
    assert back == look and not back.decided
    assert Look.from_json({**look.to_json(), "decision": UNDECIDED}).decided
    with pytest.raises(AnalysisError, match="missing"):
        Look.from_json({"verdict": "gate"})
    # An undefined statistic (a one-seed side) is null in JSON, nan back.
    undefined = Look("equivalence", "x", 1, {"a": 1, "b": 3}, float("nan"), 0.2, CONTINUE, "t")
    d = undefined.to_json()
    assert d["statistic"] is None and json.dumps(d, allow_nan=False)
    assert np.isnan(Look.from_json(d).statistic)


def test_identical_layouts_pass_at_the_first_look(tmp_path):
    runs = synthetic_layout_runs(tmp_path, range(1, 4), ["a0-l0-d1", "a0-l1-d1"])
    looks = sweep_looks(runs, SequentialDesign(), 1)
    assert len(looks) == 1
    (look,) = looks
    assert look.decision == "PASS" and look.decided and look.look == 1
    assert set(look.seeds.values()) == {3}
    assert "a0-l1-d1" in look.subject and "look 1/4" in look.text
    # low noise: the design has power here, so the fixed design of equal power is given
    assert look.fixed_design_seeds is not None and look.fixed_design_seeds >= 3


def test_small_effect_continues_then_is_undecided_at_the_cap(tmp_path):
    """A shift of 0.15 normalised (margin 0.2) with per-seed noise: 3 seeds per side
    cannot decide; at the cap the Look says so with the planner's estimate."""
    runs = synthetic_layout_runs(tmp_path, range(1, 4), ["a0-l0-d1", "a0-l1-d1"],
                                 shift={"a0-l1-d1": 0.15}, noise=0.3)
    design = SequentialDesign(3, 2, 3 + 2)
    (first,) = sweep_looks(runs, design, 1)
    assert first.decision == CONTINUE and not first.decided
    assert first.statistic > first.boundary
    (cap,) = sweep_looks(runs, SequentialDesign(3, 2, 3), 1)
    assert cap.decision == UNDECIDED and cap.decided
    # The planner's estimate, if the true difference is 0 and at the difference seen.
    assert "seeds per side for 80% power if the true difference is 0" in cap.needs
    assert "at the difference seen (+0.24" in cap.needs
    # At this spread the one-look design rarely passes even at no difference: a fixed
    # design "of equal power" would need few seeds and read as cheaper; it is left out
    # (the needs line says what it takes).
    assert cap.fixed_design_seeds is None


def test_gate_looks_and_kept_decisions(tmp_path):
    ref = synthetic_layout_runs(tmp_path / "ref", range(1, 4), ["a0-l0-d1"])
    new = synthetic_layout_runs(tmp_path / "new", range(11, 14), ["a0-l0-d1"])
    looks = sweep_looks(new, SequentialDesign(), 1, verdicts=("gate",), reference_runs=ref)
    assert [x.verdict for x in looks] == ["gate"]
    assert looks[0].seeds == {"new": 3, "reference": 3}
    assert looks[0].boundary == pytest.approx(-0.2)
    with pytest.raises(AnalysisError, match="reference runs"):
        sweep_looks(new, SequentialDesign(), 1, verdicts=("gate",))
    with pytest.raises(AnalysisError, match="valid: equivalence, gate"):
        sweep_looks(new, SequentialDesign(), 1, verdicts=("reproduce",))
    with pytest.raises(AnalysisError, match="1..4"):
        sweep_looks(new, SequentialDesign(), 5)
    decided = Look("gate", looks[0].subject, 1, looks[0].seeds, 0.0, -0.2, "PASS", "x")
    kept = sweep_looks(new, SequentialDesign(), 2, verdicts=("gate",), reference_runs=ref,
                       previous=[decided])
    assert kept[0].decision == "PASS" and kept[0].look == 2 and "kept" in kept[0].text


def test_one_look_design_is_the_fixed_verdict(tmp_path):
    """A design with a single look spends all of alpha at once: its repeated CIs are the
    fixed verdict's 90% CIs, so the decision is the fixed one (INCONCLUSIVE -> UNDECIDED)."""
    from analysis.scoring.grouping import analyse
    from analysis.verdicts.compare import pair_groups
    from analysis.verdicts.equivalence import INCONCLUSIVE, equivalence
    for shift, noise in ((0.0, 0.05), (0.1, 0.3), (0.6, 0.05)):
        root = tmp_path / f"{shift}-{noise}"
        runs = synthetic_layout_runs(root, range(1, 5), ["a0-l0-d1", "a0-l1-d1"],
                                     shift={"a0-l1-d1": shift}, noise=noise)
        suite = analyse(load_runs([root])).suites[0]
        ((group, ref),) = pair_groups(suite).pairs
        fixed = equivalence(group, ref, 0.2).verdict
        (look,) = sweep_looks(runs, SequentialDesign(4, 1, 4), 1)
        assert look.decision == (UNDECIDED if fixed == INCONCLUSIVE else fixed), look.text


@pytest.mark.parametrize("n", [3, 6])
def test_a_fixed_plan_is_its_one_look_design_on_the_same_draws(n):
    """The seed planner's fixed-design power and the sequential power of the design with
    one look at n seeds draw the same seeds and decide alike, so they agree exactly."""
    from analysis.sequential.design import sequential_equivalence_power, sequential_gate_power
    from analysis.verdicts.seedplan import equivalence_power, gate_power, given_spread
    one_look = SequentialDesign(n, 1, n)
    spread = given_spread(0.06, correlation=0.4)
    for delta in (0.08, 0.15):
        assert sequential_equivalence_power(one_look, spread, delta, 2000, seed=3) == \
            equivalence_power(spread, delta, n, 2000, seed=3)
        assert sequential_gate_power(one_look, 0.06, 5, delta, 2000, seed=3) == \
            gate_power(spread, delta, n, 2000, seed=3, n_ref=5)


def test_calibration_rows_keep_alpha_where_naive_re_testing_does_not():
    """The reduced grid's sequential rows (4,000 draws): the design keeps its false-pass
    rate at the margin over all looks; naive re-testing (the fixed verdict after every
    batch) leaves nominal + 3 MC SE; and the design needs fewer seeds on average than the
    fixed design of equal power (seed planner)."""
    from calibration.draws import NORMAL
    from calibration.sequential_cells import (
        FIXED_SEEDS,
        SEEDS_AT_0,
        sequential_equivalence_cells,
        sequential_gate_cells,
    )
    design = SequentialDesign()
    for cells in (sequential_equivalence_cells(4000, design, 1.0, NORMAL, 0),
                  sequential_gate_cells(4000, design, 9, 1.0, NORMAL, 0)):
        rows = {(c.verdict.startswith("naive"), c.rate): c for c in cells}
        assert all(c.ok for c in cells)
        assert rows[False, "false pass at margin"].value <= rows[False, "false pass at margin"].bound
        naive = rows[True, "false pass at margin"]
        assert naive.shown_only and naive.value > naive.bound, naive.row()
        assert rows[False, SEEDS_AT_0].value < rows[False, FIXED_SEEDS].value - 1


def test_a_look_with_fewer_seeds_than_planned_spends_by_its_own_information():
    d = SequentialDesign()
    planned = d.boundaries()
    assert [d.boundary(k) for k in (1, 2, 3, 4)] == pytest.approx(planned)
    assert d.boundary(2, seeds=(5, 5)) == pytest.approx(planned[1])
    # A failed run leaves 4 + 5 seeds at look 2: less information, O'Brien-Fleming is stricter.
    assert d.boundary(2, seeds=(4, 5)) > planned[1]
    # The last look spends what is left, whatever the seeds.
    assert d.boundary(4, seeds=(8, 9)) == pytest.approx(planned[3])


def test_plan_sequential_cli_prints_boundaries_and_costs(tmp_path, capsys):
    from analysis.cli import main
    assert main(["plan-sequential", "--sd", "0.06", "--suite", "CartPole-v1",
                 "--sims", "2000"]) == 0
    out = capsys.readouterr().out
    assert "4 looks at 3, 5, 7, 9 seeds per side" in out
    assert "| 4 | 9 | 1.00 | 0.0500 | 1.731 |" in out  # the last O'Brien-Fleming boundary
    assert "| equivalence (final + AUC) | 0.2 |" in out and "| gate (vs 9 reference" in out
    # From pilot runs, as plan-seeds.
    synthetic_layout_runs(tmp_path, range(1, 4), ["a0-l0-d1", "a0-l1-d1"], noise=0.3)
    assert main(["plan-sequential", str(tmp_path), "--sims", "1000", "--spending",
                 "pocock", "--reference-seeds", "3"]) == 0
    assert "pocock alpha spending" in capsys.readouterr().out
    assert main(["plan-sequential", "--sd", "0.06", "--max-seeds", "2"]) == 2
    assert "max_seeds (2) must be >= first_seeds (3)" in capsys.readouterr().err
