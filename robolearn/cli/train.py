"""``robolearn train``: SAC with the RLPD recipe, a progress bar, then the run's summary."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from robolearn.rl.config import TrainCfg

if TYPE_CHECKING:
    from robolearn.rl.drq import PixelTrainCfg
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


PIXEL_OPTIONS = (
    "--backend mujoco|mujoco_batch|pybullet, --num-envs, --steps, --seed, --out, --name, "
    "--scripted-demos, --demos (one dataset), --reward task|classifier:PATH, --reward-threshold, "
    "--learning-starts, --replay-budget-mb, --pretrained-encoder, --torch-device, --torch-threads, --sac.*"
)
"""What ``robolearn train`` takes for a task with cameras (DrQ, :mod:`robolearn.rl.drq`)."""


def _refused_pixel_options(cmd: TrainCfg) -> dict[str, bool]:
    """The options DrQ training does not take, and whether each was given (differs from its default)."""
    default = TrainCfg(task=cmd.task)

    def given(*names: str) -> bool:
        return any(getattr(cmd, n) != getattr(default, n) for n in names)

    return {
        "--backend mujoco_warp": cmd.backend == "mujoco_warp",
        "--resume": given("resume"),
        "--hil (interventions)": given("hil"),
        "--random-steps (random actions last until --learning-starts)": given("random_steps")
        and cmd.random_steps != cmd.learning_starts,
        "--replay-capacity (use --replay-budget-mb)": given("replay_capacity"),
        "--randomize": given("randomize"),
        "--sim-params": given("sim_params"),
        "--rate-limits": given("rate_limits"),
        "--eval-every, --eval-episodes, --final-eval-episodes, --stop-at-success (no evaluation runs)": given(
            "eval_every", "eval_episodes", "final_eval_episodes", "stop_at_success"
        ),
        "--checkpoint-every (no checkpoints)": given("checkpoint_every"),
        "--threaded": given("threaded"),
        "--updates-per-step": given("updates_per_step"),
        "--parallel": given("parallel"),
        "--exchange ray, --actors, --ray-*": given(
            "exchange",
            "actors",
            "ray_address",
            "ray_timeout",
            "ray_actor_resource",
            "ray_robot_resource",
            "sim_actors",
        ),
        "--robot ros": given(
            "robot", "robot_safety", "robot_timeout", "reset_timeout", "robot_reset", "robot_trigger"
        ),
        "--offline, --offline-steps, --online-steps, --offline-algo, --online-mode": given(
            "offline", "offline_steps", "online_steps", "offline_algo", "online_mode"
        ),
        "--init-from, --init-sim-share": given("init_from", "init_sim_share"),
        "--sac.n-step above 1": cmd.sac.n_step > 1,
    }


def check_pixel_options(cmd: TrainCfg) -> None:
    """Refuse, in one line, an option that training from cameras does not take (naming it and what
    it takes), rather than dropping it silently."""
    from robolearn.errors import ConfigError

    for option, given in _refused_pixel_options(cmd).items():
        if given:
            raise ConfigError(
                f"{option}: not available for {cmd.task}, a task with cameras trained with DrQ; "
                f"it takes {PIXEL_OPTIONS}"
            )


def check_state_options(cmd: TrainCfg) -> None:
    """Refuse the options of pixel training for a task without cameras."""
    from robolearn.errors import ConfigError

    default = TrainCfg(task=cmd.task)
    options = {"--pretrained-encoder": "pretrained_encoder", "--replay-budget-mb": "replay_budget_mb"}
    for option, name in options.items():
        if getattr(cmd, name) != getattr(default, name):
            raise ConfigError(
                f"{option} applies to a task with cameras (e.g. panda_pick_cube_pixels); {cmd.task} has "
                "none: use --replay-capacity for its buffer"
            )


def pixel_train_cfg(cmd: TrainCfg, out: Path) -> PixelTrainCfg:
    """The DrQ configuration a ``robolearn train`` command of a task with cameras asks for."""
    from robolearn.rl.drq import PixelTrainCfg
    from robolearn.rl.train import resolve_device

    check_pixel_options(cmd)
    kind, _, path = cmd.reward.partition(":")
    return PixelTrainCfg(
        task=cmd.task,
        backend=cmd.backend,
        num_envs=cmd.num_envs,
        steps=cmd.steps,
        seed=cmd.seed,
        device=str(resolve_device(cmd.torch_device)),
        learning_starts=max(cmd.learning_starts, cmd.num_envs),
        replay_budget_mb=cmd.replay_budget_mb,
        pretrained_encoder=cmd.pretrained_encoder,
        demo_episodes=cmd.scripted_demos,
        demos=_one_dataset(cmd),
        reward_classifier=Path(path) if kind == "classifier" else None,
        reward_threshold=cmd.reward_threshold,
        out=out,
        sac=cmd.sac,
    )


def run_pixel_train(cmd: TrainCfg) -> None:
    """A task with cameras trains with DrQ (:mod:`robolearn.rl.drq`): the options that apply carry
    over, the others are refused (:func:`check_pixel_options`)."""
    import torch

    from robolearn.rl.drq import train_pixels

    out = cmd.out / (cmd.name or f"{cmd.task}-s{cmd.seed}-{time.strftime('%Y%m%d-%H%M%S')}")
    cfg = pixel_train_cfg(cmd, out)
    if cmd.torch_threads > 0:
        torch.set_num_threads(cmd.torch_threads)
    print(
        f"train {cmd.task}: a task with cameras, trained from pixels with DrQ "
        "(no evaluations, checkpoints or video during the run)",
        file=sys.stderr,
    )
    run = train_pixels(cfg)
    summary = run.summary(cfg) | {"run_dir": str(out), "policy": str(out / "policy")}
    print(json.dumps(summary))


def run_train(cmd: TrainCfg) -> None:
    """Train with a live progress bar on stderr; print the summary (last line JSON)."""
    if _has_cameras(cmd.task):
        run_pixel_train(cmd)
        return
    check_state_options(cmd)
    from tqdm import tqdm

    from robolearn.rl.train import resolved_cfg, train  # torch: only when training

    # A resumed run's own length on the bar, and a wrong --resume or --init-from refused before it.
    cmd = resolved_cfg(cmd)
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
        if "offline_updates" in live:  # pretraining on --offline, before the first environment step
            done, total = int(live["offline_updates"]), int(live["offline_total"])
            bar.set_postfix(offline=f"{done}/{total} updates", upd_s=f"{live['updates_per_s']:.0f}")
            return
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
