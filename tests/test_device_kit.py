"""The device kit (benchmarks/device_kit.py) and the one device call (.device/run.sh): its
pure parts, bad input, and the rehearsal of the call on this CPU against the GPU image's
stack (a fresh Python 3.12 venv holding only benchmarks/gpu_image_stack.txt; the kit
installed with --no-index; `run.sh --tiny`; every row of the table must have numbers), and of
the GPU campaign through the same kit (two leases on this CPU, merged, the second resuming
without repeating a run, the report's "Hardware evidence" section built from them)."""

from __future__ import annotations

import base64
import glob
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from harness_cli import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

from device_kit import ENVPOOL_ENTRY, MIB, keep_rule, kept, rom_name, strip_wheel  # noqa: E402
from suite_table import NOT_YET, TRAINING_ROWS  # noqa: E402
from test_campaign import probe_section  # noqa: E402
from venv_install import pip_install  # noqa: E402

from runrecord.exits import EXIT_BAD_INPUT  # noqa: E402

KIT_SCRIPT = ROOT / "benchmarks" / "device_kit.py"
RUN_SH = ROOT / "benchmarks" / "device_run.sh"
STACK = ROOT / "benchmarks" / "gpu_image_stack.txt"
CACHE = Path.home() / ".cache" / "cleanba-bench"


def test_rom_names() -> None:
    assert rom_name("Breakout-v5") == "breakout"
    assert rom_name("SpaceInvaders-v5") == "space_invaders"
    for bad in ("breakout", "Break out-v5", "-v5", "CartPole_1-v1"):
        with pytest.raises(ValueError, match="--games"):
            rom_name(bad)


def test_keep_rules() -> None:
    prefixes, _ = keep_rule("envpool", ("Breakout-v5",))
    assert kept("envpool/atari/atari_envpool.so", prefixes)
    assert kept("envpool/python/protocol.py", prefixes)
    assert kept("envpool.libs/libEGL-48f73270.so.1.1.0", prefixes)
    assert not kept("envpool/mujoco/mujoco_envpool.so", prefixes)
    assert not kept("envpool/vizdoom/registration.py", prefixes)
    assert kept("envpool-1.2.5.dist-info/METADATA", prefixes)
    assert not kept("envpool-1.2.5.dist-info/RECORD", prefixes)  # rewritten, not copied
    roms, words = keep_rule("envpool-assets", ("Breakout-v5", "SpaceInvaders-v5"))
    assert kept("envpool_assets/atari/roms/space_invaders.bin", roms)
    assert not kept("envpool_assets/atari/roms/pong.bin", roms)
    assert not kept("envpool_assets/procgen/assets/x.png", roms)
    assert "breakout.bin, space_invaders.bin" in words
    assert keep_rule("tyro", ()) == ((), "whole") and kept("tyro/_cli.py", ())


