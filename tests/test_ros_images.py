"""Camera images over ROS 2 (issue 13): raw and compressed, out of sim_robot_node, into policy_node.

The unit tests check what :class:`FrameReader` makes of a message (encodings, resizing, JPEG and
PNG, refusals); the DDS tests run the nodes as processes on a domain of their own and judge
commands by their stamps (the node's decision time), never by fixed sleeps.
"""

from __future__ import annotations

import contextlib
import io
import struct
import subprocess
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import pytest
import torch
from PIL import Image

pytest.importorskip("rclpy", reason="ROS 2 (rclpy) is not installed")

from ros_helpers import ArmCommandLog

from robolearn.bench.deploy import StandInRobot, camera_sized
from robolearn.hardware.ros._rclpy import RosParameterError, command_qos, msg, sensor_qos
from robolearn.hardware.ros.harness import (
    local_node,
    private_domain,
    start_node,
    stop_node,
    wait_for_matches,
    wait_until,
)
from robolearn.hardware.ros.images import (
    RAW_ENCODINGS,
    CorruptFrameError,
    FrameReader,
    camera_topic,
    compressed_image_msg,
    image_msg,
    read_image,
)
from robolearn.hardware.ros.messages import MessageError
from robolearn.hardware.ros.policy_node import PolicyNodeParams
from robolearn.hardware.ros.sim_robot_node import RobotReport, SimRobotParams
from robolearn.policy.encoders import ObservationEncoder
from robolearn.policy.meta import CameraSpec
from robolearn.policy.network import Actor
from robolearn.policy.pixel_export import export_pixel_policy
from robolearn.policy.pixel_network import PixelPolicy
from robolearn.tasks import make_task_cfg
from robolearn.tasks.worlds import TaskWorlds

pytestmark = [pytest.mark.ros, pytest.mark.filterwarnings("ignore::DeprecationWarning:lark")]

WRIST = CameraSpec("wrist_rgb", "wrist", 24, 32, "rgb8")
PIXEL_TASK = "panda_pick_cube_pixels"


def _frame(h: int = 24, w: int = 32, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def _smooth(h: int, w: int) -> np.ndarray:
    """A camera-like frame (smooth gradients): JPEG's loss on it is small."""
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([255 * x / w, 255 * y / h, 128 + 100 * np.sin(x / 7.0 + y / 11.0)], -1).astype(np.uint8)


# -- raw -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("encoding", list(RAW_ENCODINGS))
def test_each_colour_encoding_becomes_the_rgb_frame_it_carries(encoding: str) -> None:
    frame = _frame()
    m = image_msg(frame, 12.5, "wrist", encoding)
    assert (m.encoding, m.height, m.width, m.header.frame_id) == (encoding, 24, 32, "wrist")
    got, stamp = read_image(m, WRIST)
    assert got.dtype == np.uint8 and np.array_equal(got, frame) and stamp == 12.5


def test_padded_rows_are_read_without_their_padding() -> None:
    frame = _frame()
    m = image_msg(frame, 1.0, "wrist", "bgr8")
    padded = np.zeros((24, 100), np.uint8)
    padded[:, :96] = np.frombuffer(bytes(m.data), np.uint8).reshape(24, 96)
    m.step, m.data = 100, padded.tobytes()
    assert np.array_equal(read_image(m, WRIST)[0], frame)


def _bad(change: dict[str, Any]) -> Any:
    m = image_msg(np.zeros((24, 32, 3), np.uint8), 1.0, "wrist")
    for key, value in change.items():
        setattr(m, key, value)
    return m


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"encoding": "mono8"},
            r"camera wrist: encoding 'mono8'; allowed: raw rgb8, bgr8, rgba8 or bgra8, or ",
        ),
        ({"encoding": "16UC1"}, r"encoding '16UC1'"),
        ({"data": b"\x00" * 100}, r"100 bytes in rows of 96 .* \(a truncated or corrupted frame\)"),
        ({"step": 90}, r"rows of 90 for a 32x24 rgb8 image, which needs rows of at least 96"),
    ],
)
def test_a_raw_image_it_cannot_take_is_one_line(change: dict[str, Any], message: str) -> None:
    with pytest.raises(MessageError, match=message) as err:
        read_image(_bad(change), WRIST)
    assert "\n" not in str(err.value)


