"""System identification (issue 19): recovery of known perturbations, the parameter file, recordings."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from robolearn.bench.sysid import ARM  # the benchmark's small arm: joint ranges +-2.5 rad, servos
from robolearn.sim.scene import IdentifiedDynamics
from robolearn.sysid.excitation import joint_excitation, multisine
from robolearn.sysid.fit import identify, simulate
from robolearn.sysid.model import SysidError, SysidModel, model_from_mjcf
from robolearn.sysid.recording import Recording, read_recordings, write_dataset
from robolearn.tasks import make_task_cfg
from robolearn.tasks.sim_params import (
    IdentifiedParam,
    SimParams,
    SimParamsError,
    apply_sim_params,
    load_sim_params,
    save_sim_params,
)
from robolearn.tasks.worlds import TaskWorlds


@pytest.fixture
def arm(tmp_path: Path) -> SysidModel:
    path = tmp_path / "two_link.xml"
    path.write_text(ARM)
    return model_from_mjcf(path)


def _recordings(arm: SysidModel, truth: IdentifiedDynamics, episodes: int = 2) -> list[Recording]:
    dt, out = 0.01, []
    for seed in range(episodes):
        ctrl = joint_excitation(arm, 4.0, dt, 0.8, seed=seed)
        n = len(ctrl)
        blank = Recording(
            f"ep{seed}",
            np.arange(n) * dt,
            arm.joints,
            np.zeros((n, len(arm.joints))),
            np.zeros((n, len(arm.joints))),
            arm.actuators,
            ctrl,
        )
        out.append(simulate(arm, blank, truth))
    return out


def test_sysid_recovers_known_perturbations(arm: SysidModel) -> None:
    truth = IdentifiedDynamics(
        joint_frictionloss={"joint1": 0.2, "joint2": 0.2, "joint3": 0.1},
        actuator_gain_scale={"servo1": 0.8, "servo2": 0.8, "servo3": 0.8},
        mass_scale=1.3,
        command_delay=0.02,
    )
    fit = identify(arm, _recordings(arm, truth), ("frictionloss", "gain", "mass", "delay"), max_iters=50)
    got = {k: p.value for k, p in fit.params.params.items()}
    expected = {
        "joint1.frictionloss": 0.2,
        "joint2.frictionloss": 0.2,
        "joint3.frictionloss": 0.1,
        "servo1.gain": 0.8,
        "servo2.gain": 0.8,
        "servo3.gain": 0.8,
        "mass_scale": 1.3,
        "command_delay": 0.02,
    }
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, rel=0.05), name
    assert fit.final_cost < 1e-3 * fit.initial_cost


def test_replay_takes_each_command_at_its_nearest_physics_step(arm: SysidModel) -> None:
    """Times read from a bag are differences of epoch seconds, off by up to a few hundred ns: a
    command stamped 150 ns after its physics step acts at that step, as on the exact grid (before,
    it acted one physics step late, a delay the fit took for dynamics)."""
    rec = _recordings(arm, IdentifiedDynamics(), episodes=1)[0]
    jitter = np.where(np.arange(len(rec.times)) % 2 == 1, 1.5e-7, -1.5e-7)
    jitter[0] = 0.0
    jittered = replace(rec, times=rec.times + jitter)
    exact, shifted = simulate(arm, rec, None), simulate(arm, jittered, None)
    np.testing.assert_allclose(shifted.qpos, exact.qpos, atol=1e-5)
    # A command one physics step late moves the arm visibly: the test can tell.
    late = replace(rec, times=rec.times + 0.6 * arm.compile().opt.timestep)
    late.times[0] = 0.0
    assert np.abs(simulate(arm, late, None).qpos - exact.qpos).max() > 1e-3


def test_multisine_stays_within_amplitude_and_starts_at_rest() -> None:
    amp = np.array([0.3, 0.7])
    x = multisine(500, 0.01, amp, seed=3)
    assert x.shape == (500, 2)
    assert (np.abs(x) <= amp + 1e-12).all()
    assert np.abs(x[0]).max() == 0.0
    assert (np.abs(x).max(axis=0) > 0.5 * amp).all()  # it does excite
    with pytest.raises(SysidError, match="half the sample rate"):
        multisine(100, 0.01, amp, f_high=60.0)


def test_joint_excitation_respects_joint_limits(arm: SysidModel) -> None:
    targets = joint_excitation(arm, 5.0, 0.01, 3.0)  # asks for more than the range allows
    assert (targets >= -2.5 + 0.1 - 1e-12).all() and (targets <= 2.5 - 0.1 + 1e-12).all()


def test_dataset_round_trip(arm: SysidModel, tmp_path: Path) -> None:
    recs = _recordings(arm, IdentifiedDynamics(), episodes=1)
    write_dataset(tmp_path / "ds", recs, arm.robot, fps=100)
    back = read_recordings(tmp_path / "ds")
    assert len(back) == 1 and back[0].joints == arm.joints and back[0].actuators == arm.actuators
    np.testing.assert_allclose(back[0].qpos, recs[0].qpos, atol=1e-5)
    assert back[0].effort is not None


def test_recordings_refuse_what_they_cannot_use(arm: SysidModel, tmp_path: Path) -> None:
    with pytest.raises(SysidError, match="neither a LeRobot dataset"):
        read_recordings(tmp_path)
    rec = _recordings(arm, IdentifiedDynamics(), episodes=1)[0]
    bad = Recording("nan", rec.times, rec.joints, rec.qpos * np.nan, rec.qvel, rec.actuators, rec.ctrl)
    with pytest.raises(SysidError, match="non-finite positions"):
        bad.check()
    other = Recording("other", rec.times, ("a", "b", "c"), rec.qpos, rec.qvel, rec.actuators, rec.ctrl)
    with pytest.raises(SysidError, match=r"needs joints \['joint1', 'joint2', 'joint3'\]"):
        other.for_model(arm)


def _panda_params() -> SimParams:
    return SimParams(
        "panda",
        {
            "panda_joint1.damping": IdentifiedParam(2.0, 0.1, 1.0),
            "panda_joint1.frictionloss": IdentifiedParam(0.3, 0.01, 0.0),
            "mass_scale": IdentifiedParam(1.1, 0.011, 1.0),
            "command_delay": IdentifiedParam(0.04, 0.005, 0.0),
        },
    )


def test_parameter_file_round_trip_and_task(tmp_path: Path) -> None:
    path = tmp_path / "sim_params.yaml"
    save_sim_params(_panda_params(), path)
    params = load_sim_params(path)
    assert params == _panda_params()
    cfg = apply_sim_params(make_task_cfg("panda_reach"), params)
    dyn = cfg.scene.robot.identified
    assert dyn is not None and dyn.joint_damping == {"panda_joint1": 2.0} and dyn.mass_scale == 1.1
    # Randomization centred on the identified values, two standard deviations wide.
    assert cfg.randomization.mass_scale == pytest.approx((0.98, 1.02))
    assert cfg.randomization.damping_scale == pytest.approx((0.9, 1.1))
    assert cfg.randomization.action_latency_steps == (-1, 1)
    worlds = TaskWorlds("panda_reach", "mujoco", 1, seed=0, sim_params=path)
    try:
        model = worlds.sim.model  # type: ignore[attr-defined]
        dof = model.joint("panda_joint1").dofadr[0]
        assert model.dof_damping[dof] == pytest.approx(2.0)
        assert model.dof_frictionloss[dof] == pytest.approx(0.3)
        assert worlds._latency.tolist() == [2]  # 40 ms at a 20 ms control period
    finally:
        worlds.close()


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("robot: panda\n", "parameters must be a non-empty mapping"),
        ("- 1\n", "expected a mapping"),
        (
            "robot: panda\nparameters: {mass_scale: {value: -1, std: 0, nominal: 1}}\n",
            "mass_scale must be positive",
        ),
        (
            "robot: panda\nparameters: {command_delay: {value: 5, std: 0, nominal: 0}}\n",
            "command_delay must be within",
        ),
        ("robot: panda\nparameters: {j.damping: {value: .nan, std: 0, nominal: 0}}\n", "must be finite"),
        ("robot: panda\nparameters: {j.damping: {value: 1, std: -1, nominal: 0}}\n", "std >= 0"),
        ("robot: panda\nparameters: {j.damping: {value: 1}}\n", "mapping of value, std and nominal"),
        ("robot: panda\nparameters: {j.stiffness: {value: 1, std: 0, nominal: 0}}\n", "unknown parameter"),
        ("robot: panda\nparameters: {payload_mass: {value: 1, std: 0, nominal: 0}}\n", "come together"),
        ("robot: panda\nparameters: {j.gain: {value: [1], std: 0, nominal: 1}}\n", "must be a number"),
        (
            "robot: panda\nextra: 1\nparameters: {mass_scale: {value: 1, std: 0, nominal: 1}}\n",
            "unknown keys",
        ),
        ("robot: [\n", "not a YAML parameter file"),
    ],
)
def test_hostile_parameter_files(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(SimParamsError, match=match):
        load_sim_params(path)


def test_parameters_of_another_robot_are_refused() -> None:
    params = SimParams("tiny_arm", {"mass_scale": IdentifiedParam(1.0, 0.0, 1.0)})
    with pytest.raises(SimParamsError, match="fitted on robot 'tiny_arm'"):
        apply_sim_params(make_task_cfg("panda_reach"), params)


# -- parameter files everywhere a simulated robot is made (issue 19) ---------------------------------
def _write_panda_params(tmp_path: Path) -> Path:
    path = tmp_path / "sim_params.yaml"
    save_sim_params(_panda_params(), path)
    return path


def test_sim_robot_and_training_take_a_parameter_file(tmp_path: Path) -> None:
    from robolearn.hardware.sim_robot import make_sim_robot
    from robolearn.rl.config import TrainCfg
    from robolearn.rl.train import make_train_env

    path = _write_panda_params(tmp_path)
    robot = make_sim_robot("panda_reach", sim_params=path)
    assert robot.task_cfg.scene.robot.identified == _panda_params().dynamics()
    env = make_train_env(TrainCfg(task="panda_reach", backend="mujoco", sim_params=path), 1, seed=0)
    try:
        dof = env.sim.model.joint("panda_joint1").dofadr[0]
        assert env.sim.model.dof_damping[dof] == pytest.approx(2.0)
    finally:
        env.close()
    bad = tmp_path / "bad.yaml"
    bad.write_text("robot: panda\nparameters: {mass_scale: {value: -1, std: 0, nominal: 1}}\n")
    with pytest.raises(SimParamsError, match="mass_scale must be positive"):
        make_sim_robot("panda_reach", sim_params=bad)
    with pytest.raises(SimParamsError, match="mass_scale must be positive"):
        TrainCfg(task="panda_reach", sim_params=bad).check()


def test_pybullet_applies_identified_dynamics(tmp_path: Path) -> None:
    params = SimParams(
        "panda",
        {
            "panda_joint1.damping": IdentifiedParam(2.0, 0.0, 1.0),
            "panda_joint2.frictionloss": IdentifiedParam(0.5, 0.0, 0.0),
            "ee_cart0.gain": IdentifiedParam(0.8, 0.0, 1.0),
            "mass_scale": IdentifiedParam(1.3, 0.0, 1.0),
            "command_delay": IdentifiedParam(0.02, 0.0, 0.0),
        },
    )
    path = tmp_path / "p.yaml"
    save_sim_params(params, path)
    plain = TaskWorlds("panda_reach", "pybullet", 1, seed=0)
    worlds = TaskWorlds("panda_reach", "pybullet", 1, seed=0, sim_params=path)
    try:
        sim, ref = worlds.sim, plain.sim
        assert sim._nominal.damping[sim._dof["panda_joint1"]] == pytest.approx(2.0)  # type: ignore[attr-defined]
        assert sim._joint_friction[sim._dof["panda_joint2"]] == pytest.approx(0.5)  # type: ignore[attr-defined]
        assert sim._ctrl_gain[0] == pytest.approx(0.8)  # type: ignore[attr-defined]
        mass, nominal = (
            sim._clients[0].getDynamicsInfo(sim._robot, 3)[0],
            ref._clients[0].getDynamicsInfo(ref._robot, 3)[0],
        )  # type: ignore[attr-defined]
        assert mass == pytest.approx(1.3 * nominal)
        assert worlds._latency.tolist() == [1]
    finally:
        worlds.close()
        plain.close()


@pytest.mark.ros
def test_sim_robot_node_refuses_a_bad_parameter_file(tmp_path: Path) -> None:
    pytest.importorskip("rclpy")
    import subprocess
    import sys

    bad = tmp_path / "bad.yaml"
    bad.write_text("robot: panda\nparameters: {j.stiffness: {value: 1, std: 0, nominal: 0}}\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "robolearn.hardware.ros.sim_robot_node",
            "--ros-args",
            "-p",
            f"sim_params:={bad}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "unknown parameter 'j.stiffness'" in lines[0], proc.stderr


@pytest.mark.parametrize("command", ["eval", "train"])
def test_cli_refuses_a_bad_parameter_file_in_one_line(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from robolearn.cli import main

    args = [command, "panda_reach", "--sim-params", str(tmp_path / "none.yaml"), "--out", str(tmp_path)]
    with pytest.raises(SystemExit) as exc:
        main(args if command == "train" else args[:-2])
    assert exc.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "none.yaml: no such parameter file" in lines[0], lines


def test_cli_sysid_fits_a_dataset_and_writes_the_parameter_file_report_and_plot(
    arm: SysidModel, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``robolearn sysid ROBOT --data PATH`` as a user runs it, on a small dataset of a known gap."""
    import json

    from robolearn.cli import main

    damping = {"joint1": 0.6, "joint2": 0.45, "joint3": 0.3}  # nominal 0.3, 0.3, 0.2
    write_dataset(
        tmp_path / "ds", _recordings(arm, IdentifiedDynamics(joint_damping=damping), 1), arm.robot, 100
    )
    out = tmp_path / "fit"
    robot = str(tmp_path / "two_link.xml")  # the fixture's file
    main(
        [
            "sysid",
            robot,
            "--data",
            str(tmp_path / "ds"),
            "--fit",
            "damping",
            "--max-iters",
            "10",
            "--out",
            str(out),
        ]
    )
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["final_cost"] < 1e-3 * result["initial_cost"]
    params = load_sim_params(out / "sim_params.yaml")
    assert params.robot == arm.robot
    for joint, value in damping.items():
        assert params.params[f"{joint}.damping"].value == pytest.approx(value, rel=0.05), joint
    html = (out / "report.html").read_text()
    assert "<html" in html.lower() and "joint1.damping" in html
    assert (out / "trajectories.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -- excitation over ROS 2 ------------------------------------------------------------------------
@pytest.mark.ros
def test_ros_excitation_through_the_safety_layer_reads_back(tmp_path: Path) -> None:
    """The recorder's command log is what the robot applied (``applied_action``), on the robot's
    step clock: the MuJoCo robot's motion replays through the same MuJoCo model closely, however
    many commands the loaded machine delivered late. The link loses 2 % of the sensor messages: an
    episode is split where a sample is missing."""
    pytest.importorskip("rclpy")
    pytest.importorskip("rosbags")
    from robolearn.hardware.ros.harness import private_domain, start_node, stop_node
    from robolearn.sysid.model import model_from_task
    from robolearn.sysid.ros_excitation import RosExcitationCfg, record_ros_excitation

    domain = private_domain()
    robot = {"task": "panda_reach", "backend": "mujoco", "drop_rate": 0.02}
    node = start_node("sim_robot_node", robot, domain)
    try:
        summary = record_ros_excitation(
            RosExcitationCfg("panda_reach", tmp_path / "rec", episodes=2, timeout=90), domain
        )
    finally:
        stop_node(node)
    assert summary["episodes"] == 2 and summary["command_log"] == ["applied"]
    assert summary["missing_actions"] == 0 and len(summary["per_episode"]) == 2
    recordings = read_recordings(tmp_path / "rec")
    # Several recordings per episode where samples were lost, each of at least 10 samples.
    assert summary["missing_samples"] > 0  # 3 sources at 2 %: about 6 % of the samples are incomplete
    assert len(recordings) == summary["stretches"] > 2
    assert sum(len(r.times) for r in recordings) == summary["frames"]
    cfg = make_task_cfg("panda_reach")
    model = model_from_task(cfg, cfg.scene.robot.arm_joints)
    errors, targets = [], []
    for rec in recordings:
        rec = rec.for_model(model)
        assert len(rec.times) >= 10 and rec.effort is None
        np.testing.assert_allclose(np.diff(rec.times), cfg.control_dt, atol=1e-6)  # the step clock
        # The tool target stayed inside the Panda's safety workspace.
        target = rec.ctrl[:, :3]
        assert (target >= np.array([0.28, -0.3, 0.015]) - 0.06).all()
        assert (target <= np.array([0.65, 0.3, 0.55]) + 0.06).all()
        targets.append(target)
        errors.append(simulate(model, rec, None).qpos - rec.qpos)
    # The excitation moved the target: over the episodes (a stretch between two lost samples can be
    # too short to move 1 cm; one measured 7.5 mm).
    assert np.ptp(np.concatenate(targets), axis=0).max() > 0.05
    rms = float(np.sqrt(np.mean(np.concatenate(errors) ** 2)))
    assert rms < 2e-3, rms
