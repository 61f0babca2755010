#!/usr/bin/env bash
# Static gates: ruff, mypy over core, the adapters and the plugins, and the import contracts of pyproject.toml's
# [tool.importlinter] (the layers of core; core never importing an adapter or a plugin; no
# adapter importing another). Run with the test venv: bash .ci/lint.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${VENV:-.venv}/bin
"$bin/ruff" check core adapters plugins src tests benchmarks reference_pipelines docs
"$bin/mypy" core adapters plugins
# grimp (import-linter's graph) finds a package's modules by walking its folder, and this
# repository maps interlock.core/adapters/plugins from three top-level folders: lay them out
# as one package in a scratch folder for it to read.
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir "$tree/interlock"
cp src/interlock/__init__.py "$tree/interlock/"
cp -r core adapters plugins "$tree/interlock/"
PYTHONPATH="$tree" "$bin/lint-imports" --no-logo --no-cache
