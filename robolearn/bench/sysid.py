"""``robolearn bench sysid``: how well system identification recovers known perturbations (issue 19)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import numpy as np

from robolearn.bench.config import SysidBenchCfg
from robolearn.eval.stats import difference_of_proportions_ci
from robolearn.sim.scene import IdentifiedDynamics
from robolearn.sysid.excitation import joint_excitation
from robolearn.sysid.fit import identify, simulate
from robolearn.sysid.model import SysidError, SysidModel, model_from_mjcf, model_from_task
from robolearn.sysid.recording import Recording, read_recordings
from robolearn.tasks import make_task_cfg
from robolearn.tasks.sim_params import IdentifiedParam, SimParams, save_sim_params

ARM = """<mujoco model="bench_arm">
  <compiler angle="radian"/>
  <option timestep="0.002" integrator="implicitfast"/>
  <worldbody>
    <body name="link1" pos="0 0 0.1">
      <inertial pos="0 0 0.1" mass="1.0" diaginertia="0.01 0.01 0.002"/>
      <joint name="joint1" type="hinge" axis="0 0 1" range="-2.5 2.5" armature="0.01" damping="0.3"
             frictionloss="0.1"/>
      <body name="link2" pos="0 0 0.2">
        <inertial pos="0.1 0 0" mass="0.8" diaginertia="0.002 0.008 0.008"/>
        <joint name="joint2" type="hinge" axis="0 1 0" range="-2.5 2.5" armature="0.01" damping="0.3"
               frictionloss="0.1"/>
        <body name="link3" pos="0.2 0 0">
          <inertial pos="0.08 0 0" mass="0.5" diaginertia="0.001 0.004 0.004"/>
          <joint name="joint3" type="hinge" axis="0 1 0" range="-2.5 2.5" armature="0.005" damping="0.2"
                 frictionloss="0.05"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position name="servo1" joint="joint1" kp="40" kv="2"/>
    <position name="servo2" joint="joint2" kp="40" kv="2"/>
    <position name="servo3" joint="joint3" kp="20" kv="1"/>
  </actuator>
</mujoco>"""
"""A small arm with position servos (the robot files of the tasks need longer fits)."""

CONTROL_DT = 0.01
"""Command and sample period of the recordings (s)."""


def run_sysid_bench(
    cfg: SysidBenchCfg, progress: Callable[[str], None]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rows (one per parameter: true, identified, relative error) and the summary."""
    with TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench_arm.xml"
        path.write_text(ARM)
        arm = model_from_mjcf(path)
    truth = IdentifiedDynamics(
        joint_frictionloss={"joint1": 0.2, "joint2": 0.2, "joint3": 0.1},
        actuator_gain_scale=dict.fromkeys(arm.actuators, 0.8),
        mass_scale=1.3,
        command_delay=0.02,
    )
    true_values = {"joint1.frictionloss": 0.2, "joint2.frictionloss": 0.2, "joint3.frictionloss": 0.1}
    true_values |= {f"{a}.gain": 0.8 for a in arm.actuators} | {"mass_scale": 1.3}
    true_values |= {"joint1.armature": 0.01, "joint2.armature": 0.01, "joint3.armature": 0.005}
    true_values |= {"joint1.damping": 0.3, "joint2.damping": 0.3, "joint3.damping": 0.2}
    rng = np.random.default_rng(cfg.seed)
    recordings = []
    for ep in range(cfg.episodes):
        ctrl = joint_excitation(arm, cfg.seconds, CONTROL_DT, 0.8, seed=cfg.seed + ep)
        n, j = len(ctrl), len(arm.joints)
        blank = Recording(
            f"ep{ep}",
            np.arange(n, dtype=np.float64) * CONTROL_DT,
            arm.joints,
            np.zeros((n, j)),
            np.zeros((n, j)),
            arm.actuators,
            ctrl,
        )
        rec = simulate(arm, blank, truth)
        assert rec.effort is not None

        def noisy(x: np.ndarray) -> np.ndarray:
            return x + rng.normal(0.0, cfg.noise, x.shape) * max(float(np.std(x)), 1e-9) / 0.5

        recordings.append(
            Recording(
                rec.name,
                rec.times,
                rec.joints,
                rec.qpos + rng.normal(0, cfg.noise, rec.qpos.shape),
                noisy(rec.qvel),
                rec.actuators,
                rec.ctrl,
                noisy(rec.effort),
            )
        )
    progress(f"sysid: fitting {len(true_values) + 1} parameters to {cfg.episodes} episodes")
    start = time.perf_counter()
    fit = identify(arm, recordings, ("armature", "frictionloss", "damping", "gain", "mass", "delay"))
    seconds = time.perf_counter() - start
    rows: list[dict[str, Any]] = []
    for name, p in fit.params.params.items():
        if name == "command_delay":
            continue
        rel = abs(p.value - true_values[name]) / abs(true_values[name])
        rows.append(
            {
                "parameter": name,
                "true": true_values[name],
                "identified": p.value,
                "std": p.std,
                "relative_error": rel,
            }
        )
    delay = fit.params.params["command_delay"]
    summary: dict[str, Any] = {
        "sysid_param_error_max": max(r["relative_error"] for r in rows),
        "sysid_delay_error_ms": abs(delay.value - 0.02) * 1e3,
        "sysid_control_period_ms": CONTROL_DT * 1e3,
        "sysid_fit_seconds": seconds,
        "sysid_parameters": len(rows) + 1,
    }
    if cfg.ros:
        with TemporaryDirectory() as tmp:
            summary |= run_sysid_ros_bench(cfg, progress, Path(tmp))
    return rows, summary


