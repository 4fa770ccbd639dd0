"""``robolearn robots``: every robot (built-in or a plugin's) with its distribution, embodiment,
description file and safety configuration; or, with ``--describe``, what robolearn reads from an
arm's URDF or MJCF file, and a first safety configuration derived from it for the user to review."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robolearn.errors import ConfigError


@dataclass(frozen=True)
class RobotsCmd:
    """List the robots, built-in and from installed plugins (entry-point group ``robolearn.robots``),
    or describe an arm's robot file (``--describe``) and derive its safety limits (``--safety-out``)."""

    json: bool = False
    """Print one JSON value instead of text."""
    describe: Path | None = None
    """An arm's URDF (.urdf) or MJCF (.xml) file: print its arm joints with limits, tool link and gripper."""
    ee_link: str | None = None
    """With ``--describe``: the tool link, where the default guess (a tcp/grasp/tool link, or the
    end of the chain) is wrong."""
    gripper_joints: tuple[str, ...] | None = None
    """With ``--describe``: the gripper's joints, where the default guess is wrong."""
    safety_out: Path | None = None
    """With ``--describe``: write the derived safety configuration (YAML) here, to review and edit."""
    workspace_low: tuple[float, float, float] | None = None
    """With ``--safety-out``: the workspace's lower corner (m); default: where the tool reaches."""
    workspace_high: tuple[float, float, float] | None = None
    """With ``--safety-out``: the workspace's upper corner (m)."""
    control_hz: float = 50.0
    """With ``--safety-out``: the tasks' control rate (Hz), for the per-step limits and the watchdog."""

    def check(self) -> None:
        """Refuse options that need ``--describe`` without it, and a half-given workspace."""
        if self.describe is None:
            given = [o for o, v in (("--safety-out", self.safety_out), ("--ee-link", self.ee_link)) if v]
            if given or self.gripper_joints is not None:
                raise ConfigError(f"{', '.join(given) or '--gripper-joints'} needs --describe ROBOT_FILE")
        elif not self.describe.is_file():
            raise ConfigError(f"--describe {self.describe}: no such file; give a .urdf or MJCF .xml file")
        if (self.workspace_low is None) != (self.workspace_high is None):
            raise ConfigError("give both --workspace-low and --workspace-high, or neither")
        if not 0 < self.control_hz <= 10_000:
            raise ConfigError(f"--control-hz must be in (0, 10000], got {self.control_hz}")


def _listing() -> list[dict[str, Any]]:
    from robolearn.errors import RobolearnError
    from robolearn.hardware.registry import get_robot, plugin_errors, robot_names, robot_source

    for error in plugin_errors():
        print(f"robolearn: error: {error}", file=sys.stderr)
    listing: list[dict[str, Any]] = []
    for name in robot_names():
        try:
            spec = get_robot(name)
        except RobolearnError as exc:  # a broken plugin: one line, the other robots still list
            print(f"robolearn: error: {exc}", file=sys.stderr)
            listing.append({"robot": name, "distribution": robot_source(name), "error": str(exc)})
            continue
        listing.append(
            {
                "robot": name,
                "distribution": robot_source(name),
                "embodiment": spec.embodiment,
                "description": spec.description,
                "model": None if spec.model is None else str(spec.model),
                "safety_config": str(spec.safety_config),
            }
        )
    return listing


def _describe(cmd: RobotsCmd) -> dict[str, Any]:
    from dataclasses import asdict

    from robolearn.hardware.safety_config import SafetyCfg, arm_safety_yaml
    from robolearn.sim.robot_description import read_arm

    assert cmd.describe is not None  # checked by the caller
    desc = read_arm(cmd.describe, cmd.ee_link, cmd.gripper_joints)
    out: dict[str, Any] = {
        "file": str(desc.path),
        "ee_link": desc.ee_link,
        "joints": [asdict(j) for j in desc.joints],
        "gripper": [asdict(j) for j in desc.gripper],
    }
    if cmd.safety_out is not None:
        workspace = None
        if cmd.workspace_low is not None and cmd.workspace_high is not None:
            workspace = (cmd.workspace_low, cmd.workspace_high)
        text = arm_safety_yaml(desc, 1.0 / cmd.control_hz, workspace=workspace)
        cmd.safety_out.write_text(text)
        SafetyCfg.load(cmd.safety_out)  # what was written loads, or the user hears it now
        out["safety_config"] = str(cmd.safety_out)
    return out


def run_robots(cmd: RobotsCmd) -> None:
    """Print the listing or the description, as text or as one JSON value with ``--json``."""
    if cmd.describe is not None:
        desc = _describe(cmd)
        if cmd.json:
            print(json.dumps(desc))
            return
        print(f"{desc['file']}: {len(desc['joints'])} arm joints, tool link {desc['ee_link']}")
        for j in desc["joints"] + desc["gripper"]:
            role = "gripper" if j in desc["gripper"] else "arm"
            extra = "".join(
                f", {k} {j[f'max_{k}']:g}" for k in ("velocity", "effort") if j[f"max_{k}"] is not None
            )
            print(f"    {role:7s} {j['name']}  {j['kind']}  [{j['low']:.4g}, {j['high']:.4g}]{extra}")
        if "safety_config" in desc:
            print(f"safety configuration written to {desc['safety_config']}: review it before use")
        return
    listing = _listing()
    if cmd.json:
        print(json.dumps(listing))
        return
    for r in listing:
        if "error" in r:
            print(f"{r['robot']}  (from {r['distribution']})  cannot be loaded (see the error above)")
            continue
        print(f"{r['robot']}  [{r['embodiment']}]  from {r['distribution']}")
        print(f"    {r['description']}")
        if r["model"] is not None:
            print(f"    model:  {r['model']}")
        print(f"    safety: {r['safety_config']}")
