"""Tasks and robots from installed packages (entry points), as a user's package declares them.

Two throwaway distributions are written and installed into a temporary folder (never into the
test's environment): ``toy-robolearn`` adds a task and a robot; ``broken-robolearn`` adds a task
whose module does not exist, a task named like a built-in one, and a robot whose callable is
missing. The CLI runs with that folder on PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from robolearn import tasks
from robolearn.hardware import registry
from robolearn.tasks.plugins import PluginError

ROOT = Path(__file__).resolve().parents[1]

TOY_PYPROJECT = """
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "toy-robolearn"
version = "0.1.0"

[project.entry-points."robolearn.tasks"]
toy_reach = "toy_robolearn:make_cfg"

[project.entry-points."robolearn.robots"]
toy_arm = "toy_robolearn:robot_spec"

[tool.setuptools]
packages = ["toy_robolearn"]

[tool.setuptools.package-data]
toy_robolearn = ["toy_arm.yaml"]
"""

TOY_MODULE = '''
"""A toy plugin: panda_reach on a robot named toy_arm, with the Panda's safety limits."""
from dataclasses import replace
from pathlib import Path

from robolearn.hardware.registry import RobotSpec
from robolearn.tasks.panda_reach import make_cfg as panda_reach
from robolearn.tasks.robots.panda import panda_robot


def toy_robot():
    return replace(panda_robot(), name="toy_arm")


def make_cfg():
    cfg = panda_reach()
    scene = replace(cfg.scene, robot=toy_robot())
    return replace(cfg, name="toy_reach", description="A toy reach.", scene=scene)


def robot_spec():
    return RobotSpec(
        name="toy_arm",
        embodiment="arm",
        description="A Panda by another name.",
        safety_config=Path(__file__).with_name("toy_arm.yaml"),
        make_robot=toy_robot,
    )
