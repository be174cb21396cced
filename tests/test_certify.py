"""Certificates, tier 1 (harness/certify/, docs/certificate.md): the Merkle tree against
RFC 6962's published vectors, what differs between a run's stack and this machine's, the
claims file, and certify + verify on the committed reference records (real runs of the
smoke preset), tampered with: one byte of one episodes.csv, a claim's number edited, a run
the plan never held added, a wrong published root, forged frames certified again (each
record's consistency, on small tables and on the reference); bad input exits 2 and writes
nothing.
Tier 2 (replays) is tests/test_certify_replay.py."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from harness.certify.claims import ClaimError, ClaimOutput, default_claims, read_claims_file
from harness.certify.facts import differences, run_facts
from harness.certify.merkle import (
    Leaf,
    _leaf_hash,
    _mth,
    inclusion_proof,
    merkle_root,
    root_from_proof,
)
from harness.cli import main as harness_main
from harness.sweep import report_options
from runrecord import PROJECT_ROOT, read_manifest
from runrecord.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, EXIT_UNDECIDED

REFERENCE = PROJECT_ROOT / "results" / "reference" / "smoke-cartpole"
NO_CACHE_DIR = shutil.ignore_patterns(".analysis-cache")  # a checkout's cache is not a record
# Cheap claims (few bootstrap reps): tier 1 recomputes them at every verify.
CLAIMS = """\
[[claim]]
name = "IQM per layout, 95% CIs"
command = "aggregate {runs} --group-by layout.name --reps 300 --seed 0"