def test_strip_wheel_keeps_the_rule_and_rewrites_record(tmp_path: Path) -> None:
    source = tmp_path / "envpool-1.2.5-cp312-cp312-x.whl"
    members = {"envpool/__init__.py": b"import envpool.entry\n",
               "envpool/entry.py": b"import envpool.mujoco.registration\n",
               "envpool/atari/atari_envpool.so": b"\x7fELF" + bytes(100),
               "envpool/mujoco/mujoco_envpool.so": b"\x7fELF" + bytes(5000),
               "envpool-1.2.5.dist-info/METADATA": b"Name: envpool\n",
               "envpool-1.2.5.dist-info/RECORD": b"stale\n"}
    with zipfile.ZipFile(source, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    target = tmp_path / "out.whl"
    prefixes, _ = keep_rule("envpool", ())
    assert strip_wheel(source, target, prefixes) == (4, 2)  # mujoco and the old RECORD out
    with zipfile.ZipFile(target) as z:
        names = set(z.namelist())
        assert names == {"envpool/__init__.py", "envpool/entry.py",
                         "envpool/atari/atari_envpool.so", "envpool-1.2.5.dist-info/METADATA",
                         "envpool-1.2.5.dist-info/RECORD"}
        assert z.read("envpool/entry.py").decode() == ENVPOOL_ENTRY
        record = z.read("envpool-1.2.5.dist-info/RECORD").decode().splitlines()
        for line in record[:-1]:
            path, digest, size = line.split(",")
            data = z.read(path)
            want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={want}" and int(size) == len(data)
        assert record[-1] == "envpool-1.2.5.dist-info/RECORD,,"


def run_kit(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(KIT_SCRIPT), *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=ROOT)


def test_bad_input_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "kit"
    for args in (["--reference-path", str(tmp_path)], ["--games", "breakout"],
                 ["--reference-note", "x"], ["--max-mib", "0"]):
        proc = run_kit("--out", str(out), *args)
        assert proc.returncode == EXIT_BAD_INPUT, (args, proc.stderr)
        assert "error:" in proc.stderr and not out.exists()
    (tmp_path / "notakit").mkdir()
    (tmp_path / "notakit" / "precious.txt").write_text("keep me")
    proc = run_kit("--out", str(tmp_path / "notakit"))
    assert proc.returncode == EXIT_BAD_INPUT and "not a device kit" in proc.stderr
    assert (tmp_path / "notakit" / "precious.txt").read_text() == "keep me"


def test_run_sh_bad_input_exits_2(tmp_path: Path) -> None:
    for args in ([], ["--out", str(tmp_path / "o"), "--budget-s", "soon"],
                 ["--out", str(tmp_path / "o"), "--repo", str(tmp_path)], ["--nope"]):
        proc = subprocess.run(["bash", str(RUN_SH), *args], capture_output=True, text=True,
                              timeout=60, cwd=ROOT)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "run.sh" in proc.stderr and not (tmp_path / "o").exists()


# --------------------------------------------------------------------------------------
# the rehearsal


def python312() -> str | None:
    """A working Python 3.12 interpreter: $PYTHON312 (as scripts/test_py312.sh), pyenv's, or
    python3.12 on PATH (a pyenv shim there may not run)."""
    candidates = [os.environ.get("PYTHON312"),
                  *sorted(glob.glob(str(Path.home() / ".pyenv/versions/3.12*/bin/python")),
                          reverse=True), shutil.which("python3.12")]
    for candidate in candidates:
        if not candidate:
            continue
        try:
            probe = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2])"],
                                   capture_output=True, text=True, timeout=60)
        except OSError:
            continue
        if probe.stdout.strip() == "(3, 12)":
            return candidate
    return None


