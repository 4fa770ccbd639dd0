#!/usr/bin/env bash
# Build .cache/<name>: a tree of links that puts robolearn.sim, .tasks and .hardware (top-level
# folders here) where the import system finds them once installed. Tools that read the package
# from files (mypy, import-linter) run inside it. Prints the tree's path.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
tree=".cache/$1"
rm -rf "$tree"
mkdir -p "$tree"
cp -rs "$PWD/robolearn" "$tree/robolearn"
for sub in sim tasks hardware; do cp -rs "$PWD/$sub" "$tree/robolearn/$sub"; done
find "$tree" -name __pycache__ -prune -exec rm -rf {} +
echo "$PWD/$tree"