[[claim]]
name = "layouts equivalent"
command = "equivalence {runs} --group-by layout.name --delta 0.2"
"""


def test_merkle_root_is_rfc6962s():
    """The Merkle tree hash of RFC 6962 on the Certificate Transparency test vectors (the
    roots of the first 1..8 leaves), and inclusion proofs that give the root back."""
    data = [b"", b"\x00", b"\x10", b"\x20\x21", b"\x30\x31", b"\x40\x41\x42\x43",
            bytes(range(0x50, 0x58)), bytes(range(0x60, 0x70))]
    hashes = [hashlib.sha256(b"\x00" + d).digest() for d in data]
    assert _mth(hashes[:1]).hex().startswith("6e340b9cffb37a98")
    assert _mth(hashes[:2]).hex().startswith("fac54203e7cc696c")
    assert _mth(hashes[:8]).hex() == ("5dc9da79a70659a9ad559cb701ded9a2"
                                      "ab9d823aad2f4960cfe370eff4604328")
    leaves = [Leaf(f"records/r{i}/episodes.csv", f"{i:064x}", i) for i in range(11)]
    root = merkle_root(leaves)
    assert merkle_root(list(reversed(leaves))) == root  # order of the list does not matter
    assert _leaf_hash(leaves[0]) == hashlib.sha256(b"\x00" + leaves[0].encoded()).digest()
    for i, leaf in enumerate(sorted(leaves, key=lambda x: x.path)):
        assert root_from_proof(leaf, i, len(leaves), inclusion_proof(leaves, leaf.path)) == root
    changed = [*leaves[:-1], Leaf(leaves[-1].path, f"{99:064x}", 10)]
    assert merkle_root(changed) != root
    with pytest.raises(ValueError, match="bound twice"):
        merkle_root([*leaves, leaves[0]])


def test_differences_name_what_makes_bits_differ():
    m = read_manifest(REFERENCE / "088c712d2a4c")  # written before the determinism block
    device, stack = run_facts(m)
    assert stack["jax"] == "0.10.2" and stack["envpool"] == "1.2.5"
    assert stack["xla_flags"] == "not recorded" and device["processes"] == 2
    block = {"platform": "cpu", "device_kind": "cpu", "cpu": "AuthenticAMD family 25 model 17:"
             " avx512f", "device_count": 1, "usable_cpus": 1, "xla_flags": "--a=1 --b=2",
             "prng_impl": "threefry2x32 (partitionable)", "deterministic": True}
    device, stack = run_facts({**m, "determinism": block})
    here = {"python": stack["python"], "jax": "0.9.0", "cpu": device["cpu"], "usable_cpus": 2,
            "xla_flags": "--b=2 --a=1 --xla_cpu_max_isa=AVX2"}
    assert differences({**device, **stack}, here, cores_at_least=True) == [
        "jax 0.10.2 (recorded) vs 0.9.0 (here)",
        "XLA flags differ (--xla_cpu_max_isa=AVX2 here only)"]
    other_cpu = {**here, "jax": "0.10.2", "cpu": "GenuineIntel family 6 model 167: avx512f",
                 "usable_cpus": 0, "xla_flags": "--a=1 --b=2"}
    assert differences({**device, **stack}, other_cpu, cores_at_least=True) == [
        "CPU AuthenticAMD family 25 model 17: avx512f (recorded) vs GenuineIntel family 6 "
        "model 167: avx512f (here)", "usable CPU cores: 1 recorded, 0 here"]
    # On a GPU the host's CPU and cores do not enter
    gpu, gstack = run_facts({**m, "determinism": {**block, "platform": "gpu",
                                                  "device_kind": "NVIDIA H100 80GB HBM3"}})
    assert differences({**gpu, **gstack}, {**other_cpu}, cores_at_least=True) == []


def test_claims_file_is_checked(tmp_path):
    ok = tmp_path / "ok.toml"
    ok.write_text(CLAIMS + '[inputs]\nref = "results/reference/smoke-cartpole"\n'
                  '[[claim]]\ncommand = ["regression", "--new", "{runs}", "--reference", '
                  '"{ref}"]\n')
    claims, inputs = read_claims_file(ok)
    assert [c.args[0] for c in claims] == ["aggregate", "equivalence", "regression"]
    assert inputs == {"ref": REFERENCE}
    bad = {
        'command = "curves {runs}"': "must start with one of",
        'command = "aggregate {runs} --out x"': "--out writes files",
        'command = "aggregate {other}"': "{other} is not a name of [inputs]",
        'command = "aggregate results/reference/smoke-cartpole"': "reads results/reference",
        'cmd = "aggregate {runs}"': "needs `command`",
    }
    for line, message in bad.items():
        f = tmp_path / "bad.toml"
        f.write_text(f"[[claim]]\n{line}\n")
        with pytest.raises(ClaimError, match=re.escape(message)):
            read_claims_file(f)
    a = ClaimOutput(0, "IQM 0.412\nmedian 0.5\n", "")
    assert a.first_difference(ClaimOutput(0, "IQM 0.412\nmedian 0.6\n", "")) == (
        "stdout line 2: recorded 'median 0.5', recomputed 'median 0.6'")
    assert a.first_difference(ClaimOutput(1, a.stdout, "")) == "exit code 0 recorded, 1 recomputed"


def _certify(root: Path, records: Path, *extra: str) -> list[str]:
    return ["certify", "--preset", "smoke", "--games", "CartPole-v1", "--no-last-filters",
            "--results-root", str(root), "--records", str(records), *extra]


def _one_byte(path: Path) -> None:
    """Change one byte of the last episode with a return of 100 or more: its first digit."""
    lines = path.read_text().splitlines(keepends=True)
    header = lines[0].strip().split(",")
    col = header.index("episode_return")
    for i in range(len(lines) - 1, 0, -1):
        cells = lines[i].split(",")
        if float(cells[col]) >= 100:
            digit = cells[col][0]
            cells[col] = ("1" if digit == "9" else "9") + cells[col][1:]
            lines[i] = ",".join(cells)
            break
    before = path.stat().st_size
    path.write_text("".join(lines))
    assert path.stat().st_size == before


@pytest.fixture
def certified(tmp_path, capsys):
    """A copy of the reference records, certified with CLAIMS."""
    records = tmp_path / "records"
    shutil.copytree(REFERENCE, records, ignore=NO_CACHE_DIR)
    claims = tmp_path / "claims.toml"
    claims.write_text(CLAIMS)
    cert = tmp_path / "out" / "smoke.cert.json"
    assert harness_main(_certify(tmp_path, records, "--claims", str(claims), "--out",
                                 str(cert))) == EXIT_OK
    out = capsys.readouterr().out
    return records, cert, out


def verify(capsys, cert: Path, *extra: str) -> tuple[int, str]:
    code = harness_main(["verify", str(cert), *extra])
    return code, capsys.readouterr().out


def test_reference_certified_and_verified(certified, capsys):
    records, cert, out = certified
    doc = json.loads(cert.read_text())
    assert f"root: {doc['root']}" in out
    assert doc["completeness"] == {"planned": 24, "statuses": {"completed": 24}, "missing": [],
                                   "unplanned": []}
    assert len(doc["files"]) == 24 * 3 + 1 and doc["merkle"]["leaves"] == 73
    assert {c["id"]: len(c["inputs"]) for c in doc["claims"]} == {"C1": 24, "C2": 24}
    assert "{runs}" in doc["claims"][0]["command"] and "IQM" in doc["claims"][0]["output"]["stdout"]
    stack = doc["stacks"][doc["runs"]["088c712d2a4c"]["stack"]]
    assert stack["jax"] == "0.10.2" and stack["xla_flags"] == "not recorded"
    code, text = verify(capsys, cert)
    assert code == EXIT_OK and "verdict: VERIFIED" in text, text
    # no analysis cache read or written (`python -m analysis summary DIR` writes DIR's)
    assert not (records / ".analysis-cache").exists()
    assert "4 claim" not in text and "2 claims recomputed" in text
    assert "tier 2: no run replayed" in text  # what was not checked
    # Asked to replay: none of these runs was made with --deterministic
    code, text = verify(capsys, cert, "--replay", "2")
    assert code == EXIT_UNDECIDED and "nothing can be replayed bit for bit" in text
    assert "tier 2 n/a, no determinism block (a baseline, an import, an older record): 088c" in text
    log = [json.loads(x) for x in Path(f"{cert}.verify.jsonl").read_text().splitlines()]
    assert [e["verdict"] for e in log] == ["VERIFIED", "NOT CHECKABLE"]


def test_one_byte_of_one_episodes_csv(certified, capsys):
    records, cert, _ = certified
    _one_byte(records / "5be696be7488" / "episodes.csv")
    code, text = verify(capsys, cert)
    assert code == EXIT_FAILED and "verdict: MISMATCH" in text
    assert ("MISMATCH: file records/5be696be7488/episodes.csv: SHA-256 differs (run "
            "5be696be7488)") in text
    assert re.search(r"MISMATCH: claim C1 \(IQM per layout, 95% CIs\): stdout line \d+: "
                     r".*caused by run 5be696be7488 \(files changed\)", text), text


def test_a_claims_number_edited(certified, capsys):
    _, cert, _ = certified
    doc = json.loads(cert.read_text())
    stdout = doc["claims"][0]["output"]["stdout"]
    number = re.search(r"\d\.\d{3}", stdout)
    assert number
    edited = f"{(int(number.group()[0]) + 1) % 10}{number.group()[1:]}"
    doc["claims"][0]["output"]["stdout"] = stdout.replace(number.group(), edited, 1)
    cert.write_text(json.dumps(doc))
    code, text = verify(capsys, cert)
    assert code == EXIT_FAILED
    assert re.search(r"MISMATCH: claim C1 \(IQM per layout, 95% CIs\): stdout line \d+: "
                     r".*no input run changed: the certificate's recorded output was edited",
                     text), text
    assert "MISMATCH: file" not in text  # the records are untouched


def test_a_run_the_plan_never_held(certified, tmp_path, capsys):
    records, cert, _ = certified
    extra = records / "0badc0ffee00"  # a fourth seed, run later and added
    shutil.copytree(records / "5be696be7488", extra)
    manifest = json.loads((extra / "manifest.json").read_text())
    manifest.update(run_id=extra.name, seed=4)
    (extra / "manifest.json").write_text(json.dumps(manifest))
    code, text = verify(capsys, cert)
    assert code == EXIT_FAILED
    assert ("MISMATCH: run 0badc0ffee00: a run folder the certificate does not hold (the "
            "plan never held it)") in text
    assert "caused by run 0badc0ffee00 (added)" in text
    # certify refuses it (nothing written), unless it is named
    again = tmp_path / "again.json"
    assert harness_main(_certify(tmp_path, records, "--out", str(again))) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "the plan does not hold: 0badc0ffee00" in err and not again.exists()
    claims = tmp_path / "claims.toml"
    assert harness_main(_certify(tmp_path, records, "--out", str(again), "--claims",
                                 str(claims), "--include-unplanned", extra.name)) == EXIT_OK
    doc = json.loads(again.read_text())
    assert doc["completeness"]["unplanned"] == ["0badc0ffee00"]
    assert doc["runs"]["0badc0ffee00"]["planned"] is False


def test_a_wrong_published_root_and_an_edited_file_list(certified, capsys):
    _, cert, _ = certified
    code, text = verify(capsys, cert, "--expect-root", "00" * 32)
    assert code == EXIT_FAILED and f"is not the published {'00' * 32}" in text
    doc = json.loads(cert.read_text())
    doc["files"][0]["sha256"] = "0" * 64
    cert.write_text(json.dumps(doc))
    code, text = verify(capsys, cert)
    assert code == EXIT_FAILED and "(the certificate was edited)" in text
    assert f"file {doc['files'][0]['path']}: SHA-256 differs" in text


def test_bad_input_exits_2_and_writes_nothing(certified, tmp_path, capsys):
    records, cert, _ = certified
    before = sorted(p.name for p in cert.parent.iterdir())
    not_json = tmp_path / "x.json"
    not_json.write_text("{")
    for argv in (["verify", str(tmp_path / "none.json")], ["verify", str(not_json)],
                 ["verify", str(cert), "--replay", "-1"],
                 ["verify", str(cert), "--records", str(tmp_path / "nowhere")],
                 ["verify", str(cert), "--input", "x=y"]):
        assert harness_main(argv) == EXIT_BAD_INPUT, argv
        assert capsys.readouterr().err.startswith("error: ")
    assert sorted(p.name for p in cert.parent.iterdir()) == before  # no log line either
    claims = tmp_path / "bad.toml"
    claims.write_text('[[claim]]\ncommand = "aggregate {runs} --json-out x.json"\n')
    out = tmp_path / "never.json"
    assert harness_main(_certify(tmp_path, records, "--claims", str(claims), "--out",
                                 str(out))) == EXIT_BAD_INPUT
    assert "--json-out writes files" in capsys.readouterr().err and not out.exists()
    failing = tmp_path / "failing.toml"
    failing.write_text('[[claim]]\ncommand = "aggregate {runs} --where system=nope"\n')
    assert harness_main(_certify(tmp_path, records, "--claims", str(failing), "--out",
                                 str(out))) == EXIT_BAD_INPUT
    assert "(aggregate {runs} --where system=nope) failed: no completed runs" in \
        capsys.readouterr().err and not out.exists()


def test_a_claim_over_a_bound_input(tmp_path, capsys):
    """A regression claim against a reference folder bound under [inputs]: its files are in
    the tree, verify finds them by --input, and a changed one is named with the claim."""
    records = tmp_path / "records"
    shutil.copytree(REFERENCE, records, ignore=NO_CACHE_DIR)
    claims = tmp_path / "claims.toml"
    claims.write_text('[inputs]\nreference = "results/reference/smoke-cartpole"\n[[claim]]\n'
                      'name = "no regression"\ncommand = "regression --new {runs} --reference '
                      '{reference} --where system=cleanba-ppo --delta 0.3"\n')
    cert = tmp_path / "c.json"
    assert harness_main(_certify(tmp_path, records, "--claims", str(claims), "--out",
                                 str(cert))) == EXIT_OK
    doc = json.loads(cert.read_text())
    assert doc["inputs"] == {"reference": {"path": "results/reference/smoke-cartpole",
                                           "kind": "folder"}}
    assert sum(f["path"].startswith("inputs/reference/") for f in doc["files"]) == 72
    assert "regression" in doc["claims"][0]["output"]["stdout"]
    moved = tmp_path / "ref"
    shutil.copytree(REFERENCE, moved, ignore=NO_CACHE_DIR)
    capsys.readouterr()
    code, text = verify(capsys, cert, "--input", f"reference={moved}")
    assert code == EXIT_OK, text
    _one_byte(moved / "5be696be7488" / "episodes.csv")
    code, text = verify(capsys, cert, "--input", f"reference={moved}")
    assert code == EXIT_FAILED
    assert "file inputs/reference/5be696be7488/episodes.csv: SHA-256 differs" in text
    assert re.search(r"MISMATCH: claim C1 \(no regression\): stdout line 1: recorded "
                     r"\"regression: PASS \(bitwise identical\).*caused by input reference "
                     r"\(files changed\)", text), text


def _rewrite_rows(path: Path, edit) -> None:
    """`edit(rows)` on the CSV's rows (lists of cells, header left out), written back."""
    lines = path.read_text().splitlines()
    rows = [line.split(",") for line in lines[1:]]
    edit(rows)
    path.write_text("\n".join([lines[0], *(",".join(r) for r in rows)]) + "\n")


