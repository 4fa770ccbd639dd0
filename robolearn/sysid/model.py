"""The MuJoCo model system identification fits: a task's robot, or any MJCF file, with joint sensors.

The spec is built once; every candidate the optimiser tries is a fresh copy with the candidate's
values written by :func:`robolearn.sim.mujoco_model.apply_identified`, the same function the
simulator uses for a parameter file, so what is fitted is exactly what the tasks then simulate. The
command delay is MuJoCo's own actuator delay (a history of past controls, read ``delay`` seconds
back), so it is fitted continuously rather than in whole control periods.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import mujoco
import numpy as np

from robolearn.errors import RobolearnError
from robolearn.sim.mujoco_model import apply_identified, build_spec
from robolearn.sim.scene import IdentifiedDynamics
from robolearn.tasks.core import TaskCfg
from robolearn.tasks.sim_params import MAX_DELAY

FIT_MAX_DELAY = 0.1
"""Longest command delay the fit considers (s); the actuators keep this much control history."""
assert FIT_MAX_DELAY <= MAX_DELAY


class SysidError(RobolearnError):
    """Data or a model that system identification cannot use; the message says what is wrong."""


_INTERP_LINEAR = 1
"""MuJoCo's actuator history interpolation: 0 zero-order hold, 1 linear (a delay between samples
then changes the motion smoothly, which finite differences need)."""


@dataclass(frozen=True)
class SysidModel:
    """A robot model prepared for identification."""

    spec: mujoco.MjSpec
    """The nominal model, with ``jointpos``/``jointvel`` sensors and control history."""
    robot: str
    """The robot's name (what a parameter file is fitted on)."""
    joints: tuple[str, ...]
    """Measured joints, in the order recordings list them."""
    actuators: tuple[str, ...]
    """Actuators, in control-input order."""
    robot_bodies: frozenset[str]
    """Links of the robot (the bodies ``mass_scale`` scales)."""
    home_qpos: dict[str, float]
    """Positions of joints not measured (a gripper, objects' free joints stay at qpos0)."""

    @property
    def pos_sensors(self) -> list[str]:
        return [f"sysid_pos:{j}" for j in self.joints]

    @property
    def vel_sensors(self) -> list[str]:
        return [f"sysid_vel:{j}" for j in self.joints]

    @property
    def effort_sensors(self) -> list[str]:
        return [f"sysid_effort:{j}" for j in self.joints]

    def compile(self, dyn: IdentifiedDynamics | None = None) -> mujoco.MjModel:
        """The model with ``dyn`` applied (the nominal one without)."""
        spec = self.spec.copy()
        if dyn is not None:
            apply_identified(spec, dyn, set(self.robot_bodies))
            for act in spec.actuators:
                act.delay = dyn.command_delay
        return spec.compile()

    def initial_state(
        self, model: mujoco.MjModel, qpos: np.ndarray, qvel: np.ndarray, ctrl: np.ndarray
    ) -> np.ndarray:
        """Full physics state at a recording's first frame; the control history holds its first command
        (the robot held it before the recording started)."""
        data = mujoco.MjData(model)
        for name, value in self.home_qpos.items():
            data.joint(name).qpos[0] = value
        for j, name in enumerate(self.joints):
            data.joint(name).qpos[0] = qpos[j]
            data.joint(name).qvel[0] = qvel[j]
        data.ctrl[:] = ctrl
        for i in range(model.nu):
            nsample = int(model.actuator_history[i, 0])
            if nsample:
                mujoco.mj_initCtrlHistory(model, data, i, None, np.full((nsample, 1), ctrl[i]))
        state = np.empty(mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_FULLPHYSICS))
        mujoco.mj_getState(model, data, state, mujoco.mjtState.mjSTATE_FULLPHYSICS)
        return state


def _prepare(
    spec: mujoco.MjSpec, robot: str, bodies: set[str], joints: tuple[str, ...], home: dict[str, float]
) -> SysidModel:
    # Effort (the actuators' torque at each joint, as joint torque sensors or motor currents report it)
    # fixes the scale: without it, masses, friction, damping and gains scaled together move alike.
    # mujoco.sysid compares a recording's columns with the model's first sensors: the measured ones
    # (positions, velocities, then efforts) must be the only ones, in that order.
    for sensor in list(spec.sensors):
        spec.delete(sensor)
    kinds = (("pos", "JOINTPOS"), ("vel", "JOINTVEL"), ("effort", "JOINTACTFRC"))
    for prefix, kind in kinds:
        for joint in joints:
            spec.add_sensor(
                name=f"sysid_{prefix}:{joint}",
                type=getattr(mujoco.mjtSensor, f"mjSENS_{kind}"),
                objtype=mujoco.mjtObj.mjOBJ_JOINT,
                objname=joint,
            )
    nsample = math.ceil(FIT_MAX_DELAY / spec.option.timestep) + 2
    for act in spec.actuators:
        act.nsample = nsample
        act.interp = _INTERP_LINEAR
    actuators = tuple(a.name for a in spec.actuators)
    if not actuators or any(not a for a in actuators):
        raise SysidError(
            f"robot {robot}: system identification needs named actuators, found {list(actuators)}"
        )
    return SysidModel(spec, robot, joints, actuators, frozenset(bodies), home)


def _moving_joints(spec: mujoco.MjSpec, bodies: set[str]) -> tuple[str, ...]:
    hinge_slide = (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)
    return tuple(j.name for j in spec.joints if j.type in hinge_slide and j.parent.name in bodies)


def model_from_task(cfg: TaskCfg, joints: tuple[str, ...] = ()) -> SysidModel:
    """The robot of a task's scene (its controllers as actuators); ``joints`` defaults to every hinge
    and slide joint of the robot."""
    scene = replace(cfg.scene, robot=replace(cfg.scene.robot, identified=None), objects=(), ground=False)
    spec = build_spec(scene)
    bodies = {b.name for b in spec.bodies} - {"world"}
    chosen = joints or _moving_joints(spec, bodies)
    home = {k: v for k, v in cfg.scene.robot.init_joint_pos.items() if k not in chosen}
    return _prepare(spec, cfg.scene.robot.name, bodies, chosen, home)


def model_from_mjcf(path: Path | str, joints: tuple[str, ...] = ()) -> SysidModel:
    """A robot from an MJCF file with its own actuators; the robot is named after the file."""
    path = Path(path)
    try:
        spec = mujoco.MjSpec.from_file(str(path))
    except (ValueError, OSError) as exc:
        raise SysidError(f"cannot read robot model {path}: {exc}".replace("\n", " ")) from None
    bodies = {b.name for b in spec.bodies} - {"world"}
    return _prepare(spec, spec.modelname or path.stem, bodies, joints or _moving_joints(spec, bodies), {})
