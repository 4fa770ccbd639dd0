"""Simulation engines behind one backend interface (:mod:`robolearn.sim.backend`)."""
