"""Failures end the run with the right status: injected exceptions, NaN loss, SIGTERM,
and bad arguments (exit 2 before any record is written)."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest
from cleanba_runs import TINY, command, run, trainer_env

from cleanba import ppo
from runrecord import RunWriter, load_run, read_manifest, schema

BATCH = 4 * 16


def test_exception_in_an_actor_fails_the_run_quickly(tmp_path):
    start = time.monotonic()
    p = run("ppo", tmp_path, *TINY, "--total-timesteps", str(BATCH * 50),
            CLEANBA_FAULT="actor:3")
    assert p.returncode == 1, p.stderr
    assert time.monotonic() - start < 60
    r = load_run(tmp_path)
    assert r.status == schema.FAILED
    assert r.manifest["error"]["type"] == "RuntimeError"
    assert "injected actor fault at rollout 3" in r.manifest["error"]["message"]
    assert "actor_loop" in r.manifest["error"]["traceback"]
    # rollouts 1 and 2 reached the learner at most; nothing after the failure
    assert len(r.updates) <= 2
    assert r.manifest["finished_at"] is not None


def test_exception_in_the_learner_fails_the_run(tmp_path):
    p = run("impala", tmp_path, *TINY[:-4], "--num-minibatches", "1",
            "--progress-interval-s", "0", "--total-timesteps", str(BATCH * 50),
            CLEANBA_FAULT="learner:2")
    assert p.returncode == 1, p.stderr
    r = load_run(tmp_path)
    assert r.status == schema.FAILED
    assert "injected learner fault at update 2" in r.manifest["error"]["message"]
    assert len(r.updates) == 1


def test_nan_loss_fails_the_run_naming_the_update(tmp_path):
    p = run("ppo", tmp_path, *TINY, "--total-timesteps", str(BATCH * 50), CLEANBA_FAULT="nan:2")
    assert p.returncode == 1, p.stderr
    r = load_run(tmp_path)
    assert r.status == schema.FAILED
    assert r.manifest["error"]["type"] == "NonFiniteLoss"
    assert "at update 2" in r.manifest["error"]["message"]
    assert len(r.updates) == 1  # the NaN update is not recorded as a result


def test_sigterm_marks_the_run_interrupted_and_keeps_its_rows(tmp_path):
    # SIGINT goes through the same watcher (cleanba/core/stopping.py, test_cleanba_signals.py).
    sig = signal.SIGTERM
    proc = subprocess.Popen(
        command("ppo", "cartpole", tmp_path, *TINY, "--total-timesteps", str(BATCH * 100_000)),
        env=trainer_env(1), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    updates = tmp_path / schema.UPDATES_FILE
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if updates.exists() and len(updates.read_text().splitlines()) >= 4:
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("no updates were written")
    sent = time.monotonic()
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert time.monotonic() - sent < 30
    r = load_run(tmp_path)
    assert r.status == schema.INTERRUPTED
    assert r.warnings == []
    assert len(r.updates) >= 3
    assert r.manifest["summary"]["updates"] == len(r.updates)


@pytest.mark.parametrize(
    "args,message",
    [
        (["--env-id", "Breakout-v4"], "unknown env id 'Breakout-v4'"),
        (["--actor-device-ids", "9"], "out of range"),
        (["--learner-device-ids", "0", "0"], "repeats"),
        (["--num-envs", "5", "--num-actor-threads", "2"], "use a multiple of 2"),
        (["--num-envs", "4", "--num-steps", "3", "--num-minibatches", "8"],
         "--num-minibatches 8 does not divide"),
        (["--total-timesteps", "10"], "less than one batch"),
        (["--num-envs", "0"], "--num-envs must be >= 1"),
        (["--coordinator-address", "localhost:1"], "need --distributed"),
    ],
)
def test_bad_arguments_exit_2_before_writing_anything(tmp_path, capsys, args, message):
    # In-process: the checks run before any thread, env or record exists.
    run_dir = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        ppo.cli(["cartpole", "--run-dir", str(run_dir), *args])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not run_dir.exists()


def test_bad_arguments_exit_code_from_the_command_line(tmp_path):
    run_dir = tmp_path / "run"
    p = run("impala", run_dir, "--num-envs", "6", "--num-minibatches", "4", timeout=120)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "--num-minibatches 4 does not divide" in p.stderr
    assert not run_dir.exists()


def test_completed_run_is_never_overwritten(tmp_path, capsys):
    writer = RunWriter(tmp_path, {"run_id": "x", "system": "cleanba-ppo"})
    writer.finish(schema.COMPLETED)
    before = read_manifest(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        ppo.cli(["cartpole", "--run-dir", str(tmp_path), *TINY])
    assert exit_info.value.code == 2
    assert "already completed" in capsys.readouterr().err
    assert read_manifest(tmp_path) == before


def _exit_code_in_process(cli, args: list[str]) -> int:
    """cli() returns 2 for a rejected command line, or exits (sys.exit) after training."""
    try:
        return cli(args)
    except SystemExit as exit_info:
        return int(exit_info.code or 0)


@pytest.mark.parametrize("args", [[], ["--env-id", "CartPole-v1", "--seed", "1"],
                                  ["cartpol", "--seed", "1"]])
def test_a_missing_preset_is_an_error_listing_the_presets(tmp_path, capsys, args):
    run_dir = tmp_path / "run"
    assert _exit_code_in_process(ppo.cli, [*args, "--run-dir", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "needs a preset first" in err
    assert "atari: the paper's Atari settings" in err and "cartpole: a small CPU preset" in err
    assert not run_dir.exists()


@pytest.mark.parametrize("alg,preset,env_id,fits", [
    ("ppo", "cartpole", "Breakout-v5", "'atari' for Atari games"),
    ("impala", "atari", "CartPole-v1", "'cartpole' for vector observations"),
])
def test_a_preset_made_for_other_observations_is_refused(tmp_path, capsys, alg, preset,
                                                          env_id, fits):
    from cleanba import impala

    cli = {"ppo": ppo.cli, "impala": impala.cli}[alg]
    run_dir = tmp_path / "run"
    code = _exit_code_in_process(cli, [preset, "--env-id", env_id, "--run-dir", str(run_dir),
                                       "--num-envs", "8", "--num-minibatches", "2"])
    assert code == 2
    err = capsys.readouterr().err
    assert f"preset {preset!r} is made for" in err and env_id in err and fits in err
    assert not run_dir.exists()


def test_every_trainer_command_the_harness_builds_names_a_preset():
    from harness.sweep import list_presets, load_sweep, preset_path

    for name in list_presets():
        for spec in load_sweep(preset_path(name)).runs:
            if spec.entry in ("cleanba.ppo", "cleanba.impala"):
                argv = spec.command("results/x/runs/y")
                assert argv[1:3] == ["-m", spec.entry] and argv[3] in ("atari", "cartpole"), \
                    (name, argv)
