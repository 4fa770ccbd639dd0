"""Camera images on ROS 2 (issue 13): out of a simulated robot, into a pixel policy.

A task's camera ``<name>`` is published as image_transport publishes a camera (sensor-data QoS, as
camera drivers do; frame id the camera's name, stamp the sample time), one topic per transport:

- ``raw``: ``sensor_msgs/Image`` on ``cameras/<name>/image_raw``, ``rgb8``;
- ``compressed``: ``sensor_msgs/CompressedImage`` on ``cameras/<name>/image_raw/compressed``, JPEG
  or PNG, its ``format`` written as image_transport's compressed plugin writes it
  (``"rgb8; jpeg compressed bgr8"``, ``"rgb8; png compressed bgr8"``: the source encoding, the codec,
  and the channel order OpenCV handed the encoder; the file itself holds ordinary RGB).

:class:`FrameReader` turns what a camera driver sends into the frame a policy was trained on:

- encodings: ``rgb8``, ``bgr8``, ``rgba8`` and ``bgra8`` raw (channels reordered, alpha dropped), JPEG
  and PNG compressed (bare ``"jpeg"``/``"png"`` formats too, as older drivers write). Grey images
  (``mono8``, a grey JPEG) and anything else are refused in one line naming the encoding and what is
  allowed: a policy trained on colour has never seen a grey frame.
- resolution: a frame of another size is resized to the policy's by area averaging (Pillow's
  ``BOX`` filter: each output pixel the mean of the input pixels it covers, as OpenCV's
  ``INTER_AREA`` when shrinking; enlarging repeats pixels). Shrinking this way is what rendering at
  the policy's resolution with supersampling would give; the policy's cameras were rendered at that
  resolution directly. A JPEG is first decoded at a reduced scale (libjpeg's DCT scaling, 1/2 to
  1/8) no smaller than the policy's size. Another aspect ratio is stretched, not cropped, and logged
  once: the field of view then differs from training's.
- a compressed frame that does not decode (truncated, corrupted), or that claims more than
  :data:`MAX_FRAME_PIXELS`, is a :class:`CorruptFrameError`, never an exception out of the callback.

Pillow is installed with robolearn's required imageio and matplotlib; no OpenCV is needed.
"""

from __future__ import annotations

import io
import logging
from typing import Any

import numpy as np
import numpy.typing as npt
from PIL import Image, UnidentifiedImageError

from robolearn.hardware.ros._rclpy import msg
from robolearn.hardware.ros.messages import MessageError, set_stamp, stamp_seconds
from robolearn.policy.meta import CameraSpec

log = logging.getLogger(__name__)

ENCODING = "rgb8"
"""sensor_msgs/Image's name for (H, W, 3) uint8 RGB: what a simulated camera publishes and a pixel
policy takes."""
RAW_ENCODINGS = {
    "rgb8": (3, [0, 1, 2]),
    "bgr8": (3, [2, 1, 0]),
    "rgba8": (4, [0, 1, 2]),
    "bgra8": (4, [2, 1, 0]),
}
"""Raw encodings converted to ``rgb8``: channels per pixel, and which of them are red, green, blue."""
TRANSPORTS = ("raw", "compressed")
"""image_transport's names of the transports a camera is published and read on."""
COMPRESSED_FORMATS = ("jpeg", "png")
"""Codecs of the ``compressed`` transport (image_transport's compressed plugin writes these two)."""
CODEC_NAMES = {"jpeg": "JPEG", "jpg": "JPEG", "png": "PNG"}
"""A format string's codec word to Pillow's format name."""
MAX_FRAME_PIXELS = 4096 * 4096
"""Largest frame a compressed message may claim (16.8 megapixels, beyond any robot camera): a few
bytes of PNG header must not make the node allocate gigabytes."""
MAX_LOGGED_SIZES = 16
"""Input sizes a :class:`FrameReader` logs its resizing of (once each); a sender cycling through
sizes gets no more lines."""
ALLOWED = "raw rgb8, bgr8, rgba8 or bgra8, or compressed jpeg or png in colour"
"""What :class:`FrameReader` takes, for its refusals."""


