"""The robot side: robot interfaces in physical units and simulated robots (:mod:`.robots`), the
safety layer with per-robot limits in ``config/*.yaml`` (:mod:`.safety`), and ROS 2 nodes."""
