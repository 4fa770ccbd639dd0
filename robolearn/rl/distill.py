"""``robolearn distill``: a network policy from a task's scripted expert, by DAgger.

Ross, Gordon and Bagnell, "A Reduction of Imitation Learning and Structured Prediction to No-Regret
Online Learning" (AISTATS 2011). Each round rolls out a mixture of the expert and the current
student (the expert acts in a world at a step with probability ``beta``, which decays from 1), has
the expert label every observation visited, adds the labels to one growing dataset and fits the
student to all of it by regression. Unlike behaviour cloning alone, the student learns what to do in
the states its own mistakes lead to.

The student is SAC's actor (its tanh of the mean) fitted in the policy's [-1, 1] action space, with
observations standardized by running statistics, so the result is an ordinary
:class:`robolearn.policy.network.Policy`. Rollouts run under the task's domain randomization on a batched
backend. The run folder has the checkpoint layout of ``robolearn train`` (weights, normalizer and
the policy record ``load_policy`` reads), so ``robolearn eval`` and ``robolearn export`` take it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F
import tyro

from robolearn.envs.task_env import TaskEnv
from robolearn.eval.evaluation import evaluate
from robolearn.policy.network import Policy
from robolearn.policy.normalization import ActionScaler, ObsLayout, RunningNorm
from robolearn.rl.checkpoint import save_checkpoint
from robolearn.rl.replay import ReplayBuffer
from robolearn.rl.sac import SAC, Actor, SACConfig
from robolearn.rl.train import TrainCfg, policy_meta
from robolearn.sim.backend import BackendName
from robolearn.tasks import make_task_cfg
from robolearn.tasks.core import TaskCfg, TaskError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DistillCmd:
    """Distill a task's scripted expert into a network policy with DAgger, under domain randomization.

    Writes a run folder that ``robolearn eval`` and ``robolearn export`` accept; the last line
    printed is one JSON object with the final success rates (nominal and randomized).
    """

    task: tyro.conf.Positional[Annotated[str, tyro.conf.arg(metavar="TASK")]]
    """Task name (see ``robolearn tasks``); it needs a scripted expert."""
    backend: BackendName = "mujoco_batch"
    """Simulator of the rollouts and evaluations."""
    num_envs: int = 16
    """Parallel worlds rolled out."""
    randomize: bool = True
    """Roll out (and evaluate during training) under the task's domain randomization."""
    iterations: int = 10
    """DAgger rounds: roll out, label, aggregate, fit."""
    steps_per_iteration: int = 8_000
    """Environment steps (all worlds together) rolled out per round."""
    beta_decay: float = 0.5
    """The expert acts with probability ``beta_decay ** round`` (1 in the first round, as in Ross et al.)."""
    updates_per_iteration: int = 1_500
    """Gradient steps of the fit after each round (warm-started from the previous round's student)."""
    batch_size: int = 256
    """Labelled observations per gradient step."""
    lr: float = 1e-3
    """Adam learning rate of the fit."""
    hidden: tuple[int, ...] = (256, 256)
    """Hidden layer widths of the student (SAC's actor network)."""
    eval_episodes: int = 32
    """Episodes of the student alone after every round (the learning curve)."""
    final_eval_episodes: int = 100
    """Episodes of each final evaluation, on the nominal and on the randomized task."""
    stop_at_success: float | None = None
    """Stop after a round whose evaluation reaches this success rate (e.g. 0.95); None runs every round."""
    seed: int = 0
    """Seed of everything random in the run."""
    out: Path = Path("runs")
    """Folder in which the run folder is made."""
    name: str | None = None
    """Run folder name (default: task, ``distill``, seed and time)."""
    torch_threads: int = 1
    """CPU threads for torch; 0 keeps torch's default (one avoids spinning against the simulator)."""

    def check(self) -> TaskCfg:
        """Refuse settings that cannot run, naming them; returns the task's definition."""
        task = make_task_cfg(self.task)
        if task.expert is None:
            raise TaskError(f"task {self.task} has no scripted expert to distill")
        positive = {
            "--num-envs": self.num_envs,
            "--iterations": self.iterations,
            "--steps-per-iteration": self.steps_per_iteration,
            "--updates-per-iteration": self.updates_per_iteration,
            "--batch-size": self.batch_size,
            "--eval-episodes": self.eval_episodes,
            "--final-eval-episodes": self.final_eval_episodes,
        }
        bad = [f"{k} {v}" for k, v in positive.items() if v < 1]
        if bad:
            raise TaskError(f"{', '.join(bad)}: must be at least 1")
        if self.steps_per_iteration < self.num_envs:
            raise TaskError(
                f"--steps-per-iteration {self.steps_per_iteration} is less than one step of "
                f"{self.num_envs} worlds"
            )
        if not 0.0 <= self.beta_decay <= 1.0:
            raise TaskError(f"--beta-decay must be in [0, 1], got {self.beta_decay}")
        if self.lr <= 0 or not self.hidden or min(self.hidden) < 1 or self.torch_threads < 0:
            raise TaskError("--lr must be positive, --hidden non-empty positive widths, --torch-threads >= 0")
        if self.stop_at_success is not None and not 0.0 < self.stop_at_success <= 1.0:
            raise TaskError(f"--stop-at-success must be in (0, 1] or None, got {self.stop_at_success}")
        return task


