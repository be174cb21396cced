"""Staleness audit: cleanba 0 then exactly 1, sync 0, async reported; violations named."""

from synthetic_records import write_synthetic_run

from analysis.cli import main
from analysis.inputs.load import load_runs
from analysis.verdicts.staleness import audit
from runrecord import RunWriter


def test_cleanba_sync_async_pass(tmp_path):
    write_synthetic_run(tmp_path, architecture="cleanba", seed=1, updates=10)
    write_synthetic_run(tmp_path, architecture="sync", seed=2, updates=10)
    write_synthetic_run(tmp_path, architecture="async", seed=3, updates=10)
    rep = audit(load_runs([tmp_path]).included, ["architecture"])
    assert rep.verdict == "PASS" and rep.exit_code == 0
    g = rep.groups
    assert g["cleanba"]["histogram"] == {0: 1, 1: 9}
    assert g["sync"]["histogram"] == {0: 10} and g["sync"]["mean"] == 0
    async_run = next(r for r in rep.runs if r.architecture == "async")
    assert async_run.check.startswith("n/a")


def _manual_run(tmp_path, versions, architecture="cleanba"):
    w = RunWriter(tmp_path / "bad", {"run_id": "bad1", "system": "cleanba-impala",
                                     "architecture": architecture, "env_id": "CartPole-v1",
                                     "seed": 1, "layout": {"name": "a0-l0-d1"}})
    w.log_episode({"env_steps": 1, "frames": 1, "wall_time_s": 0.1, "env_index": 0,
                   "episode_return": 10.0, "episode_length": 10})
    for k, (vmin, vmax, mid) in enumerate(versions, start=1):
        w.log_update({"update": k, "learner_version": k + 1, "rollout_policy_version_min": vmin,
                      "rollout_policy_version_max": vmax, "num_rollouts": 4,
                      "policy_changes_mid_rollout": mid})
    w.finish("completed")


def test_violation_names_run_and_update(tmp_path, capsys):
    # update 3 trained on version 1 (staleness 2): a cleanba run must have exactly 1
    _manual_run(tmp_path, [(1, 1, 0), (1, 1, 0), (1, 2, 1), (3, 3, 0)])
    rep = audit(load_runs([tmp_path]).included)
    assert rep.verdict == "FAIL" and rep.exit_code == 1
    run = rep.runs[0]
    assert run.num_violations == 1
    assert "run bad1" in run.violations[0] and "update 3" in run.violations[0]
    assert run.mid_rollout_share == 1 / 16
    # The report's verdict row: worst and mean staleness (0, 1, 2, 1), exact, the rule.
    assert rep.cells() == {"estimate": "max 2, mean 1.000", "ci": "exact: every update counted",
                           "margin": "cleanba: 0 at update 1, then exactly 1",
                           "seeds": "1 of 1 run checked"}
    assert main(["staleness", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "VIOLATION run bad1 (cleanba) update 3" in out


def test_first_update_must_be_fresh(tmp_path):
    # update 1 cannot have trained on anything but the initial version 1
    _manual_run(tmp_path, [(0, 0, 0), (1, 1, 0)])
    rep = audit(load_runs([tmp_path]).included)
    assert rep.runs[0].violations[0].startswith("run bad1 (cleanba) update 1")


def test_sync_with_stale_data_is_a_violation(tmp_path, capsys):
    _manual_run(tmp_path, [(1, 1, 0), (1, 1, 0)], architecture="sync")
    assert main(["staleness", str(tmp_path), "--json-out", str(tmp_path / "s.json")]) == 1
    assert "update 2" in capsys.readouterr().out
    assert (tmp_path / "s.json").exists()


def test_nothing_checked_is_undecided_not_a_pass(tmp_path, capsys):
    """Async runs have no rule: an audit that checked no run is no evidence of a pass
    (it printed `staleness: PASS; 0 run(s) checked` and exited 0)."""
    write_synthetic_run(tmp_path, architecture="async", seed=3, updates=10)
    rep = audit(load_runs([tmp_path]).included)
    assert rep.verdict == "UNDECIDED" and rep.exit_code == 4
    assert rep.cells()["margin"] == "no rule checked"
    assert rep.cells()["seeds"] == "0 of 1 run checked"
    assert main(["staleness", str(tmp_path)]) == 4
    out = capsys.readouterr().out
    assert "staleness: UNDECIDED; no run could be checked (1 n/a (no rule for architecture " \
        "'async'))" in out and "PASS" not in out


def test_suites_are_audited_apart(tmp_path, capsys):
    """A layout that ran CartPole and Breakout gets one row per suite, labelled by suite,
    as every other command splits; one suite alone keeps its plain labels."""
    for seed in (1, 2):
        write_synthetic_run(tmp_path, architecture="cleanba", seed=seed, updates=10)
    write_synthetic_run(tmp_path, architecture="cleanba", seed=3, updates=6,
                        env_id="Breakout-v5")
    runs = load_runs([tmp_path]).included
    rep = audit(runs, ["architecture"])
    assert {g: d["runs"] for g, d in rep.groups.items()} == {"CartPole-v1: cleanba": 2,
                                                             "Atari: cleanba": 1}
    assert rep.groups["Atari: cleanba"]["histogram"] == {0: 1, 1: 5}
    cartpole = [r for r in runs if r.manifest["env_id"] == "CartPole-v1"]
    assert list(audit(cartpole, ["architecture"]).groups) == ["cleanba"]
    assert main(["staleness", str(tmp_path), "--group-by", "architecture"]) == 0
    out = capsys.readouterr().out
    assert "| Atari: cleanba-ppo / cleanba " in out
    assert "| CartPole-v1: cleanba-ppo / cleanba " in out
