#!/usr/bin/env bash
# Type-check the package as it is installed (scripts/package-tree.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$PWD"
cd "$(bash scripts/package-tree.sh typecheck)"
"$root/.venv/bin/mypy" --config-file "$root/pyproject.toml" robolearn