def _env(task: TaskCfg, backend: str, num_envs: int, seed: int, randomize: bool) -> TaskEnv:
    # The one-world MuJoCo reference cannot hold a batch; its batched twin can.
    name = "mujoco_batch" if backend == "mujoco" and num_envs > 1 else backend
    return TaskEnv(task, name, num_envs, seed=seed, randomize=randomize)


def _student(actor: Actor, norm: RunningNorm, layout: ObsLayout, scaler: ActionScaler) -> Policy:
    """The student as a deployable policy; its normalization is exactly what ``load_policy`` rebuilds."""
    return Policy(layout, actor, norm.mean, norm.std, scaler.low, scaler.high, obs_clip=norm.clip).eval()


def distill(cmd: DistillCmd, progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run DAgger; returns the summary also written to ``summary.json`` in the run folder."""
    task = cmd.check()
    run_dir = cmd.out / (cmd.name or f"{cmd.task}-distill-s{cmd.seed}-{time.strftime('%Y%m%d-%H%M%S')}")
    if cmd.torch_threads > 0:
        torch.set_num_threads(cmd.torch_threads)
    torch.manual_seed(cmd.seed)
    seeds = [int(s) for s in np.random.SeedSequence(cmd.seed).generate_state(5)]
    rng = np.random.default_rng(seeds[0])

    env = _env(task, cmd.backend, cmd.num_envs, seeds[1], cmd.randomize)
    eval_env = _env(task, cmd.backend, min(cmd.eval_episodes, cmd.num_envs), seeds[2], cmd.randomize)
    assert task.expert is not None  # check() refused a task without one
    expert = task.expert(task)
    # The same policy record as a trained run's, so load_policy reads both alike; the student
    # flattens observations in its order.
    meta = policy_meta(TrainCfg(task=cmd.task, sac=SACConfig(hidden=cmd.hidden)), env)
    obs_shapes = {k: tuple(v) for k, v in meta["obs_shapes"].items()}
    layout = ObsLayout(obs_shapes)
    scaler = ActionScaler(task.action.low, task.action.high)
    # A whole SAC agent, though only its actor is fitted: the checkpoint then has train's layout.
    agent = SAC(layout.dim, len(scaler.low), SACConfig(hidden=cmd.hidden), torch.device("cpu"))
    optimizer = torch.optim.Adam(agent.actor.parameters(), lr=cmd.lr)
    norm = RunningNorm(layout.dim)
    run_dir.mkdir(parents=True, exist_ok=False)
    (run_dir / "distill_config.json").write_text(json.dumps(dataclasses.asdict(cmd), default=str, indent=1))

    inputs: list[npt.NDArray[np.float32]] = []
    labels: list[npt.NDArray[np.float32]] = []
    evals: list[dict[str, Any]] = []
    env_steps = 0
    started = time.perf_counter()
    obs, _ = env.reset(seed=seeds[1])
    for it in range(cmd.iterations):
        beta = cmd.beta_decay**it
        student = _student(agent.actor, norm, layout, scaler)
        steps, rollout_successes = cmd.steps_per_iteration // cmd.num_envs, []
        for _ in range(steps):
            label = expert(obs)
            action = label
            if beta < 1.0:
                own = student.act(obs)
                action = np.where((rng.random(cmd.num_envs) < beta)[:, None], label, own)
            inputs.append(layout.flatten(obs))
            labels.append(scaler.to_unit(label))
            obs, _, _, _, info = env.step(action)
            if "final_info" in info:
                rollout_successes += info["final_info"]["episode_success"][info["_final_info"]].tolist()
        env_steps += steps * cmd.num_envs
        x_all = np.concatenate(inputs)
        norm.update(x_all[-steps * cmd.num_envs :])
        loss = _fit(agent.actor, optimizer, norm(x_all), np.concatenate(labels), cmd, rng)

        student = _student(agent.actor, norm, layout, scaler)
        result = evaluate(eval_env, student.act, cmd.eval_episodes, seed=seeds[3]).summary()
        result |= {
            "iteration": it,
            "env_steps": env_steps,
            "samples": len(x_all),
            "beta": beta,
            "loss": loss,
            "rollout_success_rate": float(np.mean(rollout_successes)) if rollout_successes else float("nan"),
            "minutes": (time.perf_counter() - started) / 60,
        }
        evals.append(result)
        log.info(
            "round %d: success %.2f, loss %.4f, %d samples", it, result["success_rate"], loss, len(x_all)
        )
        if progress is not None:
            progress(result)
        if cmd.stop_at_success is not None and result["success_rate"] >= cmd.stop_at_success:
            break
    env.close()
    eval_env.close()
    train_seconds = time.perf_counter() - started  # rounds only; wall_minutes adds the final evaluations

    student = _student(agent.actor, norm, layout, scaler)
    final: dict[str, dict[str, Any]] = {}
    for label_, randomize in (("nominal", False), ("randomized", True)):
        fenv = _env(task, cmd.backend, min(cmd.final_eval_episodes, cmd.num_envs), seeds[4], randomize)
        final[label_] = evaluate(fenv, student.act, cmd.final_eval_episodes, seed=seeds[4]).summary()
        fenv.close()

    ckpt = save_checkpoint(
        run_dir / "checkpoints",
        env_steps,
        agent=agent,
        obs_norm=norm,
        online=ReplayBuffer(1, obs_shapes, len(scaler.low)),
        demos=None,
        state={
            "policy": meta,
            "distill": {"env_steps": env_steps, "samples": len(x_all), "rounds": len(evals)},
        },
    )
    from robolearn.eval.plots import plot_learning_curve

    summary: dict[str, Any] = {
        "task": cmd.task,
        "method": "dagger",
        "run_dir": str(run_dir),
        "checkpoint": str(ckpt),
        "env_steps": env_steps,
        "samples": len(x_all),
        "train_minutes": train_seconds / 60,
        "wall_minutes": (time.perf_counter() - started) / 60,
        "success_rate": final["randomized" if cmd.randomize else "nominal"]["success_rate"],
        "success_rate_nominal": final["nominal"]["success_rate"],
        "success_rate_nominal_ci95": final["nominal"]["success_rate_ci95"],
        "success_rate_randomized": final["randomized"]["success_rate"],
        "success_rate_randomized_ci95": final["randomized"]["success_rate_ci95"],
        "learning_curve": str(
            plot_learning_curve(evals, run_dir / "learning_curve.png", f"{cmd.task} (DAgger)")
        ),
        "evals": evals,
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def _fit(
    actor: Actor,
    optimizer: torch.optim.Optimizer,
    x: npt.NDArray[np.float32],
    y: npt.NDArray[np.float32],
    cmd: DistillCmd,
    rng: np.random.Generator,
) -> float:
    """Regress the actor's deterministic action onto the expert's labels; returns the last 100 steps' loss."""
    xt, yt = torch.as_tensor(x), torch.as_tensor(y)
    losses = []
    for _ in range(cmd.updates_per_iteration):
        idx = torch.as_tensor(rng.integers(0, len(xt), size=cmd.batch_size))
        loss = F.mse_loss(actor.act(xt[idx]), yt[idx])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return float(torch.stack(losses[-100:]).mean())


def run_distill(cmd: DistillCmd) -> None:
    """The ``distill`` subcommand: a progress bar on stderr, then the results (last line JSON)."""
    from tqdm import tqdm

    cmd.check()  # before the progress bar, so a bad request ends in its one-line message alone
    with tqdm(total=cmd.iterations, desc=f"distill {cmd.task}", unit="round", file=sys.stderr) as bar:

        def progress(result: dict[str, Any]) -> None:
            bar.set_postfix(
                success=f"{result['success_rate']:.2f}",
                loss=f"{result['loss']:.1e}",
                samples=str(result["samples"]),
                refresh=False,
            )
            bar.update(1)

        summary = distill(cmd, progress)
    print(
        f"{summary['task']}: success {summary['success_rate_nominal']:.1%} nominal, "
        f"{summary['success_rate_randomized']:.1%} randomized, after {summary['env_steps']} env steps "
        f"in {summary['train_minutes']:.1f} min ({summary['wall_minutes']:.1f} with the final evaluations)"
    )
    print(f"run: {summary['run_dir']}  (curve: {summary['learning_curve']})")
    print(json.dumps({k: v for k, v in summary.items() if k != "evals"}))