def test_forged_frames_certified_again_fail_tier_1(certified, tmp_path, capsys):
    """The files' hashes bind whatever was certified: a forgery certified again passes
    them, and each record's consistency catches it (no replay)."""
    records, _, _ = certified
    run = records / "5be696be7488"

    def swap_updates_2_and_3(rows):  # env_steps and frames move together: only the order
        rows[1][1:3], rows[2][1:3] = rows[2][1:3], rows[1][1:3]

    _rewrite_rows(run / "updates.csv", swap_updates_2_and_3)
    _rewrite_rows(run / "episodes.csv", lambda rows: rows[4].__setitem__(1, "1680"))
    cert = tmp_path / "again.json"
    assert harness_main(_certify(tmp_path, records, "--out", str(cert))) == EXIT_OK
    code, text = verify(capsys, cert)
    assert code == EXIT_FAILED and "verdict: MISMATCH (3 mismatches, 0 not checkable)" in text, text
    assert ("MISMATCH: run 5be696be7488: updates.csv row 3: frames 2048 after 3072 in the "
            "row before: frames never decrease") in text, text
    assert ("MISMATCH: run 5be696be7488: episodes.csv row 5: frames 1680 is not env_steps "
            "168 x frame skip 1") in text, text
    assert ("MISMATCH: run 5be696be7488: episodes.csv row 6: frames 208 after 1680 in the "
            "row before: frames never decrease") in text
    assert "SHA-256 differs" not in text  # certified again: the hashes bind the forgery


