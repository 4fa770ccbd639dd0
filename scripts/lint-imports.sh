#!/usr/bin/env bash
# import-linter's contracts (pyproject.toml [tool.importlinter]) on the package as it is installed
# (scripts/package-tree.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$PWD"
cd "$(bash scripts/package-tree.sh importlint)"
PYTHONPATH="$PWD" "$root/.venv/bin/lint-imports" --no-cache "$root/pyproject.toml"
