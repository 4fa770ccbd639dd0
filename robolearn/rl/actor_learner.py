"""Acting and learning as separate roles that meet at one narrow interface.

The actor steps batched environments with the newest policy it has and sends transitions; the
learner turns transitions into gradient updates and publishes policy weights. All they exchange
goes through :class:`Exchange`: transitions as numpy arrays, weights as a numpy dict with a
version number, both plain data a process boundary or a distributed engine (Ray's object store,
an actor handle) can carry unchanged. :class:`LocalExchange` is the in-process implementation,
for one thread each or for alternating calls in one thread.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import torch

from robolearn.data.episodes import EpisodeWriter
from robolearn.envs.autoreset import EndedEpisodes, EpisodeStatistics, step_success, transition_next_obs
from robolearn.hil.interventions import Interventions, InterventionStats
from robolearn.policy.normalization import ActionScaler, ObsLayout, RunningNorm
from robolearn.rl.gripper import GripperSpec
from robolearn.rl.replay import Batch, LearnerBatch, ReplayBuffer, sample_training_batch
from robolearn.rl.sac import SAC

Weights = dict[str, npt.NDArray[np.float32]]


@dataclass
class EpisodeStats:
    """Outcomes of the episodes that ended during a collection."""

    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    successes: list[bool] = field(default_factory=list)
    interventions: InterventionStats = field(default_factory=InterventionStats)
    """Human intervention rate and label per ended episode (empty without interventions)."""

    def add(self, ended: EndedEpisodes) -> None:
        """Append episodes that ended (success only where the environment reports it)."""
        self.returns += ended.returns.tolist()
        self.lengths += ended.lengths.tolist()
        if ended.successes is not None:
            self.successes += ended.successes.tolist()

    def extend(self, other: EpisodeStats) -> None:
        self.returns += other.returns
        self.lengths += other.lengths
        self.successes += other.successes
        self.interventions.rates += other.interventions.rates
        self.interventions.labels += other.interventions.labels


@dataclass
class Transitions:
    """What an actor sends: a batch of transitions and the episodes that ended in it."""

    batch: Batch
    episodes: EpisodeStats
    env_steps: int
    policy_version: int
    intervened: npt.NDArray[np.bool_] | None = None
    """Per transition: its action came from a human (HIL-SERL puts these in both buffers)."""


class Exchange(Protocol):
    """The only coupling between actors and a learner."""

    def send_transitions(self, item: Transitions) -> None: ...

    def receive_transitions(self, block: bool = False, timeout: float | None = None) -> list[Transitions]: ...

    def publish_weights(self, version: int, weights: Weights) -> None: ...

    def latest_weights(self, newer_than: int) -> tuple[int, Weights] | None: ...


class LocalExchange:
    """Thread-safe in-process exchange; a bounded queue applies back-pressure to a fast actor."""

    def __init__(self, max_pending: int = 64) -> None:
        self._queue: queue.Queue[Transitions] = queue.Queue(maxsize=max_pending)
        self._lock = threading.Lock()
        self._weights: tuple[int, Weights] | None = None

    def send_transitions(self, item: Transitions) -> None:
        self._queue.put(item)

    def receive_transitions(self, block: bool = False, timeout: float | None = None) -> list[Transitions]:
        items = []
        try:
            if block:
                items.append(self._queue.get(timeout=timeout))
            while True:
                items.append(self._queue.get_nowait())
        except queue.Empty:
            pass
        return items

    def publish_weights(self, version: int, weights: Weights) -> None:
        with self._lock:
            self._weights = (version, weights)

    def latest_weights(self, newer_than: int) -> tuple[int, Weights] | None:
        with self._lock:
            if self._weights is None or self._weights[0] <= newer_than:
                return None
            return self._weights


PolicyFactory = Callable[
    [Weights], Callable[[dict[str, npt.NDArray[np.float32]], bool], npt.NDArray[np.float64]]
]
"""Builds, from published weights, a function (obs, explore) -> physical actions."""


RewardFn = Callable[[dict[str, npt.NDArray[np.float32]]], npt.NDArray[np.float64]]
"""Maps a batch of observations reached to rewards, replacing the task's (a learned classifier)."""


