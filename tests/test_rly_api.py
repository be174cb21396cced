"""Every public name of rliable 1.2.0's library, metrics and plot_utils against rliable
itself (the test oracle): the names and signatures, the bootstrap classes' indices and
attributes, bc and bca intervals, the profile helpers and the probability-of-improvement
plot (the aggregates, profiles and README cells: tests/test_rly.py).

"Within Monte Carlo error" as in tests/test_rly.py: endpoints within 4 sd of the
difference of two independent bootstraps of the same reps, the sd measured from ours.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
import typing

import matplotlib
import numpy as np
import pytest
from harness_cli import ROOT
from rly_data import atari_like, example_scores, ours_rliable
from scipy import stats

from analysis import rly
from analysis.errors import AnalysisError
from analysis.rly import bootstraps
from analysis.stats.metrics import interval_from_replicates

matplotlib.use("Agg")
rliable_lib = pytest.importorskip("rliable.library", reason="rliable is the test oracle")
rliable_metrics = pytest.importorskip("rliable.metrics")
rliable_plots = pytest.importorskip("rliable.plot_utils")

PUBLIC = {
    "library": ["Float", "StratifiedBootstrap", "StratifiedIndependentBootstrap",
                "average_score_distributions", "create_performance_profile",
                "get_interval_estimates", "mean_score_deviation", "run_score_deviation",
                "score_distributions"],
    "metrics": ["aggregate_iqm", "aggregate_mean", "aggregate_median",
                "aggregate_optimality_gap", "probability_of_improvement"],
    "plot_utils": ["plot_interval_estimates", "plot_performance_profiles",
                   "plot_probability_of_improvement", "plot_sample_efficiency_curve"],
}
"""rliable's public names (what its modules define, not the typing names they import)."""
ADDED_PARAMETERS = {"create_performance_profile": ["random_state"]}
"""Parameters we add (docs/from-rliable.md)."""


def rliable_public(module) -> list[str]:
    return sorted(n for n, o in vars(module).items()
                  if not n.startswith("_") and not inspect.ismodule(o)
                  and n not in typing.__all__)


def parameters(fn) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


def test_every_public_name_with_rliable_signature():
    theirs_modules = {"library": rliable_lib, "metrics": rliable_metrics,
                      "plot_utils": rliable_plots}
    for mod, names in PUBLIC.items():
        theirs, ours = theirs_modules[mod], getattr(rly, mod)
        assert rliable_public(theirs) == names, mod
        for name in names:
            t, o = getattr(theirs, name), getattr(ours, name)
            if name == "Float":
                assert o == t
                continue
            if isinstance(t, np.vectorize):
                assert isinstance(o, np.vectorize) and o.excluded == t.excluded
                continue
            fn_t, fn_o = (t.__init__, o.__init__) if inspect.isclass(t) else (t, o)
            extra = ADDED_PARAMETERS.get(name, [])
            assert [p for p in parameters(fn_o) if p[0] not in extra] == parameters(fn_t), name
    for cls in ("StratifiedBootstrap", "StratifiedIndependentBootstrap"):
        conf_t = getattr(rliable_lib, cls).conf_int
        assert parameters(getattr(rly.library, cls).conf_int) == parameters(conf_t)
        for attr in ("bootstrap", "index", "random_state", "data", "pos_data", "kw_data"):
            assert hasattr(getattr(rly.library, cls), attr)


def test_stratified_bootstrap_index_and_attributes():
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(4, 3, 2)), rng.normal(size=(4, 3, 2))
    for task_bootstrap in (False, True):
        ours = rly.library.StratifiedBootstrap(x, w=w, random_state=3,
                                               task_bootstrap=task_bootstrap)
        theirs = rliable_lib.StratifiedBootstrap(x, w=w, task_bootstrap=task_bootstrap)
        assert ours.w is w or np.array_equal(ours.w, theirs.w)
        assert np.array_equal(ours.pos_data[0], theirs.pos_data[0])
        assert list(ours.kw_data) == list(theirs.kw_data) == ["w"]
        assert ours._name == theirs._name
        seen = []
        for (pos_o, kw_o), (pos_t, kw_t) in zip(ours.bootstrap(30), theirs.bootstrap(30),
                                                strict=True):
            idx_o, idx_t = ours.index, theirs.index
            assert len(idx_o) == len(idx_t) == 3
            assert [np.shape(i) for i in idx_o] == [np.shape(i) for i in idx_t]
            if not task_bootstrap:
                assert all(np.array_equal(a, b) for a, b in zip(idx_o[1:], idx_t[1:],
                                                                strict=True))
            assert np.array_equal(pos_o[0], x[idx_o]) and np.array_equal(kw_o["w"], w[idx_o])
            assert pos_o[0].shape == pos_t[0].shape and kw_o["w"].shape == kw_t["w"].shape
            assert np.all(idx_o[0] == idx_o[0][..., :1])  # a run's curve stays together
            seen.append(idx_o[0][..., 0].copy())
        assert {int(v) for v in np.ravel(seen)} == set(range(4))
        twice = [[pos[0] for pos, _ in rly.library.StratifiedBootstrap(
            x, w=w, random_state=3, task_bootstrap=task_bootstrap).bootstrap(3)]
                 for _ in range(2)]
        assert all(np.array_equal(a, b) for a, b in zip(*twice, strict=True))
    assert isinstance(ours.random_state, np.random.Generator)
    ours.random_state = 7
    with pytest.raises(AnalysisError, match="same runs and tasks"):
        rly.library.StratifiedBootstrap(x, x[:3])