# -- resizing ------------------------------------------------------------------------------------
def test_frames_of_another_resolution_are_area_averaged_to_the_policy_s() -> None:
    frame = _frame()
    twice = np.kron(frame, np.ones((2, 2, 1), np.uint8))  # each pixel a 2x2 block
    assert np.array_equal(read_image(image_msg(twice, 1.0, "wrist"), WRIST)[0], frame)
    # A 3x3 block average of a 72x96 frame, against NumPy's.
    big = _frame(72, 96, seed=1)
    mean = big.reshape(24, 3, 32, 3, 3).astype(np.float64).mean(axis=(1, 3))
    got = read_image(image_msg(big, 1.0, "wrist"), WRIST)[0].astype(np.float64)
    assert np.abs(got - mean).max() < 1.0  # within a grey level (Pillow's fixed-point arithmetic)
    # Another aspect ratio and an enlargement: the policy's size all the same.
    assert read_image(image_msg(_frame(50, 50), 1.0, "wrist"), WRIST)[0].shape == (24, 32, 3)
    assert read_image(image_msg(_frame(12, 16), 1.0, "wrist"), WRIST)[0].shape == (24, 32, 3)


# -- compressed ----------------------------------------------------------------------------------
@pytest.mark.parametrize("codec", ["jpeg", "png"])
def test_compressed_images_as_image_transport_writes_them(codec: str) -> None:
    frame = _smooth(24, 32)
    m = compressed_image_msg(frame, 3.25, "wrist", codec)
    assert m.format == f"rgb8; {codec} compressed bgr8" and m.header.frame_id == "wrist"
    got, stamp = read_image(m, WRIST, "compressed")
    assert stamp == 3.25 and got.shape == (24, 32, 3) and got.dtype == np.uint8
    error = np.abs(got.astype(int) - frame).mean()
    assert error == 0 if codec == "png" else error < 3.0  # PNG is lossless; JPEG at quality 95 nearly
    # A bare codec name (older drivers) and a larger frame, shrunk to the policy's size.
    m = compressed_image_msg(_smooth(96, 128), 1.0, "wrist", codec)
    m.format = codec
    got = read_image(m, WRIST, "compressed")[0]
    assert np.abs(got.astype(int) - _smooth(96, 128).reshape(24, 4, 32, 4, 3).mean(axis=(1, 3))).mean() < 3.0