class ActorRole:
    """Steps a vector environment with the latest published policy and sends what it saw.

    Until weights arrive (and for ``random_steps`` env steps) it acts uniformly at random, the
    usual SAC warm-up, whose episodes end after ``random_episode_steps`` (0: where the task ends
    them) as truncations. With ``interventions``, people (or scripted stand-ins) may take over any
    world at any step; with ``reward_fn`` a learned success classifier gives the reward and ends
    an episode it judges successful, as SERL does where no simulator computes the reward;
    ``recorder`` receives every step, for a dataset of the training episodes. With a discrete
    ``gripper`` (``--gripper-critic``), the warm-up's random actions close or open it, as the
    gripper head does, never between.
    """

    def __init__(
        self,
        env: Any,
        exchange: Exchange,
        make_policy: PolicyFactory,
        scaler: ActionScaler,
        *,
        seed: int,
        random_steps: int,
        random_episode_steps: int = 0,
        interventions: Interventions | None = None,
        reward_fn: RewardFn | None = None,
        recorder: EpisodeWriter | None = None,
        gripper: GripperSpec | None = None,
    ) -> None:
        self.env = env
        self.gripper = gripper
        self.exchange = exchange
        self.make_policy = make_policy
        self.scaler = scaler
        self.random_steps = random_steps
        self.random_episode_steps = random_episode_steps
        self.interventions = interventions
        self.reward_fn = reward_fn
        self.recorder = recorder
        self.quit_requested = False
        self.rng = np.random.default_rng(seed)
        self.version = 0
        self.policy: Callable[[dict[str, npt.NDArray[np.float32]], bool], npt.NDArray[np.float64]] | None = (
            None
        )
        self.env_steps = 0
        self.obs, _ = env.reset(seed=seed)
        self.stats = EpisodeStatistics(env.num_envs)

    def _act(self) -> npt.NDArray[np.float64]:
        n = self.env.num_envs
        if self.policy is None or self.env_steps < self.random_steps:
            unit = self.rng.uniform(-1.0, 1.0, size=(n, len(self.scaler.low))).astype(np.float32)
            if self.gripper is not None:
                g = self.gripper
                unit[:, g.action_index] = np.where(self.rng.random(n) < 0.5, g.closed, g.opened)
            return self.scaler.to_physical(unit)
        return self.policy(self.obs, True)

    def step(self) -> None:
        """One step of every world; the transitions go to the exchange."""
        latest = self.exchange.latest_weights(self.version)
        if latest is not None:
            self.version, weights = latest
            self.policy = self.make_policy(weights)
        n = self.env.num_envs
        warm_up = self.policy is None or self.env_steps < self.random_steps
        action = self._act()
        interventions = self.interventions
        human = interventions.apply(self.obs, action) if interventions is not None else None
        if human is not None:
            action = human.action
            self.quit_requested |= human.quit
        unit = self.scaler.to_unit(action).astype(np.float32)
        next_obs, reward, terminated, truncated, info = self.env.step(action)
        env_episodes = self.stats.step(reward, terminated, truncated, info)  # the env's own outcome
        final_next = transition_next_obs(next_obs, info)
        success = step_success(info, n)[0]
        terminated, truncated = np.asarray(terminated, bool), np.asarray(truncated, bool)
        env_ended = terminated | truncated
        forced_success = np.zeros(n, bool)
        if self.reward_fn is not None:
            reward = self.reward_fn(final_next)
            success = forced_success = reward > 0.5
        forced_end = forced_success.copy()
        if human is not None:
            forced_success |= human.marked_success
            forced_end |= human.marked_success | human.marked_failure
        terminated |= forced_success
        episodes = EpisodeStats()
        episodes.add(env_episodes)
        # A classifier's verdict or a human's mark ends an episode the environment has not ended.
        forced_end &= ~env_ended
        if forced_end.any():
            episodes.add(self.stats.end(forced_end, forced_success))
        # The warm-up's long episodes cut short: truncations (``terminated`` stays, so the values
        # still bootstrap), with the environment's own success so far.
        cut = np.zeros(n, bool)
        if warm_up and self.random_episode_steps:
            cut = (self.stats.lengths >= self.random_episode_steps) & ~(env_ended | forced_end)
            if cut.any():
                episodes.add(self.stats.end(cut))
        if (forced_end | cut).any():
            next_obs, _ = self.env.reset(options={"reset_mask": forced_end | cut})
        ended = env_ended | forced_end | cut
        if interventions is not None:
            interventions.episodes_ended(np.flatnonzero(ended), episodes.interventions)
        if self.recorder is not None:
            self.recorder.add(
                self.obs,
                action,
                reward,
                success,
                terminated,
                ended,
                human.mask if human is not None else np.zeros(n, bool),
            )
        batch = Batch(
            {k: v.copy() for k, v in self.obs.items()},
            unit,
            np.asarray(reward, np.float32),
            final_next,
            np.asarray(terminated, np.float32),
        )
        intervened = human.mask.copy() if human is not None else None
        self.exchange.send_transitions(Transitions(batch, episodes, n, self.version, intervened))
        self.obs = next_obs
        self.env_steps += n

    def run(self, stop: threading.Event, max_env_steps: int) -> None:
        """Act until told to stop or the step budget is spent (the actor thread's body)."""
        while not stop.is_set() and self.env_steps < max_env_steps:
            self.step()


def policy_weights(agent: SAC, obs_norm: RunningNorm) -> Weights:
    """What a learner publishes: the actor's parameters and the observation statistics, as numpy arrays."""
    w = {f"actor.{k}": v.detach().cpu().numpy() for k, v in agent.actor.state_dict().items()}
    w["obs_mean"] = obs_norm.mean.astype(np.float32)
    w["obs_std"] = obs_norm.std.astype(np.float32)
    return w


