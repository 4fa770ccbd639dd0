"""The robolearn command as a user runs it: listings, evaluation, videos, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import imageio.v2 as imageio
import pytest

ROBOLEARN = [sys.executable, "-m", "robolearn"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ROBOLEARN, *args], capture_output=True, text=True, timeout=300, check=False)


def test_tasks_lists_spaces_with_units_rates_and_backends() -> None:
    out = run("tasks", "--json")
    assert out.returncode == 0, out.stderr
    listing = {t["task"]: t for t in json.loads(out.stdout)}
    assert {
        "panda_reach",
        "panda_pick_cube",
        "quadrotor_hover",
        "quadrotor_waypoints",
        "car_checkpoints",
    } <= set(listing)
    pick = listing["panda_pick_cube"]
    assert pick["embodiment"] == "arm" and pick["control_hz"] == 50
    assert pick["observation"]["cube_pos"] == {"dim": 3, "units": "m"}
    assert [a["name"] for a in pick["action"]] == ["ee_dx", "ee_dy", "ee_dz", "gripper_opening"]
    assert set(pick["backends"]) == {"mujoco", "mujoco_batch", "pybullet"}
    table = run("tasks")
    assert "panda_pick_cube  [arm]" in table.stdout and "cube_pos[3] m" in table.stdout


def test_eval_scripted_reports_json_and_writes_a_video(tmp_path: Path) -> None:
    video = tmp_path / "reach.mp4"
    out = run("eval", "panda_reach", "--episodes", "3", "--video", str(video))
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["success_rate"] == 1.0 and summary["episodes"] == 3
    assert summary["steps_per_second"] > 0
    reader = imageio.get_reader(video)
    frame = reader.get_data(0)
    assert frame.shape[:2] == (240, 320) and frame.std() > 1.0
    assert reader.count_frames() > 10


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("eval", "panda_pik_cube"), "unknown task 'panda_pik_cube'; tasks: panda_reach"),
        (("eval", "panda_reach", "--backend", "gazebo"), "invalid choice 'gazebo'"),
        (("eval", "panda_reach", "--episods", "3"), "--episods"),
        (("eval", "ant", "--backend", "pybullet"), "task ant does not run on backend 'pybullet'"),
        (("eval", "ant"), "task ant has no scripted expert"),
        (("eval", "panda_reach", "--episodes", "0"), "--episodes must be at least 1"),
        (("frobnicate",), "frobnicate"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(args: tuple[str, ...], message: str) -> None:
    out = run(*args)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("robolearn: error:"), out.stderr
    assert message in lines[0]
    assert "Traceback" not in out.stderr
