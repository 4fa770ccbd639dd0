"""Training on the device (issue 14): simulation, replay buffer, normalization and SAC on one torch device.

With ``--backend mujoco_warp``, ``robolearn train`` runs this loop instead of the actor and learner
roles of :mod:`robolearn.rl.train`. The worlds' observations, rewards and flags are torch tensors where
the worlds are (a CUDA device, or Warp's CPU device in tests); they go straight into a
:class:`~robolearn.rl.replay.DeviceReplayBuffer` on that device, the observation statistics are
updated there, the policy acts there and SAC samples and updates there. The hot path makes no host
copy of observations, actions or transitions, and reads one thing from the device per step of all
worlds: which worlds' episodes ended (``torch.nonzero``, one synchronization), because the task's reset
terms draw their random states per world reset, by index. SAC's loss figures stay on the device
(:meth:`~robolearn.rl.sac.SAC.update_on_device`) and are copied only when they are logged, every 500
updates; the last ended episodes are copied only for the progress line (twice a second) and the
evaluations.
Evaluation, checkpoints and the summary are the host loop's own (:func:`robolearn.rl.train.train`),
so ``robolearn eval``, ``export`` and ``--resume`` take such a run as any other.

Two schedules of learner steps (each ``--sac.utd-ratio`` critic updates and one actor update):

- the sample-efficient default: one learner step per transition collected, as the host loop makes;
- the massively parallel mode (``--parallel``, :data:`~robolearn.rl.config.PARALLEL_PRESETS`): many
  worlds, large batches and a few learner steps per step of all worlds, as FastTD3 and FastSAC (Seo et
  al., 2025) train on GPU simulators.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import torch

from robolearn.envs.task_env import TaskEnv
from robolearn.errors import ConfigError
from robolearn.policy.normalization import ActionScaler, ObsLayout, RunningNorm, merge_moments
from robolearn.rl.actor_learner import EpisodeStats, Weights, policy_weights
from robolearn.rl.checkpoint import load_checkpoint, restore_agent
from robolearn.rl.config import TrainCfg
from robolearn.rl.replay import DeviceBatch, DeviceReplayBuffer, LearnerBatch, sample_symmetric_device
from robolearn.rl.sac import SAC, read_metrics
from robolearn.rl.train import (
    RunState,
    _checkpoint,
    _demo_buffer,
    _evaluate,
    _finish,
    _succeeded,
    make_train_env,
    open_run,
    start_run,
)

log = logging.getLogger(__name__)

RECENT_EPISODES = 100
"""Ended episodes whose outcomes the loop keeps on the device for progress and logs."""
LIVE_PERIOD = 0.5
"""Seconds between the progress figures' copies to the host (each waits for the device)."""