def test_consistency_of_one_record():
    """Each rule on small tables, the first row and the count it names, and the records
    whose writer does not promise a rule (a baseline's episode order, an import's steps)."""
    from harness.certify.consistency import check_record
    from runrecord.reader import Table

    def table(**cols):
        arrays = {k: np.asarray(v, dtype=np.float64) for k, v in cols.items()}
        return Table(arrays, len(next(iter(arrays.values()))))

    updates = table(env_steps=[64, 128, 192], frames=[256, 512, 768])
    episodes = table(env_steps=[32, 48, 48, 96], frames=[128, 192, 192, 384],
                     episode_length=[8, 12, 13, 5], episode_return=[0, 1, 0, 2])
    cleanba = {"system": "cleanba-ppo", "env_id": "Breakout-v5",
               "env_protocol": {"frame_skip": 4}, "hyperparameters": {"num_envs": 4}}
    found = check_record(cleanba, episodes, updates)
    assert [f.line() for f in found.findings] == [
        "episodes.csv row 3: episode_length 13 is longer than the steps its env had taken: "
        "env_steps 48 over 4 envs (its env's share)"] and found.not_applied == []
    # frame skip from the env when the protocol names none (1 off Atari); CartPole's rule
    pole = {**cleanba, "env_id": "CartPole-v1", "env_protocol": {}}
    found = check_record(pole, episodes, updates)
    assert [f.line() for f in found.findings] == [
        "updates.csv row 1: frames 256 is not env_steps 64 x frame skip 1 (3 rows in all)",
        "episodes.csv row 1: frames 128 is not env_steps 32 x frame skip 1 (4 rows in all)",
        "episodes.csv row 3: episode_length 13 is longer than the steps its env had taken: "
        "env_steps 48 over 4 envs (its env's share)",
        "episodes.csv row 1: episode_return 0 is not episode_length 8 (CartPole-v1 gives a "
        "reward of 1 per step) (4 rows in all)"]
    # a baseline: episodes out of step order are its actors' order; one env's bound is all
    # envs' steps
    late = table(env_steps=[96, 48], frames=[384, 192], episode_length=[50, 49],
                 episode_return=[1, 1])
    baseline = {**cleanba, "system": "monobeast-impala"}
    found = check_record(baseline, late, updates)
    assert [f.line() for f in found.findings] == [
        "episodes.csv row 2: episode_length 49 is longer than the steps its env had taken: "
        "env_steps 48 over 1 env (all envs')"]
    assert found.not_applied == ["episodes.csv frames in order: a baseline's actors report "
                                 "episodes as they come, not in step order"]
    found = check_record({**cleanba, "system": "cleanba-ppo"}, late, updates)
    assert "episodes.csv row 2: frames 192 after 384 in the row before: frames never " \
        "decrease" in [f.line() for f in found.findings]
    # an import: steps as the source logged them (frames per step declared apart), no
    # lengths: nothing to fail; still in step order
    imported = {"system": "cleanrl-ppo", "env_id": "CartPole-v1", "env_protocol": {},
                "imported": {"format": "table"}}
    no_lengths = table(env_steps=[10, 20], frames=[40, 80], episode_length=[np.nan, np.nan],
                       episode_return=[500, 9])
    found = check_record(imported, no_lengths, table(env_steps=[], frames=[]))
    assert found.findings == [] and len(found.not_applied) == 2
    unordered = table(env_steps=[20, 10], frames=[80, 40], episode_length=[30, 9],
                      episode_return=[30, 9])
    assert [f.line() for f in check_record(imported, unordered, updates).findings] == [
        "episodes.csv row 2: frames 40 after 80 in the row before: frames never decrease"]
    # text where a number belongs
    text = Table({"env_steps": np.array(["8", "x"], dtype=object),
                  "frames": np.array([8.0, 9.0])}, 2)
    assert [f.line() for f in check_record(pole, table(env_steps=[]), text).findings][0] == \
        "updates.csv row 2: env_steps 'x' is not a number"


