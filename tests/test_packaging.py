"""The distribution: one import namespace from four folders, nothing generic in site-packages."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_puts_everything_under_robolearn(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.startswith("robolearn-")}
    assert top == {"robolearn"}
    for module in (
        "robolearn/sim/mujoco_backend.py",
        "robolearn/tasks/panda_pick_cube.py",
        "robolearn/hardware/__init__.py",
        "robolearn/hardware/config/panda.yaml",
        "robolearn/hardware/ros/policy_node.py",
        "robolearn/teleop/device.py",
    ):
        assert module in names


def test_regular_install_imports_every_part(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    code = (
        "import robolearn.sim.mujoco_backend, robolearn.tasks, robolearn.hardware, robolearn.cli;"
        "from robolearn.tasks import make_task_cfg; make_task_cfg('panda_pick_cube');"
        "print(robolearn.sim.mujoco_backend.__file__)"
    )
    # -S skips .pth files, so the editable install's import hook does not answer first.
    path = [str(target), sysconfig.get_paths()["purelib"]]
    out = subprocess.run(
        [sys.executable, "-S", "-c", f"import sys; sys.path[:0] = {path!r}; {code}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith(str(target))