class DeviceNorm:
    """Running observation statistics kept and applied on the device (float64 statistics, float32 data).

    :class:`~robolearn.policy.normalization.RunningNorm`'s update (the same merge) and clip, so a
    checkpoint holds the same statistics whichever loop wrote it.
    """

    def __init__(self, host: RunningNorm, device: torch.device) -> None:
        self.clip, self.eps = host.clip, host.eps
        self.mean = torch.as_tensor(host.mean, dtype=torch.float64, device=device)
        self.var = torch.as_tensor(host.var, dtype=torch.float64, device=device)
        self.count = host.count

    def update(self, x: torch.Tensor) -> None:
        """Fold a batch (n, dim) into the statistics."""
        n = int(x.shape[0])
        if n == 0:
            return
        x64 = x.to(torch.float64)
        batch_var, batch_mean = torch.var_mean(x64, dim=0, correction=0)
        self.mean, self.var, self.count = merge_moments(
            self.mean, self.var, self.count, batch_mean, batch_var, n
        )

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Standardized, clipped observations (n, dim)."""
        mean = self.mean.to(torch.float32)
        inv_std = torch.rsqrt(self.var + self.eps).to(torch.float32)
        return ((x - mean) * inv_std).clamp_(-self.clip, self.clip)

    def to_host(self) -> RunningNorm:
        """The statistics as a :class:`RunningNorm` (for checkpoints and published weights)."""
        host = RunningNorm(len(self.mean), clip=self.clip, eps=self.eps)
        host.mean, host.var = self.mean.cpu().numpy(), self.var.cpu().numpy()
        host.count = self.count
        return host


class DeviceEpisodes:
    """Return, length and success of the last ended episodes, kept on the device until read."""

    def __init__(self, device: torch.device, capacity: int = RECENT_EPISODES) -> None:
        self.returns = torch.zeros(capacity, dtype=torch.float32, device=device)
        self.lengths = torch.zeros(capacity, dtype=torch.int64, device=device)
        self.successes = torch.zeros(capacity, dtype=torch.bool, device=device)
        self.count = 0
        """Episodes ended so far (a host integer: the loop knows how many ended)."""

    def add(self, returns: torch.Tensor, lengths: torch.Tensor, successes: torch.Tensor) -> None:
        k, capacity = int(returns.shape[0]), len(self.returns)
        slots = (self.count + torch.arange(k, device=returns.device)) % capacity
        self.returns[slots], self.lengths[slots], self.successes[slots] = returns, lengths, successes
        self.count += k

    def recent(self) -> EpisodeStats:
        """The kept episodes, oldest first, as host lists (one copy from the device)."""
        capacity = len(self.returns)
        n = min(self.count, capacity)
        order = (self.count - n + torch.arange(n, device=self.returns.device)) % capacity
        stats = EpisodeStats()
        stats.returns = self.returns[order].tolist()
        stats.lengths = self.lengths[order].tolist()
        stats.successes = self.successes[order].tolist()
        return stats


class DeviceLoop:
    """Collects from ``env``'s worlds into ``online`` and updates ``agent``, all on ``agent.device``.

    ``env`` must keep its worlds on that device (:attr:`TaskEnv.device`); :meth:`collect` and
    :meth:`learn` are the hot path.
    """

    def __init__(
        self,
        env: TaskEnv,
        agent: SAC,
        layout: ObsLayout,
        online: DeviceReplayBuffer,
        demos: DeviceReplayBuffer | None,
        norm: DeviceNorm,
        *,
        seed: int,
        random_steps: int,
    ) -> None:
        self.env, self.agent, self.layout = env, agent, layout
        self.online, self.demos, self.norm = online, demos, norm
        device = self.device = agent.device
        self.generator = torch.Generator(device=device)
        """Random actions of the warm-up and replay indices (the policy's noise: torch's stream)."""
        self.generator.manual_seed(seed)
        self.random_steps = random_steps
        space = cast(Any, env.single_action_space)  # a Box
        self._low = torch.as_tensor(space.low, dtype=torch.float32, device=device)
        self._high = torch.as_tensor(space.high, dtype=torch.float32, device=device)
        self.recent = DeviceEpisodes(device)
        self.env_steps = 0
        self.intervened_transitions = 0  # no person watches the device's worlds
        env.reset_worlds(cast(Any, torch.arange(env.num_envs, device=device)))
        self.obs = self._observe()

    def _observe(self) -> torch.Tensor:
        """Every world's observation, flattened in the layout's order: (num_envs, obs_dim) float32."""
        obs = self.env.observe()
        n = self.env.num_envs
        return torch.cat([cast(torch.Tensor, obs[k]).reshape(n, -1) for k in self.layout.keys], dim=1)

    def _act(self) -> torch.Tensor:
        """Actions in [-1, 1]: uniform during the warm-up, then the policy's samples."""
        shape = (self.env.num_envs, len(self._low))
        if self.env_steps < self.random_steps:
            return torch.rand(shape, generator=self.generator, device=self.device) * 2.0 - 1.0
        with torch.no_grad():
            return self.agent.actor.sample(self.norm(self.obs))[0]

    def collect(self) -> int:
        """One step of every world; its transitions go to the online buffer. Returns how many."""
        env = self.env
        unit = self._act()
        result = env.advance(self._low + (unit + 1.0) * 0.5 * (self._high - self._low))
        # On a device backend the step's results are tensors there (typed as the host's arrays).
        reward, terminated = cast(torch.Tensor, result.reward), cast(torch.Tensor, result.terminated)
        done = terminated | cast(torch.Tensor, result.truncated)
        next_obs = self._observe()  # an ended world's final observation: the transition's
        self.online.add(
            DeviceBatch(self.obs, unit, reward.to(torch.float32), next_obs, terminated.to(torch.float32))
        )
        self.norm.update(self.obs)
        # The step's one synchronization: the reset terms draw per world, by index.
        ended = torch.nonzero(done).squeeze(1)
        if ended.numel():
            self.recent.add(
                cast(torch.Tensor, env.episode_return)[ended],
                cast(torch.Tensor, env.step_count)[ended],
                cast(torch.Tensor, env.episode_success)[ended],
            )
            env.reset_worlds(cast(Any, ended))
            next_obs = torch.where(done[:, None], self._observe(), next_obs)
        self.obs = next_obs
        self.env_steps += env.num_envs
        return env.num_envs

    def learn(self, steps: int) -> dict[str, torch.Tensor]:
        """``steps`` learner steps on batches sampled and normalized on the device; the last one's losses,
        still on the device (:func:`~robolearn.rl.sac.read_metrics` copies them, when they are logged)."""
        cfg = self.agent.cfg
        n = cfg.batch_size * cfg.utd_ratio
        metrics: dict[str, torch.Tensor] = {}
        for _ in range(steps):
            batch = sample_symmetric_device(self.online, self.demos, n, cfg.demo_fraction, self.generator)
            both = self.norm(torch.cat([batch.obs, batch.next_obs]))  # one pass over both halves
            normalized = batch._replace(obs=both[:n], next_obs=both[n:])
            metrics = self.agent.update_on_device(LearnerBatch.one_step(normalized, cfg.gamma))
        return metrics

    # -- what the host reads, off the hot path -----------------------------------------------
    @property
    def episodes(self) -> EpisodeStats:
        """The last ended episodes' outcomes (a copy from the device)."""
        return self.recent.recent()

    def weights(self) -> Weights:
        """The policy's weights and observation statistics as numpy arrays (evaluation, export)."""
        return policy_weights(self.agent, self.norm.to_host())

    def rng_state(self) -> dict[str, Any]:
        """The loop's generator state as JSON-ready data (checkpoints)."""
        return {"device_generator": self.generator.get_state().tolist()}

    def set_rng_state(self, state: dict[str, Any]) -> None:
        self.generator.set_state(torch.tensor(state["device_generator"], dtype=torch.uint8))


