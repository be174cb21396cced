"""`harness report` opens with a verdict table, one row per verdict
(subject, outcome coloured, estimate, CI, margin, seeds, a link to its details), and the
regression gate's result is in it (the fixed gate and the gate over training time), on
records of the test-only trainer."""

from __future__ import annotations

import csv
import html
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from harness_cli import ROOT, harness

pytestmark = pytest.mark.slow  # three fake sweeps and two reports: about a minute

FAKE = ROOT / "tests" / "harness_fake_trainer.py"


def sweep_file(tmp: Path, name: str, seeds: str, regression: str = "") -> Path:
    path = tmp / f"{name}.toml"
    path.write_text(f"""\
name = "{name}"
systems = ["fake-ppo"]
layouts = ["a0-l0-d1", "a0-l1-d1"]
games = ["CartPole-v1"]
seeds = [{seeds}]
frames = 2000
overrides = {{ sleep-s = 0.0, updates = 20, return-scale = 25.0 }}
[report]
reps = 200
{regression}
[entry_points.fake-ppo]
entry = "{FAKE}"
""")
    return path


def table(page: Path) -> list[list[str]]:
    """The verdict table's rows as text; the details cell is its link's target."""
    text = page.read_text()
    body = re.search(r"<table class='verdicts'>.*?<tbody>(.*?)</tbody>", text, re.S)
    assert body, "no verdict table"
    rows = []
    for tr in re.findall(r"<tr>(.*?)</tr>", body[1], re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)
        link = re.search(r"href='#([^']+)'", cells[-1])
        rows.append([html.unescape(c) for c in cells[:-1]] + [link[1] if link else ""])
    return rows


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("verdicts")
    root = tmp / "res"
    ref = sweep_file(tmp, "ref", "1, 2, 3")
    reg = (f'[regression]\nreference = "{root / "ref" / "runs"}"\ndelta = 0.3\n'
           'layouts = ["a0-l0-d1"]\n')
    fixed = sweep_file(tmp, "fixed", "1, 2, 3", reg)
    looks = sweep_file(tmp, "looks", "1", reg + "looks_at = [0.5, 1.0]\n")
    # the one-seed side of `looks` leaves its gate UNDECIDED: exit 4, every run completed
    for f, exit_code in ((ref, 0), (fixed, 0), (looks, 4)):
        p = harness("run", "--sweep", str(f), "--results-root", str(root), "--no-progress")
        assert p.returncode == exit_code, p.stdout + p.stderr
    out = {}
    for f in (fixed, looks):
        p = harness("report", "--sweep", str(f), "--results-root", str(root))
        assert p.returncode == 0, p.stdout + p.stderr
        out[f.stem] = (root / f.stem / "report" / "index.html", p.stdout)
    return out


def test_the_report_opens_with_one_row_per_verdict_and_the_gate_is_one(reports):
    page, stdout = reports["fixed"]
    rows = table(page)
    text = page.read_text()
    verdict_lines = [x for x in stdout.splitlines() if x.startswith("verdict: ")]
    assert len(rows) == len(verdict_lines) == 3
    assert text.index("class='verdicts'") < text.index("id='figures'")
    by_kind = {r[0].split(":")[0]: r for r in rows}
    assert set(by_kind) == {"regression", "staleness", "equivalence"}
    gate = by_kind["regression"]
    assert gate[0] == "regression: fake-ppo on CartPole-v1 (1 layout, 1 game)"
    assert gate[1:6] == ["PASS", "+0.0000", "one-sided 95%: [+0.0000, +0.0000]", "-0.3",
                         "3 new vs 3 reference"]
    eq = by_kind["equivalence"]
    assert eq[1].startswith("PASS") and eq[4] == "±0.2" and "paired by seed" in eq[5]
    assert eq[3].startswith("90%: final [")
    assert "<td class='outcome v-PASS'>PASS</td>" in text
    for row in rows:  # every verdict kind gives its estimate, CI, margin and seeds
        assert "–" not in row[2:6], row
    stale = by_kind["staleness"]
    assert stale[3] == "exact: every update counted" and stale[5] == "6 of 6 runs checked"
    for row in rows:  # every details link lands on that verdict's full line
        target = re.search(rf"<div id='{row[-1]}' class='verdict [^']*'[^>]*>([^<]*)", text)
        assert target and target[1].startswith(row[0].split(":")[0]), row
    assert "design: paired by seed (3 seeds on both sides" in html.unescape(text)
    assert "verdict: regression: PASS (bitwise identical) for fake-ppo" in stdout


def test_the_gate_over_training_time_is_a_row_undecided_with_one_seed(reports):
    page, stdout = reports["looks"]
    (gate,) = [r for r in table(page) if r[0].startswith("regression")]
    assert gate[:3] == ["regression: fake-ppo CartPole-v1", "UNDECIDED", "–"], gate
    assert "<td class='outcome v-UNDECIDED'>UNDECIDED</td>" in page.read_text()
    assert ("verdict: regression over training time: UNDECIDED for fake-ppo CartPole-v1: "
            "these seeds cannot decide it") in stdout


def test_a_bitwise_pass_shows_the_interval_its_footnote_names(tmp_path):
    """The smoke reference's a0-l1-d1 copies a0-l0-d1 bit for bit: its row's CI is [0, 0]
    for both metrics, and the footnote says so (it once described an unpaired Welch CI
    that the row no longer shows)."""
    from harness.report import WHY_BITWISE

    ref = ROOT / "results" / "reference" / "smoke-cartpole"
    p = subprocess.run([sys.executable, "-m", "analysis", "equivalence", str(ref),
                        "--where", "system=cleanba-ppo", "--format", "csv"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    rows = [r for r in csv.DictReader(io.StringIO(p.stdout)) if "a0-l1-d1" in r["group"]]
    assert rows and all(r["verdict"].startswith("PASS (bitwise") for r in rows), p.stdout
    assert all(float(r["diff_low"]) == float(r["diff_high"]) == 0 for r in rows)
    assert "[0, 0]" in WHY_BITWISE and "Welch" not in WHY_BITWISE
