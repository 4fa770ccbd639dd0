"""Shared fixtures: tasks and backends to parametrize over."""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")
