"""The adapter skeleton (baselines.adapter.run_adapter) with a small stand-in baseline:
each way a run can end gives its exit code and a finished record.

The real adapters run it with torchbeast and moolib (tests/test_baselines_real.py, when
their checkouts are given); this baseline needs neither torch nor a checkout's code.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from baselines import common, mapping
from baselines.adapter import Baseline, Checkout, Launch, run_adapter
from runrecord import exits, schema

MARKER = "stand_in/train.py"


@dataclass(kw_only=True)
class StandInArgs(common.AdapterArgs):
    """A stand-in baseline."""

    DEFAULTS: ClassVar[Mapping[str, Any]] = {
        "env_id": "Breakout-v5", "seed": 1, "total_timesteps": 100, "num_envs": 2,
        "num_steps": 5, "learning_rate": 0.001, "batch_size": 2, "learner_delay_s": 0.0,
        "gamma": 0.99, "ent_coef": 0.01, "vf_coef": 0.5, "max_grad_norm": 40.0,
        "use_cuda": True, "ending": "completed",
    }
    MODEL: ClassVar[str] = "the stand-in"

    ending: str = "completed"
    """how train() ends: completed, failed, raise, interrupt"""
    stand_in_path: Path | None = None
    """the stand-in's checkout"""

    def checkout(self) -> Path | None:
        return self.stand_in_path


class StandInRun:
    def __init__(self, launch: Launch[StandInArgs]):
        self.launch = launch
        self.updates = 0
        self.episodes = 0
        self.error: str | None = None

    def train(self) -> str:
        self.updates, self.episodes = 3, 2
        ending = self.launch.args.ending
        if ending == "failed":
            self.error = "actor 1 died\ntraceback lines"
            return schema.FAILED
        if ending == "raise":
            raise RuntimeError("hook broke")
        if ending == "interrupt":
            raise KeyboardInterrupt
        return schema.COMPLETED

    def close(self) -> dict[str, Any]:
        return {**(self.launch.plan or {}), "native": "tidied", "on_cuda": self.launch.on_cuda}

    def summary(self) -> dict[str, Any]:
        return schema.summary(self.updates * 10, 4, 2.0, self.updates, self.episodes)

    def failure(self, error: object) -> str:
        return f"stand-in failed: {self.error or error}"


def plan(args: StandInArgs, native_dir: Path) -> dict[str, Any]:
    if args.num_envs > 4:
        raise mapping.MappingError("num_envs > 4: the stand-in has 4 actors")
    return {"argv": ["--actors", str(args.num_envs)], "native_dir": native_dir.name}


def start(launch: Launch[StandInArgs]) -> StandInRun | int:
    if launch.args.ending == "refuse":
        launch.writer.finish(schema.FAILED, error={"type": "RecordError", "traceback": "",
                                                   "message": "refused"})
        return exits.EXIT_FAILED
    return StandInRun(launch)


STAND_IN = Baseline(
    system="monobeast-impala", args=StandInArgs, prog="stand-in",
    checkout=Checkout("stand-in", "STAND_IN_PATH", MARKER, "https://example.org"), load=lambda checkout: {"loaded_from": checkout}, extra_columns=(), start=start, plan=plan,
    provenance=lambda code: {"module": str(code["loaded_from"])}, cuda_available=lambda: False,
)


@pytest.fixture
def checkout(tmp_path):
    (tmp_path / "checkout" / MARKER).parent.mkdir(parents=True)
    (tmp_path / "checkout" / MARKER).write_text("# stand-in\n")
    return tmp_path / "checkout"


def run(tmp_path, checkout, *flags):
    run_dir = tmp_path / "run"
    code = run_adapter(STAND_IN, ["--stand-in-path", str(checkout), "--run-dir", str(run_dir),
                                  *flags])
    manifest_path = run_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else None
    return code, manifest


