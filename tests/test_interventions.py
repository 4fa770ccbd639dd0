"""Interventions on their own: whose action executes, the per-episode rate and labels, pacing."""

from __future__ import annotations

import time

import numpy as np
import pytest

from robolearn.hil.interventions import Interventions, InterventionStats
from robolearn.tasks import make_task_cfg
from robolearn.teleop.device import Device, DeviceError, TeleopCommand, TeleopEvent
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


def test_the_scripted_person_steps_in_only_when_the_policy_strays() -> None:
    """``disagree``: it takes over after ``patience`` steps in a row of a policy action far from its
    own, drives at least ``hold`` steps and hands back once the policy agrees again for
    ``patience`` steps in a row; a policy that agrees is left alone."""
    cfg = make_task_cfg(TASK)
    expert = cfg.expert(cfg) if cfg.expert else None
    assert expert is not None
    person = ScriptedDevice(cfg, schedule=InterventionSchedule(disagree=0.5, patience=3, hold=5))
    hil = Interventions([person])
    hil.connect()
    obs = _obs(1)
    own = np.asarray(expert(obs), np.float64)
    wrong = np.clip(-own, cfg.action.low, cfg.action.high)  # straight away from the goal

    def driven(actions: list[np.ndarray]) -> list[bool]:
        return [bool(hil.apply(obs, a).mask[0]) for a in actions]

    assert not any(driven([own] * 12))
    # Strays 3 steps: taken over at the third; still straying, it keeps driving past the hold.
    assert driven([wrong] * 9) == [False, False] + [True] * 7
    # Agreeing again: 3 steps in a row after the hold, then handed back.
    assert driven([own] * 5) == [True, True, False, False, False]
    # Agreeing at once after a takeover: it still drives its 5 steps, then waits for 3 agreeing ones.
    assert driven([wrong] * 3 + [own] * 8) == [False, False, True] + [True] * 6 + [False, False]
    # A new episode forgets the streak and the takeover.
    driven([wrong] * 4)
    hil.episodes_ended(np.array([0]), InterventionStats())
    assert driven([wrong] * 3) == [False, False, True]
    hil.disconnect()


def test_a_policy_that_goes_wrong_is_rescued_on_a_real_arm() -> None:
    """On MuJoCo's arm: a policy that drives away from the goal never reaches it alone; with the
    person stepping in on disagreement the episode succeeds, and the policy still drove part of it."""
    from robolearn.envs.task_env import TaskEnv

    cfg = make_task_cfg(TASK)
    env = TaskEnv(cfg, "mujoco", 1, autoreset=False)
    expert = cfg.expert(cfg) if cfg.expert else None
    assert expert is not None

    def episode(hil: Interventions | None) -> tuple[bool, float]:
        obs, _ = env.reset(seed=3)
        driven = []
        for _ in range(cfg.episode_length):
            wrong = np.clip(-np.asarray(expert(obs), np.float64), cfg.action.low, cfg.action.high)
            out = hil.apply(obs, wrong) if hil is not None else None
            action = out.action if out is not None else wrong
            driven.append(bool(out.mask[0]) if out is not None else False)
            obs, _, terminated, truncated, info = env.step(action)
            if info["success"][0]:
                return True, float(np.mean(driven))
            if terminated[0] or truncated[0]:
                break
        return False, float(np.mean(driven))

    assert episode(None) == (False, 0.0)
    person = ScriptedDevice(cfg, schedule=InterventionSchedule(disagree=0.5, patience=3, hold=10))
    hil = Interventions([person])
    hil.connect()
    succeeded, share = episode(hil)
    assert succeeded and 0.0 < share < 1.0, share
    env.close()


def test_stepping_in_on_disagreement_needs_the_policys_action() -> None:
    cfg = make_task_cfg(TASK)
    person = ScriptedDevice(cfg, schedule=InterventionSchedule(disagree=0.5))
    person.connect()
    with pytest.raises(DeviceError, match=r"needs the policy's action before each read"):
        person.read({k: v[0] for k, v in _obs(1).items()})
    with pytest.raises(DeviceError, match=r"disagreement threshold must be in \(0, 2\]"):
        ScriptedDevice(cfg, schedule=InterventionSchedule(disagree=0.0))
    with pytest.raises(DeviceError, match="patience and hold must be at least 1"):
        ScriptedDevice(cfg, schedule=InterventionSchedule(disagree=0.5, hold=0))
