#!/usr/bin/env bash
# Type-check the package as it is installed: robolearn.sim, .tasks and .hardware live in top-level
# folders, so mypy reads a tree of links that puts them where the import system finds them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
tree=.cache/typecheck
rm -rf "$tree"
mkdir -p "$tree"
cp -rs "$PWD/robolearn" "$tree/robolearn"
for sub in sim tasks hardware; do cp -rs "$PWD/$sub" "$tree/robolearn/$sub"; done
find "$tree" -name __pycache__ -prune -exec rm -rf {} +
cd "$tree"
../../.venv/bin/mypy --config-file ../../pyproject.toml robolearn
