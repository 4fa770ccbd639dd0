#!/usr/bin/env bash
# GPU figures on a lent device machine: `bench learn` parts with --device cuda.
#
#   bash scripts/device.sh fetch       # here: wheels into .dev3/, EGL's glvnd debs into .gl/
#   (device tool) run  command: bash scripts/device.sh pixels 490 [bench learn options]
#                      or:      bash scripts/device.sh throughput 420 [bench learn options]
#                      carry:   [".dev3", ".gl"]
#
# The device image has torch, numpy, pyarrow, safetensors, yaml, imageio, matplotlib, but not MuJoCo,
# Gymnasium (and the glfw its MuJoCo envs import), tyro, Stable-Baselines3 or PyOpenGL (MuJoCo's EGL
# binding): those travel as wheels (Python 3.12, x86-64), pybullet_data's arm and car files and a
# stand-in imageio_ffmpeg (both imported at start-up). `pixels` (issue 13, docs/pixels.md: pick-cube from pixels with DrQ) writes
# check.log, pixels.log and summary.json to $OUT; one run took about 5 minutes on an H200, 6 on an
# H100 (380 s of wall time with set-up). `throughput` (issue 11, docs/learner.md: SAC updates/s and
# a Walker2d run against SB3's, both on CUDA) writes learn.log and summary.json. Python runs with
# -P: the checkout's robolearn/ lacks the sim, tasks and hardware folders, so the package tree must
# come first on the path, not the cwd.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

fetch() {
    grep -qx '/.dev3/' .git/info/exclude || echo /.dev3/ >>.git/info/exclude
    grep -qx '/.gl/' .git/info/exclude || echo /.gl/ >>.git/info/exclude
    mkdir -p .dev3 .gl /tmp/amd64/partial
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux2014_x86_64 \
        -d .dev3 mujoco==4.0.0 mujoco-core==4.0.0 gymnasium farama-notifications tyro docstring-parser \
        typeguard array-api-compat pyopengl stable-baselines3 cloudpickle pandas pytz tzdata glfw
    # pybullet_data: the robot files the tasks name (the whole package is 100 MB); imageio_ffmpeg: a
    # stand-in that refuses to write video (no ffmpeg there; the bench writes none).
    local site shim
    site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    shim=$(mktemp -d)
    mkdir -p "$shim/pybullet_data" "$shim/imageio_ffmpeg"
    cp -r "$site/pybullet_data/__init__.py" "$site/pybullet_data/franka_panda" "$site/pybullet_data/racecar" \
        "$shim/pybullet_data/"
    cat >"$shim/imageio_ffmpeg/__init__.py" <<'PY'
"""Device-machine stand-in (no ffmpeg carried there): benchmarks that write no video import it only."""
def _missing(*a, **k):
    raise RuntimeError("imageio_ffmpeg is not installed on this device machine")
read_frames = count_frames_and_secs = write_frames = get_ffmpeg_exe = _missing
PY
    tar -C "$shim" -cJf .dev3/shim.tar.xz pybullet_data imageio_ffmpeg
    rm -rf "$shim"
    local o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
    # shellcheck disable=SC2086
    apt-get $o update >/dev/null
    # shellcheck disable=SC2086
    (cd .gl && apt-get $o download libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
    du -sh .dev3 .gl
}

setup() {
    export PYTHONUNBUFFERED=1 MUJOCO_GL=egl
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .dev3/*.whl
    tar -C /tmp/site -xJf .dev3/shim.tar.xz
    PYTHONPATH=/tmp/site:$(bash scripts/package-tree.sh device)
    export PYTHONPATH
    nvidia-smi -L
}

# `robolearn bench learn` with its INFO lines shown (a cut-short run still says how far it got), in
# what is left of the mode's SECONDS; the log goes to $OUT/$1.log.
bench_learn() {
    local log=$1
    shift
    timeout $((LIMIT - ($(date +%s) - T0))) python3 -P -c '
import logging, sys
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
from robolearn.cli import main
main(["bench", "learn", "--device", "cuda", "--out", "/tmp/bl", *sys.argv[1:]])
' "$@" 2>&1 | tee "$OUT/$log.log"
    cp /tmp/bl/*/summary.json "$OUT/" 2>/dev/null || true
}

pixels() {
    # One render and the pixel task's step rate first: a broken EGL shows here, not after set-up.
    python3 -P - <<'EOF' 2>&1 | tee "$OUT/check.log"
import time

import numpy as np

from robolearn.envs.task_env import TaskEnv

env = TaskEnv("panda_pick_cube_pixels", "mujoco_batch", 4, seed=0, render_mode=None)
env.reset(seed=0)
action = np.zeros((4, env.action_space.shape[-1]), np.float32)
started = time.perf_counter()
for _ in range(200):
    obs, *_ = env.step(action)
seconds = time.perf_counter() - started
print(f"pixel task: {800 / seconds:.0f} world-steps/s, mean wrist pixel {obs['wrist_rgb'].mean():.1f}")
EOF
    bench_learn pixels --parts pixels --stop-at-90 "$@"
}

throughput() {
    bench_learn learn --parts throughput "$@"
}

case "${1:-}" in
fetch) fetch ;;
pixels | throughput)
    mode=$1 LIMIT=${2:-480} T0=$(date +%s)
    shift 2 || shift
    setup
    "$mode" "$@"
    ;;
*) echo "usage: bash scripts/device.sh fetch | pixels|throughput [SECONDS] [bench learn options]" >&2 && exit 2 ;;
esac
