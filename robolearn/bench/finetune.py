"""Fine-tuning a simulation-trained policy on a robot over ROS 2 (issue 10): ``robolearn bench finetune``.

The sim-to-real proxy: the "real" robot is a PyBullet ``sim_robot_node`` with a deliberate gap (its
engine, observations ``obs_latency_ms`` late and noisy, and optionally a ``robolearn sysid``
parameter file with changed masses, gains and friction). Three policies meet it, each evaluated by
``policy_node`` against the gapped robot, success counted by the robot:

1. zero-shot: a SAC policy trained in MuJoCo (given, or trained here with scripted demonstrations);
2. fine-tuned: that run continued on the robot for ``robot_minutes`` of real time with
   ``robolearn train --robot ros --init-from RUN`` (WSRL: a warm-up with the frozen pretrained
   policy, then updates on robot data only), a scripted person taking over every k-th episode;
3. from scratch: the same robot budget and person, without the pretrained policy.

The last line of ``robolearn bench finetune`` is one JSON object with ``zero_shot_success``,
``finetuned_success``, ``scratch_success`` and ``robot_minutes``. The issue's goal: fine-tuned at
least 0.95 within 20 robot minutes where zero-shot is below 0.6, and well above from scratch.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from robolearn.bench.config import FinetuneBenchCfg, TransferBenchCfg
from robolearn.bench.report import format_table, machine_info, versions
from robolearn.bench.transfer import ros_pybullet_success
from robolearn.rl.config import OfflineConfig, TrainCfg
from robolearn.tasks import make_task_cfg

log = logging.getLogger(__name__)


def _gap(cfg: FinetuneBenchCfg) -> dict[str, object]:
    """The robot's parameters that make the gap (beyond latency and noise)."""
    return {"sim_params": str(cfg.gap_params)} if cfg.gap_params is not None else {}


def _robot_success(run_dir: Path, name: str, cfg: FinetuneBenchCfg, folder: Path) -> dict[str, Any]:
    """A run's policy, exported, deployed by policy_node to the gapped robot for ``cfg.episodes``."""
    from robolearn.policy.export import export_policy

    policy = export_policy(run_dir, folder / f"{name}-policy", force=True)
    transfer = TransferBenchCfg(
        episodes=cfg.episodes, obs_latency_ms=cfg.obs_latency_ms, obs_noise=cfg.obs_noise, seed=cfg.seed
    )
    return ros_pybullet_success(str(policy), cfg.task, transfer, folder, robot_params=_gap(cfg))


@contextlib.contextmanager
def _gapped_robot(cfg: FinetuneBenchCfg, folder: Path, name: str) -> Iterator[None]:
    """The gapped robot for a training run, on a private ROS domain this process joins meanwhile."""
    from robolearn.hardware.ros.harness import node_env, private_domain, start_node, stop_node

    domain = private_domain()
    params: dict[str, object] = {
        "task": cfg.task,
        "backend": "pybullet",
        "obs_latency_ms": cfg.obs_latency_ms,
        "obs_noise": cfg.obs_noise,
        "seed": cfg.seed + 1,
        "self_reset": False,  # the trainer asks for every reset (docs/ros.md, "Resets")
        **_gap(cfg),
    }
    saved = {k: os.environ.get(k) for k in node_env(domain) if k.startswith(("ROS_", "RMW_"))}
    with open(folder / f"{name}-robot.log", "w") as robot_log:
        robot = start_node("sim_robot_node", params, domain, log=robot_log)
        os.environ.update({k: v for k, v in node_env(domain).items() if k in saved})
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            stop_node(robot)


def _train_on_robot(
    cfg: FinetuneBenchCfg, folder: Path, name: str, init_from: Path | None
) -> tuple[Path, dict[str, Any]]:
    """``robolearn train --robot ros`` for the robot budget; the run folder and its summary."""
    from robolearn.rl.train import train

    task = make_task_cfg(cfg.task)
    steps = max(1, round(cfg.robot_minutes * 60 / task.control_dt))
    run = TrainCfg(
        task=cfg.task,
        num_envs=1,
        steps=steps,
        seed=cfg.seed,
        out=folder,
        name=name,
        robot="ros",
        hil=True,
        device="scripted",
        intervene_every=cfg.intervene_every,
        init_from=init_from,
        offline_cfg=OfflineConfig(warmup_steps=cfg.warmup_steps),
        eval_every=max(steps, 1),
        checkpoint_every=max(steps, 1),
        video=False,
    )
    with _gapped_robot(cfg, folder, name):
        summary = train(run)
    return Path(summary["run_dir"]), summary