def test_stratified_independent_bootstrap_index_and_attributes():
    rng = np.random.default_rng(1)
    x, y, z = rng.normal(size=(4, 3)), rng.normal(size=(6, 3)), rng.normal(size=(5, 3, 2))
    ours = rly.library.StratifiedIndependentBootstrap(x, y, z=z, random_state=1)
    theirs = rliable_lib.StratifiedIndependentBootstrap(x, y, z=z)
    assert ours.z is z and len(ours.pos_data) == len(theirs.pos_data) == 2
    for (pos_o, kw_o), _ in zip(ours.bootstrap(5), theirs.bootstrap(5), strict=True):
        (pos_i, kw_i), (pos_it, kw_it) = ours.index, theirs.index
        assert [[np.shape(a) for a in t] for t in pos_i] == \
            [[np.shape(a) for a in t] for t in pos_it]
        assert [np.shape(a) for a in kw_i["z"]] == [np.shape(a) for a in kw_it["z"]]
        assert np.array_equal(pos_o[1], y[pos_i[1]]) and np.array_equal(kw_o["z"], z[kw_i["z"]])
        assert pos_i[1][0].max() < 6 and pos_i[0][0].max() < 4


@pytest.mark.parametrize("method", ["percentile", "basic", "norm", "bc", "bca"])
def test_conf_int_matches_rliable_classes(method):
    """The classes' conf_int (arch's defaults: 1000 reps, method 'basic' unless given)
    on one task, where both jackknifes coincide."""
    rng = np.random.default_rng(11)
    x = rng.lognormal(0, 1, (12, 1))

    def func(s):
        return np.array([np.mean(s), np.median(np.mean(s, axis=0))])

    reps = 4000
    for tail in ("two", "lower"):
        np.random.seed(0)
        theirs = rliable_lib.StratifiedBootstrap(x).conf_int(func, reps=reps, method=method,
                                                             tail=tail)
        runs = [rly.library.StratifiedBootstrap(x, random_state=s).conf_int(
            func, reps=reps, method=method, tail=tail) for s in range(12)]
        ours, sd = runs[0], np.std(np.nan_to_num(runs, posinf=0, neginf=0), axis=0, ddof=1)
        finite = np.isfinite(theirs)
        assert np.array_equal(finite, np.isfinite(ours))
        assert np.all(np.abs(ours - theirs)[finite] <= 4 * np.sqrt(2) * sd[finite] + 1e-12)


def test_bca_acceleration_is_the_stratified_jackknife():
    rng = np.random.default_rng(2)
    one = rng.lognormal(0, 1, (9, 1))
    # one task: the leave-one-out jackknife (arch's and scipy's)
    jk = np.array([np.mean(np.delete(one, i, axis=0)) for i in range(9)])
    u = jk.mean() - jk
    expected = np.sum(u ** 3) / (6 * np.sum(u ** 2) ** 1.5)
    assert bootstraps.jackknife_acceleration(rly.aggregate_mean, [one]) == pytest.approx(expected)
    # two tasks of 3 runs, by hand: delete run j of task h, the task keeping its weight
    x = np.array([[0.0, 1.0], [1.0, 5.0], [5.0, 2.0]])
    values = []
    for h in range(2):
        means = x.mean(axis=0)
        for j in range(3):
            m = means.copy()
            m[h] = np.delete(x[:, h], j).mean()
            values.append(m.mean())
    u = (2 / 3) * (np.reshape(values, (2, 3)).mean(axis=1, keepdims=True)
                   - np.reshape(values, (2, 3)))
    expected = np.sum(u ** 3) / (6 * np.sum(u ** 2) ** 1.5)
    assert bootstraps.jackknife_acceleration(rly.aggregate_mean, [x]) == pytest.approx(expected)
    assert bootstraps.jackknife_acceleration(rly.aggregate_mean, [x], paired=True) == \
        pytest.approx(expected)
    # a statistic no deletion moves: acceleration 0 (arch raises)
    assert bootstraps.jackknife_acceleration(lambda s: np.float64(1.0), [x]) == 0.0


