"""KUKA LBR iiwa for robolearn: the robot (:mod:`.robot`) and a reach task (:mod:`.reach`)."""
