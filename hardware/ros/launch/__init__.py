"""The ROS 2 launch-file interpreter behind ``robolearn launch``: XML and YAML launch files run
without the ROS 2 launch library.

Robots and workstations that run the policy often have ``rclpy`` but not ``ros2 launch`` (the
``launch``/``launch_ros`` packages). This package reads the same declarative files that
``ros2 launch`` reads and starts the same processes with the same command lines, so one file in
``launch/`` serves both. Its parts, in the order a launch goes through them:

- ``formats``: XML and YAML files read into entities (tags with attributes and sub-tags);
- ``substitutions``: the ``$(name args...)`` templates of attribute values;
- ``resolver``: the actions (``<arg>``, ``<let>``, ``<group>``, ``<include>``, ``<node>``, ...)
  turned into a :class:`LaunchPlan`;
- ``packages``: ament prefixes, share folders and executables, as ``ros2`` finds them;
- ``processes``: the plan's processes started, their output prefixed, stopped in stages;
- ``limits``: the bounds on size, nesting, includes and processes a launch file must stay within.

Python launch files are refused: they need the launch library.
"""

from robolearn.hardware.ros.launch.limits import DEFAULT_LIMITS, LaunchLimits
from robolearn.hardware.ros.launch.packages import PACKAGE, find_launch_file, package_prefix, package_share
from robolearn.hardware.ros.launch.plan import LaunchError, LaunchPlan, LaunchProcess, format_plan
from robolearn.hardware.ros.launch.processes import run_processes
from robolearn.hardware.ros.launch.resolver import parse_arguments, resolve_launch

__all__ = [
    "DEFAULT_LIMITS",
    "PACKAGE",
    "LaunchError",
    "LaunchLimits",
    "LaunchPlan",
    "LaunchProcess",
    "find_launch_file",
    "format_plan",
    "package_prefix",
    "package_share",
    "parse_arguments",
    "resolve_launch",
    "run_processes",
]
