"""Sim-to-sim transfer over ROS 2: a policy trained on MuJoCo, deployed to a PyBullet robot.

For each embodiment (``panda_reach``, ``quadrotor_hover``, ``car_checkpoints``), a policy trained
on MuJoCo under domain randomization (given, or distilled here from the scripted expert with
DAgger, :mod:`robolearn.rl.distill`) is

1. evaluated in MuJoCo (:class:`robolearn.envs.task_env.TaskEnv`, nominal task): the success it was
   trained for;
2. deployed as ROS 2 nodes: ``policy_node`` (exported policy, safety layer) against
   ``sim_robot_node`` running the task on PyBullet in real time, with the robot's observations
   20 ms late and noisy at the task's sensor noise levels. The robot side counts successes.

The transfer ratio is (2) over (1); the goal is at least 0.9 for each embodiment. PyBullet differs
from MuJoCo in contact, friction and actuator models (``docs/backends.md``), so the ratio measures
robustness to a different engine plus a real link, not to a real robot.

With cameras (``arm_pixels``, issue 13): a policy over ``panda_pick_cube_pixels``' wrist and scene
cameras (given, or distilled here by DAgger from the state task's expert, a small encoder so that a
CPU trains it) is evaluated the same way; on the robot side PyBullet renders the cameras and
``sim_robot_node`` publishes them as ``sensor_msgs/Image``. Besides the engine, this ratio measures
what the other renderer costs (colours, lighting, shading: ``docs/backends.md``).

PyBullet's CPU renderer draws the two 64x64 cameras in 40 to 70 ms, longer than the task's 20 ms
control period: in real time the robot overran nearly every step and ``policy_node``'s watchdog held
the arm for stale images, so the row measured the renderer's speed, not the policy (0.00). The pixel
row therefore runs the robot in lockstep (``realtime`` false: one step per command, each step's
images rendered after it, as :class:`~robolearn.envs.task_env.TaskEnv` renders them in training) and
``policy_node`` acts on every complete sample (``trigger`` ``observation``) with a watchdog timeout
of :data:`LOCKSTEP_WATCHDOG_S`. Every message still crosses ROS 2 (images as ``sensor_msgs/Image``,
noise, QoS, the safety layer), but time is the simulator's: the observation latency delays each
sample in wall-clock time while the robot waits for its command, so it costs the policy no control
step as it does in real time; the ratio measures the engine and the renderer, not timing.
"""

from __future__ import annotations

import contextlib
import logging
import math
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from robolearn.bench.config import TransferBenchCfg
from robolearn.bench.report import format_table, machine_info, versions
from robolearn.envs.task_env import TaskEnv
from robolearn.eval.evaluation import evaluate
from robolearn.tasks import make_task_cfg

log = logging.getLogger(__name__)

TASKS = {
    "arm": "panda_reach",
    "drone": "quadrotor_hover",
    "car": "car_checkpoints",
    "arm_pixels": "panda_pick_cube_pixels",
}
"""The task run for each embodiment (``arm_pixels``: from cameras, with ``pixels``)."""
PIXEL_ENCODER_CHANNELS = 16
"""Camera encoder channels of a pixel policy distilled here: a quarter of DrQ's arithmetic, for a CPU."""
GOAL = 0.9
"""Transfer ratio to reach for every embodiment."""
LOCKSTEP_WATCHDOG_S = 1.0
"""policy_node's watchdog timeout (s) against a robot in lockstep: a sample's age when the policy acts
is the render (40 to 70 ms, more on a loaded machine) plus the latency; a silent camera still trips it."""
LOCKSTEP_STEP_S = 0.5
"""Wall-clock seconds a lockstep step may take on a loaded machine (for the run's timeout)."""


def lockstep(task: str) -> bool:
    """Whether the robot of ``task`` runs in lockstep with the policy (a task with cameras, see the
    module doc) rather than in real time."""
    return bool(make_task_cfg(task).cameras)