'''

BROKEN_PYPROJECT = """
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "broken-robolearn"
version = "0.1.0"

[project.entry-points."robolearn.tasks"]
broken_task = "broken_robolearn.missing:make_cfg"
panda_reach = "broken_robolearn:make_cfg"

[project.entry-points."robolearn.robots"]
broken_bot = "broken_robolearn:no_such_callable"

[tool.setuptools]
packages = ["broken_robolearn"]
"""


def _install(source: Path, target: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--target", str(target), str(source)],
        check=True,
        capture_output=True,
    )  # fmt: skip


@pytest.fixture(scope="module")
def plugins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding both installed distributions."""
    root = tmp_path_factory.mktemp("plugins")
    toy = root / "toy"
    (toy / "toy_robolearn").mkdir(parents=True)
    (toy / "pyproject.toml").write_text(TOY_PYPROJECT)
    (toy / "toy_robolearn" / "__init__.py").write_text(TOY_MODULE)
    panda_limits = (ROOT / "hardware" / "config" / "panda.yaml").read_text()
    (toy / "toy_robolearn" / "toy_arm.yaml").write_text(panda_limits)
    broken = root / "broken"
    (broken / "broken_robolearn").mkdir(parents=True)
    (broken / "pyproject.toml").write_text(BROKEN_PYPROJECT)
    (broken / "broken_robolearn" / "__init__.py").write_text("def make_cfg():\n    raise AssertionError\n")
    target = root / "site"
    _install(toy, target)
    _install(broken, target)
    return target


@pytest.fixture
def on_path(plugins: Path) -> Iterator[Path]:
    """The installed plugins visible to this process, for the length of one test."""
    sys.path.insert(0, str(plugins))
    tasks.reload_plugins()
    registry.reload_plugins()
    try:
        yield plugins
    finally:
        sys.path.remove(str(plugins))
        tasks.reload_plugins()
        registry.reload_plugins()


def _cli(plugins: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ) | {"PYTHONPATH": str(plugins)}
    return subprocess.run(
        [sys.executable, "-m", "robolearn", *args], env=env, capture_output=True, text=True, timeout=300
    )


def test_robolearn_tasks_lists_plugins_with_their_distribution_past_broken_ones(plugins: Path) -> None:
    done = _cli(plugins, "tasks", "--json")
    assert done.returncode == 0, done.stderr
    listing = {t["task"]: t for t in json.loads(done.stdout.splitlines()[-1])}
    assert listing["toy_reach"]["distribution"] == "toy-robolearn"
    assert listing["toy_reach"]["robot"] == "toy_arm" and listing["toy_reach"]["embodiment"] == "arm"
    assert listing["panda_reach"]["distribution"] == "robolearn"  # the built-in wins the collision
    assert "error" in listing["broken_task"] and listing["broken_task"]["distribution"] == "broken-robolearn"
    errors = [line for line in done.stderr.splitlines() if line.startswith("robolearn: error:")]
    assert len(errors) == 2, done.stderr
    missing = next(e for e in errors if "broken_task" in e)
    assert "distribution broken-robolearn" in missing
    assert "entry point broken_task = broken_robolearn.missing:make_cfg" in missing
    assert "ModuleNotFoundError" in missing
    collision = next(e for e in errors if "panda_reach" in e)
    assert "entry point panda_reach = broken_robolearn:make_cfg" in collision and "built-in" in collision
    assert "Traceback" not in done.stderr


def test_robolearn_robots_lists_the_plugin_robot(plugins: Path) -> None:
    done = _cli(plugins, "robots", "--json")
    assert done.returncode == 0, done.stderr
    listing = {r["robot"]: r for r in json.loads(done.stdout.splitlines()[-1])}
    assert listing["toy_arm"]["distribution"] == "toy-robolearn"
    assert listing["toy_arm"]["embodiment"] == "arm"
    assert listing["panda"]["distribution"] == "robolearn"
    assert set(listing) >= {"panda", "crazyflie", "racecar", "toy_arm", "broken_bot"}
    (error,) = [line for line in done.stderr.splitlines() if "broken_bot" in line]
    assert "distribution broken-robolearn" in error and "no_such_callable" in error


def test_gym_make_and_eval_use_the_plugin_task(plugins: Path) -> None:
    code = (
        "import gymnasium as gym, robolearn\n"
        "env = gym.make('robolearn/ToyReach-v0')\n"
        "obs, _ = env.reset(seed=0)\n"
        "env.step(env.action_space.sample())\n"
        "print(sorted(obs))\n"
    )
    env = dict(os.environ) | {"PYTHONPATH": str(plugins)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "goal_from_ee" in done.stdout

    done = _cli(plugins, "eval", "toy_reach", "--episodes", "3")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["task"] == "toy_reach" and result["success_rate"] == 1.0


def test_a_broken_plugin_task_is_one_line_exit_2(plugins: Path) -> None:
    done = _cli(plugins, "eval", "broken_task", "--episodes", "1")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("robolearn: error: robolearn.tasks plugin (distribution broken-robolearn, ")
    assert "broken_robolearn.missing:make_cfg" in line


def test_plugin_robot_gives_the_task_its_safety_limits(on_path: Path) -> None:
    cfg = tasks.make_task_cfg("toy_reach")
    assert tasks.task_source("toy_reach") == "toy-robolearn"
    assert registry.task_robot(cfg) == "toy_arm"
    safety = registry.load_safety_config("toy_arm")
    assert Path(safety.source) == on_path / "toy_robolearn" / "toy_arm.yaml"
    with pytest.raises(PluginError, match=r"distribution broken-robolearn, entry point broken_bot"):
        registry.get_robot("broken_bot")
    with pytest.raises(registry.UnknownRobotError, match=r"unknown robot 'nope'; robots: panda, "):
        registry.get_robot("nope")


def test_listing_imports_no_plugin(plugins: Path) -> None:
    """Gymnasium registration at import and both listings read metadata only."""
    code = (
        "import sys, robolearn\n"
        "from robolearn.tasks import task_names\n"
        "from robolearn.hardware.registry import robot_names\n"
        "assert 'toy_reach' in task_names() and 'broken_task' in task_names(), task_names()\n"
        "assert 'toy_arm' in robot_names() and 'broken_bot' in robot_names()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('toy_robolearn', 'broken_robolearn')))\n"
    )
    env = dict(os.environ) | {"PYTHONPATH": str(plugins)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_two_plugins_with_one_name_are_both_refused(tmp_path: Path, on_path: Path) -> None:
    """A second distribution also declaring toy_reach: neither is used, and the error names both."""
    other = tmp_path / "other-0.1.dist-info"
    other.mkdir()
    (other / "METADATA").write_text("Metadata-Version: 2.1\nName: other-robolearn\nVersion: 0.1\n")
    (other / "entry_points.txt").write_text("[robolearn.tasks]\ntoy_reach = other:make_cfg\n")
    sys.path.insert(0, str(tmp_path))
    tasks.reload_plugins()
    try:
        assert "toy_reach" not in tasks.task_names()
        (error,) = [e for e in tasks.plugin_errors() if "toy_reach" in e]
        assert "toy-robolearn" in error and "other-robolearn" in error and "neither is used" in error
    finally:
        sys.path.remove(str(tmp_path))
        tasks.reload_plugins()
    assert "toy_reach" in tasks.task_names()


def test_register_task_refuses_a_plugin_name(on_path: Path) -> None:
    with pytest.raises(tasks.TaskError, match=r"'toy_reach' is already registered \(from toy-robolearn\)"):
        tasks.register_task("toy_reach", tasks.make_task_cfg)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("math:pi", r"is a float, not a callable"),
        ("builtins:dict", r"returned a dict, not a TaskCfg"),
        ("json:dumps", r"failed: TypeError: "),
        ("no_such_module_here:make", r"failed to load: ModuleNotFoundError: "),
    ],
)
def test_a_plugin_that_is_not_a_task_factory_is_refused_in_one_line(value: str, match: str) -> None:
    from robolearn.tasks.core import TaskCfg
    from robolearn.tasks.plugins import TASK_GROUP, Plugin

    plugin = Plugin("bad", value, "bad-dist", TASK_GROUP)
    with pytest.raises(PluginError, match=match) as info:
        plugin.call(TaskCfg)
    message = str(info.value)
    assert "\n" not in message and f"distribution bad-dist, entry point bad = {value}" in message


def test_record_and_replay_a_dataset_of_the_plugin_task(
    on_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``robolearn record`` writes the plugin task's dataset, replays it through the task (which
    checks its features against the task's) and ``robolearn dataset validate`` accepts both."""
    from robolearn.cli import main

    def run(*args: str) -> dict[str, object]:
        main(list(args))
        result: dict[str, object] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        return result

    demos, replayed = tmp_path / "demos", tmp_path / "replayed"
    recorded = run("record", "toy_reach", "--device", "none", "--policy", "scripted", "--episodes", "1",
                   "--out", str(demos))  # fmt: skip
    assert recorded["task"] == "toy_reach" and recorded["episodes_saved"] == 1 and recorded["successes"] == 1
    again = run("record", "toy_reach", "--device", "replay", "--replay-from", str(demos), "--episodes", "1",
                "--out", str(replayed))  # fmt: skip
    assert again["episodes_saved"] == 1 and again["frames"] == recorded["frames"]
    for root in (demos, replayed):
        checked = run("dataset", "validate", str(root))
        assert checked["valid"] is True and checked["episodes"] == 1
        info = run("dataset", "info", str(root))
        assert info["robot_type"] == "toy_arm" and info["tasks"] == ["A toy reach."]
