"""Camera streams as mp4 (H.264 through the ffmpeg binary that imageio-ffmpeg ships): writing
rollouts, and reading a dataset episode's frames with a message that names what is wrong."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import imageio.v2 as imageio
import numpy as np
import numpy.typing as npt

from robolearn.data.format import IMAGES, DatasetError

if TYPE_CHECKING:
    from robolearn.data.reader import Dataset


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


def episode_video(ds: Dataset, episode: int, camera: str) -> npt.NDArray[np.uint8]:
    """One episode's frames of a camera (``wrist`` or ``observation.images.wrist``), (n, H, W, 3) uint8.

    A missing, damaged or short video raises a one-line :class:`DatasetError` naming the file, the
    episode and the camera.
    """
    key = camera if camera.startswith(IMAGES) else IMAGES + camera
    try:
        return ds.video_frames(episode, key)
    except DatasetError as exc:  # the reader names the file; say which episode and camera
        raise DatasetError(f"{exc} (episode {episode}, camera {key.removeprefix(IMAGES)!r})") from None