def test_a_completed_run_records_plan_provenance_and_summary(tmp_path, checkout, capsys):
    code, m = run(tmp_path, checkout, "--num-envs", "3")
    assert code == exits.EXIT_OK
    assert m["status"] == schema.COMPLETED and m["error"] is None
    assert m["hyperparameters"]["num_envs"] == 3 and m["hyperparameters"]["ending"] == "completed"
    assert m["baseline_run"] == {"argv": ["--actors", "3"], "native_dir": "native",
                                 "native": "tidied", "on_cuda": False}
    assert m["provenance"]["baseline"]["module"] == str(checkout)
    assert m["provenance"]["baseline"]["file"] == MARKER
    assert m["layout"]["devices"] == ["cpu"]  # --use-cuda, but no GPU seen
    assert m["summary"]["updates"] == 3 and m["summary"]["env_steps"] == 30
    out = capsys.readouterr().out
    assert "monobeast-impala: record in" in out
    assert "monobeast-impala: completed; 3 updates, 2 episodes" in out


def test_a_failure_the_run_caught_is_recorded_with_its_message(tmp_path, checkout, capsys):
    code, m = run(tmp_path, checkout, "--ending", "failed")
    assert code == exits.EXIT_FAILED
    assert m["status"] == schema.FAILED
    assert m["error"]["type"] == "BaselineError" and m["error"]["message"] == "actor 1 died"
    assert "error: stand-in failed: actor 1 died" in capsys.readouterr().err


def test_an_exception_fails_the_run_and_an_interrupt_interrupts_it(tmp_path, checkout, capsys):
    code, m = run(tmp_path, checkout, "--ending", "raise")
    assert code == exits.EXIT_FAILED and m["status"] == schema.FAILED
    assert "hook broke" in m["error"]["message"]
    assert m["baseline_run"]["native"] == "tidied"  # closed whatever happened
    assert "error: stand-in failed: hook broke" in capsys.readouterr().err

    code, m = run(tmp_path, checkout, "--ending", "interrupt", "--seed", "2")
    assert code == exits.EXIT_INTERRUPTED and m["status"] == schema.INTERRUPTED


def test_a_refusal_at_start_keeps_its_exit_code(tmp_path, checkout):
    code, m = run(tmp_path, checkout, "--ending", "refuse")
    assert code == exits.EXIT_FAILED
    assert m["status"] == schema.FAILED and m["error"]["message"] == "refused"


@pytest.mark.parametrize("flags", [["--num-envs", "5"], ["--env-id", "CartPole-v1"],
                                   ["--learner-delay-s", "-1"]])
def test_bad_settings_exit_2_and_write_nothing(tmp_path, checkout, flags, capsys):
    code, m = run(tmp_path, checkout, *flags)
    assert code == exits.EXIT_BAD_INPUT and m is None
    assert not (tmp_path / "run").exists()
    assert capsys.readouterr().err.startswith("error: ")


def test_a_missing_checkout_is_recorded_as_skipped(tmp_path, monkeypatch):
    monkeypatch.delenv("STAND_IN_PATH", raising=False)
    code, m = run(tmp_path, tmp_path / "nowhere")
    assert code == exits.EXIT_UNAVAILABLE
    assert m["status"] == "skipped" and "stand-in checkout not found" in m["error"]["message"]


def test_defaults_come_from_the_baseline():
    args = StandInArgs.defaults()
    assert args.hyperparameters() == dict(StandInArgs.DEFAULTS)
    assert args.run_dir is None and args.results_root == Path("results")


@pytest.mark.parametrize(("module", "words"), [
    ("baselines.monobeast", ["(monobeast --unroll_length)", "(default: 80)", "RMSprop",
                             "--num-buffers", "--torchbeast-path"]),
    ("baselines.moolib", ["(moolib unroll_length)", "(default: 20)", "Adam",
                          "--num-actor-batches", "--moolib-path"]),
])
def test_help_speaks_each_baselines_terms(module, words):
    # The shared flags' help comes from each adapter's Args docstring, their defaults
    # from its mapping.*_DEFAULTS.
    r = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.replace("│", " ").split())
    for w in words:
        assert w in text
