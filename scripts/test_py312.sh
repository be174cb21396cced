#!/usr/bin/env bash
# The Python 3.12 CI leg: its own venv (.venv312) with the newest JAX, Flax, Optax and
# EnvPool the pins allow, then the trainer, determinism, run-record and analysis tests not
# marked slow (the 3.11 leg, scripts/test.sh, runs everything). Left to the 3.11 leg: the
# trainers' process handling (signals, failures, argument checks), which depends on the
# OS and Python's subprocess, not on the JAX, Flax, Optax or EnvPool versions this leg
# exists for (~85 s of CI on 2 cores). Extra arguments go to pytest. PYTHON312: the
# interpreter (default: pyenv's 3.12.1, present here and on CI).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON312:-$HOME/.pyenv/versions/3.12.1/bin/python}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null; then
  echo "test_py312.sh: $PY is not a Python 3.12 interpreter; set PYTHON312" >&2
  exit 2
fi
start=$(date +%s)
VENV=.venv312 PYTHON="$PY" scripts/setup.sh --dev
echo "== py312 leg: venv ready after $(( $(date +%s) - start )) s"
.venv312/bin/python -c '
import sys
from runrecord.provenance import package_versions
names = ("jax", "jaxlib", "flax", "optax", "envpool", "numpy", "scipy", "tyro", "wandb", "submitit")
print("== py312 leg: Python", sys.version.split()[0], "|",
      ", ".join(f"{n} {v}" for n, v in package_versions(names).items()))'
export XLA_FLAGS="${XLA_FLAGS:-} --xla_force_host_platform_device_count=4"
export WANDB_MODE=offline WANDB_SILENT=true
set +e
.venv312/bin/python -m pytest -n "${TEST_WORKERS:-2}" -m "not slow" -p no:cacheprovider \
  tests/test_cleanba_*.py tests/test_determinism_*.py tests/test_runrecord*.py \
  tests/test_analysis_*.py --deselect tests/test_cleanba_signals.py \
  --deselect tests/test_cleanba_failures.py --deselect tests/test_cleanba_checks.py "$@"
rc=$?
set -e
echo "== py312 leg finished in $(( $(date +%s) - start )) s (pytest exit $rc)"
if [ "$rc" = 5 ]; then echo "no tests collected" >&2; exit 1; fi
exit "$rc"
