"""colcon's ament_python build runs this file; the package is described in pyproject.toml and the
ROS 2 additions (data files, script folder) in setup.cfg.

The call stays an argument-less ``setup()``: colcon then reads ``setup.cfg`` instead of running
this file to collect ``setup()``'s arguments, which fails for a project whose pyproject.toml sets
``requires-python`` (colcon-python-setup-py cannot parse the ``SpecifierSet`` setuptools makes of it).
"""

from setuptools import setup

setup()