def learner_device(cfg: TrainCfg, worlds: torch.device) -> torch.device:
    """The learner's device: the worlds' (``--torch-device auto``), or the one named if it is theirs."""
    if cfg.torch_device == "auto" or torch.device(cfg.torch_device).type == worlds.type:
        return worlds
    raise ConfigError(
        f"--torch-device {cfg.torch_device}: the worlds run on {worlds} (Warp's device, named by "
        f"ROBOLEARN_WARP_DEVICE) and the device loop learns where they are; use auto or {worlds.type}"
    )


def train_on_device(
    cfg: TrainCfg, progress: Callable[[RunState, dict[str, float]], None] | None = None
) -> dict[str, Any]:
    """:func:`robolearn.rl.train.train` for a configuration whose ``device_loop`` holds (already
    resolved and checked there); returns the run's summary, also written to ``summary.json``."""
    run_dir, resuming = open_run(cfg)
    if cfg.torch_threads > 0:
        torch.set_num_threads(cfg.torch_threads)
    # Seeding: one seed, separate streams (as the host loop's).
    torch.manual_seed(cfg.seed)
    seeds = np.random.SeedSequence(cfg.seed).generate_state(4)

    # Worlds, on the backend's device; the learner joins them there.
    env = make_train_env(cfg, cfg.num_envs, int(seeds[0]))
    device = learner_device(cfg, torch.device(env.device))
    eval_env = make_train_env(cfg, min(cfg.eval_episodes, 10), int(seeds[1]))
    obs_shapes = {k: tuple(s.shape) for k, s in env.single_observation_space.items()}
    layout = ObsLayout(obs_shapes)
    scaler = ActionScaler(env.single_action_space.low, env.single_action_space.high)
    action_dim = len(scaler.low)
    log.info("device loop on %s: %d worlds, batch %d", device, cfg.num_envs, cfg.sac.batch_size)

    # Networks and buffers.
    agent = SAC(layout.dim, action_dim, cfg.sac, device)
    host_norm = RunningNorm(layout.dim)
    online = DeviceReplayBuffer(cfg.replay_capacity, obs_shapes, action_dim, device)
    demos: DeviceReplayBuffer | None = None
    state = RunState()
    if resuming:
        loaded = load_checkpoint(run_dir)
        restore_agent(agent, host_norm, loaded)
        saved_online, saved_demos = loaded.replay("online"), loaded.replay("demos")
        if saved_online is not None:
            online = DeviceReplayBuffer.from_host(saved_online, device, cfg.replay_capacity)
        if saved_demos is not None:  # demonstrations never grow here: as many slots as they fill
            demos = DeviceReplayBuffer.from_host(saved_demos, device, max(len(saved_demos), 1))
        state = RunState(**loaded.state["run"])
        agent.updates = state.updates
        log.info("resumed %s at %d env steps", loaded.path, state.env_steps)
    else:
        start_run(cfg, run_dir)
        host_demos = _demo_buffer(cfg, scaler, obs_shapes, int(seeds[3]))
        if host_demos is not None:
            host_norm.update(layout.flatten(host_demos.obs)[: len(host_demos)])
            demos = DeviceReplayBuffer.from_host(host_demos, device, max(len(host_demos), 1))
    env.reseed(int(seeds[0]) + state.env_steps)  # a resumed run's worlds start afresh, as the host's
    loop = DeviceLoop(
        env,
        agent,
        layout,
        online,
        demos,
        DeviceNorm(host_norm, device),
        seed=int(seeds[2]) + state.env_steps,
        random_steps=max(0, cfg.random_steps - state.env_steps),
    )
    loop.env_steps = state.env_steps
    if resuming:
        loop.set_rng_state(loaded.state["learner_rng"])

    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(run_dir / "tb"))
    started = time.perf_counter() - state.wall_seconds
    next_eval = (state.env_steps // cfg.eval_every + 1) * cfg.eval_every
    next_ckpt = (state.env_steps // cfg.checkpoint_every + 1) * cfg.checkpoint_every
    logged_at, live, live_at = state.updates, _live(loop, state, started), time.perf_counter()
    try:
        while state.env_steps < cfg.total_steps and not _succeeded(cfg, state):
            arrived = loop.collect()
            state.env_steps = loop.env_steps
            if len(online) >= cfg.learning_starts:
                metrics = loop.learn(cfg.learner_steps(arrived))
                if metrics and agent.updates - logged_at >= 500:
                    logged_at = agent.updates
                    for k, v in read_metrics(metrics).items():  # the only copy of the losses
                        writer.add_scalar(f"train/{k}", v, state.env_steps)
            state.updates = agent.updates
            state.episodes = loop.recent.count
            if state.env_steps >= next_eval or state.env_steps >= cfg.total_steps:
                next_eval += cfg.eval_every
                _evaluation(loop, layout, scaler, cfg, eval_env, state, started, writer)
            if state.env_steps >= next_ckpt:
                next_ckpt += cfg.checkpoint_every
                state.wall_seconds = time.perf_counter() - started
                _save(run_dir, state, loop, cfg, env)
            if progress is not None:
                if time.perf_counter() - live_at >= LIVE_PERIOD:
                    live, live_at = _live(loop, state, started), time.perf_counter()
                progress(state, live)
    finally:
        writer.close()
    state.wall_seconds = time.perf_counter() - started
    _save(run_dir, state, loop, cfg, env)
    env.close()
    return _finish(cfg, run_dir, state, loop, layout, scaler, eval_env)


def _evaluation(
    loop: DeviceLoop,
    layout: ObsLayout,
    scaler: ActionScaler,
    cfg: TrainCfg,
    eval_env: Any,
    state: RunState,
    started: float,
    writer: Any,
) -> None:
    """Evaluate the deterministic policy (as the host loop does) and log it."""
    result = _evaluate(loop, layout, scaler, cfg, eval_env, cfg.eval_episodes)
    result |= {"env_steps": state.env_steps, "minutes": (time.perf_counter() - started) / 60}
    state.evals.append(result)
    writer.add_scalar("eval/success_rate", result["success_rate"], state.env_steps)
    writer.add_scalar("eval/return", result["return_mean"], state.env_steps)
    recent = loop.episodes
    if recent.returns:
        writer.add_scalar("rollout/return", float(np.mean(recent.returns[-20:])), state.env_steps)


def _save(run_dir: Any, state: RunState, loop: DeviceLoop, cfg: TrainCfg, env: TaskEnv) -> None:
    """A checkpoint of the host loop's format: buffers and statistics copied to the host."""
    demos = loop.demos.to_host() if loop.demos is not None else None
    _checkpoint(
        run_dir,
        state,
        loop.agent,
        loop.norm.to_host(),
        loop.online.to_host(),
        demos,
        loop.rng_state(),
        cfg,
        env,
    )


def _live(loop: DeviceLoop, state: RunState, started: float) -> dict[str, float]:
    """Rates and the last 20 episodes' return and success, for the progress bar (one device copy)."""
    elapsed = max(time.perf_counter() - started, 1e-9)
    recent = loop.episodes
    return {
        "steps_per_s": state.env_steps / elapsed,
        "updates_per_s": state.updates / elapsed,
        "return": float(np.mean(recent.returns[-20:])) if recent.returns else float("nan"),
        "success": float(np.mean(recent.successes[-20:])) if recent.successes else float("nan"),
    }
