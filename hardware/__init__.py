"""The robot side: robot interfaces in physical units, the safety layer and ROS 2 nodes."""
