#!/usr/bin/env bash
# Create .venv and install the project with training (`.[train]`; idempotent).
# Usage: scripts/setup.sh [--dev] [--browser] [--tex]
#   --dev      test tools (pytest, ruff, mypy, rliable as a test oracle)
#   --browser  Debian chromium + chromium-driver for the HTML report test (needs root)
#   --tex      Debian TeX Live (pdflatex, booktabs) for the test that compiles the LaTeX
#              tables (needs root; about 45 s and 200 MB)
# PYTHON: the interpreter of a new venv (default python3); VENV: its folder (default .venv;
# the Python 3.12 CI leg uses .venv312, scripts/test_py312.sh). Packages come through uv
# with pip's settings where it works (scripts/uv_install.py), else through pip;
# SETUP_PIP=1: pip only.
set -euo pipefail
cd "$(dirname "$0")/.."
dev=0; browser=0; tex=0
for a in "$@"; do
  case "$a" in
    --dev) dev=1 ;;
    --browser) browser=1 ;;
    --tex) tex=1 ;;
    *) echo "setup.sh: unknown option $a (valid: --dev --browser --tex)" >&2; exit 2 ;;
  esac
done
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup.sh: creating $VENV"
  "$PY" -m venv "$VENV"
fi
# install ARGS: `pip install ARGS` into $VENV, by uv with pip's settings where it works
# (scripts/uv_install.py: several times faster), else by pip. SETUP_PIP=1: pip only.
install() {
  if [ "${SETUP_PIP:-0}" != 1 ] && "$VENV/bin/python" scripts/uv_install.py "$VENV/bin/python" "$@"; then
    return 0
  fi
  [ "${SETUP_PIP:-0}" = 1 ] || echo "setup.sh: uv did not install; pip instead" >&2
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q "$@" 2>&1 | grep -vE "^WARNING: Location|ignored: it is neither" || true
}
hash=$(sha256sum pyproject.toml | cut -c1-16)
stamp="$VENV/.installed-$hash-$dev"
# A --dev install (stamp -1) includes the plain one: no reinstall for benchmark.sh.
if [ ! -f "$stamp" ] && { [ "$dev" = 1 ] || [ ! -f "$VENV/.installed-$hash-1" ]; }; then
  # train: JAX, ale-py, EnvPool (Linux) and the harness's packages (the core install is the analysis only)
  if [ "$dev" = 1 ]; then extras="[train,dev]"; else extras="[train]"; fi
  echo "setup.sh: installing the project${extras} into $VENV (about a minute on a first run)"
  install -e ".$extras"
  # EnvPool on Linux only (the train extra's marker); ale-py everywhere
  "$VENV/bin/python" -c "import sys, jax, ale_py, flax, optax, tyro; sys.platform == 'linux' and __import__('envpool')" || { echo "setup.sh: install failed" >&2; exit 1; }
  touch "$stamp"
fi
if [ "$browser" = 1 ] && ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null) \
      || echo "setup.sh: could not install chromium; the HTML report browser test will be skipped" >&2
  else
    echo "setup.sh: not root; install chromium and chromium-driver for the report browser test" >&2
  fi
fi
if [ "$tex" = 1 ] && ! command -v pdflatex >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
       texlive-latex-base texlive-latex-recommended >/dev/null) \
      || echo "setup.sh: could not install TeX Live; the LaTeX compile test will be skipped" >&2
  else
    echo "setup.sh: not root; install texlive-latex-recommended for the LaTeX compile test" >&2
  fi
fi
