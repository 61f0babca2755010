#!/usr/bin/env bash
# Set up a test environment from scratch (or reuse it) and run the whole suite.
#   bash tests/run.sh                 # everything
#   bash tests/run.sh tests/core -x   # extra args go to pytest (-n 0: one process)
# Needs only Python 3.11 and pip. Creates .venv (the project, all extras, test tools, pinned
# by constraints.txt) and .venv-mlmd (ml-metadata, whose protobuf<5 pin cannot share .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3

# A headless browser for the HTML report tests (tests/core/test_report_browser.py) and
# Debian's Prometheus and Pushgateway for the metrics tests (tests/plugins/prometheus). CI
# runs as root on a fresh Debian image; where apt cannot install them (no root, no sudo),
# those tests skip and say why.
missing=()
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 \
    && ! command -v google-chrome >/dev/null 2>&1; then
  missing+=(chromium fonts-dejavu-core)
fi
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
command -v prometheus-pushgateway >/dev/null 2>&1 || missing+=(prometheus-pushgateway)
if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo -n"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
      "${missing[@]}"; } >/tmp/interlock-apt.log 2>&1 \
    || echo "tests/run.sh: ${missing[*]} not installed (see /tmp/interlock-apt.log); the tests that need them will skip" >&2
fi

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -c constraints.txt -e '.[test]'

# ML Metadata lives in its own interpreter (see docs/lineage.md).
if ! .venv-mlmd/bin/python -c 'import ml_metadata' >/dev/null 2>&1; then
  .venv/bin/interlock lineage --setup --env .venv-mlmd
fi
export INTERLOCK_MLMD_PYTHON="$PWD/.venv-mlmd/bin/python"
export PATH="$PWD/.venv/bin:$PATH"  # as if activated: console scripts (interlock, pyflyte-execute)

# Tests never touch the real home directory: flytekit, kfp, mlflow and airflow caches go to a
# throwaway HOME as a second line of defence behind the tests' own tmp_path isolation.
export HOME="$(mktemp -d)"
# Two workers (the suite is parallel-safe: every test keeps its state in its own tmp dirs)
# unless the arguments choose: -n N, --numprocesses, or -p no:xdist.
workers=(-n 2)
for arg in "$@"; do
  case "$arg" in -n|-n[0-9]*|--numprocesses*|no:xdist) workers=() ;; esac
done
exec .venv/bin/python -m pytest "${workers[@]}" "$@"
