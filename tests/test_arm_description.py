"""Any serial arm from its robot file: what is read, the generic controllers, the derived safety limits."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pybullet_data
import pytest

from robolearn.hardware.robots import ArmState, EeDelta
from robolearn.hardware.ros.messages import make_codec
from robolearn.hardware.safety import SafetyLayer
from robolearn.hardware.safety_config import SafetyCfg, SafetyConfigError, arm_safety_yaml
from robolearn.sim.backend import SimError
from robolearn.sim.robot_description import ArmKinematics, reachable_box, read_arm
from robolearn.sim.scene import CartesianImpedanceCfg, JointPositionCfg, SceneCfg
from robolearn.tasks import make_task_cfg
from robolearn.tasks.core import DoneTerm, ObsTerm, TaskCfg
from robolearn.tasks.robots.arm import arm_robot, ee_delta_action, joint_delta_action
from robolearn.tasks.robots.panda import ARM_JOINTS, FINGER_JOINTS, tool_position
from robolearn.tasks.terms import frame_pos, joint_pos
from robolearn.tasks.worlds import TaskWorlds

DATA = Path(pybullet_data.getDataPath())
PANDA = DATA / "franka_panda" / "panda.urdf"
IIWA = DATA / "kuka_iiwa" / "model.urdf"

# Two hinges and a slide in a chain, then a hand with two slide fingers and a tool site body.
MJCF = """
<mujoco>
  <worldbody>
    <body name="base">
      <body name="upper" pos="0 0 0.3">
        <joint name="shoulder" type="hinge" axis="0 1 0" range="-1.5 1.5"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
        <body name="fore" pos="0.3 0 0">
          <joint name="elbow" type="hinge" axis="0 1 0" range="-2 2" actuatorfrcrange="-20 20"/>
          <geom type="capsule" fromto="0 0 0 0.25 0 0" size="0.025"/>
          <body name="hand" pos="0.25 0 0">
            <joint name="lift" type="slide" axis="0 0 1" range="-0.05 0.05"/>
            <geom type="box" size="0.02 0.04 0.01"/>
            <body name="left"><joint name="left_finger" type="slide" axis="0 1 0" range="0 0.03"/>
              <geom type="box" size="0.01 0.005 0.02" pos="0 0.02 -0.02"/></body>
            <body name="right"><joint name="right_finger" type="slide" axis="0 -1 0" range="0 0.03"/>
              <geom type="box" size="0.01 0.005 0.02" pos="0 -0.02 -0.02"/></body>
            <body name="tcp" pos="0 0 -0.05"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def test_the_panda_urdf_reads_as_its_hand_written_description() -> None:
    desc = read_arm(PANDA)
    assert desc.joint_names == ARM_JOINTS
    assert desc.gripper_names == FINGER_JOINTS
    assert desc.ee_link == "panda_grasptarget"
    j4 = desc.joints[3]
    assert (j4.low, j4.high, j4.max_velocity, j4.max_effort) == pytest.approx((-3.1416, 0.0, 2.175, 87.0))


def test_an_arm_without_gripper_and_an_mjcf_arm() -> None:
    iiwa = read_arm(IIWA)
    assert iiwa.joint_names == tuple(f"lbr_iiwa_joint_{i}" for i in range(1, 8))
    assert iiwa.ee_link == "lbr_iiwa_link_7" and iiwa.gripper == ()


def test_an_mjcf_arm(tmp_path: Path) -> None:
    path = tmp_path / "arm.xml"
    path.write_text(MJCF)
    desc = read_arm(path)
    assert desc.joint_names == ("shoulder", "elbow", "lift")
    assert [j.kind for j in desc.joints] == ["revolute", "revolute", "prismatic"]
    assert desc.gripper_names == ("left_finger", "right_finger")
    assert desc.ee_link == "tcp"
    assert desc.joints[1].max_effort == 20.0 and desc.joints[0].max_effort is None
    assert desc.joints[0].max_velocity is None  # MJCF has no velocity limits
    # Naming the parts explicitly overrides the guesses.
    named = read_arm(path, ee_link="hand", gripper_joints=("lift",))
    assert named.joint_names == ("shoulder", "elbow") and named.gripper_names == ("lift",)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"ee_link": "wrist"}, r"has no link 'wrist'; links: .*panda_link0"),
        ({"gripper_joints": ("claw",)}, r"has no joints \['claw'\]; joints: panda_joint1"),
    ],
)
def test_names_the_file_lacks_are_refused_with_the_names_it_has(kwargs: dict, match: str) -> None:
    with pytest.raises(SimError, match=match):
        read_arm(PANDA, **kwargs)


