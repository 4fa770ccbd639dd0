"""The PyBullet backend against the MuJoCo reference: same frames, same controllers, same conventions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robolearn.sim.backend import Marker, PhysicsParams, SimError
from robolearn.sim.mujoco_backend import MujocoBackend
from robolearn.sim.pybullet_backend import PybulletBackend
from robolearn.sim.scene import MjcfAsset, RobotCfg, SceneCfg, ThrustBodyRateCfg, UrdfAsset
from robolearn.sim.transforms import quat_from_euler, quat_rotate_inverse
from robolearn.tasks.panda_pick_cube import make_cfg as pick_cfg
from robolearn.tasks.robots.panda import ARM_JOINTS, FINGER_JOINTS

ONE = np.arange(1)
FLYER_URDF = """<?xml version="1.0"?>
<robot name="flyer">
  <link name="body">
    <inertial>
      <origin xyz="{com}" rpy="0 0 0"/>
      <mass value="0.5"/>
      <inertia ixx="0.002" ixy="0" ixz="0" iyy="0.003" iyz="0" izz="0.004"/>
    </inertial>
    <collision><geometry><box size="0.1 0.1 0.04"/></geometry></collision>
  </link>
</robot>
"""


def quat_angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angle between orientations (rad), whatever the quaternions' signs."""
    return 2.0 * np.arccos(np.clip(np.abs(np.sum(a * b, axis=1)), 0.0, 1.0))


@pytest.fixture
def scene() -> SceneCfg:
    return pick_cfg().scene


def flyer_scene(folder: Path, com: str) -> SceneCfg:
    """A free-flying box with thrust and body-rate control; ``com`` is its centre of mass (m)."""
    path = folder / f"flyer_{com.replace(' ', '_')}.urdf"
    path.write_text(FLYER_URDF.format(com=com))
    robot = RobotCfg(
        name="flyer",
        asset=UrdfAsset(path),
        fixed_base=False,
        base_pos=(0.0, 0.0, 1.0),
        actuators=(
            ThrustBodyRateCfg("flyer", max_thrust=10.0, rate_gain=(0.05, 0.05, 0.05), max_torque=(0.2,) * 3),
        ),
    )
    return SceneCfg(robot=robot, ground=False)


def both(scene: SceneCfg) -> tuple[MujocoBackend, PybulletBackend]:
    mj, pb = MujocoBackend(scene, 1), PybulletBackend(scene, 1)
    for sim in (mj, pb):
        sim.reset_worlds(ONE)
        sim.forward(ONE)
    return mj, pb


def assert_same_frame(mj: MujocoBackend, pb: PybulletBackend, frame: str, tol: float = 1e-6) -> None:
    np.testing.assert_allclose(pb.frame_pos(frame), mj.frame_pos(frame), atol=tol)
    assert quat_angle(pb.frame_quat(frame), mj.frame_quat(frame))[0] < tol * 10
    np.testing.assert_allclose(pb.frame_linvel(frame), mj.frame_linvel(frame), atol=tol * 10)
    np.testing.assert_allclose(pb.frame_angvel(frame), mj.frame_angvel(frame), atol=tol * 10)


def test_panda_scene_builds_like_mujoco(scene: SceneCfg) -> None:
    mj, pb = both(scene)
    assert pb.num_controls == mj.num_controls == 8
    for frame in ("ee", "cube"):
        assert_same_frame(mj, pb, frame)
    np.testing.assert_allclose(pb.joint_pos(ARM_JOINTS), mj.joint_pos(ARM_JOINTS))


def test_joint_state_round_trip_and_frame_velocities(scene: SceneCfg) -> None:
    mj, pb = both(scene)
    pos = np.array([[0.3, -0.5, 0.4, -2.0, -0.3, 1.8, 0.5]])
    vel = np.array([[0.3, -0.2, 0.4, 0.1, -0.3, 0.2, 0.5]])
    for sim in (mj, pb):
        sim.set_joint_state(ONE, ARM_JOINTS, pos, vel)
        sim.forward(ONE)
    np.testing.assert_allclose(pb.joint_pos(ARM_JOINTS), pos)
    np.testing.assert_allclose(pb.joint_vel(ARM_JOINTS), vel)
    # A moving, rotated tool: world-frame velocities and (w, x, y, z) quaternions as MuJoCo's.
    assert_same_frame(mj, pb, "ee")


