"""Learning from cameras: SAC on encoded observations with DrQ's augmentation (issue 13).

Kostrikov, Yarats and Fergus, "Image Augmentation Is All You Need: Regularizing Deep Reinforcement
Learning from Pixels" (DrQ, 2020); Yarats et al., "Mastering Visual Continuous Control" (DrQ-v2,
2021); Luo et al., "SERL: A Software Suite for Sample-Efficient Robotic Reinforcement Learning"
(2024), whose DrQ agent HIL-SERL trains real arms with:

- every camera goes through a small conv encoder (:mod:`robolearn.policy.encoders`), state terms
  are standardized beside it, and the SAC of :mod:`robolearn.rl.sac` works on the features;
- images are randomly shifted (4 pixels) each time a batch is encoded, for the current and the
  next observation (DrQ's K = M = 1);
- the critic's TD loss trains the encoder; the actor reads the features detached (its gradient
  would otherwise pull the representation towards what the current policy needs, DrQ section 3);
  next-state features for the target are computed without gradient, by the online encoder, as in
  DrQ-v2;
- a frozen pretrained encoder (HIL-SERL's choice) has no optimizer: only the critic and actor learn.

Frames are stored once per step in a :class:`~robolearn.rl.pixel_replay.FrameReplay` sized by a
memory budget. On CPU this runs for correctness (a DrQ encoder's update over 512 64x64 images takes
seconds per core); the learning figures of issue 13 are GPU runs.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from robolearn.envs.autoreset import EpisodeStatistics, transition_next_obs
from robolearn.envs.task_env import TaskEnv
from robolearn.errors import ConfigError
from robolearn.policy.encoders import (
    ENCODER_FILE,
    ObservationEncoder,
    load_encoder_weights,
    save_encoder_weights,
)
from robolearn.policy.normalization import ActionScaler
from robolearn.policy.pixel_export import export_pixel_policy, save_pixel_policy
from robolearn.policy.pixel_network import PixelPolicy
from robolearn.rl.config import SACConfig
from robolearn.rl.pixel_replay import FrameReplay, TensorBatch, capacity_for_budget, load_image_demos
from robolearn.rl.replay import Batch, LearnerBatch
from robolearn.rl.sac import SAC
from robolearn.tasks.core import TaskCfg
from robolearn.tasks.teacher import privileged_observations, teacher_task

log = logging.getLogger(__name__)

__all__ = [
    "ENCODER_FILE",
    "SUMMARY_FILE",
    "DrQLearner",
    "PixelRun",
    "PixelTrainCfg",
    "RewardFn",
    "classifier_reward",
    "collect_pixel_demos",
    "make_pixel_env",
    "train_pixels",
]

SUMMARY_FILE = "summary.json"
"""What a run measured (:meth:`PixelRun.summary`), written to :attr:`PixelTrainCfg.out`."""
RewardFn = Callable[[dict[str, npt.NDArray[Any]]], npt.NDArray[np.float64]]
"""A learned reward: (n,) rewards in {0, 1} for a batch of observations reached."""


@dataclass(frozen=True)
class PixelTrainCfg:
    """Training a pixel task (one with cameras) with DrQ."""

    task: str = "panda_pick_cube_pixels"
    """A task with cameras (``robolearn tasks`` lists their image terms)."""
    backend: str = "mujoco_batch"
    """Simulator backend."""
    num_envs: int = 1
    """Worlds stepped together. The learner keeps ``sac.utd_ratio`` critic steps per transition
    whatever their number: a step of all worlds is followed by ``utd_ratio * num_envs`` of them and
    one actor step (pick-cube from pixels with 4 worlds: 25 % success at 30,000 steps with one critic
    step per step of all worlds, 95 % at 16,000 with one per transition; H200, docs/pixels.md)."""
    steps: int = 10_000
    """Environment steps (over all worlds)."""
    seed: int = 0
    """Seed of the environment, the networks and the sampler."""
    device: str = "cpu"
    """Torch device of the learner."""
    learning_starts: int = 1_000
    """Steps of uniformly random actions before the first update; state statistics come from them."""
    replay_budget_mb: float = 1_024.0
    """Memory the replay may take (MiB); its capacity in steps follows from the frame sizes."""
    features: int = 50
    """Features per camera (DrQ's 50)."""
    pretrained_encoder: Path | None = None
    """A local safetensors file of camera encoder weights (:func:`save_encoder_weights`); the
    encoder is then frozen. None: train the encoder from scratch with the critic."""
    encoder_lr: float = 3e-4
    """Learning rate of the camera encoders (trained through the critic)."""
    reward_classifier: Path | None = None
    """A reward classifier folder (``robolearn reward train``, HIL-SERL's learned reward) that judges
    each observation reached, cameras included: its verdict is the reward (1 or 0) and a success ends
    the episode; demonstrations are relabelled by it too. None: the task's reward terms."""
    reward_threshold: float | None = None
    """Success probability above which the classifier gives reward 1 (None: the one it was saved with)."""
    onnx: bool = False
    """Also write ``policy/policy.onnx`` (needs the onnx package)."""
    eval_every: int = 0
    """Environment steps between evaluations of the deterministic policy on the nominal task, in
    worlds of their own (0: none)."""
    eval_episodes: int = 20
    """Episodes per evaluation."""
    stop_at_success: float | None = None
    """Stop at the first evaluation whose success rate reaches this (None: train for all steps)."""
    demo_episodes: int = 0
    """Successful scripted episodes collected before training, for a demonstration buffer that
    fills half of every batch (RLPD's symmetric sampling, as in :mod:`robolearn.rl.replay`)."""
    expert_task: str | None = None
    """The state task whose scripted expert makes the demonstrations, acting on its own (privileged)
    observation terms evaluated on the pixel task's worlds while the pixels are stored; None: the
    task's name without ``_pixels``."""
    demos: Path | None = None
    """A recorded LeRobot dataset whose cameras (``observation.images.<camera>``, named as the task's
    cameras) become demonstrations, beside or instead of scripted ones."""
    out: Path | None = None
    """Folder to write at the end: ``policy/`` (the exported pixel policy, TorchScript) and
    ``encoder.safetensors`` (the camera encoders, reusable frozen as ``pretrained_encoder``)."""
    sac: SACConfig = field(default_factory=lambda: SACConfig(batch_size=128, init_temperature=0.1))
    """The SAC on features (DrQ's initial temperature 0.1)."""

    def check(self) -> None:
        """Refuse inconsistent options with a one-line :class:`ConfigError`."""
        if self.steps < 1 or self.num_envs < 1:
            raise ConfigError(f"steps ({self.steps}) and num_envs ({self.num_envs}) must be at least 1")
        if self.learning_starts < self.num_envs:
            raise ConfigError(
                f"learning_starts {self.learning_starts} must be at least num_envs {self.num_envs}"
            )
        if self.replay_budget_mb <= 0:
            raise ConfigError(f"replay_budget_mb {self.replay_budget_mb} must be positive")
        if self.pretrained_encoder is not None and not Path(self.pretrained_encoder).is_file():
            raise ConfigError(f"pretrained encoder {self.pretrained_encoder}: no such file")
        if self.demo_episodes < 0:
            raise ConfigError(f"demo_episodes {self.demo_episodes} must not be negative")
        if self.reward_classifier is not None and not Path(self.reward_classifier).is_dir():
            raise ConfigError(
                f"reward classifier {self.reward_classifier}: no such folder "
                "(robolearn reward train writes one)"
            )
        if self.reward_threshold is not None and not 0.0 <= self.reward_threshold <= 1.0:
            raise ConfigError(f"reward_threshold {self.reward_threshold} must be in [0, 1]")
        if self.eval_every < 0 or self.eval_episodes < 1:
            raise ConfigError(
                f"eval_every ({self.eval_every}) must not be negative, eval_episodes "
                f"({self.eval_episodes}) must be at least 1"
            )
        if self.stop_at_success is not None and (self.eval_every == 0 or not 0 < self.stop_at_success <= 1):
            raise ConfigError("stop_at_success needs eval_every above 0 and a success rate in (0, 1]")
        if self.sac.reward_scale != "none":
            raise ConfigError(
                f"--sac.reward-scale {self.sac.reward_scale}: pixel training (DrQ) takes rewards as they "
                "are; use none"
            )


class DrQLearner:
    """SAC over an :class:`ObservationEncoder`, the encoder trained by the critic only."""

    def __init__(
        self,
        encoder: ObservationEncoder,
        action_dim: int,
        cfg: SACConfig,
        device: torch.device,
        encoder_lr: float = 3e-4,
    ) -> None:
        self.device = device
        self.encoder = encoder.to(device)
        self.sac = SAC(encoder.feature_dim, action_dim, cfg, device)
        self.cfg = cfg
        trainable = [p for p in encoder.parameters() if p.requires_grad]
        self.encoder_opt = torch.optim.Adam(trainable, lr=encoder_lr) if trainable else None

    def update(self, batch: Batch | TensorBatch) -> dict[str, float]:
        """A critic (and encoder) step on each consecutive ``batch_size`` slice of ``batch``, then
        one actor step."""
        b, sac = self.cfg.batch_size, self.sac
        steps = len(batch.reward) // b
        if steps < 1 or steps * b != len(batch.reward):
            raise ValueError(f"a batch of {len(batch.reward)} is not a multiple of batch_size {b}")
        if isinstance(batch, Batch):
            batch = TensorBatch.of(batch, self.device)
        obs = [batch.obs[k] for k in self.encoder.keys]
        next_obs = [batch.next_obs[k] for k in self.encoder.keys]
        act, rew, term = batch.action, batch.reward, batch.terminated
        discount = torch.full_like(rew, self.cfg.gamma)
        losses, features = [], torch.zeros(0)
        for k in range(steps):
            s = slice(k * b, (k + 1) * b)
            features = self.encoder.encode([x[s] for x in obs], augment=True)
            with torch.no_grad():
                next_features = self.encoder.encode([x[s] for x in next_obs], augment=True)
            if self.encoder_opt is not None:
                self.encoder_opt.zero_grad(set_to_none=True)
            # critic_step's backward reaches the encoder through the features; its optimizer steps here.
            part = LearnerBatch(features, act[s], rew[s], next_features, term[s], discount[s])
            losses.append(sac.critic_step(part))
            if self.encoder_opt is not None:
                self.encoder_opt.step()
        # The actor never trains the encoder.
        actor_loss, alpha, entropy = sac.scheduled_actor_step(features.detach())
        sac.updates += steps
        return sac.metrics(torch.stack(losses).mean(), actor_loss, alpha, entropy)

    def policy(self, action_low: npt.ArrayLike, action_high: npt.ArrayLike) -> PixelPolicy:
        """The acting policy: this encoder and actor (shared, not copied)."""
        return PixelPolicy(self.encoder, self.sac.actor, action_low, action_high).to(self.device)


@dataclass
class PixelRun:
    """What a pixel training run produced."""

    policy: PixelPolicy
    replay: FrameReplay
    metrics: list[dict[str, float]]
    """One entry per update: critic_loss, actor_loss, temperature, entropy."""
    episode_successes: list[bool]
    """Each finished episode's success, in order."""
    seconds: float
    env_steps: int = 0
    """Environment steps taken (all worlds)."""
    evals: list[dict[str, float]] = field(default_factory=list)
    """Each evaluation: ``env_steps``, ``success_rate``, ``return_mean`` and ``minutes`` (of training,
    evaluations excluded: rendering their episodes on a CPU would otherwise dominate)."""
    critic_steps: int = 0
    """Critic (and encoder) steps: ``sac.utd_ratio`` per transition after ``learning_starts``."""
    split: dict[str, float] = field(default_factory=dict)
    """Where the training's seconds went: ``demos`` (collecting them), ``acting`` (the policy and the
    worlds' steps, cameras rendered), ``updating`` (sampling and learner updates), ``evaluating``."""

    def summary(self, cfg: PixelTrainCfg) -> dict[str, Any]:
        """What the run measured and how its memory went (the run's ``summary.json``)."""
        successes = self.episode_successes
        return {
            "task": cfg.task,
            "algorithm": "drq",
            "backend": cfg.backend,
            "env_steps": self.env_steps,
            "updates": len(self.metrics),
            "critic_steps": self.critic_steps,
            "episodes": len(successes),
            "training_success_rate": sum(successes) / len(successes) if successes else None,
            "reward": "task" if cfg.reward_classifier is None else f"classifier:{cfg.reward_classifier}",
            "encoder": "trained" if cfg.pretrained_encoder is None else f"frozen:{cfg.pretrained_encoder}",
            "replay_budget_mb": cfg.replay_budget_mb,
            "replay_capacity": self.replay.capacity,
            "bytes_per_transition": self.replay.bytes_per_slot,
            "replay_mb": self.replay.nbytes / 2**20,
            "critic_loss_first": self.metrics[0]["critic_loss"] if self.metrics else None,
            "critic_loss_last": self.metrics[-1]["critic_loss"] if self.metrics else None,
            "evals": self.evals,
            "wall_minutes": self.seconds / 60.0,
            "seconds": {k: round(v, 2) for k, v in self.split.items()},
        }


def make_pixel_env(cfg: PixelTrainCfg) -> TaskEnv:
    """The task's vector environment, refusing a task without cameras."""
    env = TaskEnv(cfg.task, cfg.backend, cfg.num_envs, seed=cfg.seed, render_mode=None)
    if not env.image_specs:
        env.close()
        raise ConfigError(
            f"task {cfg.task} has no cameras; pixel training needs one (e.g. panda_pick_cube_pixels)"
        )
    return env


def train_pixels(cfg: PixelTrainCfg) -> PixelRun:
    """DrQ on a pixel task: random steps, then one update per environment step (see the module doc)."""
    cfg.check()
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    device = torch.device(cfg.device)
    env = make_pixel_env(cfg)
    try:
        run = _train(cfg, env, rng, device)
    finally:
        env.close()
    if cfg.out is not None:
        out = Path(cfg.out)
        out.mkdir(parents=True, exist_ok=True)
        save_encoder_weights(run.policy.encoder, out / ENCODER_FILE)
        save_pixel_policy(run.policy, env.cfg, out)  # what ``robolearn export RUN`` exports again
        export_pixel_policy(run.policy, env.cfg, out / "policy", onnx=cfg.onnx, source=str(out), force=True)
        (out / SUMMARY_FILE).write_text(json.dumps(run.summary(cfg), indent=1))
        log.info("wrote %s, %s and %s", out / "policy", out / ENCODER_FILE, out / SUMMARY_FILE)
    return run


def classifier_reward(cfg: PixelTrainCfg) -> RewardFn | None:
    """The reward classifier's verdict as the reward (None: the task's reward terms)."""
    if cfg.reward_classifier is None:
        return None
    from robolearn.hil.reward_classifier import load_reward_classifier

    return load_reward_classifier(Path(cfg.reward_classifier), threshold=cfg.reward_threshold).reward


def _train(cfg: PixelTrainCfg, env: TaskEnv, rng: np.random.Generator, device: torch.device) -> PixelRun:
    started = time.perf_counter()
    images = {k: spec.shape for k, spec in env.image_specs.items() if spec.kind == "rgb"}
    if len(images) != len(env.image_specs):
        raise ConfigError(f"task {cfg.task}: depth images are not learned from yet; use RGB cameras")
    states = dict(env.observation_sizes)
    shapes = {**images, **{k: (s,) for k, s in states.items()}}
    action_dim = len(env.cfg.action.names)
    capacity = capacity_for_budget(int(cfg.replay_budget_mb * 2**20), shapes, action_dim)
    # A run never needs more than a slot per step plus one per ended episode (at most one per step).
    replay = FrameReplay(min(capacity, 2 * cfg.steps + 4 * cfg.num_envs), shapes, action_dim)
    log.info(
        "replay: %d steps of %d bytes (%.1f MiB)",
        replay.capacity,
        replay.bytes_per_slot,
        replay.nbytes / 2**20,
    )
    encoder = ObservationEncoder(
        images, states, features=cfg.features, frozen=cfg.pretrained_encoder is not None
    )
    if cfg.pretrained_encoder is not None:
        load_encoder_weights(encoder, Path(cfg.pretrained_encoder))
    learner = DrQLearner(encoder, action_dim, cfg.sac, device, cfg.encoder_lr)
    scaler = ActionScaler(env.cfg.action.low, env.cfg.action.high)
    reward_fn = classifier_reward(cfg)
    t0 = time.perf_counter()
    demos = _demonstrations(cfg, env, scaler, shapes)
    split = {"demos": time.perf_counter() - t0, "acting": 0.0, "updating": 0.0}
    if demos is not None and reward_fn is not None:  # one reward for all data, as SERL relabels
        demos.relabel(reward_fn)
    for buffer in (replay, demos):
        if buffer is not None and device.type != "cpu":
            buffer.keep_on(device)  # batches gathered in the learner's memory (a GPU's)
    policy = learner.policy(scaler.low, scaler.high)
    stats = EpisodeStatistics(env.num_envs)
    metrics: list[dict[str, float]] = []
    successes: list[bool] = []
    evaluator = _Evaluator(cfg, policy)
    obs, _ = env.reset(seed=cfg.seed)
    warm: list[npt.NDArray[np.float32]] = []
    steps = 0
    while steps < cfg.steps and not evaluator.reached:
        t0 = time.perf_counter()
        if steps < cfg.learning_starts:
            unit = rng.uniform(-1.0, 1.0, (env.num_envs, action_dim)).astype(np.float32)
            warm.append(np.concatenate([obs[k].reshape(env.num_envs, -1) for k in states], axis=1))
        else:
            unit = scaler.to_unit(policy.act(obs, explore=True))
        next_obs, reward, terminated, truncated, info = env.step(scaler.to_physical(unit))
        final_next = transition_next_obs(next_obs, info)
        ended = stats.step(reward, terminated, truncated, info)
        if ended.successes is not None:
            successes += ended.successes.tolist()
        if reward_fn is not None:
            # The classifier's success is the reward and ends an episode the task has not ended
            # (as robolearn.rl.actor_learner does for the state learner).
            reward = reward_fn(final_next)
            judged = reward > 0.5
            forced = judged & ~(np.asarray(terminated, bool) | np.asarray(truncated, bool))
            terminated = np.asarray(terminated, bool) | judged
            if forced.any():
                verdicts = stats.end(forced, judged).successes
                successes += [] if verdicts is None else verdicts.tolist()
                next_obs, _ = env.reset(options={"reset_mask": forced})
        replay.add(obs, unit, reward, final_next, terminated, terminated | truncated)
        obs = next_obs
        steps += env.num_envs
        t1 = time.perf_counter()
        split["acting"] += t1 - t0
        if steps >= cfg.learning_starts:
            if warm:  # state statistics once, from the random steps (fixed afterwards: a stable input)
                data = np.concatenate(warm)
                encoder.set_state_statistics(data.mean(axis=0), data.std(axis=0))
                warm = []
            sac = cfg.sac  # utd_ratio critic steps per transition:
            batch = _sample(
                replay, demos, sac.batch_size, sac.utd_ratio * env.num_envs, sac.demo_fraction, rng, device
            )
            metrics.append(learner.update(batch))  # its losses are floats: timed to the device's end
        split["updating"] += time.perf_counter() - t1
        evaluator.maybe(steps, time.perf_counter() - started)
    evaluator.close()
    seconds = time.perf_counter() - started - evaluator.seconds
    split["evaluating"] = evaluator.seconds
    return PixelRun(
        policy, replay, metrics, successes, seconds, steps, evaluator.evals, learner.sac.updates, split
    )


class _Evaluator:
    """Evaluations every ``eval_every`` steps in worlds of their own; their time is kept apart."""

    def __init__(self, cfg: PixelTrainCfg, policy: PixelPolicy) -> None:
        self.cfg, self.policy = cfg, policy
        self.env: TaskEnv | None = None
        self.next_at = cfg.eval_every
        self.evals: list[dict[str, float]] = []
        self.seconds = 0.0
        self.reached = False

    def maybe(self, steps: int, elapsed: float) -> None:
        """Evaluate if ``steps`` passed the next evaluation point (``elapsed``: seconds since the start)."""
        if self.cfg.eval_every == 0 or steps < self.next_at:
            return
        from robolearn.eval.evaluation import evaluate

        self.next_at += self.cfg.eval_every
        t0 = time.perf_counter()
        if self.env is None:
            self.env = TaskEnv(
                self.cfg.task, self.cfg.backend, min(self.cfg.eval_episodes, 8), seed=self.cfg.seed + 1
            )
        result = evaluate(self.env, self.policy.act, self.cfg.eval_episodes, seed=self.cfg.seed + 1).summary()
        minutes = (elapsed - self.seconds) / 60.0
        self.seconds += time.perf_counter() - t0
        rate = float(result["success_rate"])  # NaN where the task defines no success
        returns = float(result["return_mean"])
        self.evals.append(
            {"env_steps": steps, "success_rate": rate, "return_mean": returns, "minutes": minutes}
        )
        log.info("%d steps: success %.2f after %.1f min", steps, rate, minutes)
        self.reached = self.cfg.stop_at_success is not None and rate >= self.cfg.stop_at_success

    def close(self) -> None:
        if self.env is not None:
            self.env.close()


def _sample(
    online: FrameReplay,
    demos: FrameReplay | None,
    batch_size: int,
    steps: int,
    demo_fraction: float,
    rng: np.random.Generator,
    device: torch.device,
) -> TensorBatch:
    """``steps`` batches of ``batch_size`` one after another on ``device``, each with
    ``demo_fraction`` of it from the demonstrations (RLPD's symmetric sampling), the rest online."""
    k = 0 if demos is None or len(demos) == 0 else round(batch_size * demo_fraction)
    parts = [(online, batch_size)] if demos is None or k == 0 else [(demos, k), (online, batch_size - k)]
    taken = [buf.take_tensors(buf.sample_slots(m * steps, rng), device) for buf, m in parts]
    return TensorBatch.cat(taken, groups=steps)


def _demonstrations(
    cfg: PixelTrainCfg, env: TaskEnv, scaler: ActionScaler, shapes: dict[str, tuple[int, ...]]
) -> FrameReplay | None:
    """The demonstration buffer: scripted episodes, then a dataset's, or None without either."""
    if cfg.demo_episodes == 0 and cfg.demos is None:
        return None
    capacity = capacity_for_budget(int(cfg.replay_budget_mb * 2**20), shapes, len(scaler.low))
    if cfg.demos is not None:
        cameras = {key: spec.camera for key, spec in env.image_specs.items()}
        demos = load_image_demos(Path(cfg.demos), scaler, shapes, cameras, capacity)
    else:
        demos = FrameReplay(capacity, shapes, len(scaler.low))
    if cfg.demo_episodes:
        attempts = collect_pixel_demos(env, _expert_cfg(cfg, env), cfg.demo_episodes, scaler, demos, cfg.seed)
        log.info("%d scripted pixel demonstrations in %d attempts", cfg.demo_episodes, attempts)
    return demos


def _expert_cfg(cfg: PixelTrainCfg, env: TaskEnv) -> TaskCfg:
    return teacher_task(env.cfg, cfg.expert_task)


def collect_pixel_demos(
    env: TaskEnv,
    expert_cfg: TaskCfg,
    episodes: int,
    scaler: ActionScaler,
    into: FrameReplay,
    seed: int,
    max_env_steps: int = 200_000,
) -> int:
    """Add ``episodes`` successful expert episodes, with the pixel task's observations, to ``into``;
    returns the attempts made.

    The expert of a state task acts on that task's observation terms evaluated on the pixel task's
    worlds (the same scene: privileged state the policy never sees, as a teacher in simulation);
    the pixel observations are what is stored. Failed episodes are dropped, as SERL keeps only
    successful demonstrations.
    """
    expert = expert_cfg.expert(expert_cfg)  # type: ignore[misc]
    n = env.num_envs
    pending: list[list[tuple[dict[str, Any], npt.NDArray[np.float32], float]]] = [[] for _ in range(n)]
    stats = EpisodeStatistics(n)
    obs, _ = env.reset(seed=seed)
    kept = attempts = steps = 0
    while kept < episodes:
        if steps >= max_env_steps:
            raise RuntimeError(
                f"the scripted expert gave {kept} successful episodes of {attempts} in {steps} steps"
            )
        action = expert(privileged_observations(expert_cfg, env))
        next_obs, reward, terminated, truncated, info = env.step(action)
        unit = scaler.to_unit(action)
        for i in range(n):
            pending[i].append(({k: v[i] for k, v in obs.items()}, unit[i], float(reward[i])))
        ended = stats.step(reward, terminated, truncated, info)
        for j, i in enumerate(ended.worlds.tolist()):
            attempts += 1
            if ended.successes is not None and ended.successes[j] and kept < episodes:
                frames, actions, rewards = zip(*pending[i], strict=True)
                into.add_episode(
                    {k: np.stack([f[k] for f in frames]) for k in frames[0]},
                    np.stack(actions),
                    np.asarray(rewards, np.float32),
                    terminal=bool(terminated[i]),
                )
                kept += 1
            pending[i] = []
        obs = next_obs
        steps += n
    return attempts
