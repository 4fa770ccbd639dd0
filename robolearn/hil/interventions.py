"""Human-in-the-loop interventions: a person takes over a world while its policy trains.

HIL-SERL's rule (Luo et al., "Precise and Dexterous Robotic Manipulation via Human-in-the-Loop
Reinforcement Learning", 2024): an intervened step executes the human's action, and its transition
goes into the online buffer *and* the demonstration buffer, so the learner both bootstraps from it
and keeps sampling it at RLPD's demonstration share. The human may also end an episode by marking
success (terminal) or failure (cut off, as a time-out). Nobody intervening is the normal case:
training then runs unattended.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from robolearn.tasks.core import Observation
from robolearn.teleop import Device, TeleopEvent

log = logging.getLogger(__name__)

BoolArray = npt.NDArray[np.bool_]


@dataclass
class StepInterventions:
    """What the people watching did in one step of every world."""

    action: npt.NDArray[np.float64]
    """(n, A) the action to execute: the human's where ``mask``, else the policy's."""
    mask: BoolArray
    """(n,) worlds whose action came from a human."""
    marked_success: BoolArray
    """(n,) worlds whose episode the human ended as a success."""
    marked_failure: BoolArray
    """(n,) worlds whose episode the human ended as a failure."""
    quit: bool = False
    """A human asked to stop training."""


@dataclass
class InterventionStats:
    """Per finished episode: the share of its steps a human drove, and any human label."""

    rates: list[float] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    """"success", "failure" or "" (not marked) per episode, in the order episodes ended."""


class Interventions:
    """The devices watching the worlds of a vector environment; ``None`` where nobody watches.

    A person watches one world (world 0, as on a real robot cell); a scripted stand-in can
    watch every world.
    """

    def __init__(
        self,
        devices: Sequence[Device | None],
        *,
        view: Callable[[], None] | None = None,
        period: float = 0.0,
    ) -> None:
        """``view`` shows the watched world before each read; ``period`` (s) paces the reads, so a
        person sees the simulation in real time (0: as fast as it runs, for scripted stand-ins)."""
        self.devices = list(devices)
        self.view = view
        self.period = period
        self._next_tick = 0.0
        n = len(self.devices)
        self._steps = np.zeros(n, np.int64)
        self._intervened = np.zeros(n, np.int64)
        self._label = [""] * n

    def connect(self) -> None:
        for device in self.devices:
            if device is not None:
                device.connect()

    def disconnect(self) -> None:
        for device in self.devices:
            if device is not None:
                device.disconnect()

    def apply(self, obs: Observation, policy_action: npt.NDArray[np.float64]) -> StepInterventions:
        """Ask every device what its person does now; their actions replace the policy's."""
        if self.view is not None:
            self.view()
        if self.period > 0.0:
            delay = self._next_tick - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            # Fell behind: carry on from now rather than race to catch up.
            self._next_tick = max(self._next_tick, time.monotonic()) + self.period
        n = len(self.devices)
        out = StepInterventions(policy_action.copy(), np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool))
        for i, device in enumerate(self.devices):
            if device is None:
                continue
            device.watch(policy_action[i])
            cmd = device.read({k: v[i] for k, v in obs.items()})
            if cmd.intervening and cmd.action is not None:
                out.action[i] = cmd.action
                out.mask[i] = True
            out.marked_success[i] = TeleopEvent.SUCCESS in cmd.events
            out.marked_failure[i] = TeleopEvent.FAILURE in cmd.events and not out.marked_success[i]
            out.quit |= TeleopEvent.QUIT in cmd.events
        self._steps += 1
        self._intervened += out.mask
        for i in np.flatnonzero(out.marked_success | out.marked_failure).tolist():
            self._label[i] = "success" if out.marked_success[i] else "failure"
            log.info("world %d: episode marked %s by a human", i, self._label[i])
        return out

    def episodes_ended(self, ids: npt.NDArray[np.int64], stats: InterventionStats) -> None:
        """Close the books of the worlds whose episodes just ended."""
        for i in ids.tolist():
            device = self.devices[i]
            if device is not None:
                device.reset()
            stats.rates.append(float(self._intervened[i]) / max(int(self._steps[i]), 1))
            stats.labels.append(self._label[i])
            self._steps[i] = self._intervened[i] = 0
            self._label[i] = ""
