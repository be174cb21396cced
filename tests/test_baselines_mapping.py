"""The harness config -> monobeast argv / moolib Hydra overrides, row by row."""

from pathlib import Path

import pytest

from baselines import mapping
from baselines.mapping import MappingError, monobeast_argv, moolib_overrides


def _flag_value(argv, flag):
    i = argv.index(flag)
    return argv[i + 1]


# (harness key, value, monobeast flag, expected text after the flag)
MONOBEAST_CASES = [
    ("env_id", "Pong-v5", "--env", "Pong-v5"),
    ("total_timesteps", 50_000_000, "--total_steps", "50000000"),
    ("num_envs", 80, "--num_actors", "80"),
    ("num_steps", 240, "--unroll_length", "240"),
    ("batch_size", 32, "--batch_size", "32"),
    ("learning_rate", 6e-4, "--learning_rate", "0.0006"),
    ("gamma", 0.95, "--discounting", "0.95"),
    ("ent_coef", 0.01, "--entropy_cost", "0.01"),
    ("vf_coef", 0.25, "--baseline_cost", "0.25"),
    ("max_grad_norm", 0.5, "--grad_norm_clipping", "0.5"),
    ("num_learner_threads", 1, "--num_learner_threads", "1"),
    ("num_buffers", 20, "--num_buffers", "20"),
]


@pytest.mark.parametrize(("key", "value", "flag", "expected"), MONOBEAST_CASES)
def test_monobeast_each_key_becomes_its_flag(key, value, flag, expected):
    argv = monobeast_argv({key: value}, savedir="/r/native", xpid="monobeast")
    assert _flag_value(argv, flag) == expected
    assert argv.count(flag) == 1


def test_monobeast_argv_parses_with_monobeast_argparse_spelling():
    argv = monobeast_argv({}, savedir="/r/native", xpid="x")
    # Defaults are monobeast's own; the fixed flags and the log location are always there.
    assert _flag_value(argv, "--num_actors") == "4"
    assert _flag_value(argv, "--unroll_length") == "80"
    assert _flag_value(argv, "--learning_rate") == "0.00048"
    assert _flag_value(argv, "--reward_clipping") == "abs_one"
    assert _flag_value(argv, "--mode") == "train"
    assert "--disable_checkpoint" in argv
    assert _flag_value(argv, "--savedir") == "/r/native"
    assert _flag_value(argv, "--xpid") == "x"
    assert "--num_buffers" not in argv  # None: monobeast's own default
    assert "--disable_cuda" not in argv
    assert "--disable_cuda" in monobeast_argv({"use_cuda": False}, savedir="/r", xpid="x")


def test_monobeast_adapter_only_keys_are_not_flags():
    a = monobeast_argv({"seed": 1, "learner_delay_s": 0.0}, savedir="/r", xpid="x")
    b = monobeast_argv({"seed": 7, "learner_delay_s": 1.0, "network": "atarinet"},
                       savedir="/r", xpid="x")
    assert a == b


def test_monobeast_network_defaults_to_the_papers_resnet():
    # The paper ran every agent with IMPALA's ResNet: so does monobeast unless told otherwise.
    assert mapping.MONOBEAST_DEFAULTS["network"] == "impala-resnet"
    assert set(mapping.MONOBEAST_NETWORKS) == {"impala-resnet", "atarinet"}


@pytest.mark.parametrize("setting", ["control", "experiment"])
def test_section3_settings(setting):
    cfg = mapping.SECTION3_MONOBEAST[setting]
    argv = monobeast_argv(cfg, savedir="/r", xpid="x")
    assert _flag_value(argv, "--batch_size") == "8"
    assert _flag_value(argv, "--num_actors") == "80"
    assert _flag_value(argv, "--unroll_length") == "240"
    assert cfg["learner_delay_s"] == (1.0 if setting == "experiment" else 0.0)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"num_env": 8}, r"unknown config keys \['num_env'\]; valid keys: .*'num_envs'"),
        ({"num_envs": 8, "num_buffers": 8}, "num_buffers=8 must be > num_envs"),
        ({"batch_size": 40, "num_envs": 4, "num_buffers": 10}, "and >= batch_size"),
        ({"num_steps": 0}, "num_steps must be >= 1"),
        ({"network": "resnet"}, r"network 'resnet' is not one of \['impala-resnet', 'atarinet'\]"),
    ],
)
def test_monobeast_bad_configs_say_what_is_wrong(config, message):
    with pytest.raises(MappingError, match=message):
        monobeast_argv(config, savedir="/r", xpid="x")


