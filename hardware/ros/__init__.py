"""ROS 2 deployment: ``policy_node`` (an exported policy behind the safety layer), ``sim_robot_node``
(a simulated robot that presents itself as a real one), ``demo_recorder`` (teleoperated
demonstrations to a dataset), standard messages in between, bags in MCAP. See ``docs/ros.md``.

rclpy is imported on first use: nothing here needs it until a node starts or a message is made.
"""

from typing import Literal, get_args

Trigger = Literal["timer", "observation"]
"""When a controller on a robot's topics acts: on its own clock at the control rate, or as soon as a
complete new sample arrives (every required topic stamped alike). ``policy_node``'s ``trigger`` and
the training environment's (``robolearn train --robot ros --robot-trigger``)."""
TRIGGERS: tuple[Trigger, ...] = get_args(Trigger)
