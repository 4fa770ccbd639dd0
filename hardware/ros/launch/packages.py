"""Package lookup as ``ros2`` does it: install prefixes and share folders from the ament index,
executables under ``lib/PACKAGE``, and robolearn's own launch files."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from robolearn.hardware.ros.launch.plan import LaunchError

PACKAGE = "robolearn"
# A source checkout is what colcon installs under share/robolearn (package.xml, launch/, ...): this
# file is hardware/ros/launch/packages.py in it. In an installed wheel the folder has no package.xml.
_SOURCE_ROOT = Path(__file__).resolve().parents[3]


def ament_prefixes(env: Mapping[str, str]) -> list[Path]:
    return [Path(p) for p in env.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]


def package_prefix(package: str, env: Mapping[str, str] = os.environ) -> Path:
    """Install prefix of a ROS package, found through the ament resource index as ``ros2`` does."""
    for prefix in ament_prefixes(env):
        if (prefix / "share" / "ament_index" / "resource_index" / "packages" / package).is_file():
            return prefix
    if package == PACKAGE:
        return Path(sys.prefix)
    raise LaunchError(
        f"package '{package}' not found in the ament index (AMENT_PREFIX_PATH="
        f"{env.get('AMENT_PREFIX_PATH', '')!r}); source its workspace's setup script"
    )


def package_share(package: str, env: Mapping[str, str] = os.environ) -> Path:
    """``$(find-pkg-share PACKAGE)``. For robolearn, a source checkout (the running code's own
    tree) comes first, then the ament index (a colcon workspace), then ``sys.prefix/share/robolearn``
    (where a wheel's data files go)."""
    candidates: list[Path] = []
    if package == PACKAGE:
        candidates.append(_SOURCE_ROOT)
    candidates += [p / "share" / package for p in ament_prefixes(env)]
    if package == PACKAGE:
        candidates.append(Path(sys.prefix) / "share" / PACKAGE)
    for share in candidates:
        if (share / "package.xml").is_file():
            return share
    raise LaunchError(
        f"share folder of package '{package}' not found (looked in: "
        f"{', '.join(map(str, candidates)) or 'none'}); for another ROS package, "
        "source its workspace's setup script"
    )


def node_executable(package: str, executable: str, env: Mapping[str, str]) -> list[str]:
    """Command that starts ``executable`` of ``package``: ``lib/PACKAGE/EXE`` under the ament
    prefixes, as ``ros2 run`` finds it; for robolearn also the console script of the running
    interpreter and ``python -m robolearn.hardware.ros.EXE``."""
    looked: list[str] = []
    if package == PACKAGE:
        script = Path(sys.executable).parent / executable
        if script.is_file() and os.access(script, os.X_OK):
            return [str(script)]
        looked.append(str(script))
    for prefix in ament_prefixes(env):
        exe = prefix / "lib" / package / executable
        if exe.is_file() and os.access(exe, os.X_OK):
            return [str(exe)]
        looked.append(str(exe))
    if package == PACKAGE:
        module = f"{PACKAGE}.hardware.ros.{executable}"
        spec = importlib.util.find_spec(f"{PACKAGE}.hardware")
        folders = list(spec.submodule_search_locations or []) if spec else []
        # Look for the file rather than import it: the ros package needs rclpy, --print must not.
        if any((Path(f) / "ros" / f"{executable}.py").is_file() for f in folders):
            return [sys.executable, "-m", module]
        looked.append(f"module {module}")
    elif not ament_prefixes(env):
        looked.append("AMENT_PREFIX_PATH is empty: source the workspace's setup script")
    raise LaunchError(
        f"executable '{executable}' of package '{package}' not found (looked for: {'; '.join(looked)})"
    )


def find_launch_file(name: str) -> Path:
    """A path as given, else a file of robolearn's ``launch/`` folder by name."""
    path = Path(name)
    if path.exists() or path.parent != Path("."):
        return path
    share = package_share(PACKAGE) / "launch"
    if (share / name).is_file():
        return share / name
    available = sorted(p.name for p in share.glob("*.launch.*")) if share.is_dir() else []
    raise LaunchError(
        f"launch file not found: {name} (robolearn's launch files: {', '.join(available) or 'none'})"
    )
