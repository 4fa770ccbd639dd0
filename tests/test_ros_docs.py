"""docs/ros.md against the code: the per-task interface table is generated, so it cannot drift."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robolearn.errors import RobolearnError
from robolearn.hardware.ros.state_view import (
    RemoteStateView,
    required_sources,
    tracked_frames,
    tracked_joints,
)
from robolearn.hardware.ros.task_topics import BEGIN, END, markdown, replace_section, task_topics
from robolearn.tasks import make_task_cfg

DOCS = Path(__file__).resolve().parents[1] / "docs" / "ros.md"


def test_the_docs_list_every_tasks_topics_as_the_task_definitions_give_them() -> None:
    text = DOCS.read_text()
    assert replace_section(text, markdown()) == text, (
        "docs/ros.md's task table is out of date: python -m robolearn.hardware.ros.task_topics "
        "--write docs/ros.md"
    )
    assert "`ee_target` (3)" in text  # the label a robot integrator had to guess (issue 12)


def test_a_file_without_the_generated_section_is_refused() -> None:
    with pytest.raises(RobolearnError, match="no generated section"):
        replace_section("# ROS 2\n", markdown())
    assert replace_section(f"a\n{BEGIN}\nold\n{END}\nb", "new") == "a\nnew\nb"


def test_joint_states_is_required_only_where_an_observation_term_reads_a_joint() -> None:
    assert required_sources(make_task_cfg("panda_reach")) == ["frames/ee", "task_state"]
    assert "joint_states" in required_sources(make_task_cfg("panda_pick_cube"))  # the finger joints
    assert "joint_states" in required_sources(make_task_cfg("car_checkpoints"))  # the steering
    assert required_sources(make_task_cfg("quadrotor_hover")) == ["frames/crazyflie", "task_state"]
    reach = task_topics(make_task_cfg("panda_reach"))
    assert reach.segments == [("stamp", 1), ("step_count", 1), ("goal", 3), ("ee_target", 3)]
    assert reach.joints[:7] == [f"panda_joint{i}" for i in range(1, 8)]


def test_a_hold_before_any_joint_states_keeps_the_gripper_at_the_neutral_opening() -> None:
    cfg = make_task_cfg("panda_reach")
    view = RemoteStateView(cfg, tracked_frames(cfg), tracked_joints(cfg))
    assert view.robot_state(0.0).gripper_opening == pytest.approx(0.08)  # not 0 m: closed
    view.sim.jpos[:] = 0.01
    view.joints_measured = True
    assert view.robot_state(0.0).gripper_opening == pytest.approx(0.02)
    assert np.all(view.robot_state(0.0).joint_pos == 0.01)
