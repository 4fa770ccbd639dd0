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

A task with cameras (``panda_pick_cube_pixels``) has no expert of its own: its state task's expert
labels it from privileged state read on the same worlds (:mod:`robolearn.tasks.teacher`), as a
teacher in simulation does, while the student sees only the cameras and proprioception. That
student is a :class:`~robolearn.policy.pixel_network.PixelPolicy` (DrQ's encoder, with
``--encoder-channels`` convolution channels, trained by the regression with random-shift
augmentation); the run folder then holds the exported policy folder ``policy/`` (TorchScript, the
cameras in ``policy.json``), which ``robolearn eval --policy`` and ``policy_node`` load.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F

from robolearn.envs.autoreset import EpisodeStatistics
from robolearn.envs.task_env import TaskEnv
from robolearn.eval.evaluation import evaluate
from robolearn.policy.encoders import ObservationEncoder
from robolearn.policy.meta import run_policy_record
from robolearn.policy.network import PolicyNetwork
from robolearn.policy.normalization import ActionScaler, ObsLayout, RunningNorm
from robolearn.policy.pixel_network import PixelPolicy
from robolearn.rl.checkpoint import save_checkpoint
from robolearn.rl.config import DistillCmd, SACConfig
from robolearn.rl.replay import ReplayBuffer
from robolearn.rl.sac import SAC
from robolearn.tasks.core import Observation, TaskCfg
from robolearn.tasks.teacher import privileged_observations, teacher_task

log = logging.getLogger(__name__)


def _env(task: TaskCfg, backend: str, num_envs: int, seed: int, randomize: bool) -> TaskEnv:
    # The one-world MuJoCo reference cannot hold a batch; its batched twin can.
    name = "mujoco_batch" if backend == "mujoco" and num_envs > 1 else backend
    return TaskEnv(task, name, num_envs, seed=seed, randomize=randomize)


def _sac(obs_dim: int, action_dim: int, cmd: DistillCmd) -> SAC:
    return SAC(obs_dim, action_dim, SACConfig(hidden=cmd.hidden), torch.device("cpu"))


class _StateStudent:
    """SAC's actor over the flattened, standardized observation: a :class:`PolicyNetwork`."""

    def __init__(self, cmd: DistillCmd, task: TaskCfg, env: TaskEnv) -> None:
        # The order a Dict space gives (sorted keys): the order the network reads its input in.
        shapes = {k: (size,) for k, size in sorted(env.observation_sizes.items())}
        self.meta = run_policy_record(cmd.task, shapes, task.action.low, task.action.high, cmd.hidden)
        self.obs_shapes = {k: tuple(v) for k, v in self.meta["obs_shapes"].items()}
        self.layout = ObsLayout(self.obs_shapes)
        self.scaler = ActionScaler(task.action.low, task.action.high)
        # A whole SAC agent, though only its actor is fitted: the checkpoint then has train's layout.
        self.agent = _sac(self.layout.dim, len(self.scaler.low), cmd)
        self.optimizer = torch.optim.Adam(self.agent.actor.parameters(), lr=cmd.lr)
        self.norm = RunningNorm(self.layout.dim)
        self.inputs: list[npt.NDArray[np.float32]] = []
        self.new = 0

    def remember(self, obs: Observation) -> None:
        self.inputs.append(self.layout.flatten(obs))
        self.new += len(self.inputs[-1])

    def __len__(self) -> int:
        return sum(len(x) for x in self.inputs)

    def fit(self, labels: npt.NDArray[np.float32], cmd: DistillCmd, rng: np.random.Generator) -> float:
        x_all = np.concatenate(self.inputs)
        self.norm.update(x_all[len(x_all) - self.new :])
        self.new = 0
        xt = torch.as_tensor(self.norm(x_all))
        return _fit(self.optimizer, lambda idx: self.agent.actor.act(xt[idx]), labels, cmd, rng)

    def policy(self) -> Callable[[Observation], npt.NDArray[np.float64]]:
        net = PolicyNetwork(
            self.layout, self.agent.actor, self.norm.mean, self.norm.std, self.scaler.low, self.scaler.high,
            obs_clip=self.norm.clip,
        )
        return net.eval().act

    def save(self, run_dir: Path, env_steps: int, rounds: int, task: TaskCfg) -> dict[str, Any]:
        ckpt = save_checkpoint(
            run_dir / "checkpoints",
            env_steps,
            agent=self.agent,
            obs_norm=self.norm,
            online=ReplayBuffer(1, self.obs_shapes, len(self.scaler.low)),
            demos=None,
            state={
                "policy": self.meta,
                "distill": {"env_steps": env_steps, "samples": len(self), "rounds": rounds},
            },
        )
        return {"checkpoint": str(ckpt)}