def test_bc_bca_formula_on_known_replicates():
    """bc / bca endpoints from replicates whose quantiles are known."""
    reps = np.linspace(0.0, 1.0, 100_001)  # uniform: the q-quantile is q
    point, a = 0.6, 0.05
    z0 = stats.norm.ppf(0.6)
    for method, acc in (("bc", 0.0), ("bca", a)):
        ci = interval_from_replicates(point, reps, 0.9, method, acceleration=a)
        z = stats.norm.ppf([0.05, 0.95])
        q = stats.norm.cdf(z0 + (z0 + z) / (1 - acc * (z0 + z)))
        assert [float(ci.low), float(ci.high)] == pytest.approx(list(q), abs=1e-5)
    tied = np.r_[np.zeros(10), np.ones(10)]  # half below, half tied at 1: z0 = Phi^-1(3/4)
    ci = interval_from_replicates(1.0, tied, 0.95, "bc")
    assert float(ci.high) == 1.0 and float(ci.low) == pytest.approx(np.percentile(
        tied, 100 * stats.norm.cdf(2 * stats.norm.ppf(0.75) + stats.norm.ppf(0.025))))
    with pytest.raises(AnalysisError, match="one side"):
        interval_from_replicates(2.0, tied, 0.95, "bc")


def test_bca_one_task_matches_scipy_and_rliable():
    """One task of 10 runs: our bca and scipy.stats.bootstrap's BCa, and rliable's, agree
    within Monte Carlo error at 5,000 reps."""
    rng = np.random.default_rng(4)
    x = rng.lognormal(0, 1, (10, 1))
    reps = 5000
    runs = [rly.get_interval_estimates({"a": x}, rly.aggregate_mean, method="bca",
                                       reps=reps, random_state=s)[1]["a"][:, 0]
            for s in range(12)]
    ours, tol = runs[0], 4 * np.sqrt(2) * np.std(runs, axis=0, ddof=1)
    ref = stats.bootstrap((x[:, 0],), np.mean, n_resamples=reps, method="BCa",
                          random_state=0).confidence_interval
    assert np.all(np.abs(ours - [ref.low, ref.high]) <= tol)
    np.random.seed(1)
    theirs = rliable_lib.get_interval_estimates({"a": x}, rliable_metrics.aggregate_mean,
                                                method="bca", reps=reps)[1]["a"][:, 0]
    assert np.all(np.abs(ours - theirs) <= tol)


def test_bc_bca_many_tasks_against_rliable():
    """5 runs x 55 games: bc agrees with rliable within Monte Carlo error; bca too once
    given rliable's acceleration (arch deletes run i from every game at once, 5 values
    for 55 strata): the bca machinery is the same, only the jackknife differs."""
    score = {"Rainbow": example_scores()["Rainbow"]}
    x = score["Rainbow"]
    reps = 2000
    np.random.seed(6)

    def theirs_func(s):
        m = rliable_metrics
        return np.array([m.aggregate_median(s), m.aggregate_iqm(s), m.aggregate_mean(s),
                         m.aggregate_optimality_gap(s)])

    their_bc = rliable_lib.get_interval_estimates(score, theirs_func, method="bc",
                                                  reps=reps)[1]["Rainbow"]
    their_bca = rliable_lib.get_interval_estimates(score, theirs_func, method="bca",
                                                   reps=reps)[1]["Rainbow"]
    bc = [rly.get_interval_estimates(score, ours_rliable, method="bc", reps=reps,
                                     random_state=s)[1]["Rainbow"] for s in range(12)]
    tol = 4 * np.sqrt(2) * np.std(bc, axis=0, ddof=1)
    assert np.all(np.abs(bc[0] - their_bc) <= tol)
    jk = np.array([ours_rliable(np.delete(x, i, axis=0)) for i in range(5)])
    u = jk.mean(axis=0) - jk
    arch_a = np.sum(u ** 3, 0) / (6 * np.sum(u ** 2, 0) ** 1.5)
    point = ours_rliable(x)
    with_arch_a = []
    for s in range(12):
        values = bootstraps.bootstrap_values(ours_rliable, [x], reps=reps,
                                         rng=np.random.Generator(np.random.PCG64(s)))
        ci = interval_from_replicates(point, values, 0.95, "bca", acceleration=arch_a)
        with_arch_a.append(np.stack([ci.low, ci.high]))
    tol = 4 * np.sqrt(2) * np.std(with_arch_a, axis=0, ddof=1)
    assert np.all(np.abs(with_arch_a[0] - their_bca) <= tol)
    ours = rly.get_interval_estimates(score, ours_rliable, method="bca", reps=reps)[1]
    assert np.all(ours["Rainbow"][0] < point) and np.all(point < ours["Rainbow"][1])