def _png_claiming(width: int, height: int) -> bytes:
    """A well-formed PNG (valid checksums) claiming a huge image, with no pixel data behind it."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")
    )


def _grey_jpeg() -> bytes:
    buf = io.BytesIO()
    Image.fromarray(_frame()[..., 0], "L").save(buf, "JPEG")
    return buf.getvalue()


@pytest.mark.parametrize(
    ("fmt", "data", "error", "message"),
    [
        (
            "rgb8; jpeg compressed bgr8",
            "truncated",
            CorruptFrameError,
            r"a jpeg frame of \d+ bytes that does not",
        ),
        ("rgb8; png compressed bgr8", "noise", CorruptFrameError, r"does not decode .*not a png file"),
        ("rgb8; png compressed bgr8", "huge", CorruptFrameError, r"a 8000x8000 frame claimed"),
        ("mono8; jpeg compressed ", "grey", MessageError, r"format 'mono8; jpeg compressed '; allowed"),
        ("jpeg", "grey", MessageError, r"a grey jpeg frame \(L\); allowed: raw rgb8"),
        ("16UC1; compressedDepth png", "noise", MessageError, r"format '16UC1; compressedDepth png'"),
    ],
)
def test_a_compressed_frame_it_cannot_take_is_one_line(
    fmt: str, data: str, error: type, message: str
) -> None:
    m = compressed_image_msg(_smooth(24, 32), 1.0, "wrist")
    m.format = fmt
    m.data = {
        "truncated": bytes(m.data)[: len(m.data) // 3],
        "noise": _frame().tobytes(),
        "huge": _png_claiming(8000, 8000),
        "grey": _grey_jpeg(),
    }[data]
    with pytest.raises(error, match=message) as err:
        FrameReader(WRIST, "compressed")(m)
    assert str(err.value).startswith("camera wrist: ") and "\n" not in str(err.value)


# -- the simulated robot -------------------------------------------------------------------------
def test_the_simulated_robot_reports_each_camera_raw_and_compressed() -> None:
    cfg = make_task_cfg(PIXEL_TASK)
    worlds = TaskWorlds(cfg, "mujoco", 1, seed=0)
    worlds.reset_worlds(np.arange(1))
    report = RobotReport(cfg, codec="png")
    topics = report.topics()
    assert topics[camera_topic("wrist")] is msg("sensor_msgs", "Image")
    assert topics[camera_topic("wrist", "compressed")] is msg("sensor_msgs", "CompressedImage")
    assert camera_topic("wrist", "compressed") == "cameras/wrist/image_raw/compressed"
    out = report.messages(worlds, 3.0)
    for camera in ("wrist", "scene"):
        spec = CameraSpec(f"{camera}_rgb", camera, 64, 64, "rgb8")
        raw, stamp = read_image(out[camera_topic(camera)], spec)
        assert stamp == 3.0 and raw.std() > 5
        png = out[camera_topic(camera, "compressed")]
        assert png.format == "rgb8; png compressed bgr8"
        assert np.array_equal(read_image(png, spec, "compressed")[0], raw)  # lossless
    skipped = report.messages(worlds, 3.0, skip=[camera_topic("scene", "compressed")])
    assert (
        camera_topic("scene", "compressed") not in skipped and camera_topic("wrist", "compressed") in skipped
    )
    worlds.close()


def test_policy_node_refuses_an_image_transport_it_does_not_read() -> None:
    with pytest.raises(RosParameterError, match=r"image_transport 'theora' is not one of raw, compressed"):
        PolicyNodeParams(policy="scripted:panda_reach", image_transport="theora").check()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"compressed_format": "webp"}, r"compressed_format 'webp' is not one of jpeg, png"),
        ({"jpeg_quality": 0}, r"jpeg_quality must be in 1..100"),
        ({"png_level": 10}, r"png_level in 0..9"),
    ],
)
def test_sim_robot_refuses_a_bad_compression_parameter(change: dict[str, Any], message: str) -> None:
    with pytest.raises(RosParameterError, match=message):
        SimRobotParams(task=PIXEL_TASK, **change).check()


# -- over DDS ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pixel_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small untrained pixel policy for panda_pick_cube_pixels (ONNX: no torch in the node's step)."""
    cfg = make_task_cfg(PIXEL_TASK)
    torch.manual_seed(0)
    sizes = {"ee_pos": 3, "ee_vel": 3, "ee_target_offset": 3, "gripper_opening": 1}
    enc = ObservationEncoder({"wrist_rgb": (64, 64, 3), "scene_rgb": (64, 64, 3)}, sizes, features=8)
    policy = PixelPolicy(enc, Actor(enc.feature_dim, 4, (16, 16)), cfg.action.low, cfg.action.high)
    return export_pixel_policy(policy, cfg, tmp_path_factory.mktemp("pixels") / "policy", onnx=True)


