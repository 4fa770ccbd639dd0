"""What a robot must publish for each deployable task, as ``docs/ros.md`` lists it.

The table is generated from the task definitions (observation terms probed by
:func:`~robolearn.hardware.ros.state_view.probe_reads`, ``TaskCfg.state`` for ``task_state``), so
the docs cannot drift from the code: ``tests/test_ros_docs.py`` fails when the section between the
markers differs from :func:`markdown`, and ``python -m robolearn.hardware.ros.task_topics --write
docs/ros.md`` rewrites it.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from robolearn.errors import RobolearnError
from robolearn.hardware.ros.images import camera_topic
from robolearn.hardware.ros.messages import COMMAND_TYPES, TaskStateLayout
from robolearn.hardware.ros.state_view import required_sources, tracked_frames, tracked_joints
from robolearn.tasks import BUILTIN, make_task_cfg, task_names, task_source
from robolearn.tasks.core import TaskCfg

BEGIN = "<!-- task-topics:begin (python -m robolearn.hardware.ros.task_topics --write docs/ros.md) -->"
END = "<!-- task-topics:end -->"


@dataclass(frozen=True)
class TaskTopics:
    """One task's side of the ROS 2 interface."""

    task: str
    embodiment: str
    control_hz: float
    frames: list[str]
    """Frames published as ``frames/<name>``."""
    joints: list[str]
    """Joint names ``joint_states`` must carry (all of them, in any order, others allowed)."""
    required: list[str]
    """Topics without which policy_node commands nothing."""
    segments: list[tuple[str, int]]
    """``task_state`` labels and sizes, in order."""
    command_types: list[str]
    """Command types, the default first."""
    cameras: list[tuple[str, int, int]]
    """Each camera's raw topic, width and height (a pixel policy requires those it reads)."""


def task_topics(cfg: TaskCfg) -> TaskTopics:
    """The interface of one task (an arm, drone or car task)."""
    layout = TaskStateLayout(cfg)
    return TaskTopics(
        task=cfg.name,
        embodiment=cfg.embodiment,
        control_hz=1.0 / cfg.control_dt,
        frames=tracked_frames(cfg),
        joints=tracked_joints(cfg),
        required=required_sources(cfg),
        segments=list(zip(layout.labels, layout.sizes, strict=True)),
        command_types=[c.name for c in COMMAND_TYPES[cfg.embodiment]],
        cameras=[(camera_topic(n), c.width, c.height) for n, c in cfg.cameras.items()],
    )


def deployable_tasks() -> list[TaskCfg]:
    """robolearn's own tasks that ROS 2 deployment supports: of an arm, drone or car (a plugin's or
    a process's registered tasks have their own docs)."""
    cfgs = [make_task_cfg(name) for name in task_names() if task_source(name) == BUILTIN]
    return [c for c in cfgs if c.embodiment in COMMAND_TYPES]


def _code(items: Sequence[str]) -> str:
    return ", ".join(f"`{i}`" for i in items) if items else "none"


def markdown() -> str:
    """The generated section of ``docs/ros.md``, markers included."""
    rows = [
        "| task | rate | required topics | `task_state` segments (values) | `joint_states` names "
        "| commands |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for t in map(task_topics, deployable_tasks()):
        segments = ", ".join(f"`{label}` ({size})" for label, size in t.segments)
        joints = _code(t.joints)
        if t.joints and "joint_states" not in t.required:
            joints += " (optional: no observation term reads them)"
        required = ", ".join([_code(t.required), *(f"`{c}` ({w}x{h})" for c, w, h in t.cameras)])
        rows.append(
            f"| `{t.task}` | {t.control_hz:g} Hz | {required} | {segments} | {joints} | "
            f"{_code(t.command_types)} |"
        )
    return "\n".join([BEGIN, *rows, END])


def replace_section(text: str, section: str) -> str:
    """``text`` with its generated section replaced by ``section``; raises RobolearnError without markers."""
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(text):
        raise RobolearnError(f"no generated section ({BEGIN} ... {END})")
    return pattern.sub(lambda _: section, text, count=1)


def main(argv: Sequence[str] | None = None) -> None:
    """Print the section, or rewrite it in a Markdown file with ``--write FILE``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="Markdown file whose generated section to rewrite")
    args = parser.parse_args(argv)
    if args.write is None:
        print(markdown())
        return
    args.write.write_text(replace_section(args.write.read_text(), markdown()))


if __name__ == "__main__":
    main()
