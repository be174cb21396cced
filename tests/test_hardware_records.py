"""The committed GPU campaign records (results/hardware) give the verdicts the repository
states: `harness report --preset hardware` over the CPU records, with the H200 leases of
2026-12-04 merged, finds the H200 equivalent to the CPU (PASS) for PPO and for IMPALA on
CartPole, and shows what those records' provenance holds beside what ran."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys

from harness_cli import ROOT

STACK = "py3.12-jax0.11.2-jaxlib0.11.2-envpool1.2.5"
STORE = ROOT / "results" / "hardware"


def test_report_over_the_committed_records_passes_h200_against_the_cpu(tmp_path):
    # a copy of the CPU results root: the report writes its folder beside the runs
    root = tmp_path / "cpu"
    shutil.copytree(STORE / "cpu" / STACK, root)
    p = subprocess.run([sys.executable, "-m", "harness", "report", "--preset", "hardware",
                        "--results-root", str(root)], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    page = (root / "equivalence" / "report" / "index.html").read_text()
    section = page[page.index(">Hardware evidence<"):]
    cells = [[html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", row, re.S)]
             for row in re.findall(r"<tr>(.*?)</tr>", section, re.S)]
    verdicts = {c[0]: c for c in cells if len(c) == 10 and c[1] == "nvidia-h200 vs cpu"}
    assert set(verdicts) == {"cleanba-ppo", "cleanba-impala"}
    for system, final in (("cleanba-ppo", "+0.008 [-0.050, +0.066]"),
                          ("cleanba-impala", "-0.016 [-0.044, +0.012]")):
        row = verdicts[system]
        assert row[2] == STACK and row[3] == "6 / 10", row
        assert row[4].startswith("PASS") and row[5] == final, row
    assert "Provenance notes" in section and "0b2eb21" in section and "f374bbf" in section
    assert "vwxyzjn/cleanba d1f8979" in section
