"""Simulation engines behind one backend interface (:mod:`robolearn.sim.backend`)."""

import os

# MuJoCo picks its OpenGL platform when it is first imported; on a machine without a display only
# EGL (CPU rendering through Mesa) can render offscreen.
if "MUJOCO_GL" not in os.environ and not os.environ.get("DISPLAY"):
    os.environ["MUJOCO_GL"] = "egl"