def format_sysid_table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'parameter':24s} {'true':>10s} {'identified':>12s} {'std':>10s} {'rel. error':>10s}"]
    lines += [
        f"{r['parameter']:24s} {r['true']:10.4g} {r['identified']:12.5g} {r['std']:10.3g} "
        f"{r['relative_error']:10.2e}"
        for r in rows
    ]
    return "\n".join(lines)


# -- the PyBullet robot over ROS 2 -----------------------------------------------------------------
ROS_TASK = "panda_reach"
"""The task whose robot the ROS 2 half excites (an arm task with a PyBullet scene)."""


def gap_params() -> SimParams:
    """The deliberate gap of the PyBullet robot: masses +30 %, joint friction x2 (the Panda file has
    viscous friction only: damping 1 -> 2 N m s/rad), Cartesian controller gains -20 %, 20 ms delay."""
    cfg = make_task_cfg(ROS_TASK)
    robot = cfg.scene.robot
    params = {
        f"{j}.damping": IdentifiedParam(2.0 * robot.joint_damping[j], 0.0, robot.joint_damping[j])
        for j in robot.arm_joints
    }
    params |= {f"ee_cart{a}.gain": IdentifiedParam(0.8, 0.0, 1.0) for a in range(6)}
    params["mass_scale"] = IdentifiedParam(1.3, 0.0, 1.0)
    params["command_delay"] = IdentifiedParam(0.02, 0.0, 0.0)
    return SimParams(robot.name, params, source={"what": "robolearn bench sysid: the deliberate gap"})


def trajectory_error(model: SysidModel, recordings: list[Recording], dyn: IdentifiedDynamics | None) -> float:
    """RMS joint position error (rad) of open-loop replays of ``recordings`` through ``model``."""
    errors = [simulate(model, r, dyn).qpos - r.for_model(model).qpos for r in recordings]
    return float(np.sqrt(np.mean(np.concatenate(errors) ** 2)))


def _episode(rec: Recording) -> str:
    """The robot episode a recording comes from (``episode_NNN``; a stretch is ``episode_NNN_K``)."""
    return rec.name[: len("episode_000")]


