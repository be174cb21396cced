"""Matrix expansion as a pure function: small validated matrices whose runs are counted
and listed by hand."""

from __future__ import annotations

import pytest

from harness.sweep.checks import resolve_preset
from harness.sweep.expand import expand, expand_all, with_accelerator, with_shared_cpu_devices
from harness.sweep.model import MatrixGame, MatrixSystem, Resources, ValidatedMatrix
from harness.sweep.systems import BUILTIN_SYSTEMS
from runrecord import parse_layout

PPO = BUILTIN_SYSTEMS["cleanba-ppo"]
MONOBEAST = BUILTIN_SYSTEMS["monobeast-impala"]
CARTPOLE = MatrixGame("CartPole-v1", "cartpole", 1000)
BREAKOUT = MatrixGame("Breakout-v5", "atari", 250)


def matrix(**changes) -> ValidatedMatrix:
    values = dict(
        sweep="t", label="m", systems=(MatrixSystem(PPO, ("cleanba",)),),
        layouts=(parse_layout("a0-l0-d1"),), games=(CARTPOLE,), seeds=(1,), frames=1000,
        overrides={}, grid={}, resources=Resources(), key_lines={"frames": 3},
        key_source="sweep.toml",
    )
    values.update(changes)
    return ValidatedMatrix(**values)


def test_one_of_each_is_one_run_with_every_field():
    (run,) = expand(matrix(overrides={"num-envs": 8}))
    assert (run.sweep, run.system, run.architecture, run.env_id, run.seed) == (
        "t", "cleanba-ppo", "cleanba", "CartPole-v1", 1)
    assert (run.preset, run.frames, run.total_timesteps) == ("cartpole", 1000, 1000)
    assert run.layout.name == "a0-l0-d1" and run.overrides == {"num-envs": 8}
    assert (run.entry, run.takes_preset, run.baseline) == ("cleanba.ppo", True, False)
    assert run.matrix == "m" and dict(run.key_lines) == {"frames": 3}
    assert run.key_source == "sweep.toml" and len(run.run_id) > 0
    assert run.cpu_devices == 0  # set for the whole sweep, not per matrix


def test_product_order_and_count():
    # 2 architectures x 2 layouts x 2 games x 3 seeds = 24 runs; seeds vary fastest.
    m = matrix(systems=(MatrixSystem(PPO, ("sync", "cleanba")),),
               layouts=(parse_layout("a0-l0-d1"), parse_layout("a0-l1-d1")),
               games=(CARTPOLE, BREAKOUT), seeds=(1, 2, 3))
    runs = expand(m)
    assert len(runs) == 24
    assert [r.seed for r in runs[:4]] == [1, 2, 3, 1]
    assert [(r.architecture, r.layout.name, r.env_id) for r in runs[:6:3]] == [
        ("sync", "a0-l0-d1", "CartPole-v1"), ("sync", "a0-l0-d1", "Breakout-v5")]
    assert runs[12].architecture == "cleanba"
    assert {r.total_timesteps for r in runs if r.env_id == "Breakout-v5"} == {250}
    assert len({r.run_id for r in runs}) == 24


def test_grid_is_a_product_in_sorted_key_order_over_the_overrides():
    m = matrix(overrides={"anneal-lr": False},
               grid={"num-envs": [8, 16], "learning-rate": [0.1, 0.2, 0.3]})
    runs = expand(m)
    assert len(runs) == 6
    # learning-rate sorts first, so num-envs varies fastest.
    assert [(r.overrides["learning-rate"], r.overrides["num-envs"]) for r in runs] == [
        (0.1, 8), (0.1, 16), (0.2, 8), (0.2, 16), (0.3, 8), (0.3, 16)]
    assert all(r.overrides["anneal-lr"] is False for r in runs)
    assert list(runs[0].overrides) == ["anneal-lr", "learning-rate", "num-envs"]


def test_a_system_without_presets_gets_none_and_its_own_entry():
    (run,) = expand(matrix(systems=(MatrixSystem(MONOBEAST, ("async",)),), games=(BREAKOUT,)))
    assert run.preset is None and run.baseline and not run.takes_preset
    assert run.entry == "baselines.monobeast"
    assert "--architecture" not in run.command("/r", python="py")


def test_run_ids_depend_on_the_definition_only():
    a = expand(matrix())[0]
    b = expand(matrix(label="other", key_lines={}, resources=Resources(accelerator="gpu")))[0]
    c = expand(matrix(seeds=(2,)))[0]
    assert a.run_id == b.run_id != c.run_id


def test_expand_all_keeps_each_run_once_with_a_note():
    first = matrix(seeds=(1, 2))
    second = matrix(label="n", seeds=(2, 3))
    runs, notes = expand_all([first, second])
    assert [r.seed for r in runs] == [1, 2, 3]
    assert [r.matrix for r in runs] == ["m", "m", "n"]
    assert notes == ["cleanba-ppo cleanba CartPole-v1 s2 a0-l0-d1 appears in more than one "
                     "matrix; run once"]


def test_cpu_runs_share_the_largest_cpu_layout_device_count():
    cpu = expand(matrix(layouts=(parse_layout("a0-l0-d1"), parse_layout("a0-l1,2-d1"))))
    gpu = expand(matrix(layouts=(parse_layout("a0,1,2,3-l4-d1"),),
                        resources=Resources(accelerator="gpu")))
    runs = with_shared_cpu_devices([*cpu, *gpu])
    assert [r.cpu_devices for r in runs] == [3, 3, 0]
    assert [r.cpu_devices for r in with_shared_cpu_devices(with_accelerator(runs, "cpu"))] == [
        5, 5, 5]


@pytest.mark.parametrize(("preset", "env_id", "resolved"), [
    ("auto", "Breakout-v5", "atari"), ("auto", "CartPole-v1", "cartpole"),
    ("atari", "CartPole-v1", "atari"), ("cartpole", "Pong-v5", "cartpole"),
])
def test_auto_preset_resolves_by_game(preset, env_id, resolved):
    assert resolve_preset(preset, env_id) == resolved