def test_free_object_root_state_round_trip(scene: SceneCfg) -> None:
    pb = PybulletBackend(scene, 2)
    ids = np.arange(2)
    pos = np.array([[0.5, 0.1, 0.3], [0.4, -0.1, 0.2]])
    quat = quat_from_euler(np.array([0.3, -0.2]), np.array([0.1, 0.5]), np.array([1.0, -2.0]))
    linvel, angvel = (
        np.array([[0.1, 0.2, 0.3], [-0.3, 0.0, 0.1]]),
        np.array([[1.0, -2.0, 0.5], [0.0, 0.7, -0.4]]),
    )
    pb.set_root_state(ids, "cube", pos, quat, linvel, angvel)
    np.testing.assert_allclose(pb.frame_pos("cube"), pos, atol=1e-9)
    assert (quat_angle(pb.frame_quat("cube"), quat) < 1e-6).all()
    np.testing.assert_allclose(pb.frame_linvel("cube"), linvel, atol=1e-9)
    np.testing.assert_allclose(pb.frame_angvel("cube"), angvel, atol=1e-9)
    with pytest.raises(SimError, match="not a free body"):
        pb.set_root_state(ids, "panda", pos)


def test_free_base_off_centre_mass_matches_mujoco(tmp_path: Path) -> None:
    # The centre of mass is off the URDF origin, where the thrust acts: a backend mixing up the
    # two frames, or the world and body axes of forces and torques, drifts from MuJoCo.
    mj, pb = both(flyer_scene(tmp_path, "0.02 -0.01 0.03"))
    assert_same_frame(mj, pb, "flyer")
    quat = quat_from_euler(np.array([0.4]), np.array([-0.3]), np.array([0.8]))
    for sim in (mj, pb):
        sim.set_root_state(
            ONE,
            "flyer",
            np.array([[0.1, -0.2, 1.5]]),
            quat,
            np.array([[0.2, 0.0, -0.1]]),
            np.array([[0.5, -1.0, 0.3]]),
        )
        sim.forward(ONE)
    assert_same_frame(mj, pb, "flyer")
    # Thrust above the weight and body-rate targets: same climb and attitude on both engines.
    ctrl = np.array([[7.0, 1.0, -0.5, 0.8]])
    for _ in range(25):
        for sim in (mj, pb):
            sim.step(ctrl, 10)
    np.testing.assert_allclose(pb.frame_pos("flyer"), mj.frame_pos("flyer"), atol=0.01)
    assert quat_angle(pb.frame_quat("flyer"), mj.frame_quat("flyer"))[0] < 0.03
    rates = [quat_rotate_inverse(s.frame_quat("flyer"), s.frame_angvel("flyer")) for s in (mj, pb)]
    np.testing.assert_allclose(rates[1], rates[0], atol=0.05)


def test_cartesian_impedance_tracks_like_mujoco(scene: SceneCfg) -> None:
    mj, pb = both(scene)
    # Position and rotation targets; a sign or frame error in the rotation input turns the tool
    # the other way.
    ctrl = np.array([[0.45, 0.15, 0.3, 0.2, -0.15, 0.3, 0.04, 0.04]])
    for _ in range(60):
        for sim in (mj, pb):
            sim.step(ctrl, 10)
    assert not pb.unstable_worlds().any()
    assert np.linalg.norm(pb.frame_pos("ee") - mj.frame_pos("ee")) < 0.01
    assert np.linalg.norm(pb.frame_pos("ee") - ctrl[:, :3]) < 0.02
    assert quat_angle(pb.frame_quat("ee"), mj.frame_quat("ee"))[0] < 0.03
    np.testing.assert_allclose(pb.joint_pos(FINGER_JOINTS), mj.joint_pos(FINGER_JOINTS), atol=0.002)


