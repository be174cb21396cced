"""The GPU campaign (benchmarks/campaign*.py) without a GPU: its plan and what a lease may
start, the merge (provenance keeps records apart, nothing overwritten, a lease merged once,
bad archives refused), and the report's "Hardware evidence" section (harness/hardware.py)
on a store of synthetic records standing in for the device kinds (a GPU cannot run here),
rendered in headless Chromium. The CPU rehearsal of real leases through the device kit is
in tests/test_device_kit.py."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from harness_cli import ROOT
from synthetic_records import write_synthetic_run

sys.path.insert(0, str(ROOT / "benchmarks"))

from campaign_merge import merge  # noqa: E402
from campaign_state import (  # noqa: E402
    Item,
    Place,
    estimate_s,
    fit,
    next_tool_kind,
    plan_items,
    read_place,
    sweep_run_ids,
)

from harness.hardware import first_thread_mean, hardware_section  # noqa: E402
from runrecord.exits import EXIT_BAD_INPUT, EXIT_FAILED  # noqa: E402
from runrecord.hardware import record_place  # noqa: E402

H100 = "NVIDIA H100 80GB HBM3"
H200 = "NVIDIA H200"
STACK = {"jax": "0.11.2", "jaxlib": "0.11.2", "envpool": "1.2.5"}
ESTIMATES = {"a": 70.0, "b": 270.0, "c": 90.0, "d": 95.0}


def done_place(seeds: list[int], expected: dict[int, set[str]]) -> Place:
    runs = {rid: {"status": "completed"} for s in seeds for rid in expected[s]}
    return Place("nvidia-h100-80gb-hbm3", "s", runs)


def test_plan_continues_where_the_store_stands_and_a_lease_takes_what_fits():
    expected = sweep_run_ids()
    assert sorted(expected)[:3] == [1, 2, 3] and all(len(ids) == 2 for ids in expected.values())
    items = plan_items(done_place([1, 3], expected), expected)
    # (c) before (b): the actor mode (c) finds faster is the one (b) runs
    assert [i.name for i in items[:8]] == ["a:seed-2", "a:seed-4", "c", "b:seed-1", "d",
                                           "a:seed-5", "a:seed-6", "b:seed-2"]
    # a whole lease: (a), (c) and (d) fit, (b) waits; a shorter one skips (b) and (d)
    assert fit(items, 470, ESTIMATES) == [Item("a", 2), Item("a", 4), Item("c"), Item("d"),
                                          Item("a", 5), Item("a", 6)]
    assert fit(items, 300, ESTIMATES) == [Item("a", 2), Item("a", 4), Item("c"), Item("a", 5)]
    # the next lease starts with what waited: nothing done is planned again
    place = done_place([1, 2, 3, 4], expected)
    place.learning_seeds = [1]
    nxt = plan_items(place, expected)
    assert [i.name for i in nxt[:4]] == ["a:seed-5", "a:seed-6", "c", "b:seed-2"]
    # a speed-bound record of the serial mode alone (made before (c) compared the modes)
    # leaves (c) in the plan; one that compared them takes it out
    place.speed_bound, place.deterministic = ["x"], ["y"]
    assert "c" in [i.name for i in plan_items(place, expected)]
    place.faster_modes = {"x": {"mode": "serial", "why": "w"}}
    assert "c" not in [i.name for i in plan_items(place, expected)]
    assert {i.chunk for i in plan_items(place, expected, chunks="a")} == {"a"}
    # estimates: the defaults, then what merged leases measured; a cap that cut an item is
    # not tried again
    fresh = Place("k", "s")
    assert estimate_s(fresh, "a", ESTIMATES) == 70.0
    fresh.leases = [{"failed": [{"chunk": "a", "wall_s": 80.0}]}]
    assert estimate_s(fresh, "a", ESTIMATES) == 120.0
    fresh.leases.append({"done": [{"chunk": "a", "wall_s": 40.0}, {"chunk": "a", "wall_s": 50.0}]})
    assert estimate_s(fresh, "a", ESTIMATES) == 45.0
    # a tiny lease's runs have other ids (their frames): they never count for the real plan
    tiny = sweep_run_ids(4096)
    assert not set().union(*tiny.values()) & set().union(*expected.values())


def write_run(store: Path, device: str, seed: int, system: str = "cleanba-ppo",
              packages: dict | None = None, **kw) -> Path:
    tmp = write_synthetic_run(store / "_tmp", system=system, seed=seed, devices=(device,),
                              packages=packages or STACK, sweep="equivalence", **kw)
    manifest = json.loads((tmp / "manifest.json").read_text())
    kind, stack = record_place(manifest)
    dst = store / kind / stack / "equivalence" / "runs" / tmp.name
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(tmp, dst)
    return dst


def test_the_next_call_names_the_kind_with_fewer_seeds(tmp_path):
    store = tmp_path / "store"
    assert next_tool_kind(store, sweep_run_ids()) == "nvidia-h100-x1"  # a tie: the first
    expected: dict[int, set[str]] = {}
    for seed in (1, 2):
        for system in ("cleanba-ppo", "cleanba-impala"):
            run = write_run(store, H100, seed, system, total_frames=20_000)
            expected.setdefault(seed, set()).add(run.name)
    expected[3] = {"not-run-yet"}
    kind = "nvidia-h100-80gb-hbm3"
    place = read_place(store, kind, next(p.name for p in (store / kind).iterdir()))
    assert place.equivalence_seeds(expected) == [1, 2]  # seed 3's run is missing
    assert next_tool_kind(store, expected) == "nvidia-h200"


def lease_archive(path: Path, runs: dict[str, Path], extra: dict[str, bytes],
                  mode: str = "paper settings",
                  lease: str = "20261201T000000Z-nvidia-h100-80gb-hbm3") -> Path:
    """A lease's records.tar.gz: run records under equivalence/runs/ and other files; the
    lease ran on the first run's stack."""
    first = json.loads((next(iter(runs.values())) / "manifest.json").read_text())
    stack = record_place(first)[1]
    files = []
    with tarfile.open(path, "w:gz") as tar:
        for rid, run in runs.items():
            for name in ("manifest.json", "episodes.csv", "updates.csv"):
                tar.add(run / name, arcname=f"./equivalence/runs/{rid}/{name}")
                files.append(f"equivalence/runs/{rid}/{name}")
        for name, data in extra.items():
            info = tarfile.TarInfo(f"./{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        facts = {"lease": lease, "kind": "nvidia-h100-80gb-hbm3", "stack": stack, "mode": mode,
                 "environment": {"cpu_model": "x", "jax": "0.11.2"}, "deferred": [],
                 "done": [{"item": "a:seed-1", "chunk": "a", "seed": 1, "wall_s": 60.0,
                           "files": [f for f in files]},
                          {"item": "c", "chunk": "c", "wall_s": 80.0,
                           "files": [n for n in extra if not n.startswith("..")]}]}
        data = json.dumps(facts).encode()
        info = tarfile.TarInfo("./lease.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path


def campaign(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "campaign.py"), *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_merge_files_by_provenance_once_and_never_overwrites(tmp_path):
    made = tmp_path / "made"
    same = write_synthetic_run(made, seed=1, devices=(H100,), packages=STACK, total_frames=20_000)
    other = write_synthetic_run(made, seed=2, devices=(H100,), total_frames=20_000,
                                packages={**STACK, "jax": "0.12.0"})
    lease = "20261201T000000Z-nvidia-h100-80gb-hbm3"
    bound = json.dumps({"bound_sps": 100.0, "share": 0.95}).encode()
    archive = lease_archive(tmp_path / "records.tar.gz", {same.name: same, other.name: other},
                            {f"speed-bound/{lease}.json": bound})
    store = tmp_path / "store"
    merged = merge(archive, store)
    kind, stack = record_place(json.loads((same / "manifest.json").read_text()))
    _, other_stack = record_place(json.loads((other / "manifest.json").read_text()))
    assert other_stack != stack and "jax0.12.0" in other_stack
    base = store / kind / stack
    assert (base / "equivalence" / "runs" / same.name / "episodes.csv").read_bytes() == \
        (same / "episodes.csv").read_bytes()
    assert (store / kind / other_stack / "equivalence" / "runs" / other.name).is_dir()
    assert not (base / "equivalence" / "runs" / other.name).exists()  # kept apart
    assert any(other.name in a for a in merged.apart)
    assert json.loads((base / "speed-bound" / f"{lease}.json").read_text())["share"] == 0.95
    lines = (base / "leases.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["lease"] == lease
    assert json.loads((base / "stack.json").read_text())["kind"] == kind
    # merged again: nothing added, the lease not listed twice
    again = merge(archive, store)
    assert not again.added and again.unchanged == 7 and "merged before" in again.lease_line
    assert len((base / "leases.jsonl").read_text().splitlines()) == 1
    # a file that differs is a conflict: reported (exit 1), the store's copy kept
    target = base / "speed-bound" / f"{lease}.json"
    target.write_text("{}")
    p = campaign("merge", str(archive), "--store", str(store))
    assert p.returncode == EXIT_FAILED and "CONFLICT" in p.stdout, p.stdout + p.stderr
    assert target.read_text() == "{}"


def test_merge_refuses_bad_archives_and_tiny_leases_into_the_store(tmp_path):
    run = write_synthetic_run(tmp_path / "made", seed=1, devices=(H100,), packages=STACK,
                              total_frames=20_000)
    evil = lease_archive(tmp_path / "evil.tar.gz", {run.name: run}, {"../evil.json": b"{}"})
    data = json.loads(tarfile.open(evil).extractfile("./lease.json").read())
    data["done"][1]["files"] = ["../evil.json"]
    repacked = tmp_path / "evil2.tar.gz"
    with tarfile.open(evil) as src, tarfile.open(repacked, "w:gz") as dst:
        for m in src.getmembers():
            body = json.dumps(data).encode() if m.name == "./lease.json" else \
                src.extractfile(m).read()
            m.size = len(body)
            dst.addfile(m, io.BytesIO(body))
    store = tmp_path / "store"
    with pytest.raises(ValueError, match="not a campaign record path"):
        merge(repacked, store)
    assert not store.exists()  # nothing written before every check passed
    tiny = lease_archive(tmp_path / "tiny.tar.gz", {run.name: run}, {}, mode="tiny")
    p = campaign("merge", str(tiny))  # into results/hardware: refused
    assert p.returncode == EXIT_BAD_INPUT and "tiny lease" in p.stderr
    p = campaign("lease", "--out", str(tmp_path / "o"), "--chunks", "ax")
    assert p.returncode == EXIT_BAD_INPUT and "--chunks" in p.stderr
    assert not (tmp_path / "o").exists()


def test_first_thread_mean_is_the_references_statistic(tmp_path):
    csv_path = tmp_path / "episodes.csv"
    rows = ["env_steps,frames,wall_time_s,env_index,episode_return,episode_length",
            "10,40,1,0,1.0,10", "20,80,2,1,3.0,20", "30,120,3,0,5.0,20", "40,160,4,2,9.0,40",
            "50,200,5,1,7.0,30"]
    csv_path.write_text("\n".join(rows) + "\n")
    # envs 0 and 1 of a first thread of 2; by frame 120: env 0 last 5.0, env 1 last 3.0
    assert first_thread_mean(csv_path, 120, 2) == 4.0
    assert first_thread_mean(csv_path, 40, 2) == 0.5  # env 1 has none yet: 0, as the reference
    assert first_thread_mean(csv_path, 1e9, 3) == (5.0 + 7.0 + 9.0) / 3


def synthetic_store(store: Path) -> None:
    """CPU, H100 and H200 stand-ins: PPO on the H100 like the CPU (6 seeds each), on the H200
    shifted down (4 seeds); IMPALA on the H100 with 2 noisy seeds."""
    for seed in range(1, 7):
        write_run(store, "cpu", seed, total_frames=20_000)
        write_run(store, H100, seed, total_frames=20_000, noise_seed_offset=7)
        write_run(store, "cpu", seed, "cleanba-impala", total_frames=20_000)
    for seed in range(1, 5):
        write_run(store, H200, seed, total_frames=20_000, shift=-0.5, noise_seed_offset=3)
    for seed in (1, 2):
        write_run(store, H100, seed, "cleanba-impala", total_frames=20_000, noise=0.6,
                  noise_seed_offset=11)
    shutil.rmtree(store / "_tmp")
    kind = "nvidia-h100-80gb-hbm3"
    stack = next(p.name for p in (store / kind).iterdir())
    base = store / kind / stack
    lease = f"20261201T000000Z-{kind}"
    (base / "speed-bound").mkdir()
    (base / "speed-bound" / f"{lease}.json").write_text(json.dumps({
        "num_envs": 128, "num_steps": 128, "num_actor_threads": 2,
        "actor_alone": {"sps": 9000.0}, "learner_alone": {"sps": 6500.0}, "bound_sps": 6500.0,
        "bound_by": "learner", "together": {"sps": 6100.0}, "share": 6100 / 6500}))
    (base / "deterministic" / lease).mkdir(parents=True)
    (base / "deterministic" / lease / "figures.json").write_text(json.dumps({
        "updates_compared": 6, "checksums_identical": True, "first_mismatch_update": None,
        "runs": [{"steady_sps": 5443.0}, {"steady_sps": 6086.0}]}))
    (base / "learning" / "seed-1").mkdir(parents=True)
    (base / "learning" / "seed-1" / "figures.json").write_text(json.dumps({
        "seed": 1, "lease": lease,
        "ours": {"steady_sps": 6200.0, "peak_rss_gb": 3.9, "first_update_s": 50.0,
                 "learning": {"last_episodes_mean_return": 3.3}},
        "reference": {"steady_sps": 6100.0, "peak_rss_gb": 3.6,
                      "learning": {"avg_episodic_return": 3.6, "frames": 1310720.0}}}))
    (base / "leases.jsonl").write_text(json.dumps({
        "lease": lease, "kind": kind, "tool_kind": "nvidia-h100-x1", "stack": stack,
        "mode": "paper settings", "started_at": "2026-12-01T00:00:00+00:00", "budget_s": 470,
        "wall_s": 455, "done": [{"item": "a:seed-1"}], "deferred": [{"item": "c"}]}) + "\n")


@pytest.mark.slow  # ~12 s: scoring, the seed planner's simulations, Chromium
def test_hardware_section_three_outcomes_seeds_needed_and_figures(tmp_path):

    store = tmp_path / "hardware"
    synthetic_store(store)
    title, body = hardware_section(store)
    assert title == "Hardware evidence"
    rows = re.findall(r"<tr>(.*?)</tr>", body)
    cells = [re.findall(r"<td>(.*?)</td>", r) for r in rows]
    verdicts = {(c[0], c[1]): c for c in cells if len(c) == 10}
    ppo_h100 = verdicts["cleanba-ppo", "nvidia-h100-80gb-hbm3 vs cpu"]
    ppo_h200 = verdicts["cleanba-ppo", "nvidia-h200 vs cpu"]
    between = verdicts["cleanba-ppo", "nvidia-h200 vs nvidia-h100-80gb-hbm3"]
    impala = verdicts["cleanba-impala", "nvidia-h100-80gb-hbm3 vs cpu"]
    assert ppo_h100[3] == "6 / 6" and ppo_h100[4].startswith("PASS") and ppo_h100[9] == "0 (decided)"
    assert ppo_h200[3] == "4 / 6" and ppo_h200[4] == "DIFFERENT"
    assert between[4] == "DIFFERENT" and between[3] == "4 / 6"
    assert impala[3] == "2 / 6" and impala[4] == "INCONCLUSIVE"
    need = int(impala[8])
    assert impala[9] == f"{max(0, need - 2)} / {max(0, need - 6)}" and need > 2
    assert body.count("class='verdict v-") == 4
    assert "software and device of" in body  # each verdict says what differs between sides
    assert "6,100" in body and "0.94" in body and "met" in body  # speed bound, share 0.94
    assert "identical" in body and "6,200" in body and "1.02" in body  # (d); (b) SPS ratio
    assert "No GPU lease merged yet" not in body
    empty = hardware_section(tmp_path / "nothing")[1]
    assert "No GPU lease merged yet; the next lease runs chunk (a) first" in empty
    render_in_chromium(title, body, tmp_path)


def test_the_speed_table_has_a_row_per_actor_mode(tmp_path):
    """A record that compared the modes gives a row per mode, the faster marked; one made
    before (the serial mode's figures at its top level) gives one serial row."""
    from harness.hardware import speed_rows

    base = tmp_path / "nvidia-h200" / "s" / "speed-bound"
    base.mkdir(parents=True)
    serial = {"num_envs": 128, "num_steps": 128, "num_actor_threads": 2,
              "actor_alone": {"sps": 10457.0}, "learner_alone": {"sps": 18316.0},
              "bound_sps": 10457.0, "bound_by": "actor", "together": {"sps": 7459.0},
              "share": 0.71}
    double = {**serial, "actor_alone": {"sps": 11400.0}, "bound_sps": 11400.0,
              "together": {"sps": 10830.0}, "share": 0.95}
    (base / "20261204T000000Z-h200.json").write_text(json.dumps(serial))
    (base / "20261210T000000Z-h200.json").write_text(json.dumps(
        {**serial, "modes": {"serial": serial, "double-buffer": double},
         "faster_mode": "double-buffer"}))
    rows = [[str(c) for c in r] for r in speed_rows(tmp_path)]
    assert [(r[0], r[3], r[5], r[8], r[9], r[10]) for r in rows] == [
        ("20261204T000000Z-h200", "serial", "10,457", "7,459", "0.71", "not met"),
        ("20261210T000000Z-h200", "serial", "10,457", "7,459", "0.71", "not met"),
        ("20261210T000000Z-h200", "double-buffer (faster)", "11,400", "10,830", "0.95", "met")]


SECTION_PROBE = (
    "var sec = Array.prototype.slice.call(document.querySelectorAll('h2')).filter("
    "function (h) { return h.textContent === 'Hardware evidence'; });\n"
    "  var srows = 0, sverdicts = 0, n = sec.length ? sec[0].nextElementSibling : null;\n"
    "  while (n && n.tagName !== 'H2') { srows += n.querySelectorAll('tbody tr').length;\n"
    "    if (n.classList.contains('verdict')) { sverdicts += 1; } n = n.nextElementSibling; }\n"
    "  var r = {section: sec.length, section_rows: srows, section_verdicts: sverdicts, ")


def probe_section(page: str, tmp_path: Path) -> dict | None:
    """What headless Chromium shows of a report page with a "Hardware evidence" section, at
    800 px: the section (rows, verdict lines) and the page checks of test_harness_report
    ('nan', empty tables, anything wider than the window); None without Chromium."""
    import html

    from test_harness_report import CHROMIUM_FLAGS, PAGE_PROBE, _chromium

    if _chromium() is None:
        return None
    probed = tmp_path / "probed.html"
    probed.write_text(page.replace("</body>", PAGE_PROBE.replace("var r = {", SECTION_PROBE)
                                   + "</body>"))
    out = subprocess.run([_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'prof'}",
                          "--window-size=800,2000", "--virtual-time-budget=10000", "--dump-dom",
                          probed.as_uri()], capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="probe">(.*?)</pre>', out.stdout)
    assert m, out.stderr[-2000:]
    seen = json.loads(html.unescape(m[1]))
    assert seen["nan"] == 0 and seen["empty_tables"] == 0 and seen["empty_header_cells"] == 0
    assert seen["scroll_width"] <= seen["client_width"], seen["wide"]
    return seen


def render_in_chromium(title: str, body: str, tmp_path: Path) -> None:
    """The section inside the report's page (harness.report.build_html), rendered in headless
    Chromium: its tables have rows and its four verdict lines show."""
    from harness.report import build_html
    from harness.store import Store
    from harness.sweep import load_sweep, preset_path

    sweep = load_sweep(preset_path("hardware"), seeds=[1])
    page = build_html({}, sweep, Store(tmp_path / "res", sweep.name), sections=[(title, body)])
    seen = probe_section(page, tmp_path)
    if seen is None:
        pytest.skip("chromium not installed (scripts/setup.sh --browser installs it)")
    assert seen["section"] == 1 and seen["section_verdicts"] == 4, seen
    assert seen["section_rows"] == 8, seen  # (a) 4 verdicts, (b), (c), (d), 1 lease


# --------------------------------------------------------------------------------------
# the actor modes: chunk (c) compares them, chunk (b) runs the faster one


def speed_bound_record(store: Path, lease: str, faster: str | None) -> None:
    """An earlier lease's chunk (c) record on the H100 (faster None: one made before chunk
    (c) compared the modes, serial only)."""
    base = store / "nvidia-h100-80gb-hbm3" / "s" / "speed-bound"
    base.mkdir(parents=True, exist_ok=True)
    record = {"bound_sps": 100.0, "share": 0.9}
    if faster is not None:
        record |= {"faster_mode": faster, "faster_why": f"{faster} won"}
    (base / f"{lease}.json").write_text(json.dumps(record))


def test_the_faster_actor_mode_names_serial_on_a_tie():
    from campaign_state import faster_mode

    assert faster_mode({"serial": 1000.0, "double-buffer": 1100.0}) == (
        "double-buffer", "together double-buffer 1,100 vs serial 1,000 SPS (x1.100)")
    assert faster_mode({"serial": 1000.0, "double-buffer": 900.0}) == (
        "serial", "together double-buffer 900 vs serial 1,000 SPS (x0.900)")
    assert faster_mode({"serial": 1000.0, "double-buffer": 1040.0}) == (
        "serial", "together double-buffer 1,040 vs serial 1,000 SPS (x1.040): a tie within 5%, "
        "the together window's run-to-run noise, so serial, the default (the simpler loop, "
        "and the mode of the records before)")
    assert faster_mode({"serial": 1000.0, "double-buffer": None}) == (
        "serial", "the modes were not both measured: serial, the default")


@pytest.mark.parametrize("earlier, mode, why", [
    (None, "serial", "no chunk (c) has compared the actor modes on this device kind and "
     "stack yet: serial, the default"),
    ("serial-only", "serial", "no chunk (c) has compared the actor modes on this device kind "
     "and stack yet: serial, the default"),
    ("double-buffer", "double-buffer", "chunk (c) of lease 20261202T000000Z-h100: "
     "double-buffer won"),
    ("serial", "serial", "chunk (c) of lease 20261202T000000Z-h100: serial won"),
])
def test_chunk_b_runs_our_trainer_in_the_mode_chunk_c_found(tmp_path, monkeypatch, earlier,
                                                              mode, why):
    """Chunk (b) in-process, its two children stubbed (the reference Cleanba is not here):
    the actor mode our trainer gets, and what figures.json and lease.md say of it."""
    import campaign_lease
    from campaign_lease import Lease, LeaseConfig, item_b, lease_markdown

    store = tmp_path / "store"
    speed_bound_record(store, "20261201T000000Z-h100", "double-buffer")  # older: not used
    if earlier == "serial-only":
        speed_bound_record(store, "20261202T000000Z-h100", None)
        (store / "nvidia-h100-80gb-hbm3" / "s" / "speed-bound" /
         "20261201T000000Z-h100.json").unlink()
    elif earlier is not None:
        speed_bound_record(store, "20261202T000000Z-h100", earlier)
    else:
        shutil.rmtree(store)
    place = read_place(store, "nvidia-h100-80gb-hbm3", "s")
    seen: list[tuple[str, ...]] = []

    def ours(suite, work, name, module, args, batch, updates, cap_s):
        seen.append(args)
        for n in ("manifest.json", "episodes.csv", "updates.csv"):
            (work / name / "run").mkdir(parents=True, exist_ok=True)
            (work / name / "run" / n).write_text("{}")
        return {"steady_sps": 6000.0, "learning": {"frames": 2560.0}}

    monkeypatch.setattr(campaign_lease, "ours", ours)
    monkeypatch.setattr(campaign_lease, "reference",
                        lambda suite, work, budget, cap_s, frames: {"steady_sps": 5900.0})
    cfg = LeaseConfig(out=tmp_path / "out", tiny=True, reference_path=tmp_path / "ref")
    lease = Lease(cfg, {}, place, tmp_path / "w", {})
    for this_lease in (None, ("double-buffer", "x1.2")):  # this lease's (c) comes first
        lease.c_mode = this_lease
        want = (mode, why) if this_lease is None else \
            ("double-buffer", "this lease's chunk (c): x1.2")
        result = item_b(lease, 1, 60.0)
        assert result["ok"] and seen[-1][-2:] == ("--actor-mode", want[0])
        figures = json.loads((lease.staging / "learning/seed-1/figures.json").read_text())
        assert (figures["ours"]["actor_mode"], figures["ours"]["actor_mode_why"]) == want
        lease.facts["done"] = [{"item": "b:seed-1", "chunk": "b", "wall_s": 1.0, **result}]
        text = lease_markdown(lease.facts | {"lease": "L", "kind": "k", "stack": "s"})
        assert text.endswith(f"## Actor modes\n\n- b:seed-1: our trainer in actor mode "
                             f"**{want[0]}** ({want[1]})\n")


@pytest.mark.slow  # ~140 s on a loaded 2-core CPU: a tiny Breakout speed bound per mode
def test_cpu_rehearsal_chunk_c_measures_both_modes_and_the_next_b_takes_the_faster(tmp_path):
    """A tiny lease of chunk (c) alone on this CPU (the real tool, both actor modes), merged
    into a scratch store: the faster mode it names is what the next lease's chunk (b) runs."""
    from campaign_state import faster_mode, trainer_mode

    out, store = tmp_path / "out", tmp_path / "store"
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "campaign.py"), "lease",
                        "--tiny", "--chunks", "c", "--out", str(out), "--store", str(store),
                        "--workdir", str(tmp_path / "w"), "--budget-s", "400"],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    facts = json.loads((out / "lease.json").read_text())
    assert facts["plan"] == ["c"] and [d["item"] for d in facts["done"]] == ["c"], facts
    figures = facts["done"][0]["figures"]
    assert list(figures["modes"]) == ["serial", "double-buffer"]
    for f in figures["modes"].values():
        assert all(f[k] > 0 for k in ("actor_alone_sps", "together_sps", "share", "bound_sps"))
        assert set(f["actor_step"]) == {"actor_alone", "together"}  # the same breakdown
        assert all("env_step" in t and "policy_result" in t for t in f["actor_step"].values())
    faster, why = faster_mode({m: f["together_sps"] for m, f in figures["modes"].items()})
    assert (figures["faster_mode"], figures["faster_why"]) == (faster, why)
    with tarfile.open(out / "records.tar.gz") as tar:
        record = json.load(tar.extractfile(f"./speed-bound/{facts['lease']}.json"))
    for mode, f in record["modes"].items():
        assert f["actor_mode"] == mode and f["trainer_args"][-2:] == ["--actor-mode", mode]
    assert record["actor_mode"] == "serial" and record["share"] == record["modes"]["serial"][
        "share"]  # the top level, which the report's table reads, is the serial mode's
    md = (out / "lease.md").read_text()
    assert f"- c: faster actor mode **{faster}** ({why})\n" in md
    for mode, f in figures["modes"].items():
        assert (f"  - {mode}: actor alone {f['actor_alone_sps']:,.0f} SPS, together "
                f"{f['together_sps']:,.0f} SPS, share {f['share']:.2f} of the bound "
                f"{f['bound_sps']:,.0f} SPS (set by the {f['bound_by']})\n") in md
    merge(out, store)
    place = read_place(store, "cpu", facts["stack"])
    assert place.faster_modes == {facts["lease"]: {"mode": faster, "why": why}}
    assert trainer_mode(place, None) == (faster, f"chunk (c) of lease {facts['lease']}: {why}")
    assert [i.name for i in plan_items(place, sweep_run_ids(4096), "bc")[:2]] == [
        "b:seed-1", "b:seed-2"]  # (c) done: not planned again
