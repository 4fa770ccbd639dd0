#!/usr/bin/env bash
# Set up .venv at the repository root with robolearn installed (editable).
#   bash setup.sh         the package and its run-time dependencies
#   bash setup.sh --dev   plus the test, lint, type-check and benchmark tools
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

target="."
if [[ "${1:-}" == "--dev" ]]; then target=".[dev]"; fi

# Offscreen rendering (videos) uses MuJoCo through EGL on Mesa's CPU renderer; a SpaceMouse is
# read through hidapi's hidraw library; torch.compile (--sac.compile) builds its CPU kernels with g++.
debs=(libegl1 libegl-mesa0 libgl1-mesa-dri libhidapi-hidraw0 g++)
if command -v dpkg >/dev/null 2>&1; then
  missing=()
  for pkg in "${debs[@]}"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
  if ((${#missing[@]})); then
    sudo=""
    if [[ "$(id -u)" != 0 ]]; then sudo="sudo"; fi
    echo "setup: installing Debian packages: ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
else
  echo "setup: not a Debian system; install EGL and Mesa's DRI drivers yourself for offscreen video" >&2
fi

python=${PYTHON:-python3.11}
command -v "$python" >/dev/null 2>&1 || python=python3
if [[ ! -x .venv/bin/python ]]; then
  "$python" -m venv .venv
fi
# torch first, pinned: this CPU build comes from local disk; an unpinned torch would pull CUDA wheels.
.venv/bin/pip install -q --disable-pip-version-check torch==2.13.0
.venv/bin/pip install -q --disable-pip-version-check -e "${target}"
echo "setup: .venv ready (${target})"