def test_nan_state_is_marked_unstable_and_recovered(scene: SceneCfg) -> None:
    pb = PybulletBackend(scene, 2)
    pb.set_root_state(
        np.array([1]), "cube", np.array([[0.5, 0.0, 0.02]]), linvel=np.array([[np.nan, 0.0, 0.0]])
    )
    ctrl = np.tile([0.4, 0.0, 0.3, 0.0, 0.0, 0.0, 0.04, 0.04], (2, 1))
    pb.step(ctrl, 5)
    np.testing.assert_array_equal(pb.unstable_worlds(), [False, True])
    np.testing.assert_allclose(pb.frame_pos("cube")[1], [0.5, 0.0, 0.02], atol=1e-9)
    for _ in range(20):
        pb.step(ctrl, 10)
    assert not pb.unstable_worlds().any()
    # The rebuilt world is a working one: the cube rests on the ground, the arm follows its target.
    np.testing.assert_allclose(pb.frame_pos("cube")[1], [0.5, 0.0, 0.02], atol=2e-3)
    np.testing.assert_allclose(pb.frame_pos("ee")[1], pb.frame_pos("ee")[0], atol=0.02)


def test_domain_randomization_scales_mass_and_gains(tmp_path: Path) -> None:
    scene = flyer_scene(tmp_path, "0 0 0")
    pb = PybulletBackend(scene, 3)
    ids = np.arange(3)
    one = np.ones(3)
    mass, gain = np.array([1.0, 2.0, 1.0]), np.array([1.0, 1.0, 0.5])
    pb.set_physics_params(ids, PhysicsParams(mass, one, one, gain))
    pb.reset_worlds(ids)
    thrust, steps = 7.0, 100
    start = pb.frame_pos("flyer")[:, 2].copy()
    for _ in range(steps):
        pb.step(np.tile([thrust, 0.0, 0.0, 0.0], (3, 1)), 1)
    t = steps * scene.physics_dt
    # A level body under thrust s_gain * T and weight s_mass * m * g.
    accel = gain * thrust / (mass * 0.5) - 9.81
    np.testing.assert_allclose(pb.frame_pos("flyer")[:, 2] - start, 0.5 * accel * t**2, atol=2e-3)
    pb.set_physics_params(ids, PhysicsParams(one, one, one, one))
    pb.reset_worlds(ids)
    for _ in range(steps):
        pb.step(np.tile([thrust, 0.0, 0.0, 0.0], (3, 1)), 1)
    np.testing.assert_allclose(pb.frame_pos("flyer")[:, 2] - start, 0.5 * accel[0] * t**2, atol=2e-3)


def test_render_shows_the_scene_and_markers(scene: SceneCfg) -> None:
    pb = PybulletBackend(scene, 1)
    image = pb.render(0, 160, 120, scene.camera)
    assert image.shape == (120, 160, 3) and image.dtype == np.uint8
    assert image.std() > 10.0
    green = Marker(scene.camera.lookat, 0.05, (0.0, 1.0, 0.0, 1.0))
    marked = pb.render(0, 160, 120, scene.camera, [green])
    is_green = (marked[..., 1] > 100) & (marked[..., 0] < 60) & (marked[..., 2] < 60)
    assert is_green[56:62, 77:83].mean() > 0.8
    # The marker is moved away, not left behind, when a frame has none.
    assert np.array_equal(pb.render(0, 160, 120, scene.camera), image)
    pb.close()


def test_bad_scenes_are_refused(scene: SceneCfg, tmp_path: Path) -> None:
    pb = PybulletBackend(scene, 1)
    with pytest.raises(SimError, match="unknown frame"):
        pb.frame_pos("nose")
    with pytest.raises(SimError, match="unknown joint"):
        pb.joint_pos(["elbow"])
    mjcf = RobotCfg(name="ant", asset=MjcfAsset(tmp_path / "ant.xml"), fixed_base=False)
    with pytest.raises(SimError, match="URDF"):
        PybulletBackend(SceneCfg(robot=mjcf), 1)
