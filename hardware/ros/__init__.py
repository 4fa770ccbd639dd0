"""ROS 2 deployment: ``policy_node`` (an exported policy behind the safety layer), ``sim_robot_node``
(a simulated robot that presents itself as a real one), ``demo_recorder`` (teleoperated
demonstrations to a dataset), standard messages in between, bags in MCAP. See ``docs/ros.md``.

rclpy is imported on first use: nothing here needs it until a node starts or a message is made.
"""