class CorruptFrameError(MessageError):
    """A compressed frame whose bytes do not decode; the message names the camera and the codec."""


def camera_topic(camera: str, transport: str = "raw") -> str:
    """The topic (relative name) a camera's images are published on with ``transport``."""
    base = f"cameras/{camera}/image_raw"
    return base if transport == "raw" else f"{base}/{transport}"


def message_type(transport: str) -> Any:
    """The message class of a transport: ``sensor_msgs/Image`` or ``sensor_msgs/CompressedImage``."""
    return msg("sensor_msgs", "Image" if transport == "raw" else "CompressedImage")


def image_msg(frame: npt.NDArray[np.uint8], t: float, camera: str, encoding: str = ENCODING) -> Any:
    """An (H, W, 3) uint8 RGB frame as ``sensor_msgs/Image`` in ``encoding`` (one of
    :data:`RAW_ENCODINGS`, alpha 255), stamped ``t`` (s since the epoch)."""
    channels, order = RAW_ENCODINGS[encoding]
    h, w = int(frame.shape[0]), int(frame.shape[1])
    out = np.full((h, w, channels), 255, np.uint8)
    out[..., order] = frame
    m = msg("sensor_msgs", "Image")()
    set_stamp(m.header.stamp, t)
    m.header.frame_id = camera
    m.height, m.width = h, w
    m.encoding = encoding
    m.is_bigendian = 0
    m.step = channels * w
    m.data = out.tobytes()
    return m


def compress(
    frame: npt.NDArray[np.uint8], codec: str = "jpeg", jpeg_quality: int = 95, png_level: int = 3
) -> bytes:
    """An (H, W, 3) uint8 RGB frame as JPEG or PNG file bytes (image_transport's default quality 95
    and PNG level 3)."""
    buf = io.BytesIO()
    image = Image.fromarray(np.ascontiguousarray(frame, dtype=np.uint8), "RGB")
    if codec == "jpeg":
        image.save(buf, "JPEG", quality=jpeg_quality)
    else:
        image.save(buf, "PNG", compress_level=png_level)
    return buf.getvalue()


def compressed_format(codec: str) -> str:
    """image_transport's ``format`` of an ``rgb8`` image compressed with ``codec``."""
    return f"{ENCODING}; {codec} compressed bgr8"


