"""docs/own-robot.md, run as written: every ``bash`` block, in order, in one shell.

The example plugin (examples/iiwa_robolearn) is installed into a folder on PYTHONPATH, never into
the test's environment. The deployment's bag is then checked against the iiwa's safety limits:
every measured joint inside its range, the tool inside the workspace.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from robolearn.hardware.ros._rclpy import ROS_ENV_DEFAULTS
from robolearn.hardware.ros.harness import private_domain
from robolearn.hardware.safety_config import SafetyCfg

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "docs" / "own-robot.md"

# rosbags' message parser imports lark, which imports modules Python 3.11 deprecates.
pytestmark = [pytest.mark.ros, pytest.mark.filterwarnings("ignore::DeprecationWarning:lark")]


def tutorial_commands() -> str:
    """The tutorial's ``bash`` blocks, joined."""
    blocks = re.findall(r"```bash\n(.*?)```", TUTORIAL.read_text(), flags=re.DOTALL)
    assert len(blocks) >= 5, "the tutorial lost its command blocks"
    return "\n".join(blocks)


def test_tutorial_commands_run_as_written(tmp_path: Path) -> None:
    pytest.importorskip("rclpy")
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    skip = shutil.ignore_patterns("build", "*.egg-info")
    shutil.copytree(ROOT / "examples", tmp_path / "examples", ignore=skip)
    env = dict(os.environ) | ROS_ENV_DEFAULTS | {"ROS_DOMAIN_ID": str(private_domain())}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # this venv's robolearn, pip
    env.pop("PYTHONPATH", None)
    script = "set -euo pipefail\n" + tutorial_commands()
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout

    # The plugin is listed with its distribution, beside the built-ins.
    assert re.search(r"^iiwa_reach  \[arm\]  from iiwa-robolearn", out, re.MULTILINE), out
    assert re.search(r"^iiwa  \[arm\]  from iiwa-robolearn", out, re.MULTILINE), out
    assert re.search(r"^panda_reach  \[arm\]  from robolearn", out, re.MULTILINE), out
    # The derived safety file loads and names the URDF's joints.
    derived = SafetyCfg.load(tmp_path / "iiwa.yaml")
    assert derived.joints is not None and list(derived.joints) == [f"lbr_iiwa_joint_{i}" for i in range(1, 8)]
    assert importlib.util.find_spec("iiwa_robolearn") is None  # nothing went into this environment

    # The deployment: five episodes run over DDS by the exported policy, and the robot's side succeeded.
    robot = json.loads((tmp_path / "robot.json").read_text())
    assert robot["episodes"] == 5 and robot["task"] == "iiwa_reach"
    assert robot["success_rate"] >= 0.8, robot
    assert robot["counts"]["steps"] >= 50 and robot["counts"]["rejected_commands"] == 0, robot

    # Every measured state inside the limits the safety layer was given (the plugin's own file).
    limits = SafetyCfg.load(tmp_path / "examples/iiwa_robolearn/iiwa_robolearn/iiwa.yaml")
    assert limits.arm is not None and limits.joints is not None
    store = get_typestore(Stores.ROS2_KILTED)
    joints_seen, tools_seen = 0, 0
    with Reader(tmp_path / "deploy_bag") as reader:
        for conn, _, raw in reader.messages():
            m = store.deserialize_cdr(raw, conn.msgtype)
            if conn.topic.endswith("/joint_states"):
                for name, q in zip(m.name, m.position, strict=True):
                    rng = limits.joints[name]  # the URDF's names: an unknown one fails here
                    assert rng.low <= q <= rng.high, (name, q)
                joints_seen += 1
            elif conn.topic.endswith("/frames/ee"):
                p = m.pose.pose.position
                # The layer bounds the impedance target; the tool trails it by at most millimetres.
                low, high = np.array(limits.arm.workspace_low), np.array(limits.arm.workspace_high)
                assert np.all(np.array([p.x, p.y, p.z]) >= low - 0.01), (p, low)
                assert np.all(np.array([p.x, p.y, p.z]) <= high + 0.01), (p, high)
                tools_seen += 1
    assert joints_seen >= robot["counts"]["steps"] and tools_seen >= robot["counts"]["steps"]
