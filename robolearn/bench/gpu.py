"""``robolearn bench sim --parts gpu`` (issue 14): task environments on MuJoCo Warp against raw MuJoCo Warp.

For every task that runs on ``mujoco_warp``, at 1,024, 4,096 and 8,192 worlds on one CUDA device:
robolearn's environment steps per second (actions in, terms evaluated, observations out, ended worlds
reset, all on the device) beside raw MuJoCo Warp stepping the same model with the same substeps and
no task code (the physics limit). The ratio is ``gpu_vs_raw`` (goal: at least 0.8). CUDA only: Warp's
CPU device would measure nothing a GPU user cares about.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, cast

from robolearn.errors import RobolearnError
from robolearn.tasks import make_task_cfg, task_names
from robolearn.tasks.worlds import TaskWorlds

log = logging.getLogger(__name__)

GPU_WORLDS = (1024, 4096, 8192)
"""World counts of the gpu part, as MuJoCo Playground reports its Panda figures."""
GPU_VS_RAW_GOAL = 0.8
"""Environment steps/s over raw MuJoCo Warp steps/s that the gpu part aims at (issue 14)."""


def require_cuda() -> str:
    """The CUDA device's name; raises :class:`RobolearnError` in one line where there is none."""
    try:
        import torch
        import warp as wp
    except ImportError as exc:
        missing = f"--parts gpu needs the gpu extra ({exc.name} is missing): pip install 'robolearn[gpu]'"
        raise RobolearnError(missing) from exc
    if not torch.cuda.is_available() or not wp.is_cuda_available():
        raise RobolearnError("--parts gpu needs a CUDA GPU; none is visible (Warp's CPU device is for tests)")
    return torch.cuda.get_device_name(0)


def _rate(step: Callable[[], None], seconds: float, sync: Callable[[], None]) -> float:
    """Calls of ``step`` per second over ``seconds`` of wall clock, after a warm-up call."""
    step()
    sync()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
        count += 1
        if count % 16 == 0:
            sync()
    sync()
    return count / (time.perf_counter() - start)


def _task_rates(task: str, num_worlds: int, seconds: float, seed: int) -> tuple[float, float]:
    """(environment steps/s, raw MuJoCo Warp steps/s) of one task at ``num_worlds`` worlds."""
    import torch

    worlds = TaskWorlds(task, "mujoco_warp", num_worlds, seed=seed)
    xp, device = worlds.xp, worlds.device
    worlds.reset_worlds(xp.arange(num_worlds, device=device))
    gen = torch.Generator(device=device).manual_seed(seed)
    low, high = worlds._act_low_x, worlds._act_high_x
    actions = low + (high - low) * torch.rand((num_worlds, len(low)), generator=gen, device=device)

    def env_step() -> None:
        result = worlds.advance(actions)
        worlds.observe()
        # On this backend the results are device tensors, typed as the host's arrays.
        done = cast(torch.Tensor, result.terminated | result.truncated)
        worlds.reset_worlds(cast(Any, torch.nonzero(done).squeeze(1)))

    sync = torch.cuda.synchronize
    env = _rate(env_step, seconds, sync) * num_worlds
    ctrl = worlds.cfg.action.to_controls(worlds, actions, **worlds.cfg.action.params)
    raw = _rate(lambda: worlds.sim.step(ctrl, worlds.cfg.substeps), seconds, sync) * num_worlds
    worlds.close()
    return env, raw


def gpu_sim_part(
    seconds: float, seed: int, say: Callable[[str], None] = log.info
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Table rows and the summary (``gpu_env_steps_per_s``, ``gpu_raw_steps_per_s``, ``gpu_vs_raw``)."""
    device = require_cuda()
    rows: list[dict[str, Any]] = []
    env_rates: dict[str, dict[str, float]] = {}
    raw_rates: dict[str, dict[str, float]] = {}
    ratios: dict[str, dict[str, float]] = {}
    for task in (t for t in task_names() if "mujoco_warp" in make_task_cfg(t).backends):
        env_rates[task], raw_rates[task], ratios[task] = {}, {}, {}
        for n in GPU_WORLDS:
            say(f"gpu {task}: {n} worlds on {device}")
            env, raw = _task_rates(task, n, seconds, seed)
            env_rates[task][str(n)], raw_rates[task][str(n)] = env, raw
            ratios[task][str(n)] = env / raw
            rows.append(
                {"part": "gpu", "task": task, "num_envs": n, "env_steps_per_s": env, "raw_steps_per_s": raw}
            )
    summary = {
        "gpu_device": device,
        "gpu_env_steps_per_s": env_rates,
        "gpu_raw_steps_per_s": raw_rates,
        "gpu_vs_raw_by_task": ratios,
        # The headline: the lowest ratio of any task at any world count.
        "gpu_vs_raw": min((r for by_n in ratios.values() for r in by_n.values()), default=None),
        "gpu_vs_raw_goal": GPU_VS_RAW_GOAL,
    }
    return rows, summary
