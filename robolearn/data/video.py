"""Writing rollouts as mp4 (H.264 through the ffmpeg binary that imageio-ffmpeg ships)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import imageio.v2 as imageio
import numpy as np
import numpy.typing as npt


def write_mp4(path: Path, frames: Sequence[npt.NDArray[np.uint8]], fps: float) -> Path:
    """Encode RGB frames (H, W, 3) to an mp4 that common players open; returns the path."""
    if not frames:
        raise ValueError(f"no frames to write to {path}")
    path.parent.mkdir(parents=True, exist_ok=True)
    # yuv420p needs even sides; macro_block_size=1 keeps imageio from resizing behind our back.
    h, w = (s - s % 2 for s in frames[0].shape[:2])
    writer: Any
    with imageio.get_writer(
        path, fps=fps, codec="libx264", macro_block_size=1, pixelformat="yuv420p"
    ) as writer:
        for frame in frames:
            writer.append_data(np.ascontiguousarray(frame[:h, :w]))
    return path
