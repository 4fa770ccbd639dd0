"""The ``robolearn`` command: one entry point, one subcommand per job.

Options come from typed dataclasses; each field's docstring is its ``--help`` text. Every error a
user can cause ends in one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import tyro

from robolearn.bench.deploy import DeployBenchCfg
from robolearn.bench.learn import LearnBenchCfg
from robolearn.bench.sim import SimBenchCfg
from robolearn.bench.transfer import TransferBenchCfg
from robolearn.data.dataset import DatasetCmd
from robolearn.hardware.ros.launch import LaunchCmd
from robolearn.hil.record import RecordCmd
from robolearn.hil.reward_classifier import RewardEvalCmd, RewardTrainCmd
from robolearn.policy.export import ExportCmd
from robolearn.rl.distill import DistillCmd
from robolearn.rl.replay import CorruptFileError
from robolearn.rl.train import TrainCfg
from robolearn.sim.backend import BackendName, SimError
from robolearn.tasks import DEFAULT_TASK, make_task_cfg, task_names
from robolearn.tasks.core import TaskError

log = logging.getLogger("robolearn")


@dataclass(frozen=True)
class TasksCmd:
    """List the tasks: embodiment, observation and action spaces with units, control rate, backends."""

    json: bool = False
    """Print one JSON object instead of a table."""


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
    """Simulator: MuJoCo one world, MuJoCo batched, or PyBullet."""
    episodes: int = 50
    """Number of episodes."""
    num_envs: int = 1
    """Parallel worlds (more than one needs ``--backend mujoco_batch`` or pybullet)."""
    seed: int = 0
    """Seed of the reset distribution."""
    randomize: bool = False
    """Apply the task's domain randomization."""
    video: Path | None = None
    """Write the first episodes of world 0 to this mp4 file."""
    video_episodes: int = 1
    """How many episodes the video shows."""


@dataclass(frozen=True)
class BenchCmd:
    """Benchmarks, measured side by side in one run; the last line is one JSON object."""

    what: tyro.conf.OmitSubcommandPrefixes[
        Annotated[SimBenchCfg, tyro.conf.subcommand("sim")]
        | Annotated[LearnBenchCfg, tyro.conf.subcommand("learn")]
        | Annotated[DeployBenchCfg, tyro.conf.subcommand("deploy")]
        | Annotated[TransferBenchCfg, tyro.conf.subcommand("transfer")]
    ]


@dataclass(frozen=True)
class RewardCmd:
    """Learned rewards for tasks where no simulator computes one."""

    what: tyro.conf.OmitSubcommandPrefixes[
        Annotated[RewardTrainCmd, tyro.conf.subcommand("train")]
        | Annotated[RewardEvalCmd, tyro.conf.subcommand("eval")]
    ]


Command = (
    Annotated[TrainCfg, tyro.conf.subcommand("train")]
    | Annotated[TasksCmd, tyro.conf.subcommand("tasks")]
    | Annotated[EvalCmd, tyro.conf.subcommand("eval")]
    | Annotated[BenchCmd, tyro.conf.subcommand("bench")]
    | Annotated[DistillCmd, tyro.conf.subcommand("distill")]
    | Annotated[ExportCmd, tyro.conf.subcommand("export")]
    | Annotated[DatasetCmd, tyro.conf.subcommand("dataset")]
    | Annotated[LaunchCmd, tyro.conf.subcommand("launch")]
    | Annotated[RecordCmd, tyro.conf.subcommand("record")]
    | Annotated[RewardCmd, tyro.conf.subcommand("reward")]
)


class UsageError(Exception):
    """A request that cannot run; the message is shown as is."""


def _one_line(text: str) -> str:
    """Condense tyro's boxed error report to its message."""
    lines = []
    for raw in text.splitlines():
        line = re.sub(r"[│╭╮╰╯─┃━┏┓┗┛]+", " ", raw).strip()
        if line and not line.startswith("For full helptext") and not re.fullmatch(r"[\w ]+", line):
            lines.append(line)
    return " ".join(lines) or text.strip()


def _parse(argv: Sequence[str] | None) -> Any:
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            return tyro.cli(Command, prog="robolearn", args=argv, config=(tyro.conf.OmitSubcommandPrefixes,))
    except SystemExit as exc:
        if exc.code not in (0, None):
            print(f"robolearn: error: {_one_line(captured.getvalue())}", file=sys.stderr)
            raise SystemExit(2) from None
        sys.stderr.write(captured.getvalue())
        raise


