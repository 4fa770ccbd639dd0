"""``robolearn tasks``: every task (built-in or a plugin's) with its distribution, embodiment, spaces
with units, rate and backends. A plugin that fails to load gets one error line and the rest lists."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TasksCmd:
    """List the tasks, built-in and from installed plugins (entry-point group ``robolearn.tasks``): the
    distribution each comes from, embodiment, observation and action spaces with units, control rate."""

    json: bool = False
    """Print one JSON object instead of a table."""


def _listing() -> list[dict[str, Any]]:
    import gymnasium as gym
    import numpy as np

    from robolearn.envs.task_env import TaskEnv
    from robolearn.errors import RobolearnError
    from robolearn.tasks import make_task_cfg, plugin_errors, task_names, task_source

    for error in plugin_errors():
        print(f"robolearn: error: {error}", file=sys.stderr)
    listing: list[dict[str, Any]] = []
    for name in task_names():
        try:
            cfg = make_task_cfg(name)
            env = TaskEnv(cfg, "mujoco", 1)
        except RobolearnError as exc:  # a broken plugin: one line, the other tasks still list
            print(f"robolearn: error: {exc}", file=sys.stderr)
            listing.append({"task": name, "distribution": task_source(name), "error": str(exc)})
            continue
        obs_space = env.single_observation_space
        assert isinstance(obs_space, gym.spaces.Dict)
        listing.append(
            {
                "task": name,
                "distribution": task_source(name),
                "embodiment": cfg.embodiment,
                "robot": cfg.scene.robot.name,
                "description": cfg.description,
                "observation": {
                    k: {"dim": int(np.prod(obs_space[k].shape or (1,))), "units": t.units}
                    for k, t in cfg.observations.items()
                },
                "images": {
                    k: {"camera": spec.camera, "shape": list(spec.shape), "dtype": np.dtype(spec.dtype).name}
                    for k, spec in env.image_specs.items()
                },
                "action": [
                    {"name": n, "units": u, "low": lo, "high": hi}
                    for n, u, lo, hi in zip(
                        cfg.action.names, cfg.action.units, cfg.action.low, cfg.action.high, strict=True
                    )
                ],
                "control_hz": round(1.0 / cfg.control_dt, 3),
                "physics_substeps": cfg.substeps,
                "episode_steps": cfg.episode_length,
                "backends": list(cfg.backends),
            }
        )
        env.close()
    return listing


def run_tasks(cmd: TasksCmd) -> None:
    """Print the listing as a table, or as one JSON object with ``--json``."""
    listing = _listing()
    if cmd.json:
        print(json.dumps(listing))
        return
    for t in listing:
        if "error" in t:
            print(f"{t['task']}  (from {t['distribution']})  cannot be loaded (see the error above)")
            continue
        print(
            f"{t['task']}  [{t['embodiment']}]  from {t['distribution']}  {t['control_hz']:g} Hz, "
            f"{t['episode_steps']} steps, backends: {', '.join(t['backends'])}"
        )
        print(f"    {t['description']}")
        obs = ", ".join(f"{k}[{v['dim']}] {v['units']}" for k, v in t["observation"].items())
        print(f"    observation: {obs}")
        if t["images"]:
            images = ", ".join(
                f"{k} {'x'.join(str(d) for d in v['shape'])} {v['dtype']} ({v['camera']} camera)"
                for k, v in t["images"].items()
            )
            print(f"    images:      {images}")
        act = ", ".join(f"{a['name']} [{a['low']:g}, {a['high']:g}] {a['units']}" for a in t["action"])
        print(f"    action:      {act}")
