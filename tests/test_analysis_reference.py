"""Reference group of equivalence verdicts, and suites split before grouping."""

import json

import pytest
from synthetic_records import write_synthetic_run

from analysis.cli import main
from analysis.errors import AnalysisError
from analysis.inputs.load import load_runs
from analysis.output.report import build_report_assets
from analysis.scoring.grouping import analyse, choose_reference, hardware_key

# ',' sorts before '-': by label a0-l0,1-d1 would come first; by hardware a0-l0-d1 does.
LAYOUTS = ("a0-l0-d2", "a0-l0,1-d1", "a0-l0-d1")


@pytest.fixture(scope="module")
def three_layouts(tmp_path_factory):
    root = tmp_path_factory.mktemp("three")
    for layout in LAYOUTS:
        for s in (1, 2, 3):
            write_synthetic_run(root, seed=s, layout=layout)
    return root


def _eq(res):
    return [v for v in res["verdicts"] if v["kind"] == "equivalence"]


def test_hardware_order_and_matching(three_layouts):
    suite = analyse(load_runs([three_layouts])).suites[0]
    ordered = sorted(suite, key=lambda g: hardware_key(suite[g]))
    # processes first (d2 last), then devices (l0,1 uses 2), then the name
    assert [g.split(" / ")[-1] for g in ordered] == ["a0-l0-d1", "a0-l0,1-d1", "a0-l0-d2"]
    assert sorted(suite)[0].endswith("a0-l0,1-d1")  # what the old "first sorted" rule took
    assert choose_reference(suite).endswith(" / a0-l0-d1")
    assert choose_reference(suite, "a0-l0,1-d1").endswith(" / a0-l0,1-d1")
    label = "cleanba-ppo / cleanba / a0-l0-d2"
    assert choose_reference(suite, label) == label
    with pytest.raises(AnalysisError, match="not found.*a0-l0-d1"):
        choose_reference(suite, "a0-l3-d1")


def test_report_reference_default_and_switch(three_layouts, tmp_path):
    kw = {"reps": 50, "aggregate_reps": 200}
    res = build_report_assets([three_layouts], tmp_path / "default", **kw)
    eq = _eq(res)
    assert sorted(v["subject"].split(" vs ")[0].split(" / ")[-1] for v in eq) == [
        "a0-l0,1-d1", "a0-l0-d2"]
    for v in eq:
        assert v["subject"].endswith(" vs cleanba-ppo / cleanba / a0-l0-d1")
        assert "vs reference cleanba-ppo / cleanba / a0-l0-d1:" in v["line"]
        assert json.loads(open(v["json"]).read())["reference"].endswith("a0-l0-d1")
    res = build_report_assets([three_layouts], tmp_path / "switched", reference="a0-l0,1-d1",
                              **kw)
    eq = _eq(res)
    assert len(eq) == 2 and all(v["subject"].endswith(" vs cleanba-ppo / cleanba / a0-l0,1-d1")
                                for v in eq)
    res = build_report_assets([three_layouts], tmp_path / "bad", reference="a9-l9-d1", **kw)
    assert not _eq(res) and any("'a9-l9-d1' not found" in w for w in res["warnings"])


def test_cli_reference_flag(three_layouts, tmp_path, capsys):
    out = tmp_path / "eq.json"
    assert main(["equivalence", str(three_layouts), "--json-out", str(out)]) == 0
    d = json.loads(out.read_text())["comparisons"]
    assert len(d) == 2 and {c["reference"].split(" / ")[-1] for c in d} == {"a0-l0-d1"}
    assert capsys.readouterr().out.count("vs reference cleanba-ppo / cleanba / a0-l0-d1") == 2
    assert main(["equivalence", str(three_layouts), "--reference", "a0-l0,1-d1",
                 "--json-out", str(out)]) == 0
    d = json.loads(out.read_text())["comparisons"]
    assert {c["reference"].split(" / ")[-1] for c in d} == {"a0-l0,1-d1"}
    assert {c["group_a"].split(" / ")[-1] for c in d} == {"a0-l0-d1", "a0-l0-d2"}
    assert main(["figures", str(three_layouts), "--out", str(tmp_path / "fig"), "--reps", "50",
                 "--aggregate-reps", "200", "--reference", "a0-l0-d2"]) == 0
    assert capsys.readouterr().out.count("vs reference cleanba-ppo / cleanba / a0-l0-d2") == 2
    assert main(["equivalence", str(three_layouts), "--a", "a0-l0,1-d1", "--json-out",
                 str(out)]) == 0  # one pair: the default reference among the others
    d = json.loads(out.read_text())
    assert d["group_a"].endswith("a0-l0,1-d1") and d["reference"].endswith("a0-l0-d1")
    assert main(["equivalence", str(three_layouts), "--reference", "nope"]) == 2
    assert "not found" in capsys.readouterr().err


def test_mixed_group_keeps_its_cartpole_comparison(tmp_path):
    """a0-l0-d1 ran CartPole and Breakout, a0-l1-d1 CartPole only: grouping before the
    suite split gave them different env sets, so CartPole had no comparison."""
    runs = tmp_path / "runs"
    for s in (1, 2, 3):
        for layout in ("a0-l0-d1", "a0-l1-d1"):
            write_synthetic_run(runs, seed=s, layout=layout)
        write_synthetic_run(runs, seed=s, layout="a0-l0-d1", env_id="Breakout-v5",
                            total_frames=400_000, episodes=150, updates=10)
    a = analyse(load_runs([runs]))
    assert a.suite_names == ["CartPole-v1", "Atari"]
    assert [len(s) for s in a.suites] == [2, 1]
    assert all(gs.tasks == ["CartPole-v1"] for gs in a.suites[0].values())
    res = build_report_assets([runs], tmp_path / "out", reps=50, aggregate_reps=200)
    eq = _eq(res)
    assert len(eq) == 1 and eq[0]["suite"] == "CartPole-v1"
    assert eq[0]["line"].startswith("CartPole-v1: equivalence cleanba-ppo / cleanba / a0-l1-d1 "
                                     "vs reference cleanba-ppo / cleanba / a0-l0-d1: PASS")
    assert (tmp_path / "out" / "CartPole-v1").is_dir() and (tmp_path / "out" / "Atari").is_dir()
    assert any(w.startswith("Atari: ") and "no equivalence verdict" in w
               for w in res["warnings"])
    # The CLI splits the same way: one CartPole comparison, exit 0
    assert main(["equivalence", str(runs)]) == 0
    assert main(["summary", str(runs)]) == 0