def test_stop_after_updates_is_bookkeeping():
    """The replay's flag is checked and left out of the run id (a replay keeps the id)."""
    from cleanba.core.config import BOOKKEEPING_FIELDS, CommonConfig, ConfigError

    assert "stop_after_updates" in BOOKKEEPING_FIELDS
    with pytest.raises(ConfigError, match="--stop-after-updates must be >= 1"):
        CommonConfig(stop_after_updates=0)


def test_the_draw_is_repeatable_from_its_printed_seed():
    from harness.certify.replay import draw

    runs = [f"{i:012x}" for i in range(40)]
    first = draw(runs, 5, 123456789)
    assert draw(list(reversed(runs)), 5, 123456789) == first  # order of the list: no matter
    assert len(set(first)) == 5 and set(first) <= set(runs)
    ranked = sorted(runs, key=lambda r: hashlib.sha256(f"123456789:{r}".encode()).hexdigest())
    assert first == ranked[:5]  # the documented rule, repeatable with sha256sum
    assert draw(runs, 5, 987654321) != first and sorted(draw(runs, 99, 1)) == runs


def test_the_reports_section(certified, tmp_path, capsys):
    from harness.certify.report_section import certificate_section

    _, cert, _ = certified
    assert certificate_section(tmp_path / "no-sweep") is None  # no certificate: no section
    sweep_dir = tmp_path / "sweep"
    sweep_dir.mkdir()
    shutil.copy(cert, sweep_dir / "certificate.json")
    title, html = certificate_section(sweep_dir)
    root = json.loads(cert.read_text())["root"]
    assert title == "Certificate" and root in html and "not verified yet" in html
    assert verify(capsys, sweep_dir / "certificate.json")[0] == EXIT_OK
    assert "VERIFIED (tier 1) at " in certificate_section(sweep_dir)[1]
    (sweep_dir / "certificate.json").write_text("{}")
    assert "not a cleanba-bench certificate" in certificate_section(sweep_dir)[1]


