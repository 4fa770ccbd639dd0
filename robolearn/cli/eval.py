"""``robolearn eval``: success rate and return of a policy with bootstrap intervals, and speed."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import tyro

from robolearn.errors import ConfigError
from robolearn.options import check_output_dir, check_range, check_seed
from robolearn.rl.config import MAX_WORLDS
from robolearn.sim.backend import BackendName
from robolearn.tasks import DEFAULT_TASK

if TYPE_CHECKING:
    from robolearn.tasks.core import TaskCfg


@dataclass(frozen=True)
class EvalCmd:
    """Roll out a policy and report success rate and return with 95% bootstrap intervals, and speed.

    Give a task name (with ``--policy``), or one or more run folders or checkpoints of trained
    policies; several runs (seeds) are summarized by their interquartile mean. The last line
    printed is one JSON object with at least ``success_rate``.
    """

    targets: tyro.conf.Positional[tuple[str, ...]] = (DEFAULT_TASK,)
    """A task name (see ``robolearn tasks``), or run folders / checkpoints."""
    policy: Literal["scripted", "random"] = "scripted"
    """For a task name: the task's scripted expert, or uniform random actions."""
    backend: BackendName = "mujoco"
    """Simulator: MuJoCo one world, MuJoCo batched, PyBullet, or MuJoCo Warp (a GPU, or Warp's CPU device)."""
    episodes: int = 50
    """Number of episodes."""
    num_envs: int = 1
    """Parallel worlds (more than one needs ``--backend mujoco_batch``, pybullet or mujoco_warp)."""
    seed: int = 0
    """Seed of the reset distribution."""
    randomize: bool = False
    """Apply the task's domain randomization."""
    sim_params: Path | None = None
    """A parameter file from ``robolearn sysid``: evaluate on the identified robot (randomization,
    if on, centred on it)."""
    rate_limits: bool = False
    """Rate-limit actions as the task robot's safety layer will (``robolearn train --rate-limits``; a
    run trained so is evaluated so without it)."""
    video: Path | None = None
    """Write the first episodes of world 0 to this mp4 file."""
    video_episodes: int = 1
    """How many episodes the video shows."""

    def check(self) -> None:
        """Refuse options outside their ranges, naming the option, the value and the range."""
        check_range("--episodes", self.episodes, 1)
        check_range("--num-envs", self.num_envs, 1, MAX_WORLDS)
        check_seed("--seed", self.seed)
        check_range("--video-episodes", self.video_episodes, 1, self.episodes)
        if self.video is not None:
            if self.video.is_dir():
                raise ConfigError(f"--video {self.video}: is a folder; give an mp4 file name")
            check_output_dir("--video", self.video.parent)


def _limited(cfg: TaskCfg, rate_limits: bool) -> TaskCfg:
    """``cfg``, under its robot's rate limits when asked."""
    if not rate_limits:
        return cfg
    from robolearn.hardware.registry import rate_limited_task

    return rate_limited_task(cfg)


def run_eval(cmd: EvalCmd) -> None:
    """Evaluate a task's scripted or random policy, or trained runs; print the summary (last line JSON)."""
    from robolearn.envs.gym_adapter import GymVectorTask, gym_env_id
    from robolearn.envs.task_env import TaskEnv
    from robolearn.eval.evaluation import make_policy
    from robolearn.eval.stats import bootstrap_ci, interquartile_mean
    from robolearn.policy.loading import load_policy
    from robolearn.tasks import make_task_cfg

    runs = [Path(t) for t in cmd.targets if Path(t).exists()]
    if runs and len(runs) != len(cmd.targets):
        missing = [t for t in cmd.targets if not Path(t).exists()]
        raise ConfigError(f"not found: {', '.join(missing)}; give one task name or existing run folders")
    if not runs:
        if len(cmd.targets) != 1:
            raise ConfigError(f"give one task name, or run folders; got {' '.join(cmd.targets)}")
        cfg = _limited(make_task_cfg(cmd.targets[0]), cmd.rate_limits)
        task_env = TaskEnv(
            cfg, cmd.backend, cmd.num_envs, seed=cmd.seed, randomize=cmd.randomize, sim_params=cmd.sim_params
        )
        summary = _rollout(cmd, task_env, make_policy(cmd.policy, cfg, cmd.num_envs, cmd.seed), cmd.policy)
        print(json.dumps(summary))
        return
    summaries = []
    for run in runs:
        policy, meta = load_policy(run)
        env_id = gym_env_id(meta["task"])
        if env_id is not None and (cmd.sim_params is not None or cmd.rate_limits):
            raise ConfigError(
                f"--sim-params and --rate-limits need a robolearn task; run {run} trained on {meta['task']}"
            )
        env: Any = (
            GymVectorTask(env_id, cmd.num_envs, render=cmd.video is not None)
            if env_id is not None
            else TaskEnv(
                # A run trained under its robot's rate limits is evaluated under them.
                _limited(make_task_cfg(meta["task"]), cmd.rate_limits or meta.get("rate_limits") is True),
                cmd.backend,
                cmd.num_envs,
                seed=cmd.seed,
                randomize=cmd.randomize,
                sim_params=cmd.sim_params,
            )
        )
        summaries.append(_rollout(cmd, env, policy.act, str(run)))
    if len(summaries) == 1:
        print(json.dumps(summaries[0]))
        return
    rates = [s["success_rate"] for s in summaries]
    returns = [s["return_mean"] for s in summaries]
    overall = {
        "runs": summaries,
        "success_rate": float(sum(rates) / len(rates)),
        "success_rate_iqm": interquartile_mean(rates),
        "success_rate_ci95": list(bootstrap_ci(rates)),
        "return_iqm": interquartile_mean(returns),
        "return_ci95": list(bootstrap_ci(returns)),
    }
    print(
        f"{len(runs)} runs: success IQM {overall['success_rate_iqm']:.1%}, "
        f"mean {overall['success_rate']:.1%}, return IQM {overall['return_iqm']:.2f}"
    )
    print(json.dumps(overall))


def _rollout(cmd: EvalCmd, env: Any, policy: Any, label: str) -> dict[str, Any]:
    """Evaluate one policy with a progress bar; print its line; return its summary."""
    from tqdm import tqdm

    from robolearn.data.video import write_mp4
    from robolearn.eval.evaluation import evaluate

    with tqdm(
        total=cmd.episodes, desc=f"{env.name} on {env.backend_name}", unit="ep", file=sys.stderr
    ) as bar:
        result = evaluate(
            env,
            policy,
            cmd.episodes,
            seed=cmd.seed,
            record_episodes=cmd.video_episodes if cmd.video else 0,
            on_episode=lambda k: bar.update(k - bar.n),
        )
    summary = result.summary() | {"policy": label}
    if cmd.video is not None:
        summary["video"] = str(write_mp4(cmd.video, result.frames, env.metadata["render_fps"]))
    env.close()
    lo, hi = summary["success_rate_ci95"]
    print(
        f"{env.name} / {label} / {env.backend_name}: success {summary['success_rate']:.1%} "
        f"[{lo:.1%}, {hi:.1%}] over {summary['episodes']} episodes, return {summary['return_mean']:.2f}, "
        f"{summary['steps_per_second']:.0f} env steps/s"
    )
    if cmd.video is not None:
        print(f"video: {summary['video']}")
    return summary
