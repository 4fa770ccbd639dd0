"""Camera images on ROS 2 (issue 13): ``sensor_msgs/Image`` out of a simulated robot, into a policy.

A task's camera ``<name>`` is published on ``cameras/<name>/image_raw`` (sensor-data QoS, as
camera drivers publish), ``rgb8`` encoding, its frame id the camera's name and its stamp the sample
time. :func:`read_image` checks a received image against what the policy was trained on (encoding,
resolution, row length and byte count) and refuses anything else in one line naming the camera;
policy_node does not resize: a camera driver set to the policy's resolution, or a policy trained
at the camera's, avoids an interpolation the policy never saw.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from robolearn.hardware.ros._rclpy import msg
from robolearn.hardware.ros.messages import MessageError, set_stamp, stamp_seconds
from robolearn.policy.meta import CameraSpec

ENCODING = "rgb8"
"""sensor_msgs/Image's name for (H, W, 3) uint8 RGB, the only encoding pixel policies take."""


def camera_topic(camera: str) -> str:
    """The topic (relative name) a camera's images are published on."""
    return f"cameras/{camera}/image_raw"


def image_msg(frame: npt.NDArray[np.uint8], t: float, camera: str) -> Any:
    """An (H, W, 3) uint8 RGB frame as ``sensor_msgs/Image``, stamped ``t`` (s since the epoch)."""
    m = msg("sensor_msgs", "Image")()
    set_stamp(m.header.stamp, t)
    m.header.frame_id = camera
    m.height, m.width = int(frame.shape[0]), int(frame.shape[1])
    m.encoding = ENCODING
    m.is_bigendian = 0
    m.step = 3 * m.width
    m.data = np.ascontiguousarray(frame, dtype=np.uint8).tobytes()
    return m


def read_image(m: Any, spec: CameraSpec) -> tuple[npt.NDArray[np.uint8], float]:
    """The (H, W, 3) frame of an ``Image`` and its stamp (s), after checking it is what the policy
    takes; raises :class:`~robolearn.hardware.ros.messages.MessageError` naming the camera otherwise."""
    where = f"camera {spec.camera}"
    if m.encoding != ENCODING:
        raise MessageError(f"{where}: encoding {m.encoding!r}; the policy takes {ENCODING} (8-bit RGB)")
    if (m.height, m.width) != (spec.height, spec.width):
        raise MessageError(
            f"{where}: a {m.width}x{m.height} image; the policy takes {spec.width}x{spec.height} "
            "(set the camera to that resolution; policy_node does not resize)"
        )
    row = 3 * spec.width
    if m.step != row or len(m.data) != row * spec.height:
        raise MessageError(
            f"{where}: {len(m.data)} bytes in rows of {m.step}; a {spec.width}x{spec.height} {ENCODING} "
            f"image has {row * spec.height} in rows of {row} (a truncated or corrupted frame)"
        )
    frame = np.frombuffer(m.data, dtype=np.uint8).reshape(spec.height, spec.width, 3)
    return frame, stamp_seconds(m.header.stamp)