def _tasks(cmd: TasksCmd) -> None:
    import gymnasium as gym
    import numpy as np

    from robolearn.envs.task_env import TaskEnv

    listing: list[dict[str, Any]] = []
    for name in task_names():
        cfg = make_task_cfg(name)
        env = TaskEnv(cfg, "mujoco", 1)
        obs_space = env.single_observation_space
        assert isinstance(obs_space, gym.spaces.Dict)
        listing.append(
            {
                "task": name,
                "embodiment": cfg.embodiment,
                "description": cfg.description,
                "observation": {
                    k: {"dim": int(np.prod(obs_space[k].shape or (1,))), "units": t.units}
                    for k, t in cfg.observations.items()
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
    if cmd.json:
        print(json.dumps(listing))
        return
    for t in listing:
        print(
            f"{t['task']}  [{t['embodiment']}]  {t['control_hz']:g} Hz, {t['episode_steps']} steps, "
            f"backends: {', '.join(t['backends'])}"
        )
        print(f"    {t['description']}")
        obs = ", ".join(f"{k}[{v['dim']}] {v['units']}" for k, v in t["observation"].items())
        print(f"    observation: {obs}")
        act = ", ".join(f"{a['name']} [{a['low']:g}, {a['high']:g}] {a['units']}" for a in t["action"])
        print(f"    action:      {act}")


def _eval(cmd: EvalCmd) -> None:
    from robolearn.envs.gym_adapter import GymVectorTask, gym_env_id
    from robolearn.envs.task_env import TaskEnv
    from robolearn.eval.evaluation import make_policy
    from robolearn.eval.stats import bootstrap_ci, interquartile_mean
    from robolearn.rl.train import load_policy

    if cmd.episodes < 1:
        raise UsageError(f"--episodes must be at least 1, got {cmd.episodes}")
    runs = [Path(t) for t in cmd.targets if Path(t).exists()]
    if runs and len(runs) != len(cmd.targets):
        missing = [t for t in cmd.targets if not Path(t).exists()]
        raise UsageError(f"not found: {', '.join(missing)}; give one task name or existing run folders")
    if not runs:
        if len(cmd.targets) != 1:
            raise UsageError(f"give one task name, or run folders; got {' '.join(cmd.targets)}")
        cfg = make_task_cfg(cmd.targets[0])
        task_env = TaskEnv(cfg, cmd.backend, cmd.num_envs, seed=cmd.seed, randomize=cmd.randomize)
        summary = _rollout(cmd, task_env, make_policy(cmd.policy, cfg, cmd.num_envs, cmd.seed), cmd.policy)
        print(json.dumps(summary))
        return
    summaries = []
    for run in runs:
        policy, meta = load_policy(run)
        env_id = gym_env_id(meta["task"])
        env: Any = (
            GymVectorTask(env_id, cmd.num_envs, render=cmd.video is not None)
            if env_id is not None
            else TaskEnv(meta["task"], cmd.backend, cmd.num_envs, seed=cmd.seed, randomize=cmd.randomize)
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


def _train(cmd: TrainCfg) -> None:
    from tqdm import tqdm

    from robolearn.rl.train import RunState, train

    bar = tqdm(total=cmd.steps, desc=f"train {cmd.task}", unit="step", file=sys.stderr, dynamic_ncols=True)
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
            success=f"{live['success']:.2f}",
            ret=f"{live['return']:.1f}",
            refresh=False,
        )

    try:
        summary = train(cmd, progress)
    finally:
        bar.close()
    print(
        f"{summary['task']}: success {summary['success_rate']:.1%} after {summary['env_steps']} env steps "
        f"in {summary['wall_minutes']:.1f} min"
    )
    print(
        f"run: {summary['run_dir']}  (policy: {summary['checkpoint']}, curve: {summary['learning_curve']}"
        + (f", video: {summary['video']})" if "video" in summary else ")")
    )
    print(json.dumps({k: v for k, v in summary.items() if k != "evals"}))


def _bench(cmd: BenchCmd) -> None:
    from robolearn.bench.learn import format_learn_table, run_learn_bench
    from robolearn.bench.report import format_table
    from robolearn.bench.sim import run_sim_bench

    def say(msg: str) -> None:
        print(msg, file=sys.stderr)

    if isinstance(cmd.what, SimBenchCfg):
        rows, summary = run_sim_bench(cmd.what, progress=say)
        print(format_table(rows))
    elif isinstance(cmd.what, LearnBenchCfg):
        rows, summary = run_learn_bench(cmd.what, progress=say)
        print(format_learn_table(rows))
    elif isinstance(cmd.what, DeployBenchCfg):
        from robolearn.bench.deploy import format_deploy_table, run_deploy_bench

        rows, summary = run_deploy_bench(cmd.what, progress=say)
        print(format_deploy_table(rows))
    else:
        from robolearn.bench.transfer import format_transfer_table, run_transfer_bench

        rows, summary = run_transfer_bench(cmd.what, progress=say)
        print(format_transfer_table(rows))
    print(json.dumps(summary))


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``robolearn`` console command."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    cmd = _parse(argv)
    try:
        if isinstance(cmd, TrainCfg):
            _train(cmd)
        elif isinstance(cmd, TasksCmd):
            _tasks(cmd)
        elif isinstance(cmd, EvalCmd):
            _eval(cmd)
        elif isinstance(cmd, BenchCmd):
            _bench(cmd)
        elif isinstance(cmd, DistillCmd):
            from robolearn.rl.distill import run_distill

            run_distill(cmd)
        elif isinstance(cmd, ExportCmd):
            from robolearn.policy.export import run_export

            run_export(cmd)
        elif isinstance(cmd, DatasetCmd):
            from robolearn.data.dataset import run_dataset

            run_dataset(cmd)
        elif isinstance(cmd, RecordCmd):
            from robolearn.hil.record import run_record

            run_record(cmd)
        elif isinstance(cmd, RewardCmd):
            from robolearn.hil.reward_classifier import run_reward_eval, run_reward_train

            if isinstance(cmd.what, RewardTrainCmd):
                run_reward_train(cmd.what)
            else:
                run_reward_eval(cmd.what)
        elif isinstance(cmd, LaunchCmd):
            from robolearn.hardware.ros.launch import run_launch

            raise SystemExit(run_launch(cmd))
    except (TaskError, SimError, UsageError, CorruptFileError, ValueError) as exc:
        print(f"robolearn: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