def run_sysid_ros_bench(cfg: SysidBenchCfg, progress: Callable[[str], None], work: Path) -> dict[str, Any]:
    """Excite the gapped PyBullet robot (sim_robot_node) over ROS 2 through the safety layer, fit the
    task's nominal MuJoCo robot to all but the last ``cfg.ros_held_out`` episodes, and compare
    trajectory errors on those held out.

    The recorder's command log is what the robot reports it applied (``applied_action``); the log of
    what was sent is replayed with the true parameters beside it, which measures what late commands
    cost a log rebuilt from the commands sent (issue 19: that log, with wall-clock sample times, put
    the true parameters' error at 0.63 of the nominal model's)."""
    import json

    from robolearn.hardware.ros.harness import private_domain, start_node, stop_node
    from robolearn.sysid.ros_excitation import RosExcitationCfg, record_ros_excitation

    gap = work / "gap.yaml"
    save_sim_params(gap_params(), gap)
    domain = private_domain()
    robot_summary = work / "robot.json"
    node = start_node(
        "sim_robot_node",
        {
            "task": ROS_TASK,
            "backend": "pybullet",
            "sim_params": str(gap),
            "seed": cfg.seed,
            "summary_path": str(robot_summary),
        },
        domain,
    )
    episodes = cfg.ros_episodes + cfg.ros_held_out
    progress(f"sysid: recording {episodes} excitation episodes of the gapped PyBullet {ROS_TASK} over ROS 2")
    try:
        summary = record_ros_excitation(
            RosExcitationCfg(ROS_TASK, work / "recording", episodes=episodes, seed=cfg.seed), domain
        )
    finally:
        stop_node(node)
    robot_counts = json.loads(robot_summary.read_text())["counts"] if robot_summary.is_file() else {}
    recordings = read_recordings(work / "recording")
    sent_log = read_recordings(work / "recording", commands="sent_commands")
    task = make_task_cfg(ROS_TASK)
    model = model_from_task(task, task.scene.robot.arm_joints)
    recorded = sorted({_episode(r) for r in recordings})
    fitted_episodes = set(recorded[: cfg.ros_episodes])
    fit_on = [r for r in recordings if _episode(r) in fitted_episodes]
    held_out = [r for r in recordings if _episode(r) not in fitted_episodes]
    held_out_sent = [r for r in sent_log if _episode(r) not in fitted_episodes]
    if not held_out:
        raise SysidError(f"the ROS 2 recording has {len(recorded)} episodes; none is left to hold out")
    progress(f"sysid: fitting {', '.join(cfg.ros_fit)} of {model.robot} to {len(fit_on)} recordings")
    start = time.perf_counter()
    fit = identify(model, fit_on, cfg.ros_fit, max_iters=cfg.ros_max_iters)
    seconds = time.perf_counter() - start
    dynamics = {"nominal": None, "identified": fit.params.dynamics(), "true_params": gap_params().dynamics()}
    errors = {k: trajectory_error(model, held_out, d) for k, d in dynamics.items()}
    per_recording = {
        r.name: {k: trajectory_error(model, [r], d) for k, d in dynamics.items()} for r in held_out
    }
    sent_nominal = trajectory_error(model, held_out_sent, None)
    sent_truth = trajectory_error(model, held_out_sent, dynamics["true_params"])
    transfer = transfer_gain(cfg, fit.params, gap, work, progress) if cfg.transfer else {}
    return {
        "sysid_traj_error_ratio": errors["identified"] / errors["nominal"],
        "sysid_traj_error_nominal_rad": errors["nominal"],
        "sysid_traj_error_identified_rad": errors["identified"],
        "sysid_traj_error_true_params_rad": errors["true_params"],
        "sysid_traj_error_ratio_true_params": errors["true_params"] / errors["nominal"],
        "sysid_traj_error_held_out": per_recording,
        # The same held-out samples with the log of the commands sent: what late commands cost it.
        "sysid_traj_error_ratio_true_params_sent_log": sent_truth / sent_nominal,
        "sysid_ros_episodes": len(fitted_episodes),
        "sysid_ros_held_out": len({_episode(r) for r in held_out}),
        "sysid_ros_recordings": len(recordings),
        "sysid_ros_frames": summary["frames"],
        "sysid_ros_late_commands": summary["late_commands"],
        "sysid_ros_missing_samples": summary["missing_samples"],
        "sysid_ros_missing_actions": summary["missing_actions"],
        "sysid_ros_dropped_samples": summary["dropped_samples"],
        "sysid_ros_stretches": summary["stretches"],
        "sysid_ros_command_log": summary["command_log"],
        "sysid_ros_per_episode": summary["per_episode"],
        "sysid_ros_robot_steps": robot_counts.get("steps"),
        "sysid_ros_robot_overruns": robot_counts.get("overruns"),
        "sysid_ros_interventions": summary["interventions"],
        "sysid_ros_fit_seconds": seconds,
        "sysid_ros_identified": {k: p.value for k, p in fit.params.params.items()},
        "sysid_transfer_gain": None,
        **transfer,
    }


def transfer_gain(
    cfg: SysidBenchCfg, identified: SimParams, gap: Path, work: Path, progress: Callable[[str], None]
) -> dict[str, Any]:
    """Success on the gapped PyBullet robot (over ROS 2) of a policy distilled on the identified
    MuJoCo robot minus that of one distilled on the nominal robot, same seed and rounds, with a 95%
    interval (Newcombe's hybrid score interval of a difference of proportions)."""
    from robolearn.bench.config import TransferBenchCfg
    from robolearn.bench.transfer import ros_pybullet_success
    from robolearn.policy.export import export_policy
    from robolearn.rl.config import DistillCmd
    from robolearn.rl.distill import distill

    save_sim_params(identified, work / "identified.yaml")
    deploy = TransferBenchCfg(
        episodes=cfg.transfer_episodes, obs_noise=0.0, obs_latency_ms=0.0, seed=cfg.seed
    )
    successes: dict[str, tuple[int, int]] = {}
    for name, params in (("nominal", None), ("identified", work / "identified.yaml")):
        progress(f"sysid: distilling {ROS_TASK} on the {name} MuJoCo robot, {cfg.transfer_rounds} rounds")
        cmd = DistillCmd(
            ROS_TASK,
            num_envs=8,
            iterations=cfg.transfer_rounds,
            steps_per_iteration=1_600,
            updates_per_iteration=1_000,
            sim_params=params,
            seed=cfg.seed,
            out=work,
            name=f"distill-{name}",
        )
        run = distill(cmd)["run_dir"]
        policy = export_policy(Path(run), work / f"policy-{name}", force=True)
        progress(f"sysid: {cfg.transfer_episodes} episodes of the {name} policy on the gapped robot")
        result = ros_pybullet_success(str(policy), ROS_TASK, deploy, work, {"sim_params": str(gap)})
        successes[name] = (round(result["success_rate"] * result["episodes"]), int(result["episodes"]))
    (k1, n1), (k0, n0) = successes["identified"], successes["nominal"]
    low, high = difference_of_proportions_ci(k1, n1, k0, n0)
    return {
        "sysid_transfer_gain": k1 / n1 - k0 / n0,
        "sysid_transfer_gain_ci95": [low, high],
        "sysid_transfer_success_identified": k1 / n1,
        "sysid_transfer_success_nominal": k0 / n0,
        "sysid_transfer_episodes": n1,
    }