def compressed_image_msg(
    frame: npt.NDArray[np.uint8],
    t: float,
    camera: str,
    codec: str = "jpeg",
    jpeg_quality: int = 95,
    png_level: int = 3,
) -> Any:
    """An (H, W, 3) uint8 RGB frame as ``sensor_msgs/CompressedImage``, as image_transport's
    compressed plugin publishes an ``rgb8`` image, stamped ``t``."""
    m = msg("sensor_msgs", "CompressedImage")()
    set_stamp(m.header.stamp, t)
    m.header.frame_id = camera
    m.format = compressed_format(codec)
    m.data = compress(frame, codec, jpeg_quality, png_level)
    return m


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class FrameReader:
    """One camera's messages (of ``transport``) as the (H, W, 3) uint8 RGB frames ``spec`` describes.

    Calling it returns the frame and its stamp (s), or raises :class:`MessageError` (or its
    :class:`CorruptFrameError`) in one line naming the camera. It remembers the sizes it has resized
    from, to log each once.
    """

    def __init__(self, spec: CameraSpec, transport: str = "raw") -> None:
        self.spec = spec
        self.transport = transport
        self.where = f"camera {spec.camera}"
        self._resized: set[tuple[int, int]] = set()

    def __call__(self, m: Any) -> tuple[npt.NDArray[np.uint8], float]:
        frame = self._raw(m) if self.transport == "raw" else self._decompress(m)
        return frame, stamp_seconds(m.header.stamp)

    # -- raw -----------------------------------------------------------------------------------
    def _raw(self, m: Any) -> npt.NDArray[np.uint8]:
        if m.encoding not in RAW_ENCODINGS:
            raise MessageError(f"{self.where}: encoding {m.encoding!r}; allowed: {ALLOWED}")
        channels, order = RAW_ENCODINGS[m.encoding]
        h, w, row = int(m.height), int(m.width), channels * int(m.width)
        # Rows may be padded (step > width * channels), as sensor_msgs/Image allows.
        if h < 1 or w < 1 or m.step < row or len(m.data) != m.step * h:
            raise MessageError(
                f"{self.where}: {len(m.data)} bytes in rows of {m.step} for a {w}x{h} {m.encoding} image, "
                f"which needs rows of at least {row} bytes and height x step bytes in all "
                "(a truncated or corrupted frame)"
            )
        data = np.frombuffer(m.data, dtype=np.uint8).reshape(h, m.step)[:, :row].reshape(h, w, channels)
        frame = data if m.encoding == ENCODING else data[..., order]
        return self._fit(np.ascontiguousarray(frame))

    # -- compressed ------------------------------------------------------------------------------
    def _codec(self, fmt: str) -> str:
        """Pillow's format name from image_transport's ``format`` (``"rgb8; jpeg compressed bgr8"``,
        or a bare ``"jpeg"``); grey or other formats refused."""
        source, _, rest = fmt.rpartition(";")
        words = rest.split()
        codec = CODEC_NAMES.get(words[0].lower()) if words else None
        if codec is None or source.strip().lower().startswith("mono"):
            raise MessageError(f"{self.where}: format {fmt!r}; allowed: {ALLOWED}")
        return codec

    def _decompress(self, m: Any) -> npt.NDArray[np.uint8]:
        codec = self._codec(m.format)
        spec = self.spec
        try:
            image: Image.Image = Image.open(io.BytesIO(bytes(m.data)), formats=[codec])
            w, h = image.size
            if w * h > MAX_FRAME_PIXELS:
                raise CorruptFrameError(f"{self.where}: a {w}x{h} frame claimed, more than any camera sends")
            if codec == "JPEG":  # decode at the smallest DCT scale still at least the policy's size
                image.draft("RGB", (spec.width, spec.height))
            image.load()
        except CorruptFrameError:
            raise
        except Exception as exc:  # Pillow raises OSError, SyntaxError, ValueError... on bad bytes
            why = f"not a {codec.lower()} file" if isinstance(exc, UnidentifiedImageError) else _one_line(exc)
            raise CorruptFrameError(
                f"{self.where}: a {codec.lower()} frame of {len(m.data)} bytes that does not decode "
                f"(truncated or corrupted: {why})"
            ) from None
        if image.mode in ("L", "LA", "I", "I;16", "1"):
            raise MessageError(
                f"{self.where}: a grey {codec.lower()} frame ({image.mode}); allowed: {ALLOWED}"
            )
        if image.mode != "RGB":  # RGBA, palette or CMYK: Pillow converts them to RGB
            image = image.convert("RGB")
        if image.size != (spec.width, spec.height):
            image = self._resize(image)
        return np.asarray(image, dtype=np.uint8)

    # -- resolution ------------------------------------------------------------------------------
    def _fit(self, frame: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
        if frame.shape[:2] == (self.spec.height, self.spec.width):
            return frame
        return np.asarray(self._resize(Image.fromarray(frame, "RGB")), dtype=np.uint8)

    def _resize(self, image: Image.Image) -> Image.Image:
        spec = self.spec
        if image.size not in self._resized and len(self._resized) < MAX_LOGGED_SIZES:
            self._resized.add(image.size)
            w, h = image.size
            stretched = abs(w * spec.height - h * spec.width) > max(w, h)  # more than a pixel's worth
            note = " (another aspect ratio: stretched, the field of view differs from training's)"
            (log.warning if stretched else log.info)(
                "%s: resizing %dx%d frames to the policy's %dx%d by area averaging%s",
                self.where, w, h, spec.width, spec.height, note if stretched else "",
            )  # fmt: skip
        return image.resize((spec.width, spec.height), Image.Resampling.BOX)


def read_image(m: Any, spec: CameraSpec, transport: str = "raw") -> tuple[npt.NDArray[np.uint8], float]:
    """The frame ``spec`` describes, from one message, and its stamp (s): a one-off
    :class:`FrameReader` (which see)."""
    return FrameReader(spec, transport)(m)
