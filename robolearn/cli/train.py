"""``robolearn train``: SAC with the RLPD recipe, a progress bar, then the run's summary."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from robolearn.rl.config import TrainCfg

if TYPE_CHECKING:
    from robolearn.rl.train import RunState

__all__ = ["TrainCfg", "run_train"]


def _has_cameras(task: str) -> bool:
    from robolearn.tasks import make_task_cfg, task_names

    return task in task_names() and bool(make_task_cfg(task).cameras)


def _one_dataset(cmd: TrainCfg) -> Path | None:
    """The one ``--demos`` dataset a pixel task trains from (its cameras become image observations)."""
    if len(cmd.demos) > 1:
        from robolearn.errors import ConfigError

        raise ConfigError(f"--demos: a task with cameras takes one dataset, got {len(cmd.demos)}")
    return cmd.demos[0] if cmd.demos else None


def run_pixel_train(cmd: TrainCfg) -> None:
    """A task with cameras trains with DrQ (:mod:`robolearn.rl.drq`): the options that apply carry over."""
    from robolearn.rl.drq import PixelTrainCfg, train_pixels
    from robolearn.rl.train import resolve_device

    out = cmd.out / (cmd.name or f"{cmd.task}-s{cmd.seed}-{time.strftime('%Y%m%d-%H%M%S')}")
    print(f"train {cmd.task}: a task with cameras, trained from pixels with DrQ", file=sys.stderr)
    run = train_pixels(
        PixelTrainCfg(
            task=cmd.task,
            backend=cmd.backend,
            num_envs=cmd.num_envs,
            steps=cmd.steps,
            seed=cmd.seed,
            device=str(resolve_device(cmd.torch_device)),
            learning_starts=max(cmd.learning_starts, cmd.num_envs),
            demo_episodes=cmd.scripted_demos,
            demos=_one_dataset(cmd),
            out=out,
            sac=cmd.sac,
        )
    )
    successes = run.episode_successes
    summary = {
        "task": cmd.task,
        "env_steps": cmd.steps,
        "episodes": len(successes),
        "training_success_rate": sum(successes) / len(successes) if successes else None,
        "wall_minutes": run.seconds / 60.0,
        "run_dir": str(out),
        "policy": str(out / "policy"),
    }
    print(json.dumps(summary))


def run_train(cmd: TrainCfg) -> None:
    """Train with a live progress bar on stderr; print the summary (last line JSON)."""
    if _has_cameras(cmd.task):
        run_pixel_train(cmd)
        return
    from tqdm import tqdm

    from robolearn.rl.train import train  # torch: only when training

    if cmd.device_loop:
        mode = "sample-efficient" if cmd.parallel == "off" else f"parallel {cmd.parallel}"
        print(
            f"train {cmd.task}: simulation, replay buffer and learner on the worlds' device, {mode} "
            "(docs/backends.md, 'Training on the device')",
            file=sys.stderr,
        )
    bar = tqdm(
        total=cmd.total_steps, desc=f"train {cmd.task}", unit="step", file=sys.stderr, dynamic_ncols=True
    )
    last = [0.0]

    def progress(state: RunState, live: dict[str, float]) -> None:
        now = time.monotonic()
        if now - last[0] < 0.5 and state.env_steps < bar.total:
            return
        last[0] = now
        bar.update(state.env_steps - bar.n)
        bar.set_postfix(
            steps_s=f"{live['steps_per_s']:.0f}",
            upd_s=f"{live['updates_per_s']:.0f}",
            # Absent where the task has no notion of success (a Gymnasium env without is_success).
            **({"success": f"{live['success']:.2f}"} if "success" in live else {}),
            ret=f"{live['return']:.1f}",
            refresh=False,
        )

    try:
        summary = train(cmd, progress)
    finally:
        bar.close()
    rate = summary["success_rate"]
    outcome = f"success {rate:.1%}" if rate is not None else f"return {summary['return_mean']:.1f}"
    print(
        f"{summary['task']}: {outcome} after {summary['env_steps']} env steps "
        f"in {summary['wall_minutes']:.1f} min"
    )
    print(
        f"run: {summary['run_dir']}  (policy: {summary['checkpoint']}, curve: {summary['learning_curve']}"
        + (f", video: {summary['video']})" if "video" in summary else ")")
    )
    print(json.dumps({k: v for k, v in summary.items() if k != "evals"}))
