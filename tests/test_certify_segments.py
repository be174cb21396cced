"""Tier 2 by segments (harness.certify.segments): `verify --replay K --segments S|all`
resumes each drawn segment from the run's certified checkpoint and compares its updates
and episodes bit for bit. On a fresh --deterministic CartPole PPO run of 10 updates with a
checkpoint every 3 (kept: 3, 6, 9): the unchanged run verifies segment by segment; a loss
forged in the last update, which no record check can see, and returns forged in the last
20% of episodes, are caught by the last segment's replay, which a prefix replay never
reaches. Cost: the run, 3 + 1 + 1 short replays: ~2 minutes on the 2-core CI box."""

from __future__ import annotations

import csv
import re
import shutil
import subprocess
import sys

import pytest

from harness.certify.segments import Segment, escape_probability, parse_count, pick
from harness.cli import main as harness_main
from runrecord import PROJECT_ROOT
from runrecord.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK

SWEEP = """\
name = "seg"
description = "segment replay: tiny deterministic CartPole PPO with checkpoints"
seeds = [1]

[resources]
cpus_per_process = 1
timeout_min = 8

[[matrix]]
name = "ok"
systems = ["cleanba-ppo"]
architectures = ["cleanba"]
layouts = ["a0-l0-d1"]
games = ["CartPole-v1"]
frames = 640

overrides = { deterministic = true, num-envs = 4, num-steps = 16, num-minibatches = 2, update-epochs = 1, checkpoint-every = 3, checkpoint-keep = 5 }
"""


def test_pick_takes_the_last_segment_and_draws_the_rest():
    segments = [Segment(3, 6), Segment(6, 9), Segment(9, 10)]
    for seed in range(20):
        got = pick(segments, 2, seed, "run")
        assert len(got) == 2 and got[-1] == Segment(9, 10)
    assert {pick(segments, 2, seed, "run")[0] for seed in range(40)} == set(segments[:2])
    assert pick(segments, None, 0, "run") == segments
    assert escape_probability(3, 2) == pytest.approx(0.5) and escape_probability(3, 3) == 0
    assert parse_count("all") is None and parse_count("2") == 2
    with pytest.raises(ValueError, match="count >= 1 or 'all'"):
        parse_count("0")




@pytest.fixture(scope="module")
def certified(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("seg")
    (tmp / "seg.toml").write_text(SWEEP)
    p = subprocess.run([sys.executable, "-m", "harness", "run", "--sweep", str(tmp / "seg.toml"),
                        "--results-root", str(tmp / "res"), "--no-progress"],
                       cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == EXIT_OK, p.stdout + p.stderr
    assert harness_main(["certify", "--sweep", str(tmp / "seg.toml"), "--results-root",
                         str(tmp / "res")]) == EXIT_OK
    run_dir = next((tmp / "res" / "seg" / "runs").iterdir())
    assert sorted(int(p.name) for p in (run_dir / "checkpoints").iterdir()) == [3, 6, 9]
    return tmp, run_dir.name


def forged_copy(tmp, tmp_path, rid, edit) -> str:
    """A copy of the store with `edit(run_dir)` applied, certified again (the hashes then
    bind the forgery); its certificate's path."""
    root = tmp_path / "res"
    shutil.copytree(tmp / "res", root)
    edit(root / "seg" / "runs" / rid)
    assert harness_main(["certify", "--sweep", str(tmp / "seg.toml"), "--results-root",
                         str(root)]) == EXIT_OK
    return str(root / "seg" / "certificate.json")


def rewrite_csv(path, change) -> None:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    fields = list(rows[0])
    change(rows)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


@pytest.mark.slow
def test_every_segment_of_the_unchanged_run_verifies(certified, capsys):
    tmp, rid = certified
    capsys.readouterr()
    code = harness_main(["verify", str(tmp / "res" / "seg" / "certificate.json"), "--replay",
                         "1", "--segments", "all"])
    out = capsys.readouterr().out
    assert code == EXIT_OK and "verdict: VERIFIED" in out, out
    assert (f"run {rid}: 3 of its 3 segments: updates 4-6 (from checkpoints/3); updates "
            "7-9 (from checkpoints/6); updates 10-10 (from checkpoints/9): 70% of its 10 "
            "updates") in out, out
    for first, last in ((3, 6), (6, 9), (9, 10)):
        assert re.search(rf"VERIFIED: params checksum and the other \d+ columns of updates\.csv "
                         rf"\(all but wall-clock times\) identical at updates {first + 1}-{last}, "
                         rf"and the \d+ episodes? that ended in them \(resumed from the "
                         rf"certified checkpoints/{first}\)", out), out
    assert "3 segments replayed bit for bit" in out
    assert "--segments all --draw-seed" in out  # the draw can be repeated


@pytest.mark.slow
def test_a_loss_forged_in_the_last_update_is_caught_by_the_last_segment(certified, tmp_path,
                                                                        capsys):
    tmp, rid = certified

    def forge(run_dir):
        def change(rows):
            rows[-1]["loss_total"] = repr(float(rows[-1]["loss_total"]) * 0.5)
        rewrite_csv(run_dir / "updates.csv", change)

    cert = forged_copy(tmp, tmp_path, rid, forge)
    capsys.readouterr()
    assert harness_main(["verify", cert]) == EXIT_OK  # no record check can see a loss
    assert harness_main(["verify", cert, "--replay", "1", "--updates", "3"]) == EXIT_OK
    capsys.readouterr()
    code = harness_main(["verify", cert, "--replay", "1", "--segments", "1"])
    out = capsys.readouterr().out
    assert code == EXIT_FAILED and "verdict: MISMATCH" in out, out
    assert f"run {rid}: 1 of its 3 segments: updates 10-10 (from checkpoints/9): 10% of " \
        "its 10 updates; a forgery confined to one other segment escapes this draw with " \
        "probability 1.00" in out, out
    assert re.search(r"MISMATCH: update 10: loss_total \S+ \(replay\) vs \S+ \(certified\)",
                     out), out


@pytest.mark.slow
def test_returns_forged_in_the_last_fifth_of_episodes_are_caught_by_segments(
        certified, tmp_path, capsys):
    tmp, rid = certified
    final_steps = []

    def forge(run_dir):
        def change(rows):
            for row in rows[-max(1, len(rows) // 5):]:
                row["episode_return"] = repr(3 * float(row["episode_return"]))
            final_steps.append(int(rows[-1]["env_steps"]))
        rewrite_csv(run_dir / "episodes.csv", change)

    cert = forged_copy(tmp, tmp_path, rid, forge)
    capsys.readouterr()
    code = harness_main(["verify", cert, "--replay", "1", "--segments", "all"])
    out = capsys.readouterr().out
    assert code == EXIT_FAILED and "verdict: MISMATCH" in out, out
    assert re.search(r"MISMATCH: updates \d+-\d+: episode \d+ \(env_steps \d+, env \d+\): "
                     r"episode_return \S+ \(replay\) vs \S+ \(certified\)", out), out


def test_bad_segments_value_is_refused(tmp_path, capsys):
    code = harness_main(["verify", str(tmp_path / "none.json"), "--replay", "1",
                         "--segments", "0"])
    assert code == EXIT_BAD_INPUT
    assert "--segments '0': give a count >= 1 or 'all'" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing written
