"""The adapters' command lines: a missing baseline, bad arguments, --help."""

import json
import os
import subprocess
import sys

import pytest
from harness_cli import ROOT


def _run(module, args, env_extra=None, unset=()):
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=300,
    )


def _manifest(run_dir):
    return json.loads((run_dir / "manifest.json").read_text())


@pytest.mark.parametrize(
    ("module", "flag", "var", "name"),
    [
        ("baselines.monobeast", "--torchbeast-path", "TORCHBEAST_PATH", "torchbeast"),
        ("baselines.moolib", "--moolib-path", "MOOLIB_PATH", "moolib"),
    ],
)
def test_missing_checkout_is_recorded_as_skipped(tmp_path, module, flag, var, name):
    missing = tmp_path / "no-such-checkout"
    run_dir = tmp_path / "run"
    r = _run(module, [flag, str(missing), "--run-dir", str(run_dir), "--total-timesteps", "100"],
             unset=(var,))
    assert r.returncode == 3, r.stderr
    assert f"{name} checkout not found at {missing}" in r.stderr
    assert f"{flag} DIR or set {var}=DIR" in r.stderr  # how to provide it
    m = _manifest(run_dir)
    assert m["status"] == "skipped"
    assert m["error"]["message"].startswith("baseline unavailable: ")
    assert m["system"] == f"{'monobeast' if name == 'torchbeast' else 'moolib'}-impala"
    assert m["layout"]["name"] == "a0-l0-d1" and m["architecture"] == "async"
    assert not (run_dir / "episodes.csv").read_text().strip().splitlines()[1:]  # no data
    assert not (run_dir / "updates.csv").read_text().strip().splitlines()[1:]

    # The env var is the alternative to the flag.
    run_dir2 = tmp_path / "run2"
    r = _run(module, ["--run-dir", str(run_dir2)], env_extra={var: str(missing)})
    assert r.returncode == 3
    assert f"{name} checkout not found at {missing}" in r.stderr


def test_moolib_import_failure_names_the_import(tmp_path):
    # A checkout with the example in place, while `import moolib` fails: where moolib is
    # not built that is the real failure; where it is, a module earlier on the path that
    # raises ImportError takes its place.
    checkout = tmp_path / "moolib"
    (checkout / "examples" / "vtrace").mkdir(parents=True)
    (checkout / "examples" / "vtrace" / "experiment.py").write_text("")
    shadow = tmp_path / "shadow" / "moolib"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('libmoolib.so: cannot open shared object file')\n")
    env = {"PYTHONPATH": f"{shadow.parent}{os.pathsep}{ROOT}"}
    run_dir = tmp_path / "run"
    r = _run("baselines.moolib", ["--moolib-path", str(checkout), "--run-dir", str(run_dir)],
             env_extra=env)
    assert r.returncode == 3, r.stderr
    assert "import moolib failed: " in r.stderr
    assert "pip install --no-build-isolation" in r.stderr
    m = _manifest(run_dir)
    assert m["status"] == "skipped" and "import moolib failed" in m["error"]["message"]
    assert m["provenance"]["baseline"]["path"] == str(checkout)


@pytest.mark.parametrize(
    ("module", "args", "message"),
    [
        ("baselines.monobeast", ["--env-id", "CartPole-v1"], "needs an Atari '<Game>-v5' id"),
        ("baselines.monobeast", ["--env-id", "Breakoutt-v5"], "unknown env id 'Breakoutt-v5'"),
        ("baselines.monobeast", ["--num-envs", "8", "--num-buffers", "4"], "num_buffers=4 must be > num_envs"),
        ("baselines.monobeast", ["--learner-delay-s", "-1"], "learner_delay_s must be >= 0"),
        ("baselines.moolib", ["--num-envs", "9", "--num-actor-batches", "2"], "positive multiple"),
    ],
)
def test_bad_arguments_exit_2_with_the_reason(tmp_path, module, args, message):
    r = _run(module, [*args, "--run-dir", str(tmp_path / "run")])
    assert r.returncode == 2, r.stderr
    assert message in r.stderr
    assert not (tmp_path / "run").exists()  # nothing recorded for a bad command


@pytest.mark.parametrize("module", ["baselines.monobeast", "baselines.moolib"])
def test_help_documents_the_flags(module):
    r = _run(module, ["--help"])
    assert r.returncode == 0
    for flag in ("--env-id", "--seed", "--total-timesteps", "--num-envs", "--num-steps",
                 "--learning-rate", "--batch-size", "--learner-delay-s", "--run-dir", "--sweep",
                 "--run-id"):
        assert flag in r.stdout
    assert "unroll length" in r.stdout
