"""Each adapter against the real baseline, for a tiny budget on Breakout-v5.

Skipped unless TORCHBEAST_PATH / MOOLIB_PATH name checkouts (moolib also built and
installed: `import moolib` must work). See docs/baselines.md for how to get them.
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from harness_cli import ROOT

from baselines.native_logs import read_monobeast_logs, read_moolib_logs
from benchenv import env_seeds
from runrecord import load_run, schema

TORCHBEAST_PATH = os.environ.get("TORCHBEAST_PATH", "")
MOOLIB_PATH = os.environ.get("MOOLIB_PATH", "")

needs_torchbeast = pytest.mark.skipif(
    not TORCHBEAST_PATH,
    reason="TORCHBEAST_PATH is not set: set it to a torchbeast checkout to run monobeast for real",
)
needs_moolib = pytest.mark.skipif(
    not MOOLIB_PATH,
    reason="MOOLIB_PATH is not set: set it to a built moolib checkout to run moolib for real",
)


def _adapter(module, args, timeout=600):
    r = subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True,
                       text=True, timeout=timeout)
    return r


def _check_common(run, total, batch_steps, num_envs):
    assert run.status == schema.COMPLETED
    m = run.manifest
    assert m["layout"]["name"] == "a0-l0-d1" and m["architecture"] == "async"
    assert m["env_protocol"]["repeat_action_probability"] == 0.25
    assert m["env_protocol"]["reward_clip"] is False
    assert m["provenance"]["baseline"]["file_sha256"]
    assert m["provenance"]["packages"]["torch"]

    up = run.updates
    n = len(up)
    assert n >= total // batch_steps
    assert np.array_equal(up["update"], np.arange(1, n + 1))
    assert np.array_equal(up["learner_version"], up["update"] + 1)
    assert np.array_equal(up["env_steps"], up["update"] * batch_steps)
    staleness_min = up["learner_version"] - 1 - up["rollout_policy_version_max"]
    staleness_max = up["learner_version"] - 1 - up["rollout_policy_version_min"]
    assert (staleness_min >= 0).all()  # no batch from a policy newer than the learner's
    assert staleness_max.max() >= 1  # async: actors run behind the learner
    assert (up["policy_changes_mid_rollout"] <= up["num_rollouts"]).all()
    assert np.isfinite(up["loss_total"]).all()

    ep = run.episodes
    assert len(ep) >= 1, "no episode finished: raise the budget"
    assert (ep["episode_return"] >= 0).all()  # Breakout scores are raw, non-negative
    assert (ep["episode_length"] > 0).all()
    assert set(ep["env_index"].astype(int)) <= set(range(num_envs))
    assert (np.diff(ep["env_steps"]) >= 0).all()
    assert run.manifest["summary"]["episodes"] == len(ep)

    native = Path(run.run_dir) / "native"
    for meta in native.rglob("meta.json*"):
        if meta.is_file() and not meta.is_symlink():
            assert not isinstance(json.loads(meta.read_text()).get("env"), dict), meta


@needs_torchbeast
@pytest.mark.slow
@pytest.mark.parametrize(("network", "parameters", "net_class"), [
    # None: the default, IMPALA's ResNet, with exactly cleanba's Flax parameter count.
    (None, 1_094_115, "baselines.torch_resnet.MonobeastImpalaNet"),
    ("atarinet", 1_694_236, "torchbeast.monobeast.AtariNet"),
])
def test_monobeast_real_run(tmp_path, network, parameters, net_class):
    run_dir = tmp_path / "run"
    total, T, B = 2000, 20, 2
    r = _adapter("baselines.monobeast", [
        "--torchbeast-path", TORCHBEAST_PATH, "--env-id", "Breakout-v5", "--seed", "1",
        "--total-timesteps", str(total), "--num-envs", "2", "--num-steps", str(T),
        "--batch-size", str(B), "--run-dir", str(run_dir),
        *(["--network", network] if network else [])])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    run = load_run(run_dir)
    _check_common(run, total, T * B, num_envs=2)
    m = run.manifest
    assert m["system"] == "monobeast-impala"
    assert m["hyperparameters"]["network"] == (network or "impala-resnet")
    assert m["baseline_run"]["network"] == {
        "name": network or "impala-resnet", "class": net_class, "parameters": parameters}
    assert m["baseline_run"]["seeds"]["env"] == env_seeds(1, 0, 2)
    # monobeast's own logs.csv (commented header) is kept and has one row per update.
    native = read_monobeast_logs(run_dir / "native" / "monobeast" / "logs.csv")
    assert len(native.rows) == len(run.updates)
    assert sorted(native.column("total_loss")) == sorted(run.updates["loss_total"].tolist())
    assert m["baseline_run"]["native"]["logs"]["rows"] == len(native.rows)
    returns = [x for x in native.column("mean_episode_return") if not math.isnan(x)]
    assert len(returns) >= 1


@needs_moolib
@pytest.mark.slow
def test_moolib_real_run(tmp_path):
    run_dir = tmp_path / "run"
    total, T, B = 1200, 20, 4
    r = _adapter("baselines.moolib", [
        "--moolib-path", MOOLIB_PATH, "--env-id", "Breakout-v5", "--seed", "1",
        "--total-timesteps", str(total), "--num-envs", "4", "--num-actor-batches", "2",
        "--num-actor-cpus", "2", "--num-steps", str(T), "--batch-size", str(B),
        "--no-use-cuda", "--run-dir", str(run_dir)])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    run = load_run(run_dir)
    _check_common(run, total, T * B, num_envs=4)
    m = run.manifest
    assert m["system"] == "moolib-impala"
    assert "wandb=false" in m["baseline_run"]["overrides"]
    # moolib's own Net: IMPALA's ResNet plus last action and reward into the heads.
    assert m["baseline_run"]["network"] == {
        "name": "moolib-net", "class": "examples.atari.models.Net", "parameters": 1_094_476}
    assert m["baseline_run"]["seeds"]["env"] == env_seeds(1, 0, 4)
    assert m["baseline_run"]["seeds"]["env_slots_exact"] is False  # 2 worker processes
    assert m["baseline_run"]["broker"].startswith("127.0.0.1:")
    native = run_dir / "native" / "moolib" / "peers" / "peer0"
    log = read_moolib_logs(native / "logs.tsv")
    assert "local/model_version" in log.columns
    assert not list((run_dir / "native").rglob("checkpoint*.tar"))  # not kept by default
    # The broker was stopped: nothing listens on its port any more.
    import socket
    host, port = m["baseline_run"]["broker"].split(":")
    with pytest.raises(OSError):
        socket.create_connection((host, int(port)), timeout=2).close()


@needs_torchbeast
@pytest.mark.slow
def test_monobeast_dead_actor_fails_the_run_instead_of_hanging(tmp_path):
    import signal
    import time

    import psutil

    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "baselines.monobeast", "--torchbeast-path", TORCHBEAST_PATH,
         "--total-timesteps", "1000000", "--num-envs", "2", "--num-steps", "20",
         "--batch-size", "2", "--run-dir", str(run_dir)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        updates = run_dir / "updates.csv"
        while time.monotonic() < deadline:
            if updates.exists() and len(updates.read_text().splitlines()) > 3:
                break
            time.sleep(0.5)
        else:
            pytest.fail("no updates within 120 s")
        actors = [c for c in psutil.Process(proc.pid).children()
                  if "baselines.monobeast" in " ".join(c.cmdline())]
        assert actors, "no forked actor found"
        os.kill(actors[0].pid, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, stderr[-2000:]
    assert "exited while training was running" in stderr
    m = load_run(run_dir).manifest
    assert m["status"] == schema.FAILED
    assert "exited while training was running" in m["error"]["message"]
