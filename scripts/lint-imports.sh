#!/usr/bin/env bash
# import-linter's contracts (pyproject.toml [tool.importlinter]) on the package as it is installed:
# robolearn.sim, .tasks and .hardware live in top-level folders, so the linter reads the same tree
# of links the type check builds (scripts/typecheck.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
tree=.cache/importlint
rm -rf "$tree"
mkdir -p "$tree"
cp -rs "$PWD/robolearn" "$tree/robolearn"
for sub in sim tasks hardware; do cp -rs "$PWD/$sub" "$tree/robolearn/$sub"; done
find "$tree" -name __pycache__ -prune -exec rm -rf {} +
cd "$tree"
PYTHONPATH="$PWD" ../../.venv/bin/lint-imports --no-cache ../../pyproject.toml
