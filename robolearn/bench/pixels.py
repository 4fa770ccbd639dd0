"""The ``pixels`` part of ``robolearn bench learn`` (issue 13): pick-cube learnt from cameras.

DrQ (:mod:`robolearn.rl.drq`) on ``panda_pick_cube_pixels`` (64x64 wrist and scene cameras and the
arm's proprioception; the cube's pose is not observed) with ``demos`` scripted demonstrations (the
state task's expert acting on the pixel task's worlds, SERL's 20), evaluated every ``eval_every``
environment steps: the steps and the minutes until the evaluated success rate first reaches 90 %,
and the device's name. The issue's goal: 90 % within 30,000 environment steps and 15 minutes on one
H100. Minutes are the training's (demonstration collection included), evaluations excluded: their
episodes render both cameras every step, on the CPU, which would otherwise dominate.

Its options are :class:`~robolearn.bench.config.PixelBenchCfg` (``--pixels.*``).
"""

from __future__ import annotations

import contextlib
import logging
import platform
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from robolearn.bench.config import LearnBenchCfg

log = logging.getLogger(__name__)

PIXEL_TASK = "panda_pick_cube_pixels"
GOAL_STEPS = 30_000
GOAL_MINUTES = 15.0
"""Issue 13's goal: 90 % within this many environment steps and minutes (on one H100)."""


def pixels_part(
    cfg: LearnBenchCfg, say: Callable[[str], None]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Train once (seed ``cfg.seed``) on ``cfg.device``; the table row and the summary's ``pixels_*`` keys."""
    import torch

    from robolearn.bench.learn import TARGET_SUCCESS
    from robolearn.rl.config import SACConfig
    from robolearn.rl.drq import PixelTrainCfg, train_pixels
    from robolearn.rl.train import resolve_device

    p = cfg.pixels
    device = resolve_device(cfg.device)
    name = (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"CPU ({platform.processor() or 'cpu'})"
    )
    say(f"pixels: {PIXEL_TASK} with DrQ, {p.demos} scripted demos, up to {p.steps:,} env steps on {name}")
    with contextlib.ExitStack() as stack:
        out = cfg.out if cfg.out is not None else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        train_cfg = PixelTrainCfg(
            task=PIXEL_TASK,
            num_envs=p.num_envs,
            steps=p.steps,
            seed=cfg.seed,
            device=str(device),
            learning_starts=max(p.learning_starts, p.num_envs),
            demo_episodes=p.demos,
            eval_every=p.eval_every,
            eval_episodes=p.eval_episodes,
            stop_at_success=TARGET_SUCCESS if cfg.stop_at_90 else None,
            out=out / f"{PIXEL_TASK}-s{cfg.seed}",
            sac=SACConfig(batch_size=p.batch_size, init_temperature=0.1, utd_ratio=cfg.utd_ratio),
        )
        run = train_pixels(train_cfg)
    reached = next((e for e in run.evals if e["success_rate"] >= TARGET_SUCCESS), None)
    steps_to_90 = None if reached is None else int(reached["env_steps"])
    minutes_to_90 = None if reached is None else float(reached["minutes"])
    best = max((e["success_rate"] for e in run.evals), default=None)
    row = {
        "part": "pixels",
        "contender": f"DrQ, {p.demos} demos",
        "steps_to_90": steps_to_90,
        "minutes_to_90": minutes_to_90,
        "note": f"{name}; best {best if best is None else f'{best:.0%}'} in {run.env_steps:,} steps; "
        f"replay {run.replay.bytes_per_slot:,} B/step",
    }
    summary = {
        "pixels_device": name,
        "pixels_steps_to_90": steps_to_90,
        "pixels_minutes_to_90": minutes_to_90,
        "pixels_meets_goal": steps_to_90 is not None
        and steps_to_90 <= GOAL_STEPS
        and minutes_to_90 is not None
        and minutes_to_90 <= GOAL_MINUTES,
        "pixels_run": run.summary(train_cfg),
    }
    return [row], summary
