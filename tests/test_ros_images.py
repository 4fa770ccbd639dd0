"""Camera images over ROS 2 (issue 13): sensor_msgs/Image out of sim_robot_node, into policy_node."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("rclpy", reason="ROS 2 (rclpy) is not installed")

from robolearn.hardware.ros._rclpy import command_qos, msg, sensor_qos
from robolearn.hardware.ros.harness import (
    local_node,
    private_domain,
    start_node,
    stop_node,
    wait_for_matches,
    wait_until,
)
from robolearn.hardware.ros.images import camera_topic, image_msg, read_image
from robolearn.hardware.ros.messages import MessageError
from robolearn.hardware.ros.sim_robot_node import RobotReport
from robolearn.policy.encoders import ObservationEncoder
from robolearn.policy.meta import CameraSpec
from robolearn.policy.network import Actor
from robolearn.policy.pixel_export import export_pixel_policy
from robolearn.policy.pixel_network import PixelPolicy
from robolearn.tasks import make_task_cfg
from robolearn.tasks.worlds import TaskWorlds

pytestmark = [pytest.mark.ros, pytest.mark.filterwarnings("ignore::DeprecationWarning:lark")]

WRIST = CameraSpec("wrist_rgb", "wrist", 24, 32, "rgb8")


def test_image_round_trip() -> None:
    frame = np.random.default_rng(0).integers(0, 256, (24, 32, 3), dtype=np.uint8)
    m = image_msg(frame, 12.5, "wrist")
    assert (m.encoding, m.height, m.width, m.step, m.header.frame_id) == ("rgb8", 24, 32, 96, "wrist")
    got, stamp = read_image(m, WRIST)
    assert np.array_equal(got, frame) and stamp == 12.5


def _bad(change: dict[str, Any]) -> Any:
    m = image_msg(np.zeros((24, 32, 3), np.uint8), 1.0, "wrist")
    for key, value in change.items():
        setattr(m, key, value)
    return m


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"encoding": "bgr8"}, r"camera wrist: encoding 'bgr8'; the policy takes rgb8"),
        ({"encoding": "mono8"}, r"encoding 'mono8'"),
        ({"height": 48, "width": 64}, r"camera wrist: a 64x48 image; the policy takes 32x24"),
        ({"data": b"\x00" * 100}, r"100 bytes in rows of 96; .* has 2304 .* truncated or corrupted frame"),
        ({"step": 100}, r"rows of 100"),
    ],
)
def test_a_camera_image_that_does_not_fit_is_one_line(change: dict[str, Any], message: str) -> None:
    with pytest.raises(MessageError, match=message) as err:
        read_image(_bad(change), WRIST)
    assert "\n" not in str(err.value)


def test_the_simulated_robot_reports_each_camera() -> None:
    cfg = make_task_cfg("panda_pick_cube_pixels")
    worlds = TaskWorlds(cfg, "mujoco", 1, seed=0)
    worlds.reset_worlds(np.arange(1))
    report = RobotReport(cfg)
    assert report.topics()[camera_topic("wrist")] is msg("sensor_msgs", "Image")
    out = report.messages(worlds, 3.0)
    for camera in ("wrist", "scene"):
        m = out[camera_topic(camera)]
        frame, stamp = read_image(m, CameraSpec(f"{camera}_rgb", camera, 64, 64, "rgb8"))
        assert stamp == 3.0 and frame.std() > 5
    worlds.close()


def _export(tmp_path: Path) -> Path:
    cfg = make_task_cfg("panda_pick_cube_pixels")
    torch.manual_seed(0)
    sizes = {"ee_pos": 3, "ee_vel": 3, "ee_target_offset": 3, "gripper_opening": 1}
    enc = ObservationEncoder({"wrist_rgb": (64, 64, 3), "scene_rgb": (64, 64, 3)}, sizes, features=8)
    policy = PixelPolicy(enc, Actor(enc.feature_dim, 4, (16, 16)), cfg.action.low, cfg.action.high)
    return export_pixel_policy(policy, cfg, tmp_path / "pixel_policy", onnx=True)


def test_a_pixel_policy_drives_the_simulated_robot_from_its_cameras(tmp_path: Path) -> None:
    """sim_robot_node publishes the cameras; policy_node commands only once it has their images,
    and refuses, in one line, an image of another resolution sent on a camera topic."""
    folder = _export(tmp_path)
    domain = private_domain()
    with (
        open(tmp_path / "policy.log", "w") as plog,
        open(tmp_path / "sim.log", "w") as slog,
        local_node("observer", domain) as node,
    ):
        commands: list[float] = []
        images: list[Any] = []
        endpoints = [
            node.create_subscription(
                msg("geometry_msgs", "TwistStamped"),
                "command",
                lambda m: commands.append(time.time()),
                command_qos(),
            ),
            node.create_subscription(
                msg("sensor_msgs", "Image"), camera_topic("wrist"), images.append, sensor_qos()
            ),
            wrong := node.create_publisher(msg("sensor_msgs", "Image"), camera_topic("scene"), sensor_qos()),
        ]
        pol = start_node(
            "policy_node",
            {"policy": str(folder), "runtime": "onnx", "command_type": "servo_twist"},
            domain,
            log=plog,
        )
        robot = start_node(
            "sim_robot_node",
            {"task": "panda_pick_cube_pixels", "command_type": "servo_twist"},
            domain,
            log=slog,
        )
        try:
            wait_for_matches(endpoints, timeout=120, processes=[pol, robot])
            wait_until(lambda: len(images) >= 3, 60, lambda: f"{len(images)} wrist images")
            assert (images[-1].height, images[-1].width, images[-1].encoding) == (64, 64, "rgb8")
            wait_until(lambda: len(commands) >= 5, 60, "no command from the pixel policy")
            wrong.publish(image_msg(np.zeros((48, 64, 3), np.uint8), time.time(), "scene"))

            def refused() -> bool:
                return (
                    "camera scene: a 64x48 image; the policy takes 64x64"
                    in (tmp_path / "policy.log").read_text()
                )

            wait_until(refused, 30, "policy_node did not refuse the wrong image")
        finally:
            stop_node(robot)
            assert stop_node(pol) == 0, (tmp_path / "policy.log").read_text()