def test_a_pixel_policy_drives_the_simulated_robot_from_compressed_images(
    tmp_path: Path, pixel_policy: Path
) -> None:
    """sim_robot_node publishes each camera compressed (JPEG) for policy_node (image_transport
    compressed), which commands from them; corrupted frames on a camera topic are warned about once
    (rate-limited: repeats are counted, not logged), and the node keeps commanding."""
    domain = private_domain()
    log_path = tmp_path / "policy.log"
    with (
        open(log_path, "w") as plog,
        open(tmp_path / "sim.log", "w") as slog,
        local_node("observer", domain) as node,
    ):
        commands = ArmCommandLog(PIXEL_TASK, still=1e-4)
        images: list[Any] = []
        scene = camera_topic("scene", "compressed")
        endpoints = [
            node.create_subscription(
                msg("geometry_msgs", "TwistStamped"), "command", commands.on_command, command_qos()
            ),
            node.create_subscription(
                msg("sensor_msgs", "CompressedImage"),
                camera_topic("wrist", "compressed"),
                images.append,
                sensor_qos(),
            ),
            bad := node.create_publisher(msg("sensor_msgs", "CompressedImage"), scene, sensor_qos()),
        ]
        servo = {"command_type": "servo_twist"}
        pol = start_node(
            "policy_node",
            {"policy": str(pixel_policy), "runtime": "onnx", "image_transport": "compressed", **servo},
            domain,
            log=plog,
        )
        robot = start_node("sim_robot_node", {"task": PIXEL_TASK, **servo}, domain, log=slog)
        try:
            wait_for_matches(endpoints, timeout=120, processes=[pol, robot])
            wait_until(lambda: len(images) >= 3, 60, lambda: f"{len(images)} compressed wrist images")
            assert images[-1].format == "rgb8; jpeg compressed bgr8"
            wait_until(lambda: commands.moving_after(0.0), 60, "no command from the pixel policy")

            corrupt = compressed_image_msg(_smooth(64, 64), time.time(), "scene")
            corrupt.data = bytes(corrupt.data)[:200]
            for _ in range(5):  # five corrupted frames, one warning (repeats are held back for 10 s)
                bad.publish(corrupt)
                time.sleep(0.01)

            def warned() -> bool:
                return "does not decode" in log_path.read_text()

            wait_until(warned, 30, "policy_node did not warn about the corrupted frame")
            t_bad = time.time()
            wait_until(lambda: commands.moving_after(t_bad), 30, "no command after the corrupted frames")
        finally:
            stop_node(robot)
            assert stop_node(pol, timeout=30.0) == 0, log_path.read_text()  # exiting takes seconds under load
    text = log_path.read_text()
    line = next(x for x in text.splitlines() if "does not decode" in x)
    assert "/cameras/scene/image_raw/compressed: camera scene: a jpeg frame of 200 bytes" in line
    assert text.count("does not decode") == 1, text
    assert "Traceback" not in text, text


@contextlib.contextmanager
def _pixel_policy_beside(
    robot: StandInRobot, period: float, policy: Path, domain: int, plog: IO[str], log_path: Path
) -> Iterator[subprocess.Popen[str]]:
    """policy_node on the pixel policy (ONNX, servo twists) while a thread publishes the stand-in
    robot's samples every ``period``; both stopped afterwards, the node exiting cleanly."""
    stop = threading.Event()

    def publish() -> None:
        while not stop.wait(period):
            robot.publish()

    pol = start_node(
        "policy_node",
        {"policy": str(policy), "runtime": "onnx", "command_type": "servo_twist"},
        domain,
        log=plog,
    )
    publisher = threading.Thread(target=publish, daemon=True)
    publisher.start()
    try:
        yield pol
    finally:
        stop.set()
        publisher.join(timeout=2.0)
        assert stop_node(pol, timeout=30.0) == 0, log_path.read_text()  # exiting takes seconds under load


