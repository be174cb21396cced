"""`harness report` (self-contained HTML, checked in headless Chromium) and
`harness regress` (the CI gate), on records written by the test-only trainer."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from html import escape as html_escape
from pathlib import Path

import pytest
from harness_cli import ROOT, harness

# Builds three fake sweeps and three reports/regressions: ~1-2 minutes on 2 cores.
pytestmark = pytest.mark.slow

FAKE = ROOT / "tests" / "harness_fake_trainer.py"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking"]


def sweep_text(name: str, offset: float, reference: Path | None = None) -> str:
    reg = f'[regression]\nreference = "{reference}"\ndelta = 0.05\n' if reference else ""
    return f"""\
name = "{name}"
description = "fake records for the report test"
systems = ["fake-ppo"]
layouts = ["a0-l0-d1", "a0-l1-d1"]
games = ["CartPole-v1"]
seeds = [1, 2, 3]
frames = 1000
[report]
reps = 200
[entry_points.fake-ppo]
entry = "{FAKE}"
[overrides]
sleep-s = 0.0
updates = 8
return-offset = {offset}
{reg}"""


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """Two fake sweeps: `ref` (returns +100) and `new` (the same), plus `worse` (+0)."""
    tmp = tmp_path_factory.mktemp("report")
    root = tmp / "res"
    files = {}
    for name, offset in (("ref", 100.0), ("new", 100.0), ("worse", 0.0)):
        ref = root / "ref" / "runs" if name != "ref" else None
        f = tmp / f"{name}.toml"
        f.write_text(sweep_text(name, offset, ref))
        p = harness("run", "--sweep", str(f), "--results-root", str(root), "--no-progress")
        assert p.returncode == 0, p.stdout + p.stderr
        files[name] = f
    return root, files


def test_report_page_is_self_contained(swept):
    root, files = swept
    p = harness("report", "--sweep", str(files["new"]), "--results-root", str(root))
    assert p.returncode == 0, p.stderr
    page = root / "new" / "report" / "index.html"
    assert f"report: {page}" in p.stdout
    assert "verdict: equivalence" in p.stdout and "verdict: staleness" in p.stdout
    html = page.read_text()
    assets = json.loads((root / "new" / "report" / "assets.json").read_text())
    assert assets["figures"] and assets["tables"]
    srcs = re.findall(r"<img src='([^']*)'", html)
    assert len(srcs) == len(assets["figures"])
    assert all(s.startswith("data:image/png;base64,") for s in srcs)
    assert "http://" not in html and "https://" not in html  # nothing fetched from outside
    for v in assets["verdicts"]:
        assert v["line"].split(";")[0].replace("&", "&amp;") in html or v["line"][:40] in html
    # Moved elsewhere, the page still has everything (no relative file references).
    assert not re.search(r"""(src|href)=['"](?!data:|#)""", html)
    # Each table's CSV and LaTeX: beside the page in tables/, and linked (as data) under it.
    for t in assets["tables"]:
        for suffix, media in ((".csv", "text/csv"), (".tex", "application/x-tex")):
            written = root / "new" / "report" / "tables" / f"{t['name']}{suffix}"
            link = re.search(rf"download='{re.escape(written.name)}' "
                             rf"href='data:{media};base64,([^']*)'", html)
            assert link and base64.b64decode(link[1]) == written.read_bytes(), written
    tex = (root / "new" / "report" / "tables" / "aggregates.tex").read_text()
    assert tex.startswith("\\begin{tabular}") and "\\toprule" in tex
    # The page shows each table as its Markdown does: an estimate and its interval in one
    # cell under the metric's label (the CSV's KEY, KEY_low, KEY_high columns are data).
    agg = next(t for t in assets["tables"] if t["name"] == "aggregates")
    shown = re.search(r"<h3>" + re.escape(html_escape(agg["title"])) + r"</h3>(.*?)</table>",
                      html, re.S)
    assert shown, agg["title"]
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", shown[1])
    assert headers == ["group", "seeds", "tasks", "Median", "IQM", "Mean", "Optimality gap"]
    assert re.search(r"<td[^>]*>\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]</td>", shown[1])


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(_chromium() is None,
                    reason="chromium not installed (scripts/setup.sh --browser installs it)")
def test_report_renders_in_headless_chromium(swept, tmp_path):
    root, files = swept
    page = root / "new" / "report" / "index.html"
    if not page.exists():
        assert harness("report", "--sweep", str(files["new"]), "--results-root",
                       str(root)).returncode == 0
    # A copy of the page with a probe that writes what the browser rendered into the DOM.
    probe = """<script>window.addEventListener('load', function () {
      var imgs = Array.prototype.slice.call(document.images);
      var r = {images: imgs.length,
               rendered: imgs.filter(function (i) {
                 return i.complete && i.naturalWidth > 0 && i.naturalHeight > 0; }).length,
               tables: document.querySelectorAll('table').length,
               rows: document.querySelectorAll('tbody tr').length,
               verdicts: document.querySelectorAll('.verdict').length};
      var p = document.createElement('pre'); p.id = 'probe';
      p.textContent = JSON.stringify(r); document.body.appendChild(p); });</script>"""
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text().replace("</body>", probe + "</body>"))
    out = subprocess.run(
        [_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
         "--virtual-time-budget=10000", "--dump-dom", probed.as_uri()],
        capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="probe">(.*?)</pre>', out.stdout)
    assert m, out.stderr[-2000:]
    seen = json.loads(m[1])
    assets = json.loads((root / "new" / "report" / "assets.json").read_text())
    assert seen["images"] == len(assets["figures"]) > 0
    assert seen["rendered"] == seen["images"]  # every figure decoded with a real size
    assert seen["tables"] >= len(assets["tables"]) > 0
    assert seen["rows"] > 0 and seen["verdicts"] == len(assets["verdicts"])


def test_regress_passes_on_equal_and_fails_on_worse(swept):
    root, files = swept
    p = harness("regress", "--sweep", str(files["new"]), "--results-root", str(root))
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("PASS") >= 2  # one verdict (fake-ppo) and the overall line
    # 2 layouts x 3 seeds: 3 independent seeds per side, not 6
    assert p.stdout.count("3 seeds (6 runs: layout copies averaged per seed)") == 2
    p = harness("regress", "--sweep", str(files["worse"]), "--results-root", str(root))
    assert p.returncode == 1, p.stdout + p.stderr
    assert "REGRESSION" in p.stdout
    # No reference: a usage error, exit 2.
    p = harness("regress", "--sweep", str(files["worse"]), "--results-root", str(root),
                "--reference", str(root / "nope"))
    assert p.returncode == 2 and "does not exist" in p.stderr
    # A reference whose runs cover other games: the gate refuses (exit 2) and names them.
    other = root / "other-ref"
    shutil.copytree(root / "ref" / "runs", other)
    for m in other.rglob("manifest.json"):
        d = json.loads(m.read_text())
        m.write_text(json.dumps({**d, "env_id": "Acrobot-v1"}))
    p = harness("regress", "--sweep", str(files["new"]), "--results-root", str(root),
                "--reference", str(other))
    assert p.returncode == 2, p.stdout + p.stderr
    assert "missing in the reference: ['CartPole-v1']" in p.stderr  # an error: stderr


def test_regress_one_new_seed_is_undecided_until_equal_spread_is_vouched(swept):
    """One new seed against three: UNDECIDED (4), naming the flag and the sweep key that
    vouch for equal spreads; with the flag, the gate decides (the sides are equal: PASS)."""
    root, files = swept
    one = root / "one-seed"
    p = harness("run", "--sweep", str(files["new"]), "--results-root", str(one), "--seeds",
                "1", "--no-progress")
    assert p.returncode == 0, p.stdout + p.stderr
    reference = ["--reference", str(root / "ref" / "runs")]
    p = harness("regress", "--sweep", str(files["new"]), "--results-root", str(one),
                *reference)
    assert p.returncode == 4, p.stdout + p.stderr
    assert "regression: UNDECIDED for fake-ppo: these seeds cannot decide it: 1 new vs 3 " \
        "reference seeds" in p.stdout
    assert "--assume-equal-spread" in p.stdout
    assert "[regression] assume_equal_spread = true" in p.stdout
    p = harness("regress", "--sweep", str(files["new"]), "--results-root", str(one),
                *reference, "--assume-equal-spread")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "regression verdict: PASS" in p.stdout


def test_report_analyses_each_benchmark_apart(tmp_path):
    """CartPole and Atari runs of one sweep (like smoke) get separate analyses, so a group
    that ran both does not drop out of the CartPole comparisons."""
    f = tmp_path / "mixed.toml"
    f.write_text(sweep_text("mixed", 0.0).replace('games = ["CartPole-v1"]',
                                                  'games = ["CartPole-v1", "Breakout-v5"]'))
    root = tmp_path / "res"
    assert harness("run", "--sweep", str(f), "--results-root", str(root),
                   "--no-progress").returncode == 0
    p = harness("report", "--sweep", str(f), "--results-root", str(root))
    assert p.returncode == 0, p.stderr
    assert "verdict: CartPole-v1: equivalence" in p.stdout
    assert "verdict: Atari: equivalence" in p.stdout
    assert (root / "mixed" / "report" / "CartPole-v1").is_dir()
    assert (root / "mixed" / "report" / "Atari").is_dir()


def test_report_reference_key_picks_the_group_compared_against(swept, tmp_path):
    root, _ = swept
    for reference, ok in (("a0-l1-d1", True), ("a9-l9-d1", False)):
        f = tmp_path / "ref_key.toml"
        f.write_text(sweep_text("refkey", 100.0).replace(
            "[report]\n", f'[report]\nreference = "{reference}"\n'))
        if ok:
            p = harness("run", "--sweep", str(f), "--results-root", str(root), "--no-progress")
            assert p.returncode == 0, p.stdout + p.stderr
        p = harness("report", "--sweep", str(f), "--results-root", str(root))
        if ok:
            assert p.returncode == 0, p.stdout + p.stderr
            line = next(x for x in p.stdout.splitlines() if "verdict: equivalence" in x)
            assert "a0-l0-d1 vs reference fake-ppo" in line and line.count("a0-l1-d1") == 1
        else:  # the report is still built; the warning names the groups there are
            assert p.returncode == 0 and "Traceback" not in p.stderr
            assert "reference group 'a9-l9-d1' not found" in p.stdout
            assert "fake-ppo / cleanba / a0-l1-d1" in p.stdout


# What a reader of the page sees, measured in headless Chromium at two widths.
PAGE_PROBE = """<script>window.addEventListener('load', function () {
  var doc = document.documentElement;
  var text = document.body.innerText;
  var empty = Array.prototype.slice.call(document.querySelectorAll('table')).filter(
    function (t) { return t.querySelectorAll('tbody tr').length === 0; }).length;
  var wide = Array.prototype.slice.call(document.querySelectorAll('body *')).filter(
    function (e) { return e.getBoundingClientRect().right > doc.clientWidth + 1; })
    .map(function (e) { return e.tagName + '.' + e.className; }).slice(0, 5);
  var r = {width: window.innerWidth, scroll_width: doc.scrollWidth,
           client_width: doc.clientWidth, wide: wide,
           nan: (text.match(/\\bnan\\b/gi) || []).length, empty_tables: empty,
           empty_header_cells: Array.prototype.slice.call(document.querySelectorAll('th'))
             .filter(function (h) { return !h.textContent.trim(); }).length,
           what_ran: (document.getElementById('what-ran') || {}).textContent || ''};
  var p = document.createElement('pre'); p.id = 'probe';
  p.textContent = JSON.stringify(r); document.body.appendChild(p); });</script>"""


def render_probe(page: Path, tmp_path: Path, width: int) -> dict:
    probed = tmp_path / f"probed-{width}.html"
    probed.write_text(page.read_text().replace("</body>", PAGE_PROBE + "</body>"))
    out = subprocess.run(
        [_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / f'profile-{width}'}",
         f"--window-size={width},2000", "--virtual-time-budget=10000", "--dump-dom",
         probed.as_uri()], capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="probe">(.*?)</pre>', out.stdout)
    assert m, out.stderr[-2000:]
    return json.loads(html_unescape(m[1]))


def html_unescape(text: str) -> str:
    import html

    return html.unescape(text)


@pytest.mark.skipif(_chromium() is None,
                    reason="chromium not installed (scripts/setup.sh --browser installs it)")
def test_report_pages_read_well_at_1400_and_800_px(swept, tmp_path):
    """A 1-seed run of a sweep scaled down with --seeds 1 (status and report take its
    filters by default) and the whole small sweep: no 'nan', no empty table or header
    cell, nothing wider than the window, and the page says what ran."""
    root, files = swept
    small = root / "small"
    p = harness("run", "--sweep", str(files["new"]), "--results-root", str(small),
                "--seeds", "1", "--no-progress")
    assert p.returncode == 0, p.stdout + p.stderr
    # No filters given: status and report use those of the last run (2 runs, not 6).
    p = harness("status", "--sweep", str(files["new"]), "--results-root", str(small))
    assert p.returncode == 0 and "filters of the sweep's last run: --seeds 1" in p.stderr
    assert '"completed": 2' in p.stdout and "pending" not in p.stdout
    p = harness("status", "--sweep", str(files["new"]), "--results-root", str(small),
                "--no-last-filters")
    assert p.returncode == 0 and '"pending": 4' in p.stdout  # pending is not failed
    p = harness("report", "--sweep", str(files["new"]), "--results-root", str(small))
    assert p.returncode == 0, p.stdout + p.stderr
    # Each verdict printed once, without a doubled kind ("verdict: staleness: staleness").
    verdicts = [x for x in p.stdout.splitlines() if x.startswith("verdict: ")]
    assert len(verdicts) == len(set(verdicts)) == 3  # the gate's too: one seed, UNDECIDED
    assert any(x.startswith("verdict: regression: UNDECIDED for fake-ppo: these seeds "
                            "cannot decide it") for x in verdicts), verdicts
    assert not any(x.startswith(("verdict: staleness: staleness", "verdict: equivalence: "))
                   for x in verdicts)
    one_seed = small / "new" / "report" / "index.html"
    full = root / "new" / "report" / "index.html"
    if not full.exists():  # test_report_page_is_self_contained builds it
        assert harness("report", "--sweep", str(files["new"]), "--results-root",
                       str(root)).returncode == 0
    for page, scaled in ((one_seed, True), (full, False)):
        text = page.read_text()
        if scaled:
            assert "n/a (1 seed)" in text and "Scaled down from the sweep file with --seeds 1" \
                in text
        else:
            assert "Scaled down" not in text and "PASS (bitwise identical)" in text
        for width in (1400, 800):
            seen = render_probe(page, tmp_path, width)
            assert seen["width"] == width, seen
            assert seen["nan"] == 0, (page, width)
            assert seen["empty_tables"] == 0 and seen["empty_header_cells"] == 0, seen
            assert seen["scroll_width"] <= seen["client_width"], (page, width, seen["wide"])
            runs = "2 runs" if scaled else "6 runs"
            assert f"This report covers {runs}" in seen["what_ran"], seen["what_ran"]
            assert ("1 seed (1)" in seen["what_ran"]) == scaled


def test_one_seed_footnote_comes_from_the_verdict_not_its_line():
    """A side with one seed: the equivalence line writes its intervals as 'n/a (1 seed)'
    itself, and the report's footnote follows the verdict's own flag, not a search of the
    line (a line quoting the words gets no footnote; a bitwise PASS gets its own)."""
    from analysis import ONE_SEED
    from analysis.stats.welch import welch_interval
    from analysis.verdicts.equivalence import INCONCLUSIVE, BitwiseResult, EquivalenceResult
    from harness.report import WHY_NO_INTERVAL, verdict_text

    one = welch_interval([0.5], [0.6])
    res = EquivalenceResult(INCONCLUSIVE, "A", "B", 0.1, one, one,
                            BitwiseResult(False, 1, "differs"), [1], [1], ["CartPole-v1"])
    assert res.one_seed_interval() and res.line().count(f"90% CI {ONE_SEED}") == 2
    v = {"line": res.line(), "verdict": res.label, "one_seed": res.one_seed_interval()}
    assert verdict_text(v) == (res.line(), {"one_seed"}) and "nan" not in res.line()
    assert "no confidence" in WHY_NO_INTERVAL
    assert verdict_text({"line": f"staleness: PASS; {ONE_SEED}", "verdict": "PASS"}) == (
        f"staleness: PASS; {ONE_SEED}", set())
    same = EquivalenceResult("PASS", "A", "B", 0.1, one, one, BitwiseResult(True, 1, "same"),
                             [1], [1], ["CartPole-v1"])
    assert not same.one_seed_interval()
    assert verdict_text({"line": same.line(), "verdict": same.label, "bitwise": True})[1] == {
        "bitwise"}


def test_regress_summary_comes_from_the_gates_outcomes(monkeypatch, capsys):
    """`harness regress`'s last line reads each gate's verdict and exit code, not its
    printed lines: a line that merely quotes ': UNDECIDED' does not turn a REGRESSION
    into 'UNDECIDED (--strict: exit 1)', and a --strict UNDECIDED gate does read so."""
    from types import SimpleNamespace

    from analysis import UNDECIDED
    from harness import report
    from runrecord.exits import EXIT_FAILED, EXIT_OK, EXIT_UNDECIDED

    assert report.summary_verdict(EXIT_FAILED, [(UNDECIDED, EXIT_FAILED), ("PASS", EXIT_OK)]
                                  ) == "UNDECIDED (--strict: exit 1)"
    assert report.summary_verdict(EXIT_FAILED, [(UNDECIDED, EXIT_FAILED),
                                                ("REGRESSION", EXIT_FAILED)]) == "REGRESSION"
    assert report.summary_verdict(EXIT_UNDECIDED, [(UNDECIDED, EXIT_UNDECIDED)]) == UNDECIDED
    assert report.summary_verdict(EXIT_OK, []) == "PASS"

    # Lines made up to mislead a search of them: ': UNDECIDED' and no ': REGRESSION'.
    misleading = ["regression over sys REGRESSION", "note: an earlier look: UNDECIDED"]
    found = report.Regressed(EXIT_FAILED, misleading, [("REGRESSION", EXIT_FAILED)], [])
    monkeypatch.setattr(report, "regress", lambda *a, **k: found)
    cmd = SimpleNamespace(store=lambda sweep: None, reference=str(Path(__file__).parent),
                          delta=0.1, strict=True)
    sweep = SimpleNamespace(regression={})
    assert report.do_regress(cmd, sweep) == EXIT_FAILED
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == found.lines
    assert out[-1].startswith("regression verdict: REGRESSION (reference ")
