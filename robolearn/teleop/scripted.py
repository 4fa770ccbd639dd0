"""A scripted stand-in for the person: a task's scripted expert, or a trained policy.

Without a schedule it drives every step, as a person recording demonstrations does. With an
:class:`InterventionSchedule` it takes over only on schedule, as a simulated HIL-SERL operator:
during steps ``[a, b)`` of every ``k``-th episode, each such episode with probability ``p``,
deterministic by seed. With ``disagree`` set it also waits, within that schedule, until the robot
goes wrong: it takes over once the policy's action (:meth:`Device.watch`) has strayed from its own
for ``patience`` steps in a row, drives at least ``hold`` steps and hands back once the policy's
action agrees with its own again for ``patience`` steps (HG-DAgger's gate, Kelly et al. 2019;
HIL-SERL's operator steps in when the robot struggles, not on a clock). It always reports
its action; ``intervening`` says whether it takes over (so a recording without a policy is driven
by it throughout, with the schedule in the flags).
Its one button: with ``confirm_reset_reads`` k, it confirms a scene reset (``RESET_DONE``) on the
k-th read after a robot asks for one (:meth:`scene_reset_requested`), as an operator who needs a
moment to put the cube back; it sends no other events. Episodes are counted by :meth:`reset` (the
first read before any reset starts episode 0).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robolearn.sim.backend import FloatArray
from robolearn.tasks.core import Observation, TaskCfg
from robolearn.teleop.device import Device, DeviceError, ObsDict, TeleopCommand, TeleopEvent


@dataclass(frozen=True)
class InterventionSchedule:
    """When the scripted stand-in takes over."""

    steps: tuple[int, int] | None = None
    """Control steps ``[a, b)`` of an episode it takes over; None: the whole episode."""
    every: int = 1
    """Episodes ``0, k, 2k, ...`` are eligible (``k = every``)."""
    probability: float = 1.0
    """Chance that an eligible episode is intervened, drawn once per episode."""
    seed: int = 0
    """Seed of those draws: episode ``e``'s draw depends on ``(seed, e)`` alone."""
    disagree: float | None = None
    """Take over only where the policy's action strays from the stand-in's own: their mean absolute
    difference per component, in units of the component's half-range (0 to 2), above this for
    ``patience`` steps in a row. None: take over wherever the schedule says."""
    patience: int = 3
    """Control steps in a row of straying before it takes over."""
    hold: int = 10
    """Control steps it drives at least once it took over; then it hands back when the policy's
    action has agreed with its own (within ``disagree``) for ``patience`` steps in a row."""

    def check(self) -> None:
        """Raise :class:`DeviceError` naming a bad field."""
        if self.disagree is not None and not 0.0 < self.disagree <= 2.0:
            raise DeviceError(f"scripted: disagreement threshold must be in (0, 2], got {self.disagree}")
        if self.patience < 1 or self.hold < 1:
            raise DeviceError(
                f"scripted: patience and hold must be at least 1 step, got {self.patience} and {self.hold}"
            )
        if self.every < 1:
            raise DeviceError(f"scripted: intervention schedule 'every' must be at least 1, got {self.every}")
        if not 0.0 <= self.probability <= 1.0:
            raise DeviceError(f"scripted: intervention probability must be in [0, 1], got {self.probability}")
        if self.steps is not None and not 0 <= self.steps[0] < self.steps[1]:
            raise DeviceError(f"scripted: intervention steps [a, b) need 0 <= a < b, got {list(self.steps)}")

    def episode_selected(self, episode: int) -> bool:
        """Whether episode ``episode`` (0-based) has an intervention."""
        if episode % self.every:
            return False
        return bool(np.random.default_rng([self.seed, episode]).random() < self.probability)

    def in_window(self, step: int) -> bool:
        """Whether ``step`` (0-based) is within the steps taken over."""
        return self.steps is None or self.steps[0] <= step < self.steps[1]

    def intervenes(self, episode: int, step: int) -> bool:
        """Whether the stand-in takes over at ``step`` of ``episode``."""
        return self.in_window(step) and self.episode_selected(episode)


