"""Sweep files: validation with line numbers, expansion, run ids, commands, presets."""

from __future__ import annotations

import subprocess
import sys

import pytest
from harness_cli import ROOT

from harness.sweep import SweepError, list_presets, load_sweep, parse_sweep, preset_path

GOOD = """\
name = "t"
seeds = [1, 2]
frames = 4000

[[matrix]]
systems = ["cleanba-ppo", "cleanba-impala"]
architectures = ["cleanba"]
layouts = ["a0-l0-d1", "a0-l1,2-d1", "a0-l0-d2"]
games = ["CartPole-v1"]

[[matrix]]
name = "atari"
systems = ["cleanba-ppo"]
layouts = ["a0-l0-d1"]
games = ["Breakout-v5"]
seeds = [7]
overrides = { num-envs = 8, learning_rate = 0.001, anneal-lr = false }
"""


def parse(text: str, **kw):
    return parse_sweep(text, "sweep.toml", **kw)


def error_of(text: str, **kw) -> str:
    with pytest.raises(SweepError) as e:
        parse(text, **kw)
    return str(e.value)


def test_expansion_counts_and_fields():
    sw = parse(GOOD)
    # 2 systems x 3 layouts x 1 game x 2 seeds + 1 atari run
    assert len(sw.runs) == 13
    atari = [r for r in sw.runs if r.env_id == "Breakout-v5"]
    assert len(atari) == 1
    r = atari[0]
    assert r.seed == 7 and r.preset == "atari"
    assert r.total_timesteps == 1000  # 4000 frames / frame skip 4
    assert r.overrides == {"num-envs": 8, "learning-rate": 0.001, "anneal-lr": False}
    cart = [r for r in sw.runs if r.env_id == "CartPole-v1"]
    assert {r.preset for r in cart} == {"cartpole"}
    assert {r.total_timesteps for r in cart} == {4000}


def test_run_ids_stable_and_distinct():
    a, b = parse(GOOD), parse(GOOD)
    assert [r.run_id for r in a.runs] == [r.run_id for r in b.runs]
    assert len({r.run_id for r in a.runs}) == len(a.runs)
    # Reordering keys in the file does not change ids; changing the budget does.
    reordered = GOOD.replace('seeds = [1, 2]\nframes = 4000', 'frames = 4000\nseeds = [1, 2]')
    assert [r.run_id for r in parse(reordered).runs] == [r.run_id for r in a.runs]
    more = parse(GOOD, frames=8000)
    assert not {r.run_id for r in more.runs} & {r.run_id for r in a.runs}


def test_command_of_two_process_layout():
    sw = parse(GOOD)
    r = next(r for r in sw.runs if r.layout.name == "a0-l0-d2" and r.system == "cleanba-ppo")
    c0 = r.command("/res/t/runs/x", process_id=0, coordinator="127.0.0.1:1234", python="py")
    c1 = r.command("/res/t/runs/x", process_id=1, coordinator="127.0.0.1:1234", python="py")
    assert c0[:4] == ["py", "-m", "cleanba.ppo", "cartpole"]
    joined = " ".join(c0)
    assert "--distributed --coordinator-address 127.0.0.1:1234 --num-processes 2" in joined
    assert c0[c0.index("--process-id") + 1] == "0" and c1[c1.index("--process-id") + 1] == "1"
    assert c0[c0.index("--run-id") + 1] == r.run_id
    assert "--actor-device-ids 0 --learner-device-ids 0" in joined
    r2 = next(r for r in sw.runs if r.layout.name == "a0-l1,2-d1")
    assert "--learner-device-ids 1 2" in " ".join(r2.command("d"))
    atari = next(r for r in sw.runs if r.env_id == "Breakout-v5")
    cmd = " ".join(atari.command("d"))
    assert "--no-anneal-lr" in cmd and "--learning-rate 0.001" in cmd and "--num-envs 8" in cmd


def test_unknown_system_names_line_and_valid_ones():
    msg = error_of(GOOD.replace('"cleanba-impala"]', '"cleanba-impalla"]'))
    assert "line 6" in msg and "cleanba-impalla" in msg and "moolib-impala" in msg


def test_malformed_layout_names_line_and_form():
    text = GOOD.replace('layouts = ["a0-l0-d1", "a0-l1,2-d1", "a0-l0-d2"]',
                        'layouts = [\n  "a0-l0-d1",\n  "a0-l1;2-d1",\n]')
    msg = error_of(text)
    assert "line 10" in msg and "a0-l1;2-d1" in msg and "a0-l1,2,3-d1" in msg


def test_duplicate_key_names_line():
    msg = error_of(GOOD.replace('frames = 4000', 'frames = 4000\nseeds = [3]'))
    assert "line 4" in msg and "duplicate" in msg


