"""Camera rendering throughput and memory per backend and resolution (``robolearn bench sim``'s
``render`` part, issue 13).

Each row renders ``panda_pick_cube_pixels``' scene camera at one resolution for every world of one
backend (one world on ``mujoco``, up to :data:`MAX_RENDER_WORLDS` on the batched backend and on
PyBullet), as an environment's ``observe`` does, for ``seconds`` after one warm-up frame. Frames per
second count images (worlds x calls) per wall-clock second; memory is the growth of the process's
resident set from before the backend was built to after the first frames (renderer buffers and
contexts included), and the bytes one uint8 frame takes in a replay. The resident set rarely
shrinks: a backend's first row also pays for loading its GL libraries, and later rows reuse what
earlier ones freed, so memory is an upper bound for the first row and a lower one after it.

Where a CUDA GPU is visible, ``mujoco_warp`` rows follow (issue 14): every world's cameras traced in
one launch on the device, ``num_envs`` worlds (not capped: that is what a device is for), memory as
the growth of the device's used memory.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from robolearn.envs.task_env import TaskEnv
from robolearn.tasks import make_task_cfg
from robolearn.tasks.cameras import render_cameras

log = logging.getLogger(__name__)

RENDER_TASK = "panda_pick_cube_pixels"
RENDER_BACKENDS = ("mujoco", "mujoco_batch", "pybullet")
RESOLUTIONS = ((64, 64), (128, 128), (320, 240))
"""(width, height) of the rows: DrQ-sized, SERL-sized, and a video frame."""
MAX_RENDER_WORLDS = 8
"""Worlds of the batched rows: rendering is per world on the host, so more only take longer."""


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _cuda_used_bytes() -> int | None:
    """Memory in use on the CUDA device, None without one (or without the gpu extra)."""
    try:
        import torch
        import warp as wp
    except ImportError:
        return None
    if not (torch.cuda.is_available() and wp.is_cuda_available()):
        return None
    free, total = torch.cuda.mem_get_info()
    return int(total - free)


def _synchronize(backend: str) -> None:
    if backend == "mujoco_warp":
        import torch

        torch.cuda.synchronize()


def render_rows(
    num_envs: int, seconds: float, seed: int, say: Callable[[str], None] | None = None
) -> list[dict[str, Any]]:
    """One row per backend and resolution: frames/s, resident memory growth (MiB), bytes per frame."""
    say = say if say is not None else log.info
    base = make_task_cfg(RENDER_TASK)
    rows: list[dict[str, Any]] = []
    on_device = _cuda_used_bytes() is not None
    for backend in (*RENDER_BACKENDS, "mujoco_warp") if on_device else RENDER_BACKENDS:
        n = 1 if backend == "mujoco" else max(1, min(num_envs, MAX_RENDER_WORLDS))
        memory: Callable[[], int | None] = _rss_bytes
        if backend == "mujoco_warp":
            n, memory = max(1, num_envs), _cuda_used_bytes
        for width, height in RESOLUTIONS:
            camera = dataclasses.replace(base.cameras["scene"], width=width, height=height)
            cfg = dataclasses.replace(base, cameras={"scene": camera})
            label = f"render {backend} {width}x{height}"
            before = memory() or 0
            env = TaskEnv(cfg, backend, n, seed=seed, render_mode=None)
            try:
                env.reset(seed=seed)
                render_cameras(env)  # warm-up: contexts and buffers are made on the first frame
                _synchronize(backend)
                grown = (memory() or 0) - before
                frames, start = 0, time.perf_counter()
                while time.perf_counter() - start < seconds:
                    render_cameras(env)
                    frames += n
                _synchronize(backend)
                fps = frames / (time.perf_counter() - start)
            finally:
                env.close()
            say(f"{label}: {fps:.1f} frames/s over {n} worlds")
            where = "on the device" if backend == "mujoco_warp" else "resident"
            rows.append(
                {
                    # The columns of bench sim's table: a frame per world per call is a render "step".
                    "part": "render",
                    "contender": f"{backend} {width}x{height}",
                    "num_envs": n,
                    "steps_per_s": fps,
                    "note": f"frames/s; +{grown / 2**20:.0f} MiB {where}, {width * height * 3} B per frame",
                    "backend": backend,
                    "resolution": f"{width}x{height}",
                    "frames_per_s": fps,
                    "memory_mb": grown / 2**20,
                    "frame_bytes": width * height * 3,
                }
            )
    return rows