def test_a_file_that_is_no_robot_description_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SimError, match=r"expected a \.urdf or an MJCF \.xml file"):
        read_arm(tmp_path / "arm.sdf")
    (tmp_path / "arm.urdf").write_text("<robot name='x'><link name='a'/></robot>")
    with pytest.raises(SimError, match="no hinge or slide joints"):
        read_arm(tmp_path / "arm.urdf")
    with pytest.raises(SimError, match="not found"):
        read_arm(tmp_path / "missing.urdf")


def test_generic_kinematics_match_the_pandas_published_kinematics() -> None:
    desc = read_arm(PANDA)
    kin = ArmKinematics(desc.asset, desc.joint_names, desc.ee_link)
    rng = np.random.default_rng(0)
    low, high = np.array([j.low for j in desc.joints]), np.array([j.high for j in desc.joints])
    for q in rng.uniform(low, high, (20, 7)):
        np.testing.assert_allclose(kin.tool_position(q), tool_position(q), atol=1e-6)


def test_the_reachable_box_is_above_the_floor_and_around_the_base() -> None:
    low, high = reachable_box(read_arm(IIWA), samples=2000)
    assert low[2] >= 0.05 and high[2] < 1.4
    assert low[0] < 0 < high[0] and low[1] < 0 < high[1]


def _reach_task(controller: str) -> TaskCfg:
    """A minimal task on the iiwa, from the generic parts only."""
    desc = read_arm(IIWA)
    home = (0.0, 0.733, 0.0, -1.485, 0.0, 0.923, 0.0)
    robot = arm_robot(desc, "iiwa", home, controller=controller)  # type: ignore[arg-type]
    action = (
        ee_delta_action((0.3, -0.4, 0.1), (0.8, 0.4, 0.7))
        if controller == "cartesian"
        else joint_delta_action(desc, max_step=0.05)
    )
    never = DoneTerm(lambda env: np.zeros(env.num_envs, dtype=bool))
    return TaskCfg(
        name=f"iiwa_{controller}",
        embodiment="arm",
        description="test",
        scene=SceneCfg(robot=robot),
        control_dt=0.02,
        episode_length=200,
        action=action,
        observations={
            "ee": ObsTerm(frame_pos, "m", {"frame": "ee"}),
            "q": ObsTerm(joint_pos, "rad", {"joints": desc.joint_names}),
        },
        rewards={},
        success=never,
        state={"ee_target": (3,), "joint_target": (7,)},
    )


@pytest.mark.parametrize("backend", ["mujoco", "pybullet"])
def test_the_generic_cartesian_controller_moves_the_tool_where_asked(backend: str) -> None:
    cfg = _reach_task("cartesian")
    assert isinstance(cfg.scene.robot.actuators[0], CartesianImpedanceCfg)
    worlds = TaskWorlds(cfg, backend, 1, seed=0)
    try:
        worlds.reset_worlds(np.arange(1))
        start = worlds.observe()["ee"][0].astype(np.float64)
        for _ in range(60):  # 0.005 m per step for 1.2 s: 0.3 m up, then hold
            worlds.advance(np.array([[0.0, 0.0, 0.005]]))
        for _ in range(40):
            worlds.advance(np.zeros((1, 3)))
        end = worlds.observe()["ee"][0]
    finally:
        worlds.close()
    np.testing.assert_allclose(end - start, [0.0, 0.0, 0.3], atol=0.02)


def test_the_generic_joint_controller_follows_targets_inside_the_limits() -> None:
    cfg = _reach_task("joint")
    assert isinstance(cfg.scene.robot.actuators[0], JointPositionCfg)
    high = np.array(cfg.action.params["high"])
    worlds = TaskWorlds(cfg, "mujoco", 1, seed=0)
    try:
        worlds.reset_worlds(np.arange(1))
        step = np.zeros((1, 7))
        step[0, 0] = 0.05  # joint 1 turns at 2.5 rad/s toward its limit and past it, were it not held
        peak = -np.inf
        for _ in range(300):
            worlds.advance(step)
            peak = max(peak, float(worlds.observe()["q"][0, 0]))
        q = worlds.observe()["q"][0]
    finally:
        worlds.close()
    assert worlds.state["joint_target"][0, 0] == pytest.approx(high[0])
    assert q[0] == pytest.approx(high[0], abs=0.1) and peak <= high[0] + 0.01
    np.testing.assert_allclose(q[1:], cfg.scene.robot.init_joint_pos["lbr_iiwa_joint_2"], atol=2.5)


