#!/usr/bin/env bash
# The project's test command: set up, lint, type-check, run every test (slow ones included).
# Extra arguments go to pytest, e.g. scripts/test.sh -m "not slow" -x
# The tests run on TEST_WORKERS pytest-xdist workers (default 2: CI's cores); tests that
# share one machine-wide resource run on one worker (tests/conftest.py). TEST_WORKERS=0: in
# this process, one test at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
scripts/setup.sh --dev --browser --tex
echo "== test.sh: set up after $(( $(date +%s) - start )) s"
export XLA_FLAGS="${XLA_FLAGS:-} --xla_force_host_platform_device_count=4"
export WANDB_MODE=offline WANDB_SILENT=true
.venv/bin/ruff check .
.venv/bin/mypy runrecord analysis calibration harness cleanba baselines
echo "== test.sh: ruff and mypy done after $(( $(date +%s) - start )) s"
set +e
.venv/bin/python -m pytest -n "${TEST_WORKERS:-2}" "$@"
rc=$?
set -e
if [ "$rc" = 5 ]; then echo "no tests collected" >&2; exit 1; fi
exit "$rc"
