"""System identification (issue 19): fit a robot's simulated dynamics to motion recorded on it.

:mod:`~robolearn.sysid.model` prepares the MuJoCo model (a task's robot or an MJCF file),
:mod:`~robolearn.sysid.recording` reads recordings (LeRobot datasets, rosbag2 folders),
:mod:`~robolearn.sysid.excitation` makes safe excitation signals, :mod:`~robolearn.sysid.fit` fits
with ``mujoco.sysid`` and :mod:`~robolearn.sysid.report` writes what a person reviews. The result is
a parameter file (:mod:`robolearn.tasks.sim_params`) that tasks, simulated robots and domain
randomization read.
"""