class ScriptedDevice(Device):
    """Plays the person with a task's scripted expert (``policy="scripted"``) or a run folder's policy."""

    name = "scripted"

    def __init__(
        self,
        task_cfg: TaskCfg,
        *,
        policy: str = "scripted",
        schedule: InterventionSchedule | None = None,
        confirm_reset_reads: int = 1,
    ) -> None:
        if schedule is not None:
            schedule.check()
        if confirm_reset_reads < 1:
            raise DeviceError(f"scripted: confirm_reset_reads must be at least 1, got {confirm_reset_reads}")
        self.confirm_reset_reads = confirm_reset_reads
        self._reset_reads: int | None = None
        """Reads left until it confirms the scene reset asked for; None: none asked for."""
        self.task_cfg, self.policy_name, self.schedule = task_cfg, policy, schedule
        self.low = np.asarray(task_cfg.action.low, np.float64)
        self.high = np.asarray(task_cfg.action.high, np.float64)
        self._half_range = (self.high - self.low) / 2.0
        """Each action component's half-range: the unit of the disagreement gate's straying."""
        self._act: Callable[[Observation], FloatArray] | None = None
        self.episode, self.step = -1, 0
        self._selected = False
        self._watched: FloatArray | None = None
        """The policy's action this step (:meth:`watch`), until read."""
        self._streak = 0
        """Steps in a row the policy's action strayed (watching) or agreed (driving)."""
        self._driven = 0
        """Steps it has driven since it took over on disagreement; 0 while it watches."""

    def connect(self) -> None:
        self._act = self._load()
        self.episode, self.step = -1, 0

    def _load(self) -> Callable[[Observation], FloatArray]:
        cfg = self.task_cfg
        if self.policy_name == "scripted":
            if cfg.expert is None:
                raise DeviceError(f"scripted: task {cfg.name} has no scripted expert; give policy=RUN_DIR")
            return cfg.expert(cfg)
        run = Path(self.policy_name)
        if not run.exists():
            raise DeviceError(f"scripted: policy must be 'scripted' or a run folder; {run} does not exist")
        from robolearn.policy.loading import load_policy

        policy, meta = load_policy(run)
        if meta.get("task") != cfg.name:
            raise DeviceError(
                f"scripted: the policy in {run} was trained on {meta.get('task')}, not {cfg.name}"
            )
        return policy.act

    def reset(self) -> None:
        self.episode += 1
        self.step = 0
        self._selected = self.schedule is None or self.schedule.episode_selected(self.episode)
        self._streak = self._driven = 0

    def watch(self, policy_action: FloatArray) -> None:
        self._watched = np.asarray(policy_action, np.float64)

    def scene_reset_requested(self) -> None:
        self._reset_reads = self.confirm_reset_reads

    def read(self, obs: ObsDict) -> TeleopCommand:
        if self._act is None:
            raise DeviceError("scripted: read before connect()")
        if self._reset_reads is not None:  # the robot waits for the scene: nothing to drive
            self._reset_reads -= 1
            if self._reset_reads > 0:
                return TeleopCommand(None, False)
            self._reset_reads = None
            return TeleopCommand(None, False, frozenset({TeleopEvent.RESET_DONE}))
        if self.episode < 0:
            self.reset()
        batch = {k: np.asarray(v, np.float32)[None] for k, v in obs.items()}
        action = np.clip(np.asarray(self._act(batch), np.float64)[0], self.low, self.high)
        schedule = self.schedule
        intervening = schedule is None or (self._selected and schedule.in_window(self.step))
        if schedule is not None and schedule.disagree is not None:
            intervening = intervening and self._gate(
                action, schedule.disagree, schedule.patience, schedule.hold
            )
        self._watched = None
        self.step += 1
        return TeleopCommand(
            action, intervening, frozenset({TeleopEvent.INTERVENE}) if intervening else frozenset()
        )

    def _gate(self, action: FloatArray, threshold: float, patience: int, hold: int) -> bool:
        """Whether it drives this step (:attr:`InterventionSchedule.disagree`). Watching, it takes
        over once the policy's action has strayed from ``action`` by more than ``threshold`` for
        ``patience`` steps in a row; driving, it hands back once it has driven ``hold`` steps and
        the policy's action has agreed with its own for ``patience`` steps in a row (HG-DAgger's
        expert returns control when the novice would do what the expert does)."""
        if self._watched is None:
            raise DeviceError(
                "scripted: stepping in on disagreement needs the policy's action before each read "
                "(Device.watch); this loop gave none"
            )
        strays = float(np.mean(np.abs(self._watched - action) / self._half_range)) > threshold
        if self._driven:
            self._driven += 1
            self._streak = self._streak + 1 if not strays and self._driven > hold else 0
            if self._streak < patience:
                return True
            self._driven = self._streak = 0
            return False
        self._streak = self._streak + 1 if strays else 0
        if self._streak < patience:
            return False
        self._driven, self._streak = 1, 0
        return True

    def disconnect(self) -> None:
        self._act = None
