"""Interventions on their own: whose action executes, the per-episode rate and labels, pacing."""

from __future__ import annotations

import time

import numpy as np

from robolearn.hil.interventions import Interventions, InterventionStats
from robolearn.tasks import make_task_cfg
from robolearn.teleop.device import Device, TeleopCommand, TeleopEvent
from robolearn.teleop.scripted import InterventionSchedule, ScriptedDevice

TASK = "panda_reach"


class _Buttons(Device):
    """A person who presses the given event at one step (a keyboard's events, without a window)."""

    name = "buttons"

    def __init__(self, at: int, event: TeleopEvent) -> None:
        self.at, self.event, self.steps, self.resets = at, event, 0, 0

    def connect(self) -> None: ...

    def disconnect(self) -> None: ...

    def reset(self) -> None:
        self.resets += 1
        self.steps = 0

    def read(self, obs: dict[str, np.ndarray]) -> TeleopCommand:
        self.steps += 1
        events = frozenset({self.event}) if self.steps == self.at else frozenset()
        return TeleopCommand(None, False, events)


def _obs(n: int) -> dict[str, np.ndarray]:
    zeros = np.zeros((n, 3), np.float32)
    return {"ee_pos": zeros, "goal_from_ee": zeros + 0.1, "ee_vel": zeros, "ee_target_offset": zeros}


def test_a_human_action_replaces_the_policys_only_where_they_intervene() -> None:
    cfg = make_task_cfg(TASK)
    person = ScriptedDevice(cfg, schedule=InterventionSchedule(steps=(1, 3)))
    hil = Interventions([None, person, None])
    hil.connect()
    policy = np.full((3, len(cfg.action.low)), 0.005)
    masks = []
    for _ in range(4):
        out = hil.apply(_obs(3), policy)
        masks.append(out.mask.copy())
        np.testing.assert_array_equal(out.action[[0, 2]], policy[[0, 2]])  # unwatched worlds: the policy
        assert out.mask[1] or np.array_equal(out.action[1], policy[1])
    assert [m.tolist() for m in masks] == [[False, False, False], [False, True, False],
                                          [False, True, False], [False, False, False]]  # fmt: skip
    stats = InterventionStats()
    hil.episodes_ended(np.array([1, 2]), stats)
    assert stats.rates == [0.5, 0.0] and stats.labels == ["", ""]
    hil.disconnect()


def test_marks_end_with_a_label_and_success_wins_over_failure() -> None:
    success, failure = _Buttons(2, TeleopEvent.SUCCESS), _Buttons(1, TeleopEvent.FAILURE)
    hil = Interventions([success, failure])
    policy = np.zeros((2, 4))
    first = hil.apply(_obs(2), policy)
    assert first.marked_failure.tolist() == [False, True] and not first.marked_success.any()
    second = hil.apply(_obs(2), policy)
    assert second.marked_success.tolist() == [True, False]
    stats = InterventionStats()
    hil.episodes_ended(np.array([0, 1]), stats)
    assert stats.labels == ["success", "failure"] and stats.rates == [0.0, 0.0]
    assert success.resets == failure.resets == 1  # each device starts its next episode


def test_quit_is_reported() -> None:
    out = Interventions([_Buttons(1, TeleopEvent.QUIT)]).apply(_obs(1), np.zeros((1, 4)))
    assert out.quit and not out.mask.any()


def test_reads_are_paced_for_a_person() -> None:
    hil = Interventions([_Buttons(0, TeleopEvent.SUCCESS)], period=0.02)
    start = time.monotonic()
    for _ in range(6):
        hil.apply(_obs(1), np.zeros((1, 4)))
    # Five periods between six reads at the least (a loaded machine only makes it longer).
    assert time.monotonic() - start >= 5 * 0.02 - 1e-3
