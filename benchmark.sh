#!/usr/bin/env bash
# Run one of the paper's experiments as a sweep, then build its report.
#
#   ./benchmark.sh PRESET [--frames N] [--games G1,G2] [--seeds 1,2] [run options]
#
# Presets (harness/presets/*.toml): smoke (CPU, minutes), deterministic (CPU, minutes:
# --deterministic on 5 layouts, all bitwise identical), section3 (Fig. 2), base (1 GPU,
# four systems, 57 games), workstation (8 GPUs), scaling (learner devices 1..7, d1/d2),
# sync-vs-cleanba (Fig. 6). --frames/--games/--seeds scale any preset down. Other options
# go to `python -m harness run` (e.g. --backend slurm, --max-parallel 4, --max-attempts 3);
# `python -m harness run --help` lists them. Ends by printing where the report is and its
# verdict lines. Exit code: 0 all runs completed, 1 a run or a verdict over training time
# failed, 4 all runs completed and a verdict over training time is UNDECIDED (these seeds
# cannot decide it), 2 bad input.
set -euo pipefail
cd "$(dirname "$0")"

usage() {
  # The header comment: every line from line 2 up to the first line that is not a comment.
  awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"
  echo "presets: $(ls harness/presets | sed 's/\.toml$//' | tr '\n' ' ')"
}
if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then usage; exit 0; fi
preset=$1; shift
if [ ! -f "harness/presets/$preset.toml" ]; then
  echo "benchmark.sh: unknown preset '$preset'" >&2; usage >&2; exit 2
fi

# Options that select the sweep go to both `run` and `report`; the rest only to `run`.
select=(); run_only=()
while [ $# -gt 0 ]; do
  case "$1" in
    --frames|--games|--seeds|--name|--results-root|--accelerator)
      [ $# -ge 2 ] || { echo "benchmark.sh: $1 needs a value" >&2; exit 2; }
      select+=("$1" "$2"); shift 2 ;;
    --frames=*|--games=*|--seeds=*|--name=*|--results-root=*|--accelerator=*) select+=("$1"); shift ;;
    *) run_only+=("$1"); shift ;;
  esac
done

start=$(date +%s)
elapsed() { echo "$(( $(date +%s) - start )) s"; }
echo "== setup: scripts/setup.sh (.venv and packages; nothing to do when installed)"
if ! scripts/setup.sh; then
  echo "benchmark.sh: scripts/setup.sh failed" >&2; exit 2
fi
echo "setup: done after $(elapsed)"
# Lines reach a log or CI as they are printed, not when a buffer fills.
export WANDB_MODE="${WANDB_MODE:-offline}" WANDB_SILENT=true PYTHONUNBUFFERED=1
PY=.venv/bin/python

echo "== run: python -m harness run --preset $preset ${select[*]-} ${run_only[*]-}"
set +e
"$PY" -m harness run --preset "$preset" ${select[@]+"${select[@]}"} ${run_only[@]+"${run_only[@]}"}
run_rc=$?
set -e
if [ "$run_rc" = 2 ]; then exit 2; fi
if [ "$run_rc" = 130 ]; then echo "benchmark.sh: interrupted; run it again to carry on" >&2; exit 130; fi

echo
echo "== report (after $(elapsed))"
report_out=$(mktemp)
set +e
"$PY" -m harness report --preset "$preset" ${select[@]+"${select[@]}"} >"$report_out"
report_rc=$?
set -e
# Warnings first, then the summary; the page and each verdict are printed once, last.
grep -vE '^(report|verdict):' "$report_out" || true
echo
echo "== $preset: finished in $(elapsed) (setup, runs and report)"
grep -E '^(report|verdict):' "$report_out" || true
rm -f "$report_out"
if [ "$run_rc" = 4 ]; then  # harness run: every run completed, a verdict undecided
  echo "every run completed; a verdict over training time is UNDECIDED (see above): more seeds decide it"
  exit 4
fi
if [ "$run_rc" != 0 ]; then
  # status exits 0 unless a run failed: a failed verdict over training time is not one
  if "$PY" -m harness status --preset "$preset" ${select[@]+"${select[@]}"} >/dev/null 2>&1; then
    echo "no run failed; a verdict over training time failed (see above)"
  else
    echo "some runs did not complete (see above); \`python -m harness status --preset $preset\` lists them"
  fi
  exit "$run_rc"
fi
exit "$report_rc"
