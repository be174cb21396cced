#!/usr/bin/env bash
# The one device call (docs/performance.md). Copied into the kit as .device/run.sh by
# benchmarks/device_kit.py; run from the repo root on the GPU machine:
#
#   bash .device/run.sh --out $OUT [--tiny] [--budget-s N] [--repo DIR] [--python PY]
#   bash .device/run.sh --campaign --out $OUT [...] [-- CAMPAIGN LEASE FLAGS]
# (flags after -- go to the campaign's lease, or without --campaign to gpu_suite.py)
#
# Installs the kit's wheels with no network into a temporary folder (never into the
# image's environment), puts it and the checkout on PYTHONPATH, prints the environment,
# then runs benchmarks/gpu_suite.py once with the budget left (480 s in all by default;
# 1500 s with --tiny). Everything printed also goes to DIR/run.log; the suite writes
# DIR/results.md, DIR/results.json and DIR/steps.log after every step. With --campaign it
# runs one lease of the GPU campaign instead (benchmarks/campaign.py lease), which writes DIR/lease.json, records.tar.gz, lease.md and steps.log.
set -u
KIT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="" TINY="" BUDGET="" REPO="$PWD" PY="${PYTHON:-python3}" CAMPAIGN="" EXTRA=()
usage() { echo "usage: run.sh [--campaign] --out DIR [--tiny] [--budget-s N] [--repo DIR] [--python PY] [-- LEASE FLAGS]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="${2:-}"; shift 2 || usage ;;
    --tiny) TINY=1; shift ;;
    --budget-s) BUDGET="${2:-}"; shift 2 || usage ;;
    --repo) REPO="${2:-}"; shift 2 || usage ;;
    --python) PY="${2:-}"; shift 2 || usage ;;
    --campaign) CAMPAIGN=1; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "run.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
[ -n "$OUT" ] || { echo "run.sh: --out DIR is required" >&2; usage; }
[ -z "$BUDGET" ] && { [ -n "$TINY" ] && BUDGET=1500 || BUDGET=480; }
case "$BUDGET" in ''|*[!0-9]*) echo "run.sh: --budget-s must be a whole number of seconds, got '$BUDGET'" >&2; exit 2 ;; esac
[ -f "$REPO/benchmarks/gpu_suite.py" ] || { echo "run.sh: $REPO is not a cleanba-bench checkout (no benchmarks/gpu_suite.py); run from the repo root or pass --repo" >&2; exit 2; }
ls "$KIT"/wheels/*.whl >/dev/null 2>&1 || { echo "run.sh: no wheels in $KIT/wheels (build the kit with benchmarks/device_kit.py)" >&2; exit 2; }
START=$(date +%s)
mkdir -p "$OUT" || exit 2
OUT="$(cd "$OUT" && pwd)"
REPO="$(cd "$REPO" && pwd)"
exec > >(tee -a "$OUT/run.log") 2>&1
TEE_PID=$!

TMP="$(mktemp -d "${TMPDIR:-/tmp}/cleanba-kit.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
SITE="$TMP/site"
echo "[run.sh] $(date -u +%FT%TZ) kit $KIT -> $SITE (no network)"
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
if ! "$PY" -m pip install --quiet --no-index --no-deps --no-compile --target "$SITE" "$KIT"/wheels/*.whl; then
  echo "[run.sh] pip install failed; unpacking the wheels directly"
  "$PY" -c 'import sys, zipfile
for w in sys.argv[2:]: zipfile.ZipFile(w).extractall(sys.argv[1])' "$SITE" "$KIT"/wheels/*.whl || exit 1
fi
export PYTHONPATH="$SITE:$REPO${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONNOUSERSITE=1 WANDB_MODE=disabled WANDB_SILENT=true
echo "[run.sh] installed in $(( $(date +%s) - START )) s; PYTHONPATH=$PYTHONPATH"

echo "[run.sh] environment:"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
"$PY" - <<'EOF'
import os, platform, sys
import envpool, jax, jaxlib, numpy
print(f"  python {platform.python_version()} ({sys.executable}); jax {jax.__version__}, "
      f"jaxlib {jaxlib.__version__}, numpy {numpy.__version__}, envpool {envpool.__version__} "
      f"({os.path.dirname(envpool.__file__)})")
try:
    import jax_cuda13_plugin as plugin  # the image's CUDA plugin, if any
    print(f"  jax_cuda13_plugin {getattr(plugin, '__version__', '?')}")
except ImportError:
    pass
print(f"  devices {jax.devices()}; CPU {platform.processor() or platform.machine()}, "
      f"{os.cpu_count()} cores, {len(os.sched_getaffinity(0))} usable")
EOF
[ -f "$KIT/manifest.json" ] && "$PY" -c 'import json, sys; m = json.load(open(sys.argv[1]))
print("  kit:", ", ".join("%s %s" % (w["name"], w["version"]) for w in m["wheels"]), "| reference:", m["reference"] or "none")' "$KIT/manifest.json"

ARGS=(--out "$OUT" --budget-s $(( BUDGET - ($(date +%s) - START) )))
[ -n "$TINY" ] && ARGS+=(--tiny)
[ -f "$KIT/reference/cleanba/cleanba_ppo.py" ] && ARGS+=(--reference-path "$KIT/reference")
if [ -n "$CAMPAIGN" ]; then
  echo "[run.sh] $PY benchmarks/campaign.py lease ${ARGS[*]} ${EXTRA[*]}"
  "$PY" "$REPO/benchmarks/campaign.py" lease "${ARGS[@]}" "${EXTRA[@]}"
else
  echo "[run.sh] $PY benchmarks/gpu_suite.py ${ARGS[*]} ${EXTRA[*]}"
  "$PY" "$REPO/benchmarks/gpu_suite.py" "${ARGS[@]}" "${EXTRA[@]}"
fi
rc=$?
echo "[run.sh] done in $(( $(date +%s) - START )) s, exit $rc; results in $OUT"
exec >&- 2>&-
wait "$TEE_PID" 2>/dev/null  # run.log is complete before the call returns
exit $rc