# (harness config, overrides that must all be present)
MOOLIB_CASES = [
    ({"env_id": "Breakout-v5"}, ["env.name=ALE/Breakout-v5"]),
    ({"total_timesteps": 10_000}, ["total_steps=10000"]),
    ({"num_envs": 8, "num_actor_batches": 2}, ["actor_batch_size=4", "num_actor_batches=2"]),
    ({"num_envs": 9, "num_actor_batches": 3}, ["actor_batch_size=3", "num_actor_batches=3"]),
    ({"num_actor_cpus": 2}, ["num_actor_cpus=2"]),
    ({"num_steps": 20}, ["unroll_length=20"]),
    ({"batch_size": 8}, ["batch_size=8", "virtual_batch_size=8"]),
    ({"learning_rate": 0.00048}, ["optimizer.learning_rate=0.00048"]),
    ({"gamma": 0.95}, ["discounting=0.95"]),
    ({"ent_coef": 0.01}, ["entropy_cost=0.01"]),
    ({"vf_coef": 0.25}, ["baseline_cost=0.25"]),
    ({"max_grad_norm": 0.5}, ["grad_norm_clipping=0.5"]),
    ({"reward_clip": 0.0}, ["reward_clip=0.0"]),
    ({"use_cuda": False}, ["device=cpu"]),
    ({"use_cuda": True}, ["device=cuda:0"]),
]


@pytest.mark.parametrize(("config", "expected"), MOOLIB_CASES)
def test_moolib_each_key_becomes_its_override(config, expected):
    ov = moolib_overrides(config, connect="127.0.0.1:5555", savedir="/r/native/moolib",
                          project="p", group="g")
    for item in expected:
        assert item in ov
    keys = [o.split("=", 1)[0] for o in ov]
    assert len(keys) == len(set(keys)), f"an override is given twice: {ov}"


def test_moolib_fixed_overrides():
    ov = moolib_overrides({}, connect="127.0.0.1:5555", savedir="/s", project="p", group="g",
                          local_name="peer0")
    for item in ("wandb=false", "env.repeat_action_probability=0.25", "env.noop_max=1",
                 "env.num_action_repeats=4", "use_lstm=false", "connect=127.0.0.1:5555",
                 "savedir=/s", "project=p", "group=g", "local_name=peer0"):
        assert item in ov
    # moolib's own defaults otherwise: 2 batches of 128 envs, lr 6e-4, unroll 20, batch 32.
    for item in ("actor_batch_size=128", "num_actor_batches=2", "optimizer.learning_rate=0.0006",
                 "unroll_length=20", "batch_size=32"):
        assert item in ov


def test_moolib_num_envs_must_split_into_batches():
    with pytest.raises(MappingError, match=r"num_envs \(9\) must be a positive multiple of num_actor_batches \(2\)"):
        moolib_overrides({"num_envs": 9}, connect="c", savedir="s", project="p", group="g")
    with pytest.raises(MappingError, match="unknown config keys"):
        moolib_overrides({"num_learner_threads": 2}, connect="c", savedir="s", project="p", group="g")


def test_tables_cover_every_default_key_once():
    for table, defaults in ((mapping.MONOBEAST_TABLE, mapping.MONOBEAST_DEFAULTS),
                            (mapping.MOOLIB_TABLE, mapping.MOOLIB_DEFAULTS)):
        keys = [r.key for r in table]
        assert sorted(keys) == sorted(defaults)


def test_docs_show_the_tables_as_they_are():
    doc = (Path(__file__).resolve().parent.parent / "docs" / "baselines.md").read_text()
    for table, defaults in ((mapping.MONOBEAST_TABLE, mapping.MONOBEAST_DEFAULTS),
                            (mapping.MOOLIB_TABLE, mapping.MOOLIB_DEFAULTS)):
        md = mapping.table_markdown(table, defaults)
        assert md in doc, f"docs/baselines.md is out of date; paste:\n{md}"
    assert "| `num_envs` | `4` | `--num_actors` |" in mapping.table_markdown(
        mapping.MONOBEAST_TABLE, mapping.MONOBEAST_DEFAULTS)