class _PixelStudent:
    """A :class:`PixelPolicy` over the task's cameras and state terms, its encoder trained by the
    regression (with DrQ's random shifts: the student must not key on exact pixel positions)."""

    def __init__(self, cmd: DistillCmd, task: TaskCfg, env: TaskEnv) -> None:
        images = {k: spec.shape for k, spec in env.image_specs.items() if spec.kind == "rgb"}
        states = dict(sorted(env.observation_sizes.items()))
        encoder = ObservationEncoder(images, states, channels=cmd.encoder_channels)
        actor = _sac(encoder.feature_dim, len(task.action.low), cmd).actor
        self.student = PixelPolicy(encoder, actor, task.action.low, task.action.high)
        self.optimizer = torch.optim.Adam(self.student.parameters(), lr=cmd.lr)
        self.scaler = ActionScaler(task.action.low, task.action.high)
        self.frames: dict[str, list[npt.NDArray[Any]]] = {k: [] for k in encoder.keys}

    def remember(self, obs: Observation) -> None:
        for key, frames in self.frames.items():
            frames.append(np.asarray(obs[key]))

    def __len__(self) -> int:
        return sum(len(x) for x in next(iter(self.frames.values())))

    def fit(self, labels: npt.NDArray[np.float32], cmd: DistillCmd, rng: np.random.Generator) -> float:
        data = [torch.as_tensor(np.concatenate(frames)) for frames in self.frames.values()]
        encoder = self.student.encoder
        if encoder.state_keys:  # standardize the state terms by everything collected so far
            states = torch.cat([d.reshape(len(d), -1).float() for d in data[len(encoder.cameras) :]], dim=1)
            encoder.set_state_statistics(states.mean(0).numpy(), states.std(0).numpy())
        self.student.train()

        def act(idx: torch.Tensor) -> torch.Tensor:
            return self.student.actor.act(encoder.encode([d[idx] for d in data], augment=True))

        loss = _fit(self.optimizer, act, labels, cmd, rng)
        self.student.eval()
        return loss

    def policy(self) -> Callable[[Observation], npt.NDArray[np.float64]]:
        return self.student.act

    def save(self, run_dir: Path, env_steps: int, rounds: int, task: TaskCfg) -> dict[str, Any]:
        from robolearn.policy.pixel_export import export_pixel_policy, save_pixel_policy

        # The weights too, as a DrQ run keeps them: ``robolearn export RUN`` (with --onnx) exports again.
        save_pixel_policy(self.student, task, run_dir)
        folder = export_pixel_policy(self.student, task, run_dir / "policy", source=f"distill:{run_dir.name}")
        return {"policy_dir": str(folder)}