def resolve_policy(spec: str | None, task: str, folder: Path, cfg: TransferBenchCfg) -> str:
    """The ``policy`` parameter of policy_node for ``spec``: ``scripted:TASK`` as it is, an exported
    folder as it is, a run folder exported into ``folder``, None distilled and exported there."""
    from robolearn.policy.export import export_policy
    from robolearn.policy.meta import META_FILE

    if spec is not None and spec.startswith("scripted:"):
        return spec
    if spec is not None and (Path(spec) / META_FILE).is_file():
        return spec
    if make_task_cfg(task).cameras:  # a pixel student is exported by the distillation itself
        if spec is None:
            from robolearn.rl.distill import DistillCmd, distill

            cmd = DistillCmd(
                task,
                iterations=cfg.distill_iterations,
                steps_per_iteration=2_000,
                updates_per_iteration=400,
                batch_size=64,
                num_envs=4,
                eval_episodes=8,
                final_eval_episodes=8,
                encoder_channels=PIXEL_ENCODER_CHANNELS,
                seed=cfg.seed,
                out=folder,
                name=f"{task}-distill",
            )
            return str(distill(cmd)["policy_dir"])
        return str(Path(spec) / "policy")
    if spec is None:
        from robolearn.rl.distill import DistillCmd, distill

        cmd = DistillCmd(
            task, iterations=cfg.distill_iterations, seed=cfg.seed, out=folder, name=f"{task}-distill"
        )
        spec = distill(cmd)["run_dir"]
    return str(export_policy(Path(spec), folder / f"{task}-policy", force=True))


def _load(policy: str) -> Any:
    from robolearn.policy.runtime import load_exported, scripted_policy

    if policy.startswith("scripted:"):
        return scripted_policy(policy.removeprefix("scripted:"))
    return load_exported(Path(policy))


def mujoco_success(policy: str, task: str, episodes: int, seed: int) -> float:
    """Success rate of a policy on the nominal task in MuJoCo."""
    deployed = _load(policy)
    env = TaskEnv(make_task_cfg(task), "mujoco_batch", min(episodes, 8), seed=seed)
    try:
        return float(evaluate(env, deployed.act_batch, episodes, seed=seed).summary()["success_rate"])
    finally:
        env.close()


def ros_pybullet_success(
    policy: str,
    task: str,
    cfg: TransferBenchCfg,
    folder: Path,
    robot_params: Mapping[str, object] | None = None,
) -> dict[str, Any]:
    """Deploy over ROS 2 to a PyBullet sim_robot_node; its summary (success counted by the robot).
    ``robot_params`` adds to the robot's parameters (a gap: ``sim_params``)."""
    import json

    from robolearn.hardware.ros.harness import private_domain, start_node, stop_node

    task_cfg = make_task_cfg(task)
    summary_path = folder / f"{task}-pybullet-summary.json"
    in_lockstep = lockstep(task)
    # Episodes in real time (or lockstep steps at their slowest), plus start-up; a run that takes
    # three times that has failed.
    step_s = LOCKSTEP_STEP_S if in_lockstep else task_cfg.control_dt
    timeout = 120.0 + 3.0 * cfg.episodes * task_cfg.episode_length * step_s
    policy_params: dict[str, object] = {
        "policy": policy,
        "priority": cfg.priority,
        "trigger": cfg.policy_trigger,
        # The stand-in resets itself within its limits: a policy that left its geofence in one
        # episode is stopped there, not in every episode after it.
        "release_at_reset": True,
    }
    robot_mode: dict[str, object] = {}
    if in_lockstep:
        policy_params |= {"trigger": "observation", "watchdog_timeout": LOCKSTEP_WATCHDOG_S}
        robot_mode = {"realtime": False}
    domain = private_domain()
    with open(folder / f"{task}-policy_node.log", "w") as plog, open(folder / f"{task}-sim.log", "w") as slog:
        pol = start_node("policy_node", policy_params, domain, log=plog)
        robot = start_node(
            "sim_robot_node",
            {
                "task": task,
                "backend": "pybullet",
                "episodes": cfg.episodes,
                "obs_latency_ms": cfg.obs_latency_ms,
                "obs_noise": cfg.obs_noise,
                "seed": cfg.seed,
                "summary_path": str(summary_path),
                **robot_mode,
                **(robot_params or {}),
            },
            domain,
            log=slog,
        )
        try:
            code = robot.wait(timeout)
        finally:
            stop_node(robot)
            stop_node(pol)
    if code != 0 or not summary_path.is_file():
        raise RuntimeError(
            f"sim_robot_node for {task} failed (exit {code}); see {folder / f'{task}-sim.log'}"
        )
    result: dict[str, Any] = json.loads(summary_path.read_text())
    return result