def test_a_stale_camera_trips_the_watchdog_as_a_stale_state_topic(tmp_path: Path, pixel_policy: Path) -> None:
    """A robot whose state keeps coming but whose cameras fall silent is held: every command decided
    more than the watchdog timeout after the last image is a stop; images back, the arm moves again.

    The robot is this process (the deployment benchmark's stand-in), its cameras 96x72 ``rgb8``:
    policy_node resizes them to the policy's 64x64 (and says so once, the aspect ratio differing).
    """
    timeout = 0.1  # the Panda safety configuration's watchdog_timeout
    domain = private_domain()
    log_path = tmp_path / "policy.log"
    cfg = camera_sized(make_task_cfg(PIXEL_TASK), (96, 72))
    with open(log_path, "w") as plog, local_node("robot", domain) as node:
        commands = ArmCommandLog(PIXEL_TASK, still=1e-4)
        endpoints = [
            node.create_subscription(
                msg("geometry_msgs", "TwistStamped"), "command", commands.on_command, command_qos()
            ),
            node.create_subscription(msg("std_msgs", "String"), "safety", commands.on_report, 10),
        ]
        robot = StandInRobot(node, cfg, "raw", command_type="servo_twist")
        endpoints += list(robot.pubs.values())
        with _pixel_policy_beside(robot, cfg.control_dt, pixel_policy, domain, plog, log_path) as pol:
            wait_for_matches(endpoints, timeout=120, processes=[pol])
            wait_until(lambda: commands.moving_after(0.0), 60, "no command moved the arm")

            robot.cameras = False
            t_silent = time.time()  # no image is stamped later
            wait_until(lambda: len(commands.stamped_after(t_silent + timeout)) >= 10, 30, "no commands")
            held = commands.stamped_after(t_silent + timeout)
            assert all(np.all(d == 0.0) for d in held), "a silent camera did not stop the arm"

            def watchdog_report() -> bool:
                with commands.lock:
                    return any(
                        r["stamp"] > t_silent + timeout and r["counts"]["watchdog"] for r in commands.reports
                    )

            wait_until(watchdog_report, 30, "no safety report of the watchdog after the camera fell silent")

            robot.cameras = True
            t_back = time.time()
            wait_until(
                lambda: commands.moving_after(t_back), 30, "the arm did not move again with its camera back"
            )
    text = log_path.read_text()
    assert "camera wrist: resizing 96x72 frames to the policy's 64x64 by area averaging" in text, text
    assert text.count("resizing 96x72") == 2  # once per camera, not once per frame


def test_a_camera_that_never_arrives_is_named_and_nothing_is_commanded(
    tmp_path: Path, pixel_policy: Path
) -> None:
    """A robot whose state comes but whose cameras never publish: policy_node commands nothing and
    says which camera topics it waits for (and their type), not the state topics that did arrive."""
    domain = private_domain()
    log_path = tmp_path / "policy.log"
    cfg = make_task_cfg(PIXEL_TASK)
    with open(log_path, "w") as plog, local_node("robot", domain) as node:
        commands = ArmCommandLog(PIXEL_TASK, still=1e-4)
        endpoints = [
            node.create_subscription(
                msg("geometry_msgs", "TwistStamped"), "command", commands.on_command, command_qos()
            )
        ]
        robot = StandInRobot(node, cfg, "raw", command_type="servo_twist")
        robot.cameras = False  # from the start: the camera driver never came up
        endpoints += [p for t, p in robot.pubs.items() if t not in robot.camera_topics]
        with _pixel_policy_beside(robot, cfg.control_dt, pixel_policy, domain, plog, log_path) as pol:
            wait_for_matches(endpoints, timeout=120, processes=[pol])
            # The warning repeats (throttled); the first can predate the state topics' first samples.
            def cameras_alone() -> bool:
                lines = [x for x in log_path.read_text().splitlines() if "nothing received yet on" in x]
                return bool(lines) and "joint_states" not in lines[-1].split("; no command")[0]

            wait_until(cameras_alone, 60, "no warning naming the cameras alone")
    line = [x for x in log_path.read_text().splitlines() if "nothing received yet on" in x][-1]
    waited = line.split("nothing received yet on", 1)[1].split("; no command")[0]
    assert "/cameras/wrist/image_raw (sensor_msgs/Image)" in waited, line
    assert "/cameras/scene/image_raw (sensor_msgs/Image)" in waited, line
    assert "frames/" not in waited and "joint_states" not in waited, line  # those did arrive
    assert not commands.stamped_after(0.0), "a command went out without the cameras"
