"""Exported pixel policies (issue 13): uint8 camera inputs, preprocessing inside, checked on load."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from robolearn.data.manifest import file_sha256
from robolearn.errors import CorruptFileError
from robolearn.policy.encoders import ObservationEncoder
from robolearn.policy.meta import META_FILE, PolicyMismatchError, read_meta
from robolearn.policy.network import Actor
from robolearn.policy.pixel_export import export_pixel_policy
from robolearn.policy.pixel_network import PixelPolicy
from robolearn.policy.runtime import load_exported
from robolearn.tasks import make_task_cfg
from robolearn.tasks.core import TaskCfg

STATE = {"ee_pos": 3, "ee_vel": 3, "ee_target_offset": 3, "gripper_opening": 1}


def _task() -> TaskCfg:
    cfg = make_task_cfg("panda_pick_cube_pixels")
    cams = {k: dataclasses.replace(c, width=32, height=24) for k, c in cfg.cameras.items()}
    return dataclasses.replace(cfg, cameras=cams)


def _policy(cfg: TaskCfg) -> PixelPolicy:
    torch.manual_seed(0)
    enc = ObservationEncoder({"wrist_rgb": (24, 32, 3), "scene_rgb": (24, 32, 3)}, STATE, features=8)
    enc.set_state_statistics(np.full(10, 0.1), np.full(10, 0.5))
    return PixelPolicy(enc, Actor(enc.feature_dim, 4, (16, 16)), cfg.action.low, cfg.action.high)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, PixelPolicy, TaskCfg]:
    cfg = _task()
    policy = _policy(cfg)
    out = export_pixel_policy(policy, cfg, tmp_path_factory.mktemp("px") / "policy", onnx=True)
    return out, policy, cfg


def _obs(rng: np.random.Generator, n: int = 3) -> dict[str, np.ndarray]:
    return {
        "wrist_rgb": rng.integers(0, 256, (n, 24, 32, 3), dtype=np.uint8),
        "scene_rgb": rng.integers(0, 256, (n, 24, 32, 3), dtype=np.uint8),
        **{k: rng.normal(size=(n, s)).astype(np.float32) for k, s in STATE.items()},
    }


@pytest.mark.parametrize("runtime", ["torchscript", "onnx"])
def test_exported_graph_acts_like_the_policy(
    exported: tuple[Path, PixelPolicy, TaskCfg], runtime: str
) -> None:
    folder, policy, cfg = exported
    loaded = load_exported(folder, runtime)  # type: ignore[arg-type]
    obs = _obs(np.random.default_rng(1))
    expected = np.clip(policy.act(obs), cfg.action.low, cfg.action.high)
    np.testing.assert_allclose(loaded.act_batch(obs), expected, atol=1e-5)
    one = {k: v[0] for k, v in obs.items()}
    np.testing.assert_allclose(loaded(one), expected[0], atol=1e-5)
    loaded.check_compatible(cfg)


def test_policy_json_lists_the_cameras(exported: tuple[Path, PixelPolicy, TaskCfg]) -> None:
    folder, _, _ = exported
    meta = read_meta(folder)
    assert [(c.name, c.camera, c.height, c.width, c.encoding) for c in meta.cameras] == [
        ("wrist_rgb", "wrist", 24, 32, "rgb8"),
        ("scene_rgb", "scene", 24, 32, "rgb8"),
    ]
    assert [t.name for t in meta.obs] == list(STATE)
    assert "uint8 RGB input per camera" in json.loads((folder / META_FILE).read_text())["network"]["input"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda o: o.pop("scene_rgb"), r"expects camera 'scene_rgb' 32x24 rgb8 but the observation has only"),
        (
            lambda o: o.update(wrist_rgb=np.zeros((3, 48, 64, 3), np.uint8)),
            r"expects camera 'wrist_rgb' 32x24 rgb8 \(uint8, height x width x 3\) but gets uint8 48x64x3",
        ),
        (
            lambda o: o.update(wrist_rgb=np.zeros((3, 24, 32, 3), np.float32)),
            r"but gets float32 24x32x3",
        ),
        (
            lambda o: o.update(wrist_rgb=np.zeros((3, 24, 32, 4), np.uint8)),
            r"but gets uint8 24x32x4",  # RGBA (sensor_msgs' rgba8) is not rgb8
        ),
    ],
)
def test_wrong_camera_input_is_one_line(
    exported: tuple[Path, PixelPolicy, TaskCfg], change: object, message: str
) -> None:
    folder, _, _ = exported
    loaded = load_exported(folder, "onnx")
    obs = _obs(np.random.default_rng(2))
    change(obs)  # type: ignore[operator]
    with pytest.raises(PolicyMismatchError, match=message) as err:
        loaded.act_batch(obs)
    assert "\n" not in str(err.value)


def test_task_with_other_cameras_is_refused(exported: tuple[Path, PixelPolicy, TaskCfg]) -> None:
    folder, _, _ = exported
    loaded = load_exported(folder, "torchscript")
    with pytest.raises(
        PolicyMismatchError, match=r"expects camera 'wrist_rgb' 32x24 rgb8 but robot provides 64x64"
    ):
        loaded.check_compatible(make_task_cfg("panda_pick_cube_pixels"))


def test_policy_json_with_a_bad_camera_encoding_is_refused(
    exported: tuple[Path, PixelPolicy, TaskCfg], tmp_path: Path
) -> None:
    folder, _, _ = exported
    data = json.loads((folder / META_FILE).read_text())
    data["cameras"][0]["encoding"] = "bgr8"
    (tmp_path / META_FILE).write_text(json.dumps(data))
    with pytest.raises(
        CorruptFileError, match=r"camera 'wrist_rgb' 32x24 bgr8: need positive sizes and an encoding"
    ):
        read_meta(tmp_path)


def test_graph_for_another_resolution_is_refused(
    exported: tuple[Path, PixelPolicy, TaskCfg], tmp_path: Path
) -> None:
    """A policy.json whose camera size disagrees with the graph fails the load's probe, in one line."""
    folder, _, _ = exported
    for name in ("policy.pt", "policy.onnx"):
        (tmp_path / name).write_bytes((folder / name).read_bytes())
    data = json.loads((folder / META_FILE).read_text())
    data["cameras"][0]["height"] = 48
    data["files"] = {k: {"sha256": file_sha256(tmp_path / k)} for k in data["files"]}
    (tmp_path / META_FILE).write_text(json.dumps(data))
    with pytest.raises(CorruptFileError, match="does not take") as err:
        load_exported(tmp_path, "torchscript")
    assert "\n" not in str(err.value)
