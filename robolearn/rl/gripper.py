"""HIL-SERL's discrete gripper critic and gripper-change penalty (issue 11).

Luo et al., "Precise and Dexterous Robotic Manipulation via Human-in-the-Loop Reinforcement
Learning" (HIL-SERL, 2024) learn the gripper of an arm apart from its motion: a discrete critic
Q(s, close | stay | open) beside the continuous SAC actor and critics, which see only the other
action components. The gripper critic is trained as double DQN (van Hasselt et al., AAAI 2016):
the next action is the online critic's argmax, valued by its own Polyak-averaged target:

    y = r - penalty * changed + gamma^k (1 - terminated) Q_target(s', argmax_a Q(s', a))

and a change of the gripper's state (closing an open gripper or opening a closed one, judged on
the measured gripper as HIL-SERL's ``GripperPenaltyWrapper`` does) costs ``penalty``, in that
critic's reward only, so a grasping policy stops chattering.

Transitions keep the task's absolute gripper command (scripted demonstrations, datasets and online
data alike); the discrete action is read back from it and the measured gripper: the command's side
of the midpoint says close or open, and where that equals the measured state the transition is
also ``stay`` (the same command, see :class:`~robolearn.policy.network.GripperHead`), so both
Q-values that describe it learn from it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from robolearn.envs.autoreset import EpisodeStatistics
from robolearn.errors import ConfigError
from robolearn.policy.network import GripperHead
from robolearn.policy.normalization import ActionScaler, ObsLayout
from robolearn.rl.config import SACConfig
from robolearn.rl.replay import LearnerBatch
from robolearn.tasks.core import TaskCfg

PolicyFn = Callable[[dict[str, npt.NDArray[np.float32]]], npt.NDArray[np.float64]]


@dataclass(frozen=True)
class GripperSpec:
    """Where a task's gripper is in the action and the observation, in the learner's units."""

    action_index: int
    """Index of the gripper command in the action."""
    obs_index: int
    """Index of the measured gripper in the flat observation."""
    open_above: float
    """Measured value (raw observation units) above which the gripper counts as open."""
    closed: float
    """Closing command in the actor's [-1, 1] units."""
    opened: float
    """Opening command in [-1, 1]."""

    def head(self, obs_dim: int, hidden: tuple[int, ...]) -> GripperHead:
        """A freshly initialized gripper critic for this gripper."""
        return GripperHead(
            obs_dim,
            hidden,
            action_index=self.action_index,
            obs_index=self.obs_index,
            open_above=self.open_above,
            closed=self.closed,
            opened=self.opened,
        )


def gripper_spec(task: TaskCfg, layout: ObsLayout, scaler: ActionScaler) -> GripperSpec:
    """The gripper of ``task`` as the learner sees it; a task without one cannot use the option."""
    grip = task.action.gripper
    if grip is None:
        raise ConfigError(
            f"--gripper-critic: task {task.name}'s action ({', '.join(task.action.names)}) commands no "
            "gripper; it applies to arm tasks with a gripper such as panda_pick_cube"
        )
    if grip.observation not in layout.keys:
        raise ConfigError(
            f"--gripper-critic: task {task.name} does not observe its gripper ({grip.observation!r}); "
            f"it observes {', '.join(layout.keys)}"
        )
    at = layout.keys.index(grip.observation)
    if layout.sizes[at] != 1:
        raise ConfigError(f"--gripper-critic: observation {grip.observation!r} must be one value")
    index = task.action.names.index(grip.action)
    closed, opened = scaler.to_unit(_at(index, len(scaler.low), (grip.closed, grip.open)))[:, index]
    return GripperSpec(index, sum(layout.sizes[:at]), grip.open_above, float(closed), float(opened))


def _at(index: int, dim: int, values: tuple[float, ...]) -> npt.NDArray[np.float64]:
    """Actions (len(values), dim) holding ``values`` in column ``index`` and zeros elsewhere."""
    out = np.zeros((len(values), dim))
    out[:, index] = values
    return out