def test_unknown_key_names_line_and_valid_keys():
    msg = error_of(GOOD.replace('seeds = [7]', 'sedes = [7]'))
    assert "line 16" in msg and "'sedes'" in msg and "seeds" in msg and "layouts" in msg


def test_unknown_game_names_line_and_suggests():
    msg = error_of(GOOD.replace('games = ["Breakout-v5"]', 'games = ["Breakuot-v5"]'))
    assert "line 15" in msg and "Breakuot-v5" in msg and "Breakout-v5" in msg


def test_baseline_only_on_single_device_layout():
    text = GOOD.replace('systems = ["cleanba-ppo"]\nlayouts = ["a0-l0-d1"]',
                        'systems = ["moolib-impala"]\nlayouts = ["a0-l1-d1"]')
    msg = error_of(text)
    assert "baseline" in msg and "a0-l0-d1" in msg and "line 14" in msg


def test_reserved_and_bad_overrides():
    msg = error_of(GOOD.replace("num-envs = 8", "seed = 8"))
    assert "may not set 'seed'" in msg and "line 17" in msg
    msg = error_of(GOOD.replace("num-envs = 8", 'resume-from = "runs/x"'))
    assert "may not set 'resume-from': the harness sets it from the record's checkpoints" in msg
    msg = error_of(GOOD.replace("num-envs = 8", "num-envs = {a = 1}"))
    assert "hyperparameter values" in msg


def test_missing_required_key():
    msg = error_of(GOOD.replace("frames = 4000\n", ""))
    assert "missing 'frames'" in msg


def test_scale_down_options():
    sw = parse(GOOD, frames=400, seeds=[5], games=["CartPole-v1"])
    assert {r.seed for r in sw.runs} == {5}
    assert {r.env_id for r in sw.runs} == {"CartPole-v1"}
    assert {r.frames for r in sw.runs} == {400}
    msg = error_of(GOOD, games=["Pong-v5"])
    assert "Pong-v5" in msg and "CartPole-v1" in msg
    gpu = parse(GOOD, accelerator="gpu")
    two = next(r for r in gpu.runs if r.layout.name == "a0-l1,2-d1")
    assert two.gpus_needed == 3 and parse(GOOD).runs[0].gpus_needed == 0
    assert [r.run_id for r in gpu.runs] == [r.run_id for r in parse(GOOD).runs]


def test_grid_expands_cartesian_product():
    text = GOOD + "grid = { learner-delay-s = [0.0, 0.1, 0.2] }\n"
    sw = parse(text)
    atari = [r for r in sw.runs if r.env_id == "Breakout-v5"]
    assert sorted(r.overrides["learner-delay-s"] for r in atari) == [0.0, 0.1, 0.2]
    assert len({r.run_id for r in atari}) == 3


def test_every_preset_parses():
    assert {"smoke", "deterministic", "section3", "base", "workstation", "scaling",
            "sync-vs-cleanba"} <= set(list_presets())
    det = load_sweep(preset_path("deterministic"))
    assert all(r.overrides["deterministic"] is True for r in det.runs)
    assert {r.cpu_devices for r in det.runs} == {4}  # one XLA CPU configuration for all
    base = load_sweep(preset_path("base"))
    assert len(base.runs) == 4 * 57 * 3
    assert {r.system for r in base.runs} == {"cleanba-ppo", "cleanba-impala",
                                            "monobeast-impala", "moolib-impala"}
    for name in list_presets():
        load_sweep(preset_path(name))


def test_cli_plan_rejects_bad_file_with_exit_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(GOOD.replace('"a0-l0-d2"', '"a0-l0-dx"'))
    p = subprocess.run([sys.executable, "-m", "harness", "plan", "--sweep", str(bad)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert "line 8" in p.stderr and "a0-l0-dx" in p.stderr
    assert p.stdout == ""


def test_unknown_hyperparameter_of_real_trainer_names_valid_ones():
    msg = error_of(GOOD.replace("num-envs = 8", "num-envz = 8"))
    assert "line 17" in msg and "'num-envz'" in msg and "num-envs" in msg


def test_regression_metric_is_one_of_the_gates_metrics():
    from analysis.verdicts.gate import GATE_METRICS

    for metric in GATE_METRICS:
        assert parse(GOOD + f'\n[regression]\nmetric = "{metric}"\n').regression["metric"] == metric
    msg = error_of(GOOD + '\n[regression]\nmetric = "mean"\n')
    metric_line = len(GOOD.splitlines()) + 3
    assert f"line {metric_line}: unknown gate metric 'mean'" in msg and "auc" in msg