class LearnerRole:
    """Keeps the buffers and the normalizer, makes the updates, publishes weights."""

    def __init__(
        self,
        agent: SAC,
        layout: ObsLayout,
        online: ReplayBuffer,
        demos: ReplayBuffer | None,
        obs_norm: RunningNorm,
        exchange: Exchange,
        *,
        seed: int,
    ) -> None:
        self.agent = agent
        self.layout = layout
        self.online = online
        self.demos = demos
        self.obs_norm = obs_norm
        self.exchange = exchange
        self.rng = np.random.default_rng(seed)
        self.env_steps = 0
        self.episodes = EpisodeStats()
        self.version = 0
        self.intervened_transitions = 0
        self.freeze_norm = False
        """Keep the observation statistics fixed (after offline pretraining, whose networks expect them)."""
        self.stride = 1
        """Transitions the actor adds per step (one per world): a successor is this many slots on."""
        self._norm_count = -1.0
        self._norm_stats: tuple[torch.Tensor, torch.Tensor] | None = None

    def ingest(self, block: bool = False, timeout: float | None = None) -> int:
        """Move received transitions into the online buffer; returns how many arrived."""
        received = 0
        for item in self.exchange.receive_transitions(block=block, timeout=timeout):
            self.online.add(item.batch)
            self.stride = item.env_steps
            if item.intervened is not None and item.intervened.any():
                self._add_demos(item.batch, np.flatnonzero(item.intervened))
            if not self.freeze_norm:
                self.obs_norm.update(self.layout.flatten(item.batch.obs))
            if self.agent.reward_scale is not None:
                self.agent.reward_scale.update(item.batch.reward, item.batch.terminated)
            self.env_steps += item.env_steps
            received += len(item.batch.reward)
            self.episodes.extend(item.episodes)
        return received

    def _add_demos(self, batch: Batch, idx: npt.NDArray[np.int64]) -> None:
        """HIL-SERL: intervened transitions also join the demonstration buffer."""
        if self.demos is None:
            self.demos = ReplayBuffer(self.online.capacity, self.online.obs_shapes, self.online.action_dim)
        self.demos.add(batch.select(idx))
        self.intervened_transitions += len(idx)

    def sample(self, n: int) -> LearnerBatch:
        """``n`` transitions as normalized tensors on the learner's device, each with its bootstrap
        discount (``gamma ** k`` after k summed rewards)."""
        cfg = self.agent.cfg
        batch, discount = sample_training_batch(
            self.online,
            self.demos,
            n,
            cfg.demo_fraction,
            self.rng,
            n_step=cfg.n_step,
            gamma=cfg.gamma,
            online_stride=self.stride,
        )
        return self.tensors(batch, discount)

    def tensors(self, batch: Batch, discount: npt.NDArray[np.float32]) -> LearnerBatch:
        """A batch as normalized tensors on the learner's device (see :meth:`sample`)."""
        n = len(batch.reward)
        device = self.agent.device
        # Observation and next observation flattened side by side and normalized in one go, in
        # float32 on the learner's device: a few large operations instead of a dozen small ones.
        flat = np.concatenate([self.layout.flatten(batch.obs), self.layout.flatten(batch.next_obs)])
        both = self._normalize(torch.from_numpy(flat).to(device, non_blocking=True))

        def tensor(x: npt.NDArray[Any]) -> torch.Tensor:
            return torch.from_numpy(np.ascontiguousarray(x, np.float32)).to(device, non_blocking=True)

        obs, next_obs = both[:n], both[n:]
        rewards = batch.reward
        if self.agent.reward_scale is not None:  # SimbaV2's scaling: rewards in the critic's units
            rewards = rewards / np.float32(self.agent.reward_scale.divisor)
        action, reward, term = tensor(batch.action), tensor(rewards), tensor(batch.terminated)
        return LearnerBatch(obs, action, reward, next_obs, term, tensor(discount))

    def _normalize(self, x: torch.Tensor) -> torch.Tensor:
        """The running normalizer applied on the device; its statistics are copied there when they change."""
        norm = self.obs_norm
        stats = self._norm_stats
        if stats is None or stats[0].device != x.device or self._norm_count != norm.count:
            self._norm_count = norm.count
            mean = torch.as_tensor(norm.mean, dtype=torch.float32, device=x.device)
            std = torch.as_tensor(norm.std, dtype=torch.float32, device=x.device)
            stats = self._norm_stats = (mean, std.reciprocal())
            self.agent.set_obs_normalization(mean, std)
        mean, inv_std = stats
        return ((x - mean) * inv_std).clamp_(-norm.clip, norm.clip)

    def update(self) -> dict[str, float]:
        """One learner step: ``utd_ratio`` critic updates and one actor update."""
        cfg = self.agent.cfg
        metrics = self.agent.update(self.sample(cfg.batch_size * cfg.utd_ratio))
        if self.agent.reward_scale is not None:
            metrics["reward_divisor"] = self.agent.reward_scale.divisor
        return metrics

    def weights(self) -> Weights:
        """The actor's parameters and the observation statistics, as numpy arrays."""
        return policy_weights(self.agent, self.obs_norm)

    def publish(self) -> None:
        self.version += 1
        self.exchange.publish_weights(self.version, self.weights())