def test_a_replays_environment_and_what_it_compares():
    """CPU: the recorded virtual device count and cores; GPU: each process its own GPUs,
    and the host's CPU and cores are not compared."""
    from harness.certify.replay import replay_env
    from runrecord.determinism import DETERMINISM_KEYS

    cpu = replay_env({"platform": "cpu", "device_count": 1, "usable_cpus": 1}, Path("/x"),
                     environ={"XLA_FLAGS": "--xla_force_host_platform_device_count=4 --f=1"})
    assert cpu["XLA_FLAGS"] == "--f=1 --xla_force_host_platform_device_count=1"
    assert cpu["JAX_PLATFORMS"] == "cpu" and cpu["OMP_NUM_THREADS"] == "1"
    assert cpu["PYTHONPATH"].split(":")[0] == "/x"
    gpu = replay_env({"platform": "gpu", "device_count": 2, "usable_cpus": 16}, Path("/x"), 1,
                     environ={"CUDA_VISIBLE_DEVICES": "0,1,2,3", "CLEANBA_FAULT": "nan:1"})
    assert gpu["CUDA_VISIBLE_DEVICES"] == "2,3" and gpu["JAX_LOCAL_DEVICE_IDS"] == "0,1"
    assert "JAX_PLATFORMS" not in gpu and "CLEANBA_FAULT" not in gpu
    rec = {"platform": "gpu", "usable_cpus": 16, "cpu": "A", "jax": "0.10.2",
           "xla_flags": "--a=1 --b=2"}
    assert differences(rec, {**rec, "usable_cpus": 2, "cpu": "B", "xla_flags": "--b=2 --a=1"},
                       keys=DETERMINISM_KEYS, where="replay") == []
    on_cpu = {**rec, "platform": "cpu"}
    assert differences(on_cpu, {**on_cpu, "usable_cpus": 2, "jax": "0.9.0", "xla_flags": "--a=1"},
                       keys=DETERMINISM_KEYS, where="replay") == [
        "usable CPU cores 16 (recorded) vs 2 (replay)", "jax 0.10.2 (recorded) vs 0.9.0 (replay)",
        "XLA flags differ (--b=2 recorded only)"]


@pytest.mark.parametrize("report", [{}, {"group_by": "system", "delta": 0.25, "reps": 300,
                                          "seed": 7, "reference": "cleanba-ppo"}])
def test_default_claims_rerun_the_reports_own_options(report):
    """A certificate's default claims run the analyses with the options `harness report`
    used (one reading of [report] serves both)."""
    opts = report_options(report)
    claims = {c.args[0]: c.args for c in default_claims(report)[0]}

    def flag(args, name):
        return args[args.index(name) + 1] if name in args else None

    for args in claims.values():
        assert flag(args, "--group-by") in (None, opts["group_by"])
    assert flag(claims["aggregate"], "--reps") == str(opts.get("aggregate_reps", 50_000))
    assert flag(claims["aggregate"], "--seed") == str(opts.get("seed", 0))
    assert flag(claims["aggregate"], "--reference") == opts.get("reference")
    assert flag(claims["equivalence"], "--delta") == (
        str(opts["delta"]) if "delta" in opts else None)
    assert flag(claims["atari5"], "--reps") == str(opts.get("reps", 2_000))