def test_derived_safety_limits_load_and_stop_a_joint_past_its_range(tmp_path: Path) -> None:
    desc = read_arm(IIWA)
    path = tmp_path / "iiwa.yaml"
    path.write_text(arm_safety_yaml(desc, workspace=((0.3, -0.4, 0.1), (0.8, 0.4, 0.7))))
    safety = SafetyCfg.load(path)
    assert safety.joints is not None
    for joint in desc.joints:  # 5% of the range inside both ends
        rng, pad = safety.joints[joint.name], 0.05 * (joint.high - joint.low)
        assert rng.low == pytest.approx(joint.low + pad, abs=1e-3)
        assert rng.high == pytest.approx(joint.high - pad, abs=1e-3)
    task = _reach_task("cartesian")
    layer = SafetyLayer(safety, task)
    tool, up = np.array([0.5, 0, 0.4]), np.array([1.0, 0, 0, 0])
    state = ArmState(np.zeros(7), np.zeros(7), tool, up, np.zeros(3), gripper_opening=0.0, stamp=0.0)
    layer.observed(0.0)
    assert layer.filter(np.array([0.0, 0.0, 0.005]), state, 0.0) == pytest.approx([0.0, 0.0, 0.005])
    # A state with the wrong number of joints is not trusted (the arm holds).
    short = replace(state, joint_pos=np.zeros(6), stamp=0.02)
    layer.observed(0.02)
    assert layer.filter(np.array([0.0, 0.0, 0.005]), short, 0.02) == pytest.approx([0.0, 0.0, 0.0])
    assert layer.counts["state"] == 1
    # A joint past its range is a protective stop, held (not rate-limited) until a reset.
    past = replace(state, joint_pos=np.array([0, 0, 0, -2.0, 0, 0, 0]), stamp=0.04)  # past -1.885
    layer.observed(0.04)
    assert layer.filter(np.array([0.0, 0.0, 0.005]), past, 0.04) == pytest.approx([0.0, 0.0, 0.0])
    layer.observed(0.06)
    back = replace(state, stamp=0.06)
    assert layer.filter(np.array([0.0, 0.0, 0.005]), back, 0.06) == pytest.approx([0.0, 0.0, 0.0])
    assert layer.counts["joint_limit"] == 2 and layer.stop_reason == "joint_limit"
    layer.reset()
    layer.observed(0.08)
    assert layer.filter(np.array([0.0, 0.0, 0.004]), replace(state, stamp=0.08), 0.08)[2] > 0
    # Limits for another robot's joints do not fit this task.
    other = replace(task.scene.robot, arm_joints=ARM_JOINTS)
    with pytest.raises(SafetyConfigError, match=r"joints lists lbr_iiwa_joint_1.*arm joints panda_joint1"):
        SafetyLayer(safety, replace(task, scene=replace(task.scene, robot=other)))


def test_an_arm_without_gripper_on_the_robot_and_ros_side() -> None:
    assert EeDelta.from_action(np.array([0.01, 0.0, -0.01])) == EeDelta(0.01, 0.0, -0.01)
    assert EeDelta(0.01, 0.0, -0.01).to_action().shape == (3,)
    assert EeDelta.from_action(np.array([0.0, 0.0, 0.0, 0.04])).gripper == 0.04
    codec = make_codec(_reach_task("cartesian"), "servo_twist")
    assert set(codec.roles()) == {"command"}
    panda = make_codec(make_task_cfg("panda_reach"), "servo_twist")
    assert set(panda.roles()) == {"command", "gripper_command"}


def test_record_excitation_writes_what_sysid_fits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``robolearn record TASK --excitation`` is system identification's recording under record's
    name (issue 19), for an arm with a servo per joint."""
    from robolearn.cli import main
    from robolearn.sysid.recording import read_recordings
    from robolearn.tasks import register_task, task_names

    if "iiwa_joint" not in task_names():
        register_task("iiwa_joint", lambda: _reach_task("joint"))
    main(["record", "iiwa_joint", "--excitation", "--episodes", "1", "--out", str(tmp_path / "ex")])
    assert "excitation episodes" in capsys.readouterr().out
    (recording,) = read_recordings(tmp_path / "ex")
    assert recording.qpos.shape[0] >= 700  # 8 s at 100 samples per second
    moved = recording.qpos.max(axis=0) - recording.qpos.min(axis=0)
    assert (moved > 0.05).all(), moved  # every joint was excited
    with pytest.raises(SystemExit) as exit_info:
        main(["record", "iiwa_joint", "--ros", "--out", str(tmp_path / "other")])
    assert exit_info.value.code == 2 and "add --excitation" in capsys.readouterr().err