def run_transfer_bench(
    cfg: TransferBenchCfg, progress: Callable[[str], None] = log.info
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run every embodiment; the table rows and the summary (the JSON the command prints last)."""
    cfg.check()
    info = machine_info()
    given = {"arm": cfg.arm_policy, "drone": cfg.drone_policy, "car": cfg.car_policy}
    given["arm_pixels"] = cfg.pixel_policy
    specs = {e: given[e] for e in TASKS if e in cfg.embodiments}
    rows: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        folder = cfg.work_dir or Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-transfer-"))
        )
        folder.mkdir(parents=True, exist_ok=True)
        for embodiment, spec in specs.items():
            task = TASKS[embodiment]
            progress(f"{embodiment}: policy for {task}")
            policy = resolve_policy(spec, task, folder, cfg)
            progress(f"{embodiment}: {cfg.mujoco_episodes} episodes in MuJoCo")
            source = mujoco_success(policy, task, cfg.mujoco_episodes, cfg.seed)
            progress(f"{embodiment}: {cfg.episodes} episodes over ROS 2 on PyBullet")
            deployed = ros_pybullet_success(policy, task, cfg, folder)
            target = deployed["success_rate"]
            ratio = target / source if source > 0 else math.nan
            rows.append(
                {
                    "embodiment": embodiment,
                    "task": task,
                    "mujoco": source,
                    "ros_pybullet": target,
                    "ratio": ratio,
                    "episodes": deployed["episodes"],
                    "robot": "lockstep" if lockstep(task) else "real time",
                    "policy": policy,
                }
            )
            summary |= {
                f"transfer_ratio_{embodiment}": ratio,
                f"success_mujoco_{embodiment}": source,
                f"success_ros_pybullet_{embodiment}": target,
                f"robot_counts_{embodiment}": deployed["counts"],
                f"robot_realtime_{embodiment}": not lockstep(task),
            }
    summary |= {
        "goal": GOAL,
        "meets_goal": all(summary[f"transfer_ratio_{e}"] >= GOAL for e in specs),
        "episodes": cfg.episodes,
        "mujoco_episodes": cfg.mujoco_episodes,
        "obs_latency_ms": cfg.obs_latency_ms,
        "obs_noise": cfg.obs_noise,
        "policies": {r["embodiment"]: r["policy"] for r in rows},
        "machine": info,
        "versions": versions(["mujoco", "pybullet", "ros-rclpy", "torch"]),
    }
    return rows, summary


COLUMNS = (
    ("embodiment", "embodiment"),
    ("task", "task"),
    ("mujoco", "MuJoCo success"),
    ("ros_pybullet", "ROS 2 + PyBullet success"),
    ("ratio", "ratio"),
    ("episodes", "episodes"),
    ("robot", "robot"),
    ("policy", "policy"),
)


def _cell(key: str, value: Any) -> str:
    if isinstance(value, float):
        return "-" if math.isnan(value) else f"{value:.2f}"
    return str(value)


def format_transfer_table(rows: list[dict[str, Any]]) -> str:
    """The rows as aligned columns under a header."""
    return format_table(rows, COLUMNS, _cell)
