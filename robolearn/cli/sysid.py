"""``robolearn sysid``: fit a robot's simulated dynamics to recordings, or record a safe excitation."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import tyro

from robolearn.errors import RobolearnError


@dataclass(frozen=True)
class SysidCmd:
    """Identify joint armature, friction, damping, actuator gains, masses, payload and command delay
    from recordings of the robot (issue 19); writes a parameter file for ``--sim-params``."""

    robot: Annotated[str, tyro.conf.Positional]
    """A task name (its scene's robot, with the task's controllers) or an MJCF file with actuators."""
    data: Path | None = None
    """Recordings to fit: a LeRobot dataset (robolearn sysid --record writes one) or a rosbag2 folder."""
    record: Path | None = None
    """Instead of fitting: record a multisine excitation of the simulated robot to this new dataset
    (with --ros: of the robot on ROS 2, to this new folder of rosbag2 episodes)."""
    ros: bool = False
    """With --record: excite the robot speaking docs/ros.md's topics on this ROS domain (ROBOT a task
    name; every command through the safety layer), one rosbag2 folder per robot episode."""
    safety: str = ""
    """With --ros: safety configuration, a robot name or YAML path ("": the task's robot)."""
    clock: Literal["steps", "stamps"] = "steps"
    """With --ros: sample times from the robot's control steps (task_state's step_count) or from the
    messages' stamps (a robot whose control steps are not evenly spaced)."""
    sim_params: Path | None = None
    """With --record: a parameter file giving the simulated robot's dynamics (a stand-in for the real one)."""
    out: Path = Path("runs/sysid")
    """Folder for sim_params.yaml, report.html and trajectories.png."""
    fit: tuple[str, ...] = ("armature", "frictionloss", "damping", "gain", "mass", "delay")
    """Parameter groups to fit: armature, frictionloss, damping, gain, mass, payload, delay."""
    payload_link: str = ""
    """The link a payload hangs on (needed to fit ``payload``)."""
    max_iters: int = 50
    """Most optimiser iterations."""
    seconds: float = 8.0
    """With --record: length of each excitation episode (s)."""
    episodes: int = 3
    """With --record: episodes, each with its own frequencies."""
    amplitude: float = 0.8
    """With --record: largest excursion of each joint from its home position (rad or m); with --ros,
    of each displaced component of the task's action from the episode's start (0.04 suits the Panda)."""
    fps: int = 100
    """With --record: commands and samples per second."""

    def check(self) -> None:
        """Exactly one of --data and --record; ranges of the numbers."""
        if (self.data is None) == (self.record is None):
            raise RobolearnError(
                "give --data PATH to fit, or --record PATH to record an excitation (one of them)"
            )
        if self.max_iters < 1 or self.episodes < 1 or self.fps < 1:
            raise RobolearnError("--max-iters, --episodes and --fps must be at least 1")
        if not (0 < self.seconds <= 600) or not (0 < self.amplitude <= 3.0):
            raise RobolearnError("--seconds must be in (0, 600] and --amplitude in (0, 3] (rad or m)")
        if self.ros and self.record is None:
            raise RobolearnError("--ros records an excitation: give --record PATH")
        if self.ros and self.amplitude > 0.5:
            raise RobolearnError(
                "--ros: --amplitude is the tool's or joints' excursion, at most 0.5 (m or rad)"
            )


def _model(robot: str) -> object:
    from robolearn.sysid.model import model_from_mjcf, model_from_task
    from robolearn.tasks import make_task_cfg, task_names

    if robot in task_names():
        return model_from_task(make_task_cfg(robot))
    if Path(robot).suffix.lower() == ".xml":
        return model_from_mjcf(robot)
    raise RobolearnError(
        f"unknown robot {robot!r}: give a task ({', '.join(task_names())}) or an MJCF .xml file"
    )


def run_sysid(cmd: SysidCmd) -> None:
    """Record an excitation, or fit and write the parameter file, MuJoCo's report and the plot."""
    from robolearn.sysid.model import SysidModel

    if cmd.ros:
        import os

        from robolearn.sysid.ros_excitation import RosExcitationCfg, record_ros_excitation

        assert cmd.record is not None
        excitation = RosExcitationCfg(
            cmd.robot,
            cmd.record,
            episodes=cmd.episodes,
            amplitude=cmd.amplitude,
            robot=cmd.safety,
            clock=cmd.clock,
        )
        summary = record_ros_excitation(excitation, int(os.environ.get("ROS_DOMAIN_ID", "0")))
        print(f"{summary['episodes']} excitation episodes recorded over ROS 2 to {cmd.record}")
        print(json.dumps(summary))
        return

    model = _model(cmd.robot)
    assert isinstance(model, SysidModel)
    if cmd.record is not None:
        from robolearn.sysid.excitation import record_excitation

        summary = record_excitation(
            model, cmd.record, cmd.episodes, cmd.seconds, cmd.amplitude, cmd.fps, cmd.sim_params
        )
        print(f"{summary['episodes']} excitation episodes of {model.robot} saved to {cmd.record}")
        print(json.dumps(summary))
        return

    from robolearn.sysid.fit import identify
    from robolearn.sysid.recording import read_recordings
    from robolearn.sysid.report import plot_trajectories, write_html_report
    from robolearn.tasks.sim_params import save_sim_params

    assert cmd.data is not None
    recordings = read_recordings(cmd.data)
    fit = identify(
        model,
        recordings,
        cmd.fit,
        payload_link=cmd.payload_link,
        max_iters=cmd.max_iters,
        source={"data": str(cmd.data)},
    )
    cmd.out.mkdir(parents=True, exist_ok=True)
    params_file = cmd.out / "sim_params.yaml"
    save_sim_params(fit.params, params_file)
    write_html_report(fit, cmd.out / "report.html", f"robolearn sysid: {model.robot}")
    plot_trajectories(model, fit, recordings, cmd.out / "trajectories.png")
    for name, p in fit.params.params.items():
        print(f"{name:32s} {p.value:12.6g} ± {p.std:.3g}  (nominal {p.nominal:.6g})")
    print(f"cost {fit.initial_cost:.4g} -> {fit.final_cost:.4g}; parameters in {params_file}")
    print(
        json.dumps(
            {
                "robot": model.robot,
                "params": str(params_file),
                "initial_cost": fit.initial_cost,
                "final_cost": fit.final_cost,
                "report": str(cmd.out / "report.html"),
                "plot": str(cmd.out / "trajectories.png"),
            }
        )
    )
