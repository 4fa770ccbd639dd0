"""``robolearn distill``: a network policy from a task's scripted expert, by DAgger.

Ross, Gordon and Bagnell, "A Reduction of Imitation Learning and Structured Prediction to No-Regret
Online Learning" (AISTATS 2011). Each round rolls out a mixture of the expert and the current
student (the expert acts in a world at a step with probability ``beta``, which decays from 1), has
the expert label every observation visited, adds the labels to one growing dataset and fits the
student to all of it by regression. Unlike behaviour cloning alone, the student learns what to do in
the states its own mistakes lead to.

The student is SAC's actor (its tanh of the mean) fitted in the policy's [-1, 1] action space, with
observations standardized by running statistics, so the result is an ordinary
:class:`robolearn.policy.network.PolicyNetwork`. Rollouts run under the task's domain randomization on a
backend. The run folder has the checkpoint layout of ``robolearn train`` (weights, normalizer and
the policy record ``load_policy`` reads), so ``robolearn eval`` and ``robolearn export`` take it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F

from robolearn.envs.autoreset import EpisodeStatistics
from robolearn.envs.task_env import TaskEnv
from robolearn.eval.evaluation import evaluate
from robolearn.policy.meta import run_policy_record
from robolearn.policy.network import Actor, PolicyNetwork
from robolearn.policy.normalization import ActionScaler, ObsLayout, RunningNorm
from robolearn.rl.checkpoint import save_checkpoint
from robolearn.rl.config import DistillCmd, SACConfig
from robolearn.rl.replay import ReplayBuffer
from robolearn.rl.sac import SAC
from robolearn.tasks.core import TaskCfg

log = logging.getLogger(__name__)


def _env(task: TaskCfg, backend: str, num_envs: int, seed: int, randomize: bool) -> TaskEnv:
    # The one-world MuJoCo reference cannot hold a batch; its batched twin can.
    name = "mujoco_batch" if backend == "mujoco" and num_envs > 1 else backend
    return TaskEnv(task, name, num_envs, seed=seed, randomize=randomize)


def _student(actor: Actor, norm: RunningNorm, layout: ObsLayout, scaler: ActionScaler) -> PolicyNetwork:
    """The student as a deployable policy; its normalization is exactly what ``load_policy`` rebuilds."""
    net = PolicyNetwork(layout, actor, norm.mean, norm.std, scaler.low, scaler.high, obs_clip=norm.clip)
    return net.eval()


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
    # The order a Dict space gives (sorted keys): the order the network reads its input in.
    shapes = {k: (size,) for k, size in sorted(env.observation_sizes.items())}
    meta = run_policy_record(cmd.task, shapes, task.action.low, task.action.high, cmd.hidden)
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
    stats = EpisodeStatistics(env.num_envs)
    for it in range(cmd.iterations):
        beta = cmd.beta_decay**it
        student = _student(agent.actor, norm, layout, scaler)
        steps = cmd.steps_per_iteration // cmd.num_envs
        rollout_successes: list[bool] = []
        for _ in range(steps):
            label = expert(obs)
            action = label
            if beta < 1.0:
                own = student.act(obs)
                action = np.where((rng.random(cmd.num_envs) < beta)[:, None], label, own)
            inputs.append(layout.flatten(obs))
            labels.append(scaler.to_unit(label))
            obs, reward, terminated, truncated, info = env.step(action)
            ended = stats.step(reward, terminated, truncated, info)
            rollout_successes += [] if ended.successes is None else ended.successes.tolist()
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