def image_venv(python: str) -> Path:
    """A venv holding only the GPU image's stack, cached by the stack file's hash (made
    once; a venv not finished is never reused)."""
    key = hashlib.sha256(STACK.read_bytes() + python.encode()).hexdigest()[:12]
    venv = CACHE / f"image-venv-{key}"
    if (venv / ".complete").exists():
        return venv
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=300)
    r = pip_install(venv / "bin" / "python", "-r", str(STACK), timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    (venv / ".complete").write_text(STACK.read_text())
    return venv


def positive(x: object) -> bool:
    return isinstance(x, int | float) and x > 0


def check_every_row(out: Path, jax_version: str | None = "0.11.2",
                    skipped: tuple[str, ...] = ()) -> None:
    """Every step of the --tiny suite has its numbers; the reference row says why not.
    `skipped`: steps the rehearsal leaves to the campaign's lease (the same step there)."""
    results = json.loads((out / "results.json").read_text())
    steps = results["steps"]
    assert steps["environment"]["jax"] == (jax_version or steps["environment"]["jax"])
    assert positive(steps["envpool-raw"]["steps_per_s"])
    overhead = {(r["num_envs"], r["num_threads"]): r for r in steps["actor-overhead"]["rows"]}
    assert set(overhead) == {(8, 1), (8, 2)}
    for row in overhead.values():
        assert all(positive(x) for x in row["raw"] + row["actor_loop"] + row["ratios"])
    det = "deterministic" not in skipped
    runs = [steps["ours-ppo"], steps["ours-impala"], *(steps["deterministic"]["runs"] if det else [])]
    for run in runs:
        assert run["exit_code"] == 0 and run["updates_done"] == run["updates_planned"], run
        for key in ("steady_sps", "first_half_sps", "second_half_sps", "first_update_s",
                    "peak_rss_gb"):
            assert positive(run[key]), (key, run)
    # two --deterministic runs of one seed on one machine: same params after every update
    assert not det or steps["deterministic"]["checksums_identical"]
    assert not det or steps["deterministic"]["updates_compared"] == runs[-1]["updates_planned"]
    assert steps["reference-ppo"]["not_run"].startswith("no --reference-path given")
    learning = steps["ours-ppo"]["learning"]
    assert learning["episodes_averaged"] >= 1 and learning["random_score"] == 1.7
    assert learning["frames"] == 4 * 8 * 32 * steps["ours-ppo"]["updates_planned"]
    assert sum(results["planned_s"].values()) == pytest.approx(results["budget_s"])
    for step, entry in steps.items():
        assert entry["step_wall_s"] <= results["budget_s"], step

    table = (out / "results.md").read_text()
    lines = table.splitlines()
    assert not [line for line in lines if NOT_YET in line and not any(
        s in line.lower() for s in skipped)]
    for label, step, _ in TRAINING_ROWS:
        row = next(line for line in lines if line.startswith(f"| {label} |"))
        if step in skipped:
            assert NOT_YET in row
        elif label.startswith("reference"):
            assert "not run" in row
        else:
            assert "completed" in row and row.count("n/a") == 1  # device memory: CPU has none
    for envs, threads in overhead:
        assert any(line.startswith(f"| actor loop, no-op forward, {envs} envs x {threads} ")
                   for line in lines)
    assert not det or "checksums of the two `--deterministic` runs: identical" in table
    assert "- random score: 1.7" in table


SUITE_STEPS = ("environment", "envpool-raw", "actor-overhead", "ours-ppo", "reference-ppo",
               "ours-impala")


def lease_command(kit: Path, venv: Path, out: Path, work: Path, store: Path, budget_s: int,
                  rounds: int) -> list[str]:
    """One tiny lease on this CPU through the kit's runner, chunks (a) and (d)."""
    return ["bash", str(kit / "run.sh"), "--campaign", "--tiny", "--out", str(out), "--python",
            str(venv / "bin" / "python"), "--repo", str(ROOT), "--budget-s", str(budget_s),
            "--", "--store", str(store), "--chunks", "ad", "--seeds-per-round", "1",
            "--rounds", str(rounds), "--workdir", str(work)]


def campaign_lease(kit: Path, venv: Path, env: dict[str, str], out: Path, work: Path,
                   store: Path, budget_s: int) -> dict:
    """A whole tiny lease (round 1 of the plan); its lease.json."""
    proc = subprocess.run(lease_command(kit, venv, out, work, store, budget_s, 1),
                          capture_output=True, text=True, timeout=1800, env=env, cwd=work.parent)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == ["lease.json", "lease.md", "records.tar.gz",
                                                     "run.log", "steps.log"]
    return json.loads((out / "lease.json").read_text())


def cut_lease(kit: Path, venv: Path, env: dict[str, str], out: Path, work: Path,
              store: Path) -> dict:
    """A tiny lease of two rounds killed (SIGKILL, its whole process group: the call's
    limit) as soon as its first item is done; the lease.json it left."""
    proc = subprocess.Popen(lease_command(kit, venv, out, work, store, 600, 2), env=env,
                            cwd=work.parent, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if json.loads((out / "lease.json").read_text())["done"]:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return json.loads((out / "lease.json").read_text())


def merge_lease(out: Path, store: Path) -> str:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "campaign.py"), "merge",
                           str(out), "--store", str(store)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def rehearse_campaign(kit: Path, venv: Path, env: dict[str, str], tmp_path: Path,
                      times: dict[str, float]) -> None:
    """Two chunks of the GPU campaign through the kit's runner on this CPU, merged into a
    store; a second lease resumes from the store and repeats nothing; the report's
    "Hardware evidence" section is built from the merged records (and checked in headless
    Chromium when there is one)."""
    store = tmp_path / "hardware"
    started = time.monotonic()
    first = campaign_lease(kit, venv, env, tmp_path / "lease1", tmp_path / "w1", store, 420)
    assert first["kind"] == "cpu" and first["stack"].startswith("py3.12-jax0.11.2-")
    assert first["plan"][:2] == ["a:seed-1", "d"], first["plan"]
    assert [d["item"] for d in first["done"]][:2] == ["a:seed-1", "d"], first
    (a1, d1) = first["done"][:2]
    assert len(a1["runs"]) == 2 and {r["system"] for r in a1["runs"]} == {"cleanba-ppo",
                                                                          "cleanba-impala"}
    assert d1["figures"]["checksums_identical"] and d1["figures"]["updates_compared"] == 5
    times["campaign lease 1"] = time.monotonic() - started
    text = merge_lease(tmp_path / "lease1", store)
    base = store / "cpu" / first["stack"]
    assert f"cpu/{first['stack']}: " in text and (base / "leases.jsonl").exists()
    merged = {p: p.read_bytes() for p in base.rglob("*") if p.is_file()}
    seed1 = {r["run_id"] for r in a1["runs"]}
    assert {p.parent.name for p in merged if p.name == "manifest.json"} >= seed1

    started = time.monotonic()
    second = cut_lease(kit, venv, env, tmp_path / "lease2", tmp_path / "w2", store)
    times["campaign lease 2 (killed after its first item)"] = time.monotonic() - started
    # resumed from the store: nothing done is planned again, the next seed runs; cut off
    # (killed as a call past its limit is) while on the next item, it keeps the first
    assert second["plan"][:2] == ["a:seed-2", "a:seed-3"], second["plan"]
    assert not {"a:seed-1", "d"} & set(second["plan"])
    assert [d["item"] for d in second["done"]] == ["a:seed-2"], second
    assert not {r["run_id"] for r in second["done"][0]["runs"]} & seed1
    text = merge_lease(tmp_path / "lease2", store)
    assert "6 files added" in text, text
    assert all(p.read_bytes() == data for p, data in merged.items() if p.name != "leases.jsonl")
    assert len((base / "leases.jsonl").read_text().splitlines()) == 2

    started = time.monotonic()
    sweep = tmp_path / "hardware.toml"
    sweep.write_text((ROOT / "harness" / "presets" / "hardware.toml").read_text().replace(
        'hardware = "results/hardware"', f'hardware = "{store}"'))
    proc = subprocess.run([sys.executable, "-m", "harness", "report", "--sweep", str(sweep),
                           "--results-root", str(base), "--frames", "4096", "--seeds", "1,2"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    page = base / "equivalence" / "report" / "index.html"
    html_text = page.read_text()
    section = html_text[html_text.index("<h2>Hardware evidence</h2>"):]
    assert "records of cpu only; nothing to compare with yet" in section
    assert "No GPU lease merged yet; the next lease runs chunk (a) first" in section
    assert section.count(first["lease"]) >= 2 and second["lease"] in section  # (d), leases
    assert "<td>identical</td>" in section
    times["report"] = time.monotonic() - started
    seen = probe_section(html_text, tmp_path)  # headless Chromium, where there is one
    if seen is not None:
        assert seen["section"] == 1 and seen["section_rows"] == 3  # (d) and the two leases


@pytest.mark.slow
def test_rehearsal_of_the_device_call(tmp_path: Path) -> None:
    python = python312()
    if python is None:  # still run the whole suite, on this venv's stack
        out = tmp_path / "out"
        proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_suite.py"),
                               "--tiny", "--out", str(out)], capture_output=True, text=True,
                              timeout=1800, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
        check_every_row(out, jax_version=None)
        pytest.skip("no Python 3.12 interpreter (set PYTHON312): the suite ran on "
                    "this venv's stack, the rehearsal on the GPU image's stack did not")
    times = {}
    started = time.monotonic()
    kit = tmp_path / ".device"
    proc = run_kit("--out", str(kit), timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    size = sum(p.stat().st_size for p in kit.rglob("*") if p.is_file())
    assert 0 < size <= 24 * MIB
    manifest = json.loads((kit / "manifest.json").read_text())
    assert manifest["total_bytes"] == size and manifest["reference"] is None
    assert {w["name"] for w in manifest["wheels"]} >= {"envpool", "tyro", "submitit",
                                                      "gymnasium", "dm-env", "optree"}
    assert "not in this kit" in (kit / "MANIFEST.md").read_text()
    times["kit"] = time.monotonic() - started
    started = time.monotonic()
    venv = image_venv(python)
    times["venv"] = time.monotonic() - started
    installed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list",
                                "--format=freeze"], capture_output=True, text=True).stdout
    assert "envpool" not in installed and "tyro" not in installed  # only the image's stack

    started = time.monotonic()
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PIP_NO_INDEX"] = "1"
    # the suite's --deterministic step runs below, as the campaign lease's chunk (d)
    proc = subprocess.run(["bash", str(kit / "run.sh"), "--tiny", "--out", str(out),
                           "--python", str(venv / "bin" / "python"), "--repo", str(ROOT),
                           "--", "--only", *SUITE_STEPS],
                          capture_output=True, text=True, timeout=1800, env=env, cwd=tmp_path)
    times["run.sh --tiny"] = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    table = (out / "results.md").read_text()
    print(table[table.index("## Time per step"):])  # planned and measured, for the CI log
    log = (out / "run.log").read_text()
    assert f"envpool 1.2.5 ({tmp_path}" not in log  # installed in a temporary site, not here
    assert "jax 0.11.2" in log and "envpool 1.2.5" in log
    assert sorted(p.name for p in out.iterdir()) == ["results.json", "results.md", "run.log",
                                                     "steps.log"]
    check_every_row(out, skipped=("deterministic",))
    rehearse_campaign(kit, venv, env, tmp_path, times)
    print(f"rehearsal seconds: {times}")