class GripperCritic:
    """The discrete gripper critic's target network, optimizer and update (see the module's docs).

    ``head`` is the actor's :class:`GripperHead` (it is part of the deployed policy); this object
    owns what only training needs.
    """

    def __init__(self, head: GripperHead, lr: float, tau: float, penalty: float, fused: bool | None) -> None:
        self.head = head
        self.target = copy.deepcopy(head).requires_grad_(False)
        self.params: list[torch.Tensor] = list(head.parameters())
        self._target_params: list[torch.Tensor] = list(self.target.parameters())
        self.opt = torch.optim.Adam(self.params, lr=lr, fused=fused)
        self.tau = tau
        self.penalty = penalty

    def labels(self, measured: torch.Tensor, command: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """For measured grippers (B,) and unit commands (B,): which of close, stay, open each
        transition's command is (B, 3) and whether it changed the gripper's state (B,)."""
        head = self.head
        to_open = (command > 0.5 * (head.closed + head.opened)) == (head.opened > head.closed)
        is_open = measured > head.open_above
        changed = to_open != is_open
        taken = torch.stack([~to_open, ~changed, to_open], dim=1)
        return taken, changed

    def loss(
        self, t: LearnerBatch, measured: torch.Tensor, command: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The double-DQN loss over the Q-values each transition describes, and its change flags.

        ``t`` without the gripper's action component; ``command`` is that component (B,) and
        ``measured`` the measured gripper (B,) in raw units."""
        taken, changed = self.labels(measured, command)
        rew = t.reward
        with torch.no_grad():
            best = self.head(t.next_obs).argmax(dim=-1, keepdim=True)
            q_next = self.target(t.next_obs).gather(1, best).squeeze(1)
            target = rew - self.penalty * changed.to(rew.dtype) + t.discount * (1.0 - t.terminated) * q_next
        q = self.head(t.obs)
        mask = taken.to(q.dtype)
        loss = ((q - target.unsqueeze(1)).square() * mask).sum(dim=1).mean()
        return loss, changed

    def step(self, t: LearnerBatch, measured: torch.Tensor, command: torch.Tensor) -> torch.Tensor:
        """One gradient step (of :meth:`loss`) and a Polyak update of the target; returns the loss."""
        loss, _ = self.loss(t, measured, command)
        self.opt.zero_grad(set_to_none=True)
        loss.backward(inputs=self.params)
        self.opt.step()
        with torch.no_grad():
            torch._foreach_lerp_(self._target_params, self.params, self.tau)
        return loss.detach()


@dataclass
class GripperChanges:
    """Outcomes of evaluation episodes with how often each changed its gripper command."""

    changes: list[int]
    """Per episode: steps whose command switched between closing and opening, from an open start."""
    successes: list[bool]

    def summary(self) -> dict[str, float]:
        return {
            "gripper_changes_mean": float(np.mean(self.changes)),
            "success_rate": float(np.mean(self.successes)) if self.successes else float("nan"),
            "episodes": len(self.changes),
        }


def gripper_changes(env: Any, policy: PolicyFn, episodes: int, *, seed: int = 0) -> GripperChanges:
    """Run ``episodes`` episodes of ``policy`` on a robolearn task's ``env`` (a fixed quota per world,
    as :func:`robolearn.eval.evaluation.evaluate`) and count each one's gripper changes.

    A command counts as opening on the open side of the midpoint between the closing and opening
    commands, so continuous and discrete gripper policies are counted alike.
    """
    grip = env.cfg.action.gripper
    if grip is None:
        raise ConfigError(f"task {env.cfg.name} commands no gripper")
    index = env.cfg.action.names.index(grip.action)
    middle = 0.5 * (grip.closed + grip.open)
    n = env.num_envs
    quota = np.full(n, episodes // n) + (np.arange(n) < episodes % n)
    done = np.zeros(n, np.int64)
    count = np.zeros(n, np.int64)
    was_open = np.ones(n, bool)  # every episode starts with the gripper open
    out = GripperChanges([], [])
    stats = EpisodeStatistics(n)
    obs, _ = env.reset(seed=seed)
    while (done < quota).any():
        action = policy(obs)
        to_open = (action[:, index] > middle) == (grip.open > grip.closed)
        count += to_open != was_open
        was_open = to_open
        obs, reward, terminated, truncated, info = env.step(action)
        ended = stats.step(reward, terminated, truncated, info)
        for j, w in enumerate(ended.worlds):
            if done[w] < quota[w]:
                out.changes.append(int(count[w]))
                if ended.successes is not None:
                    out.successes.append(bool(ended.successes[j]))
        done[ended.worlds] += 1
        count[ended.worlds] = 0
        was_open[ended.worlds] = True
    return out


def train_gripper(sac: SACConfig, task: str, layout: ObsLayout, scaler: ActionScaler) -> GripperSpec | None:
    """The gripper a training run's learner commands with ``--gripper-critic``, else None."""
    if not sac.gripper_critic:
        return None
    from robolearn.tasks import make_task_cfg

    return gripper_spec(make_task_cfg(task), layout, scaler)
