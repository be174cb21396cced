"""baselines/bench.py: one setting for all three systems, and the ratios it prints."""

import math

from baselines import bench


def _flag(cmd, flag):
    return cmd[cmd.index(flag) + 1]


def test_all_three_run_the_same_setting(monkeypatch):
    monkeypatch.delenv("TORCHBEAST_PATH", raising=False)
    monkeypatch.delenv("MOOLIB_PATH", raising=False)
    args = bench.Args(torchbeast_path="/tb", moolib_path="/ml", num_envs=6, num_steps=30,
                      total_timesteps=5000)
    cmds = bench.commands(args)
    assert list(cmds) == list(bench.SYSTEMS)
    for name, cmd in cmds.items():
        assert cmd is not None
        assert (_flag(cmd, "--num-envs"), _flag(cmd, "--num-steps")) == ("6", "30"), name
        assert _flag(cmd, "--total-timesteps") == "5000", name
        assert _flag(cmd, "--env-id") == "Breakout-v5" and _flag(cmd, "--seed") == "1"
    # One gradient step per num_envs x num_steps batch for all three.
    assert _flag(cmds["cleanba-impala"], "--num-minibatches") == "1"
    assert _flag(cmds["monobeast-impala"], "--batch-size") == "6"
    assert _flag(cmds["moolib-impala"], "--batch-size") == "6"
    # The paper's network for monobeast too (cleanba's preset and moolib's Net are ResNets).
    assert _flag(cmds["monobeast-impala"], "--network") == "impala-resnet"
    assert _flag(cmds["monobeast-impala"], "--torchbeast-path") == "/tb"
    assert "--no-use-cuda" in cmds["moolib-impala"]


def test_a_system_without_checkout_is_left_out(monkeypatch):
    monkeypatch.delenv("TORCHBEAST_PATH", raising=False)
    monkeypatch.setenv("MOOLIB_PATH", "/from-env")
    cmds = bench.commands(bench.Args())
    assert cmds["monobeast-impala"] is None
    assert _flag(cmds["moolib-impala"], "--moolib-path") == "/from-env"
    assert cmds["cleanba-impala"] is not None


def test_ratios_are_to_cleanba():
    r = bench.ratios({"cleanba-impala": (100.0, 200.0), "monobeast-impala": (50.0, 300.0)})
    assert r["cleanba-impala"] == (1.0, 1.0)
    assert r["monobeast-impala"] == (0.5, 1.5)
    alone = bench.ratios({"monobeast-impala": (50.0, 300.0)})
    assert all(math.isnan(x) for x in alone["monobeast-impala"])


def test_network_of_each_record():
    assert bench.network_of({"system": "cleanba-impala",
                             "hyperparameters": {"channels": [16, 32, 32], "hidden": 256}}) \
        == "impala-resnet 16-32-32/256"
    assert bench.network_of({"system": "monobeast-impala",
                             "hyperparameters": {"network": "impala-resnet"}}) == "impala-resnet"
    assert bench.network_of({"system": "monobeast-impala", "hyperparameters": {}}) == "atarinet"
    assert bench.network_of({"system": "moolib-impala"}).startswith("impala-resnet")
