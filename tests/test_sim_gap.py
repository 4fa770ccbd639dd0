"""The reality gap's parameters (issue 10): object mass and friction, the robot's contact friction
(a car's tyres) and a drone's motor constant, read from a ``robolearn sysid`` parameter file and
applied by every host backend. Each test measures the physics, not the stored number."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from test_pybullet_backend import FLYER_URDF

from robolearn.sim.backend import HOST_BACKENDS, make_backend
from robolearn.sim.mujoco_backend import MujocoBackend
from robolearn.sim.scene import (
    BoxObjectCfg,
    IdentifiedDynamics,
    RobotCfg,
    SceneCfg,
    ThrustBodyRateCfg,
    UrdfAsset,
)
from robolearn.tasks import make_task_cfg
from robolearn.tasks.sim_params import (
    IdentifiedParam,
    SimParams,
    SimParamsError,
    apply_sim_params,
    load_sim_params,
    save_sim_params,
)

ONE = np.arange(1)
G = 9.81
FLYER_MASS = 0.5
CUBE_MASS = 0.2
HALF = (0.03, 0.03, 0.01)
"""A flat box: launched at a friction of 1.5 it slides instead of tumbling."""


def flyer_scene(folder: Path, dyn: IdentifiedDynamics, *, ground: bool, cube_z: float | None) -> SceneCfg:
    """The flyer at 1 m (or resting on the ground), optionally with a cube resting on it or beside it."""
    path = folder / "flyer.urdf"
    path.write_text(FLYER_URDF.format(com="0 0 0"))  # a 0.5 kg box: a drone without propellers
    robot = RobotCfg(
        name="flyer",
        asset=UrdfAsset(path),
        fixed_base=False,
        base_pos=(0.0, 0.0, 1.0 if not ground else 0.02),
        actuators=(
            ThrustBodyRateCfg("flyer", max_thrust=20.0, rate_gain=(0.05,) * 3, max_torque=(0.2,) * 3),
        ),
        # Both engines' coefficients made equal (PyBullet's URDF default is 0.5, MuJoCo's 1).
        collision_friction=(1.0, 0.005, 0.0001),
        identified=dyn,
    )
    objects = ()
    if cube_z is not None:
        objects = (BoxObjectCfg("cube", HALF, CUBE_MASS, (0.0 if not ground else 0.5, 0.0, cube_z)),)
    return SceneCfg(robot=robot, objects=objects, ground=ground)


def lifted_height(backend: str, scene: SceneCfg, thrust: float, steps: int = 150) -> float:
    """Height gained by the flyer (and whatever rests on it) under a constant thrust, level flight."""
    sim = make_backend(backend, scene, 1)
    try:
        sim.reset_worlds(ONE)
        sim.forward(ONE)
        start = float(sim.frame_pos("flyer")[0, 2])
        for _ in range(steps):
            sim.step(np.array([[thrust, 0.0, 0.0, 0.0]]), 1)
        return float(sim.frame_pos("flyer")[0, 2]) - start
    finally:
        sim.close()


def slide_distance(backend: str, scene: SceneCfg, entity: str, speed: float = 1.0, steps: int = 300) -> float:
    """How far ``entity`` slides on the ground after being launched along x at ``speed`` (m/s)."""
    sim = make_backend(backend, scene, 1)
    try:
        sim.reset_worlds(ONE)
        sim.forward(ONE)
        for _ in range(25):  # settle the contact first
            sim.step(np.zeros((1, sim.num_controls)), 1)
        pos = sim.frame_pos(entity).copy()
        sim.set_root_state(ONE, entity, pos, sim.frame_quat(entity), np.array([[speed, 0.0, 0.0]]))
        sim.forward(ONE)
        for _ in range(steps):
            sim.step(np.zeros((1, sim.num_controls)), 1)
        return float(sim.frame_pos(entity)[0, 0] - pos[0, 0])
    finally:
        sim.close()


@pytest.mark.parametrize("backend", HOST_BACKENDS)
def test_mass_and_motor_constant_change_a_drones_climb(backend: str, tmp_path: Path) -> None:
    thrust, steps = 8.0, 150
    t = steps * 0.002
    for mass_scale, gain in ((1.0, 1.0), (1.5, 0.8)):
        dyn = IdentifiedDynamics(mass_scale=mass_scale, actuator_gain_scale={"thrust": gain})
        climbed = lifted_height(backend, flyer_scene(tmp_path, dyn, ground=False, cube_z=None), thrust, steps)
        accel = gain * thrust / (mass_scale * FLYER_MASS) - G
        assert climbed == pytest.approx(0.5 * accel * t**2, abs=2e-3), (mass_scale, gain)


@pytest.mark.parametrize("backend", HOST_BACKENDS)
def test_object_mass_scale_weighs_on_what_carries_the_object(backend: str, tmp_path: Path) -> None:
    # The flyer lifts a cube resting on its top face: the stack's climb depends on the cube's mass.
    thrust, steps = 14.0, 150
    t = steps * 0.002
    on_top = 1.0 + 0.02 + HALF[2]
    climbs = {}
    for scale in (1.0, 4.0):
        scene = flyer_scene(
            tmp_path, IdentifiedDynamics(object_mass_scale=scale), ground=False, cube_z=on_top
        )
        climbs[scale] = lifted_height(backend, scene, thrust, steps)
        expected = 0.5 * (thrust / (FLYER_MASS + scale * CUBE_MASS) - G) * t**2
        # The contact settles by a millimetre or so while the stack starts to climb.
        assert climbs[scale] == pytest.approx(expected, rel=0.1, abs=3e-3), scale
    assert climbs[4.0] < 0.6 * climbs[1.0]


@pytest.mark.parametrize("backend", HOST_BACKENDS)
@pytest.mark.parametrize("which", ["object", "robot"])
def test_friction_scales_change_how_far_a_body_slides(backend: str, which: str, tmp_path: Path) -> None:
    # Sliding distance v^2 / (2 mu g): half the friction, twice the distance (both engines' contact
    # models: Bullet's product of the two sides, MuJoCo's prioritized side).
    entity = "cube" if which == "object" else "flyer"
    distances = {}
    for scale in (1.0, 0.5):
        dyn = IdentifiedDynamics(**{f"{which}_friction_scale": scale})
        scene = flyer_scene(tmp_path, dyn, ground=True, cube_z=HALF[2])
        distances[scale] = slide_distance(backend, scene, entity)
    for scale, distance in distances.items():
        assert distance == pytest.approx(1.0 / (2 * scale * 1.0 * G), rel=0.1), scale  # all coefficients 1


def test_a_parameter_file_carries_the_gap_into_the_pick_cube_task(tmp_path: Path) -> None:
    cfg = make_task_cfg("panda_pick_cube")
    robot = cfg.scene.robot.name
    params = {
        "object_mass_scale": IdentifiedParam(2.0, 0.0, 1.0),
        "object_friction_scale": IdentifiedParam(0.6, 0.0, 1.0),
        "robot_friction_scale": IdentifiedParam(0.9, 0.0, 1.0),
    }
    save_sim_params(SimParams(robot, params), tmp_path / "gap.yaml")
    loaded = load_sim_params(tmp_path / "gap.yaml")
    dyn = apply_sim_params(cfg, loaded).scene.robot.identified
    assert dyn is not None
    assert (dyn.object_mass_scale, dyn.object_friction_scale, dyn.robot_friction_scale) == (2.0, 0.6, 0.9)
    # Built by MuJoCo: the cube weighs twice its nominal mass and grips with 0.6 of its friction.
    sim = MujocoBackend(replace(cfg.scene, robot=replace(cfg.scene.robot, identified=dyn)), 1)
    nominal = MujocoBackend(cfg.scene, 1)
    body = sim.model.body("cube").id
    geom = sim.model.body_geomadr[body]
    assert sim.model.body_mass[body] == pytest.approx(2.0 * nominal.model.body_mass[body])
    assert sim.model.geom_friction[geom, 0] == pytest.approx(0.6 * nominal.model.geom_friction[geom, 0])
    assert sim.model.geom_priority[geom] == 1  # MuJoCo: the cube's own coefficient decides its contacts


@pytest.mark.parametrize("name", ["object_mass_scale", "object_friction_scale", "robot_friction_scale"])
def test_a_scale_that_is_not_positive_is_refused_by_name(name: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(f"robot: panda\nparameters:\n  {name}: {{value: 0.0, std: 0.0, nominal: 1.0}}\n")
    with pytest.raises(SimParamsError, match=f"{name} must be positive"):
        load_sim_params(path)