def _expert_for(
    task: TaskCfg, env: TaskEnv, teacher_name: str | None
) -> Callable[[Observation], npt.NDArray[Any]]:
    """The task's scripted expert, or for a task with cameras its state task's, reading privileged
    state from the same worlds (the student never sees it)."""
    if not task.cameras:
        assert task.expert is not None  # check() refused a task without one
        return task.expert(task)
    teacher = teacher_task(task, teacher_name)
    assert teacher.expert is not None  # teacher_task checked it
    expert = teacher.expert(teacher)
    return lambda _obs: np.asarray(expert(privileged_observations(teacher, env)), np.float64)


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
    expert = _expert_for(task, env, cmd.expert_task)
    student = _PixelStudent(cmd, task, env) if task.cameras else _StateStudent(cmd, task, env)
    scaler = student.scaler
    run_dir.mkdir(parents=True, exist_ok=False)
    (run_dir / "distill_config.json").write_text(json.dumps(dataclasses.asdict(cmd), default=str, indent=1))

    labels: list[npt.NDArray[np.float32]] = []
    evals: list[dict[str, Any]] = []
    env_steps = 0
    started = time.perf_counter()
    obs, _ = env.reset(seed=seeds[1])
    stats = EpisodeStatistics(env.num_envs)
    for it in range(cmd.iterations):
        beta = cmd.beta_decay**it
        acting = student.policy()
        steps = cmd.steps_per_iteration // cmd.num_envs
        rollout_successes: list[bool] = []
        for _ in range(steps):
            label = expert(obs)
            action = label
            if beta < 1.0:
                own = acting(obs)
                action = np.where((rng.random(cmd.num_envs) < beta)[:, None], label, own)
            student.remember(obs)
            labels.append(scaler.to_unit(label))
            obs, reward, terminated, truncated, info = env.step(action)
            ended = stats.step(reward, terminated, truncated, info)
            rollout_successes += [] if ended.successes is None else ended.successes.tolist()
        env_steps += steps * cmd.num_envs
        loss = student.fit(np.concatenate(labels), cmd, rng)

        result = evaluate(eval_env, student.policy(), cmd.eval_episodes, seed=seeds[3]).summary()
        result |= {
            "iteration": it,
            "env_steps": env_steps,
            "samples": len(student),
            "beta": beta,
            "loss": loss,
            "rollout_success_rate": float(np.mean(rollout_successes)) if rollout_successes else float("nan"),
            "minutes": (time.perf_counter() - started) / 60,
        }
        evals.append(result)
        log.info(
            "round %d: success %.2f, loss %.4f, %d samples", it, result["success_rate"], loss, len(student)
        )
        if progress is not None:
            progress(result)
        if cmd.stop_at_success is not None and result["success_rate"] >= cmd.stop_at_success:
            break
    env.close()
    eval_env.close()
    train_seconds = time.perf_counter() - started  # rounds only; wall_minutes adds the final evaluations

    final: dict[str, dict[str, Any]] = {}
    for label_, randomize in (("nominal", False), ("randomized", True)):
        fenv = _env(task, cmd.backend, min(cmd.final_eval_episodes, cmd.num_envs), seeds[4], randomize)
        final[label_] = evaluate(fenv, student.policy(), cmd.final_eval_episodes, seed=seeds[4]).summary()
        fenv.close()

    saved = student.save(run_dir, env_steps, len(evals), task)
    from robolearn.eval.plots import plot_learning_curve

    summary: dict[str, Any] = {
        "task": cmd.task,
        "method": "dagger",
        "run_dir": str(run_dir),
        **saved,
        "env_steps": env_steps,
        "samples": len(student),
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
    optimizer: torch.optim.Optimizer,
    act: Callable[[torch.Tensor], torch.Tensor],
    y: npt.NDArray[np.float32],
    cmd: DistillCmd,
    rng: np.random.Generator,
) -> float:
    """Regress the student's deterministic action (``act`` of sample indices) onto the expert's
    labels ``y``; returns the last 100 steps' loss."""
    yt = torch.as_tensor(y)
    losses = []
    for _ in range(cmd.updates_per_iteration):
        idx = torch.as_tensor(rng.integers(0, len(yt), size=cmd.batch_size))
        loss = F.mse_loss(act(idx), yt[idx])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return float(torch.stack(losses[-100:]).mean())