def test_profile_helpers_equal_rliable():
    rng = np.random.default_rng(8)
    x = atari_like(rng, 5, 20)
    taus = np.linspace(0, 3, 13)
    for name in ("run_score_deviation", "mean_score_deviation"):
        for tau in taus:
            assert getattr(rly.library, name)(x, tau) == getattr(rliable_lib, name)(x, tau)
    for name in ("score_distributions", "average_score_distributions"):
        np.testing.assert_array_equal(getattr(rly.library, name)(x, taus),
                                      getattr(rliable_lib, name)(x, taus))


def test_plot_probability_of_improvement_draws_rliable_bars():
    import matplotlib.pyplot as plt

    points = {"PPG,PPO": 0.71, "PPO,DQN": 0.55}
    cis = {"PPG,PPO": np.array([[0.62], [0.8]]), "PPO,DQN": np.array([[0.45], [0.66]])}
    axes = [module.plot_probability_of_improvement(points, cis)
            for module in (rliable_plots, rly.plot_utils)]
    bars = [[(p.get_x(), p.get_width(), p.get_y()) for p in ax.patches] for ax in axes]
    np.testing.assert_allclose(bars[0], bars[1])
    labels = [[t.get_text() for t in ax.get_yticklabels()] for ax in axes]
    assert labels[0] == labels[1] == ["PPG", "PPO"]
    twins = [[t.get_text() for t in ax.figure.axes[1].get_yticklabels()] for ax in axes]
    assert twins[0] == twins[1] == ["PPO", "DQN"]
    plt.close("all")


def test_non_linear_scaling_places_taus_as_rliable():
    import matplotlib.pyplot as plt

    profiles, _ = rly.create_performance_profile(example_scores(), np.linspace(0, 4, 41),
                                                 reps=50)
    taus = np.linspace(0, 4, 41)
    expected = rliable_plots._non_linear_scaling(profiles, taus)
    ax = rly.plot_performance_profiles(profiles, taus, use_non_linear_scaling=True)
    np.testing.assert_allclose(ax.lines[0].get_xdata(), expected[0])
    np.testing.assert_allclose(ax.get_xticks(), expected[1])
    plt.close("all")


def test_rly_runs_with_rliable_and_arch_blocked():
    """Every public name of analysis.rly works with rliable, arch and seaborn unimportable."""
    probe = r"""
import importlib.abc, sys
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("rliable", "arch", "seaborn"):
            raise ImportError(f"analysis.rly imported {name}")
sys.meta_path.insert(0, Blocker())
import warnings; warnings.simplefilter("ignore")
import matplotlib; matplotlib.use("Agg")
import numpy as np
from analysis import rly
rng = np.random.default_rng(0)
x, y = rng.lognormal(0, 1, (5, 8)), rng.lognormal(0, 1, (6, 8))
for m in ("percentile", "basic", "bc", "bca"):
    rly.get_interval_estimates({"a": x}, rly.aggregate_iqm, method=m, reps=200)
p, ci = rly.get_interval_estimates({"a,b": (x, y)}, rly.probability_of_improvement,
                                   method="bca", reps=200)
rly.plot_probability_of_improvement(p, ci)
bs = rly.StratifiedBootstrap(x, random_state=1)
list(bs.bootstrap(3)); bs.conf_int(np.mean, reps=100, method="bca")
ib = rly.StratifiedIndependentBootstrap(x, y)
list(ib.bootstrap(3)); ib.conf_int(rly.probability_of_improvement, reps=100)
lib = rly.library
lib.score_distributions(x, [0.5, 1]); lib.average_score_distributions(x, [0.5, 1])
pr, pci = lib.create_performance_profile({"a": x}, [0.5, 1.0], reps=50)
rly.plot_performance_profiles(pr, [0.5, 1.0], pci, use_non_linear_scaling=True)
assert not [m for m in sys.modules if m.split(".")[0] in ("rliable", "arch", "seaborn")]
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]
