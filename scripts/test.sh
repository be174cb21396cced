#!/usr/bin/env bash
# The project's test command: set up, lint, type-check, run every test (slow ones included).
# Extra arguments go to pytest, e.g. scripts/test.sh -m "not slow" -x
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --dev --browser
export XLA_FLAGS="${XLA_FLAGS:-} --xla_force_host_platform_device_count=4"
export WANDB_MODE=offline WANDB_SILENT=true
.venv/bin/ruff check .
.venv/bin/mypy runrecord analysis harness cleanba baselines
set +e
.venv/bin/python -m pytest "$@"
rc=$?
set -e
if [ "$rc" = 5 ]; then echo "no tests collected" >&2; exit 1; fi
exit "$rc"
