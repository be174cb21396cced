"""--deterministic: bit-identical records across layouts and process counts,
and whether the actors keep their observations on the host or on their devices.

Each case trains on the layouts of LAYOUTS (4 virtual CPU devices; d2
is two processes over jax.distributed on localhost) and asserts that params checksums,
every updates.csv loss column and episodes.csv (all but wall_time_s) are identical: with
XLA compiling for this host's instruction set, and for the ResNet again with XLA capped to
AVX2 (the code path of AVX2-only CPUs, where IMPALA + ResNet once differed between 1 and 2
learner devices; skipped where the cap does not exist). The same runs without the flag differ, and
analysis' equivalence check calls the deterministic group bitwise identical.

Cost: 3 cases (CartPole IMPALA natively on the 5 layouts, 6 trainer processes; Breakout on
4 of them, natively for PPO and capped to AVX2 for IMPALA, 5 processes each: 150-210 s a
case on the 2-core CI box beside another worker before a0-l1-d1 was left out). CartPole
PPO on the 5 layouts: tests/test_determinism_check.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cleanba_runs import command, free_port, trainer_env

from analysis.verdicts.equivalence import records_identical
from cleanba.core.config import ConfigError
from cleanba.core.layout import make_plan
from cleanba.core.xla_flags import with_flag
from cleanba.ppo import PPOConfig, deterministic_minibatch_indices
from runrecord import load_run, schema

# (name, actor device ids, learner device ids, processes)
LAYOUTS = [
    ("a0-l0-d1", ["0"], ["0"], 1),
    ("a0-l1-d1", ["0"], ["1"], 1),
    ("a0-l0,1-d1", ["0"], ["0", "1"], 1),
    ("a0,1-l2,3-d1", ["0", "1"], ["2", "3"], 1),
    ("a0-l0-d2", ["0"], ["0"], 2),
]
# These layouts' actors keep their rollouts' observations on their devices, as on a GPU
# (CLEANBA_ROLLOUT_OBS=device; cleanba/core/actor.py): the learner splits one rollout over
# two devices (a0-l0,1) or builds the global batch of two processes (d2) from device
# arrays. Their records must be the bits of the host path's (a0-l0-d1 and the others).
DEVICE_OBS_LAYOUTS = ("a0-l0,1-d1", "a0-l0-d2")
COMMON = ["--num-actor-threads", "1", "--progress-interval-s", "0", "--seed", "3"]
CASES = {
    # 8 envs = 4 groups of 2; enough updates for CartPole episodes to end mid-run
    "cartpole": ("cartpole", ["--num-envs", "8", "--num-steps", "16", "--num-minibatches", "2",
                              "--total-timesteps", str(8 * 16 * 5), *COMMON]),
    # the real IMPALA ResNet on Atari frames, tiny budget
    "breakout": ("atari", ["--env-id", "Breakout-v5", "--num-envs", "4", "--num-steps", "8",
                           "--num-minibatches", "2", "--total-timesteps", str(4 * 8 * 2),
                           *COMMON]),
}


def train_on_layout(alg: str, preset: str, args: list[str], layout: tuple, run_dir: Path,
                    deterministic: bool = True, xla_flag: str = "") -> Path:
    _, actors, learners, processes = layout
    flags = [*args, "--actor-device-ids", *actors, "--learner-device-ids", *learners]
    if alg == "ppo":
        flags += ["--update-epochs", "2"]
    elif "Breakout-v5" in args:  # 4 envs: 2 groups of 2 so each of 2 minibatches gets 1 env
        flags += ["--deterministic-groups", "2"]
    if deterministic:
        flags.append("--deterministic")
    # Every process gets 4 virtual CPU devices: on CPU, XLA's host device count changes how
    # convolutions are split over threads, hence their bits (docs/deterministic.md).
    env = trainer_env(4, **({"CLEANBA_ROLLOUT_OBS": "device"}
                            if layout[0] in DEVICE_OBS_LAYOUTS else {}))
    if xla_flag:
        env["XLA_FLAGS"] = with_flag(env["XLA_FLAGS"], xla_flag)
    if processes == 1:
        p = subprocess.run(command(alg, preset, run_dir, *flags), env=env, capture_output=True,
                           text=True, timeout=600)
        assert p.returncode == 0, p.stderr[-3000:]
        return run_dir
    port = free_port()
    flags += ["--distributed", "--coordinator-address", f"localhost:{port}",
              "--num-processes", str(processes)]
    procs = [subprocess.Popen(command(alg, preset, run_dir, *flags, "--process-id", str(i)),
                              env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for i in range(processes)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    return run_dir


# XLA's CPU backend compiles for the host's instruction set; this caps it (the flag exists
# in jax 0.10's XLA; an unknown flag in XLA_FLAGS aborts the process). The tests below use it
# to check determinism on the AVX2 code path of an AVX-512 host.
AVX2_CAP_FLAG = "--xla_cpu_max_isa=AVX2"


def isa_cap_available(python: str, env: dict[str, str]) -> bool:
    """Whether this x86-64 host's jaxlib accepts AVX2_CAP_FLAG: one JAX start-up in a child
    process (`python`, environment `env`, whose XLA_FLAGS get the flag added)."""
    import platform

    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    child = {**env, "XLA_FLAGS": with_flag(env.get("XLA_FLAGS", ""), AVX2_CAP_FLAG)}
    probe = "import jax, jax.numpy as jnp; jax.jit(lambda x: x + 1)(jnp.ones(2)).block_until_ready()"
    p = subprocess.run([python, "-c", probe], env=child, capture_output=True, text=True,
                       timeout=120)
    return p.returncode == 0 and "Unknown CPU ISA" not in p.stderr


_cap: dict[str, bool] = {}


def avx2_cap() -> str:
    """The XLA flag capping code generation to AVX2, or skip where this host has none."""
    if "ok" not in _cap:
        _cap["ok"] = isa_cap_available(sys.executable, trainer_env(4))
    if not _cap["ok"]:
        pytest.skip("XLA's CPU backend cannot be capped to AVX2 here (not x86-64, or a jaxlib "
                    "without --xla_cpu_max_isa)")
    return AVX2_CAP_FLAG


# The AVX2 cap runs with the ResNet only: that is where the capped code path once
# differed between layouts; the MLP's policy head (the reduction that differed) is the
# same code in both networks, and dropping CartPole x AVX2 saves 10 trainer processes.
# On Breakout one case per algorithm (150-210 s a case in CI): the ResNet and its
# gradient's reduction over learner devices are the same code under both losses
# (tests/test_cleanba_deterministic_primitives.py checks the ResNet gradient's bits on
# 1, 2 and 4 learner devices; tests/test_env_backends.py PPO on Breakout over two
# layouts), and IMPALA keeps the capped path where it once differed. CartPole PPO on
# these five layouts is tests/test_determinism_check.py's clean run (the same records
# compared the same way), so CartPole here is IMPALA only.
MATRIX = [("cartpole", "native", "impala"), ("breakout", "native", "ppo"),
          ("breakout", "avx2", "impala")]


@pytest.mark.slow
@pytest.mark.parametrize("case,isa,alg", MATRIX)
def test_deterministic_records_are_identical_on_every_layout(tmp_path, alg, case, isa):
    xla_flag = avx2_cap() if isa == "avx2" else ""
    preset, args = CASES[case]
    # The ResNet skips a0-l1-d1: one learner device other than the actor's runs a0-l0-d1's
    # program on another device of the same kind (the MLP cases still run it).
    layouts = LAYOUTS if case == "cartpole" else [lay for lay in LAYOUTS if lay[0] != "a0-l1-d1"]
    runs = {layout[0]: load_run(train_on_layout(alg, preset, args, layout,
                                                tmp_path / "det" / layout[0], xla_flag=xla_flag))
            for layout in layouts}
    reference = runs["a0-l0-d1"]
    assert reference.status == schema.COMPLETED
    assert all(reference.updates["params_checksum"])  # the checksums are there to compare
    assert np.all(np.isfinite(reference.updates["loss_total"]))
    if case == "cartpole":
        assert len(reference.episodes) > 10
    for name, r in runs.items():
        assert r.manifest["layout"]["name"] == name
        assert r.manifest["hyperparameters"]["deterministic"] is True
        assert records_identical(r, reference) is None, (name, records_identical(r, reference))
        np.testing.assert_array_equal(r.updates["params_checksum"],
                                      reference.updates["params_checksum"])

    if case != "cartpole":
        return  # the tiny Breakout runs finish no episode: nothing for analysis to score
    # analysis' equivalence check says so too
    p = subprocess.run(
        [sys.executable, "-m", "analysis", "equivalence", str(tmp_path / "det"), "--bitwise-only"], capture_output=True, text=True, cwd=Path(__file__).parents[1])
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("IDENTICAL") == len(LAYOUTS) - 1, p.stdout
    assert "NOT IDENTICAL" not in p.stdout


@pytest.mark.slow
@pytest.mark.parametrize("alg", ["ppo", "impala"])
def test_without_the_flag_records_differ_between_layouts(tmp_path, alg):
    """The control: the default learner splits minibatches by device and averages
    gradients with pmean, so a0-l0,1-d1 trains on other numbers than a0-l0-d1."""
    preset, args = CASES["cartpole"]
    one, two = LAYOUTS[0], LAYOUTS[2]
    a = load_run(train_on_layout(alg, preset, args, one, tmp_path / "a", deterministic=False))
    b = load_run(train_on_layout(alg, preset, args, two, tmp_path / "b", deterministic=False))
    assert a.status == b.status == schema.COMPLETED
    assert records_identical(a, b) is not None
    assert list(a.updates["params_checksum"]) != list(b.updates["params_checksum"])


def _plan(learners: int, processes: int = 1, process_index: int = 0, **kw):
    config = PPOConfig(env_id="CartPole-v1", num_envs=8, num_steps=16, num_minibatches=2,
                       total_timesteps=8 * 16, num_actor_threads=1, deterministic=True,
                       learner_device_ids=tuple(range(learners)), **kw)
    return config, make_plan(config, processes, process_index, 4)


def _global_samples(learners: int, processes: int = 1) -> list[list[tuple[int, int]]]:
    """Each minibatch's samples as sorted (t, global env) pairs, over all devices."""
    out: list[list[tuple[int, int]]] = [[], []]
    for p in range(processes):
        config, plan = _plan(learners, processes, p)
        for j, idx in enumerate(deterministic_minibatch_indices(config, plan, 1, 0)):
            for d in range(idx.shape[0]):
                first_env = (p * learners + d) * plan.envs_per_learner_device
                for flat in idx[d].ravel():
                    t, e = divmod(int(flat), plan.envs_per_learner_device)
                    out[j].append((t, first_env + e))
    return [sorted(x) for x in out]


def test_minibatches_hold_the_same_samples_on_every_layout():
    one = _global_samples(1)
    assert _global_samples(2) == one
    assert _global_samples(4) == one
    assert _global_samples(1, processes=2) == one
    # each epoch's minibatches partition the batch, every env group contributing equally
    assert sorted(one[0] + one[1]) == [(t, e) for t in range(16) for e in range(8)]
    groups = [sum(1 for _, e in one[0] if e // 2 == g) for g in range(4)]
    assert groups == [16, 16, 16, 16]


@pytest.mark.parametrize("kw,needle", [
    ({"architecture": "async"}, "needs --architecture sync or cleanba"),
    ({"deterministic_groups": 3}, "power of two"),
    ({"deterministic_groups": 16}, "divides --num-envs 8"),
])
def test_bad_deterministic_settings_say_what_is_valid(kw, needle):
    with pytest.raises(ConfigError, match=needle):
        _plan(1, **kw)


def test_groups_must_be_shared_by_the_learner_devices():
    with pytest.raises(ConfigError, match="4 learner devices cannot each hold whole env groups"):
        _plan(4, deterministic_groups=2)