def _pretrained(cfg: FinetuneBenchCfg, folder: Path) -> tuple[Path, float | None]:
    """The MuJoCo run: given, or trained here; its run folder and simulation success (if known)."""
    if cfg.pretrained is not None:
        return cfg.pretrained, None
    from robolearn.rl.train import train

    summary = train(
        TrainCfg(
            task=cfg.task,
            backend="mujoco_batch",
            num_envs=4,
            steps=cfg.pretrain_steps,
            seed=cfg.seed,
            scripted_demos=cfg.pretrain_demos,
            out=folder,
            name="pretrained",
            eval_every=cfg.pretrain_steps,
            checkpoint_every=cfg.pretrain_steps,
            video=False,
        )
    )
    return Path(summary["run_dir"]), summary["success_rate"]


def run_finetune_bench(
    cfg: FinetuneBenchCfg, progress: Callable[[str], None] = log.info
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The three policies on the gapped robot; the table rows and the summary (the JSON printed last)."""
    cfg.check()
    info = machine_info()
    with contextlib.ExitStack() as stack:
        folder = cfg.work_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-ft-")))
        folder.mkdir(parents=True, exist_ok=True)
        progress(f"pretrained policy for {cfg.task} (MuJoCo)")
        pretrained, sim_success = _pretrained(cfg, folder)
        progress(f"zero-shot: {cfg.episodes} episodes on the gapped robot")
        zero_shot = _robot_success(pretrained, "zero-shot", cfg, folder)
        rows = [_row("zero-shot", zero_shot, 0, 0.0, None)]
        results: dict[str, dict[str, Any]] = {}
        for name, init in (("finetuned", pretrained), ("scratch", None)):
            progress(f"{name}: {cfg.robot_minutes:g} robot minutes of training over ROS 2")
            started = time.monotonic()
            run_dir, trained = _train_on_robot(cfg, folder, name, init)
            wall = (time.monotonic() - started) / 60
            progress(f"{name}: {cfg.episodes} episodes on the gapped robot")
            results[name] = _robot_success(run_dir, name, cfg, folder)
            rows.append(_row(name, results[name], trained["env_steps"], wall, trained.get("robot")))
    task = make_task_cfg(cfg.task)
    summary = {
        "task": cfg.task,
        "sim_success": sim_success,
        "zero_shot_success": zero_shot["success_rate"],
        "finetuned_success": results["finetuned"]["success_rate"],
        "scratch_success": results["scratch"]["success_rate"],
        "robot_minutes": cfg.robot_minutes,
        "robot_steps": round(cfg.robot_minutes * 60 / task.control_dt),
        "episodes": cfg.episodes,
        "gap": {"backend": "pybullet", "obs_latency_ms": cfg.obs_latency_ms, "obs_noise": cfg.obs_noise}
        | _gap(cfg),
        "overruns": {r["policy"]: r["overruns"] for r in rows if r["overruns"] is not None},
        "machine": info,
        "versions": versions(["mujoco", "pybullet", "ros-rclpy", "torch"]),
    }
    return rows, summary


def _row(
    name: str, evaluated: dict[str, Any], steps: float, wall: float, robot: dict[str, Any] | None
) -> dict[str, Any]:
    return {
        "policy": name,
        "success": evaluated["success_rate"],
        "episodes": evaluated["episodes"],
        "robot_steps": steps,
        "wall_minutes": wall,
        "overruns": None if robot is None else robot["overruns"],
    }


COLUMNS = (
    ("policy", "policy"),
    ("success", "success on the gapped robot"),
    ("episodes", "episodes"),
    ("robot_steps", "robot steps trained"),
    ("wall_minutes", "wall minutes"),
    ("overruns", "control-period overruns"),
)


def _cell(key: str, value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def format_finetune_table(rows: list[dict[str, Any]]) -> str:
    """The rows as aligned columns under a header."""
    return format_table(rows, COLUMNS, _cell)
