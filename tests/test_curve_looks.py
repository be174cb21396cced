"""Looks over training time: the boundaries under any joint law, the look's
statistic and its plan, on numbers checked by hand, by simulation, and on records."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis.errors import AnalysisError
from analysis.inputs.load import load_runs
from analysis.sequential.curves import (
    CurveDesign,
    GateOptions,
    contrast_covariance,
    curve_contrast,
    curve_look,
    curve_plan,
    fails,
    first_decision,
    make_plan,
    margin_share,
    plan_boundaries,
    plan_lines,
    reference_pseudo_values,
)
from analysis.sequential.spending import UNION, boundaries, spent_alpha
from analysis.verdicts.regression import regression_lower_bound
from runrecord import PROJECT_ROOT
from tests.spending_checks import canonical_correlation, crossing_rates
from tests.synthetic_records import write_synthetic_run

LOOKS = (0.1, 0.2, 0.3, 0.5, 0.7, 1.0)


def regress(design: CurveDesign, new, ref, budget: float, subject: str,
            options: GateOptions):
    """Every look of completed records as `harness regress` takes them
    (harness.adaptive.curves.curve_regress): the plan, then the looks in order up to the
    first decision."""
    plan = curve_plan(design, ref, budget, len({r.manifest["seed"] for r in new}),
                      "CartPole-v1", options)
    looks = []
    while first_decision(looks) is None:
        looks.append(curve_look(plan, new, ref, len(looks) + 1, subject, options))
    return plan, looks


def ar(rho: float, k: int = len(LOOKS)) -> np.ndarray:
    i = np.arange(k)
    return rho ** np.abs(np.subtract.outer(i, i))


@pytest.mark.parametrize("spending", ["pocock", "obrien-fleming"])
def test_sampled_boundaries_of_the_canonical_matrix_are_the_integrated_ones(spending):
    mine = boundaries(LOOKS, 0.05, spending, canonical_correlation(LOOKS))
    exact = boundaries(LOOKS, 0.05, spending)
    # within 0.03 (O'Brien-Fleming's early increments are ~1e-4: tens of the 2^18 paths)
    assert np.allclose(mine, exact, atol=0.03), (mine, exact)
    assert mine[0] == pytest.approx(exact[0], abs=1e-9)  # the first look is exact


@pytest.mark.parametrize("rho", [0.5, 0.9, 0.99])
def test_boundaries_spend_alpha_look_by_look_under_the_looks_own_law(rho):
    r = ar(rho)
    c = boundaries(LOOKS, 0.05, "pocock", r)
    cum = crossing_rates(r, c, draws=400_000, seed=7).cumsum()  # other draws than the plan
    se = np.sqrt(0.05 * 0.95 / 400_000)
    assert np.allclose(cum, spent_alpha(LOOKS, 0.05, "pocock"), atol=4 * se + 0.001), cum
    # The union bound keeps alpha whatever the correlation, spending less where it is high,
    # and its boundaries are never below the exact ones.
    union = boundaries(LOOKS, 0.05, "pocock", UNION)
    assert np.all(union >= c - 0.02)
    assert crossing_rates(r, union, draws=400_000, seed=8).sum() <= 0.05 + 4 * se


def test_union_bound_boundaries_are_bonferroni_over_the_increments():
    c = boundaries([0.5, 1.0], 0.05, "pocock", UNION)
    spent = spent_alpha([0.5, 1.0], 0.05, "pocock")
    from scipy import stats
    assert c[0] == pytest.approx(stats.norm.isf(spent[0]))
    assert c[1] == pytest.approx(stats.norm.isf(spent[1] - spent[0]))
    with pytest.raises(AnalysisError, match="increase within"):
        boundaries([0.5, 0.4, 1.0], 0.05, "pocock", UNION)


def test_the_look_statistic_is_the_gates_welch_bound_at_the_full_budget():
    rng = np.random.default_rng(0)
    new, ref = rng.normal(0.4, 0.05, 3), rng.normal(0.45, 0.05, 4)
    contrast, se, df, margin = curve_contrast(new, ref, ref, 0.3)
    diff, _, se_gate, df_gate = regression_lower_bound(new, ref)
    assert contrast == pytest.approx(diff + 0.3) and se == pytest.approx(se_gate)
    assert df == pytest.approx(df_gate) and margin == pytest.approx(0.3)


def test_the_margin_follows_the_references_progress_and_its_noise_enters_the_se():
    ref_final = np.array([0.4, 0.5, 0.6])
    ref_now = np.array([0.1, 0.12, 0.14])
    rho = float(margin_share(ref_final, 0.25))
    assert rho == pytest.approx(0.5)
    pseudo = reference_pseudo_values(ref_now, ref_final, 0.25)
    assert pseudo.mean() == pytest.approx((1 - rho) * ref_now.mean())
    # delta method: (1 - rho) b_s + rho (m_b / m_B) B_s, centred
    slope = rho * ref_now.mean() / ref_final.mean()
    assert np.allclose(pseudo - pseudo.mean(), (1 - rho) * (ref_now - ref_now.mean())
                       + slope * (ref_final - ref_final.mean()))
    contrast, _, _, margin = curve_contrast(np.array([0.0, 0.01, 0.0]), ref_now, ref_final, 0.25)
    assert margin == pytest.approx(rho * 0.12)
    assert contrast == pytest.approx(0.01 / 3 - 0.06)
    # A reference that learned no more than delta: rho 1, the margin is all its progress.
    assert float(margin_share(np.array([0.1, 0.2]), 0.3)) == 1.0
    assert np.allclose(reference_pseudo_values(ref_now[:2], np.array([0.1, 0.2]), 0.3), 0.0)


def test_fails_on_the_repeated_upper_bound_zero_spread_and_undefined_se():
    assert bool(fails(-0.1, 0.01, 10.0, 2.0))
    assert not bool(fails(-0.01, 0.01, 10.0, 2.0))
    assert bool(fails(-1e-9, 0.0, 5.0, 2.0)) and not bool(fails(0.0, 0.0, 5.0, 2.0))
    assert not bool(fails(-1.0, math.nan, 5.0, 2.0))
    assert not bool(fails(-1.0, 0.01, 10.0, math.inf))  # a look that spends nothing


@pytest.mark.parametrize("looks_at, words", [
    ((0.5, 0.9), "end at 1"), ((0.5, 0.4, 1.0), "increase"), ((0.0, 1.0), "within"),
    ((), "list of numbers")])
def test_a_bad_design_says_what_is_valid(looks_at, words):
    with pytest.raises(AnalysisError, match=words):
        CurveDesign(looks_at).validate()
    with pytest.raises(AnalysisError, match="valid: obrien-fleming, pocock"):
        CurveDesign((0.5, 1.0), spending="linear").validate()


def test_the_plan_estimates_the_correlation_only_from_enough_reference_seeds():
    rng = np.random.default_rng(1)
    t = np.array(LOOKS)
    curve = 0.5 * (1 - np.exp(-3 * t))

    def seeds(m):  # a per-seed level that persists along the curve: strongly correlated
        return curve + 0.04 * rng.standard_normal((m, 1)) * t + 0.005 * rng.standard_normal(
            (m, len(t)))
    design = CurveDesign(LOOKS)
    c_few, how_few = plan_boundaries(design, seeds(3), 3, 0.2)
    assert how_few.startswith("union bound (the reference's 3 seeds")
    assert np.allclose(c_few, boundaries(LOOKS, 0.05, "pocock", UNION))
    c_many, how_many = plan_boundaries(design, seeds(12), 3, 0.2)
    assert how_many == "correlation estimated from the reference's curves (12 seeds)"
    assert np.all(c_many[1:] < c_few[1:])  # the correlation wins back power
    r = contrast_covariance(seeds(12), 3, 0.2)
    assert r.shape == (6, 6) and np.allclose(r, r.T)
    plan = make_plan(design, seeds(12), 50_000, 3, 0.2)
    assert plan.frames == [5_000, 10_000, 15_000, 25_000, 35_000, 50_000]
    assert plan.alpha_spent[-1] == pytest.approx(0.05)


def test_records_an_unchanged_candidate_passes_at_the_end_a_broken_one_fails_early(tmp_path):
    runs = load_runs([PROJECT_ROOT / "results" / "reference" / "smoke-cartpole"]).included
    ppo = [r for r in runs if r.manifest["system"] == "cleanba-ppo"]
    design = CurveDesign(LOOKS)
    plan, looks = regress(design, ppo, ppo, 50_000, "ppo", GateOptions(delta=0.3))
    assert [x.decision for x in looks] == ["CONTINUE"] * 5 + ["PASS"]
    assert plan.method.startswith("union bound") and plan.n_reference == 3
    assert "PASS is decided at the full budget only" in looks[0].text
    assert "the fixed gate at the full budget says PASS" in looks[-1].text
    # Synthetic records: a reference that learns, a candidate that does not (skill 0).
    for s in (1, 2, 3):
        write_synthetic_run(tmp_path / "ref", seed=s, skill=0.8, noise=0.02)
        write_synthetic_run(tmp_path / "new", seed=s, skill=0.0, noise=0.02)
    ref = load_runs([tmp_path / "ref"]).included
    new = load_runs([tmp_path / "new"]).included
    _, looks = regress(design, new, ref, 100_000, "broken", GateOptions(delta=0.3))
    assert looks[-1].decision == "REGRESSION" and looks[-1].look < len(LOOKS), looks
    assert "stopped at" in looks[-1].text and "frames not spent" in looks[-1].text


def test_a_look_and_its_plan_print_one_plain_line_the_internals_only_with_verbose(tmp_path):
    for s in (1, 2, 3):
        write_synthetic_run(tmp_path / "ref", seed=s, skill=0.8, noise=0.02)
        write_synthetic_run(tmp_path / "new", seed=s, skill=0.0, noise=0.02)
    ref = load_runs([tmp_path / "ref"]).included
    new = load_runs([tmp_path / "new"]).included
    plan, looks = regress(CurveDesign(LOOKS), new, ref, 100_000, "broken",
                          GateOptions(delta=0.3))
    internals = ("joint law", "rho", "df", "alpha")
    [line] = plan_lines(plan, "broken")
    assert not any(word in line for word in internals), line
    assert "6 looks at 10%, 20%" in line and "below -0.3" in line
    assert "3 new vs 3 reference seeds" in line
    verbose = "\n".join(plan_lines(plan, "broken", verbose=True))
    assert "joint law: union bound" in verbose and "boundaries" in verbose
    last = looks[-1]
    assert last.decision == "REGRESSION"
    assert not any(word in last.text for word in internals), last.text
    # the estimate is new - reference (the contrast less the margin there), with its bound
    assert f"new - reference {last.estimate:+.3f}, repeated upper bound " \
           f"{last.statistic:+.3f}, margin -{-last.boundary:.3f}" in last.text
    assert "3 new vs 3 reference seeds" in last.text
    assert "new - (1 - rho) x reference" in last.detail and "df" in last.detail
    assert type(last).from_json(last.to_json()) == last
    # a look stored with its contrast, upper bound and margin reads back as the same look
    stored = {k: v for k, v in last.to_json().items()
              if k not in ("verdict", "statistic", "boundary", "estimate", "needs",
                           "fixed_design_seeds")}
    margin = 0.25
    stored |= {"contrast": last.estimate + margin, "upper": last.statistic + margin,
               "margin": margin}
    back = type(last).from_json(stored)
    assert back.verdict == "gate over training time" and back.boundary == -margin
    assert back.estimate == last.estimate + margin - margin
    assert back.statistic == last.statistic + margin - margin
    assert back.cells()["margin"] == f"-0.250 at look {last.look}/{last.looks}"


def test_with_adaptive_seeds_regression_over_seeds_spends_only_its_share():
    """The looks over training time take TIME_SHARE of the gate's alpha; a look over
    seeds then fails only beyond the boundary of the rest (PASS keeps all of alpha)."""
    from analysis.sequential.curves import TIME_SHARE
    from analysis.sequential.design import SequentialDesign
    from analysis.sequential.looks import result_look
    from analysis.verdicts.regression import RegressionResult

    design = SequentialDesign(3, 2, 9)
    res = RegressionResult(verdict="REGRESSION", lower_bound=-0.7, diff=-0.5, new_mean=0.5,
                           reference_mean=1.0, delta=0.3, confidence=0.95, n_new=9,
                           n_reference=9, se=0.1, df=16.0)
    assert result_look(res, design, 4, "s").decision == "REGRESSION"
    split = result_look(res, design, 4, "s", (1 - TIME_SHARE) * design.alpha)
    assert split.decision == "UNDECIDED AT CAP"
    passing = RegressionResult(verdict="PASS", lower_bound=0.0, diff=0.2, new_mean=1.2,
                               reference_mean=1.0, delta=0.3, confidence=0.95, n_new=9,
                               n_reference=9, se=0.1, df=16.0)
    assert result_look(passing, design, 4, "s", 0.025).decision == "PASS"


def test_a_look_before_any_episode_ended_continues_without_spending():
    from analysis.inputs.facts import episode_x
    from runrecord.reader import Run, Table

    runs = load_runs([PROJECT_ROOT / "results" / "reference" / "smoke-cartpole"]).included
    ppo = [r for r in runs if r.manifest["system"] == "cleanba-ppo"]
    late = []
    for r in ppo:  # the candidate's first episodes end after 20% of the budget
        keep = episode_x(r.episodes) > 10_000
        late.append(Run(r.run_dir, r.manifest, Table({k: v[keep] for k, v in
                                                      r.episodes.columns.items()},
                                                     int(keep.sum())), r.updates))
    plan = curve_plan(CurveDesign(LOOKS), ppo, 50_000, 3, "CartPole-v1",
                      GateOptions(delta=0.3))
    first = curve_look(plan, late, ppo, 1, "late", GateOptions(delta=0.3))
    assert first.decision == "CONTINUE" and "nothing to decide on" in first.text
    assert math.isnan(first.statistic) and math.isnan(first.estimate)
    assert curve_look(plan, late, ppo, 3, "late", GateOptions(delta=0.3)).seeds == {
        "new": 3, "reference": 3}
