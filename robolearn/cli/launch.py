"""``robolearn launch``: run a ROS 2 launch file (XML or YAML) without the ROS 2 launch library."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import tyro

from robolearn.hardware.ros.launch import (
    PACKAGE,
    find_launch_file,
    format_plan,
    parse_arguments,
    resolve_launch,
    run_processes,
)


@dataclass(frozen=True)
class LaunchCmd:
    """Run a ROS 2 launch file (XML or YAML) like ``ros2 launch``, without the ROS 2 launch library.

    Starts every node as a process (output prefixed with the node's name), stops them all on
    Ctrl-C or SIGTERM or when a node with ``on_exit="shutdown"`` exits, and exits with that
    node's exit code. ``FILE`` is a path, or a file name in robolearn's ``launch/`` folder;
    ``ros2 launch``'s ``robolearn FILE`` form works too.
    """

    file: tyro.conf.Positional[Annotated[str, tyro.conf.arg(metavar="FILE")]]
    """Launch file: a path, or the name of one in robolearn's launch/ folder (e.g. deploy_arm.launch.xml)."""
    args: tyro.conf.Positional[Annotated[tuple[str, ...], tyro.conf.arg(metavar="NAME:=VALUE")]] = ()
    """Launch arguments as ``name:=value``."""
    print: bool = False
    """Print the resolved processes (command lines, environment changes) instead of starting them."""
    sigterm_timeout: float = 5.0
    """Seconds a process has to exit after SIGINT before SIGTERM (and as long again before SIGKILL)."""


def run_launch(cmd: LaunchCmd) -> int:
    """``robolearn launch``: resolve the file, then print or run it; returns the exit code."""
    words = list(cmd.args)
    name = cmd.file
    if name == PACKAGE and words and ":=" not in words[0]:
        name = words.pop(0)  # ros2 launch's "PACKAGE FILE" form
    plan = resolve_launch(find_launch_file(name), parse_arguments(words))
    if cmd.print:
        print(format_plan(plan))
        return 0
    if not plan.processes:
        print(f"{plan.file.name}: nothing to start")
        return 0
    return run_processes(plan.processes, sigterm_timeout=cmd.sigterm_timeout)
