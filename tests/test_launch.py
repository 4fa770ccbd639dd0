"""Launch files and ``robolearn launch``: resolution as ``ros2 launch`` does it, and process control."""

from __future__ import annotations

import ast
import io
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import zipfile
from pathlib import Path

import pytest
import yaml

from robolearn.cli.launch import LaunchCmd, run_launch
from robolearn.errors import RobolearnError
from robolearn.hardware.ros.launch import (
    DEFAULT_LIMITS,
    LaunchError,
    LaunchLimits,
    LaunchPlan,
    LaunchProcess,
    find_launch_file,
    resolve_launch,
    run_processes,
)

# Process trees timed against SIGTERM deadlines: run alone on the machine (scripts/check).
pytestmark = pytest.mark.serial

ROOT = Path(__file__).resolve().parents[1]
LAUNCH_FILES = sorted((ROOT / "launch").glob("*.launch.xml"))
ROS_NODES = ROOT / "hardware" / "ros"
NEEDS = {"deploy_arm": "policy:=scripted:panda_reach", "deploy_drone": "policy:=scripted:quadrotor_hover",
         "deploy_car": "policy:=scripted:car_checkpoints"}  # fmt: skip


def node_params(executable: str) -> dict[str, object]:
    """The ROS parameters a node declares, with their defaults: the fields of the frozen
    ``*Params`` dataclass in its module, read from the source (no rclpy needed)."""
    tree = ast.parse((ROS_NODES / f"{executable}.py").read_text())
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name.endswith("Params")]
    assert len(classes) == 1, f"{executable}: expected one *Params dataclass"
    return {
        s.target.id: ast.literal_eval(s.value)
        for s in classes[0].body
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value is not None
    }


def plan(name: str, *args: str) -> LaunchPlan:
    words = [a for a in (NEEDS.get(name.removesuffix(".launch.xml")), *args) if a]
    return resolve_launch(ROOT / "launch" / name, dict(w.split(":=", 1) for w in words))


def ros_args(process: LaunchProcess) -> tuple[dict[str, str], dict[str, str]]:
    """The ``-p`` and ``-r`` rules of a node's command line."""
    cmd = list(process.cmd)
    assert "--ros-args" in cmd
    params, remaps = {}, {}
    tail = cmd[cmd.index("--ros-args") + 1 :]
    for flag, rule in zip(tail[::2], tail[1::2], strict=True):
        name, _, value = rule.partition(":=")
        (params if flag == "-p" else remaps)[name] = value
    return params, remaps


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


# -- the shipped launch files ---------------------------------------------------------------------


def test_launch_folder_has_the_deployment_files() -> None:
    names = {p.name for p in LAUNCH_FILES}
    assert {
        f"{n}.launch.xml" for n in ("deploy_arm", "deploy_drone", "deploy_car", "sim_robot", "sim_to_sim")
    } <= names


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_every_launch_file_resolves_to_existing_executables_and_declared_parameters(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = (NEEDS[path.name.removesuffix(".launch.xml")],) if path.name.startswith("deploy") else ()
    assert run_launch(LaunchCmd(str(path), args, print=True)) == 0
    printed = capsys.readouterr().out
    result = plan(path.name)
    assert result.processes
    for process in result.processes:
        assert f"[{process.label}] " in printed
        exe = Path(process.cmd[0])
        assert exe.is_file() and os.access(exe, os.X_OK), process.cmd
        executable = exe.name
        if len(process.cmd) > 2 and process.cmd[1] == "-m":
            module = process.cmd[2]
            executable = module.rsplit(".", 1)[1]
            assert module == f"robolearn.hardware.ros.{executable}"
        params, _ = ros_args(process)
        declared = node_params(executable)
        assert set(params) <= set(declared), f"{executable} does not declare {set(params) - set(declared)}"
        assert process.shutdown_on_exit


def test_launch_defaults_are_the_nodes_defaults() -> None:
    """A launch argument's default must not drift from the node's own default."""
    sim = plan("sim_robot.launch.xml")
    params, _ = ros_args(sim.processes[0])
    for name, default in node_params("sim_robot_node").items():
        assert yaml.safe_load(params[name] or "''") == default, name
    policy_defaults = node_params("policy_node")
    tree = ast.parse((ROS_NODES.parent / "registry.py").read_text())
    robots = next(
        ast.literal_eval(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "DEFAULT_ROBOTS"
    )
    from robolearn.hardware.ros.messages import COMMAND_TYPES

    for embodiment in ("arm", "drone", "car"):
        params, _ = ros_args(plan(f"deploy_{embodiment}.launch.xml").processes[0])
        assert params["robot"] == robots[embodiment]
        assert params["command_type"] == COMMAND_TYPES[embodiment][0].name
        choices = {c.name for c in COMMAND_TYPES[embodiment]}
        for other in choices:
            plan(f"deploy_{embodiment}.launch.xml", f"command_type:={other}")
        for name in ("rate_hz", "watchdog_timeout", "trigger"):
            assert yaml.safe_load(params[name]) == policy_defaults[name], (embodiment, name)


def test_arguments_override_parameters_namespace_and_remaps() -> None:
    result = plan(
        "deploy_drone.launch.xml",
        "command_type:=twist_rates",
        "namespace:=cf1",
        "odom_topic:=/cf1/odom",
        "command_topic:=/cf1/cmd_rates",
        "rate_hz:=250",
    )
    (policy,) = result.processes
    params, remaps = ros_args(policy)
    assert params["command_type"] == "twist_rates"
    assert params["rate_hz"] == "250"
    assert remaps["__node"] == "policy" and remaps["__ns"] == "/cf1"
    assert remaps["frames/crazyflie"] == "/cf1/odom" and remaps["command"] == "/cf1/cmd_rates"
    assert policy.node == "/cf1/policy"
    with pytest.raises(
        LaunchError, match=r"command_type:=forward_command is not one of cmd_vel_legacy, twist_rates"
    ):
        plan("deploy_drone.launch.xml", "command_type:=forward_command")


def test_sim_to_sim_runs_simulator_and_policy_in_one_namespace() -> None:
    result = plan(
        "sim_to_sim.launch.xml", "task:=car_checkpoints", "embodiment:=car", "namespace:=race", "seed:=7",
        "episodes:=2", "backend:=pybullet", "summary_path:=/tmp/s.json",
    )  # fmt: skip
    sim, policy = result.processes
    sim_params, sim_remaps = ros_args(sim)
    policy_params, policy_remaps = ros_args(policy)
    assert sim.label == "sim_robot" and policy.label == "policy"
    assert sim_remaps["__ns"] == policy_remaps["__ns"] == "/race"
    # seed and summary_path are sim_robot.launch.xml's arguments: a command-line argument reaches
    # an included file as in ros2 launch.
    assert sim_params["seed"] == "7" and sim_params["summary_path"] == "/tmp/s.json"
    assert sim_params["task"] == "car_checkpoints" and sim_params["episodes"] == "2"
    assert sim_params["backend"] == "pybullet"
    assert policy_params["policy"] == "scripted:car_checkpoints" and policy_params["robot"] == "racecar"
    assert sim.shutdown_on_exit and policy.shutdown_on_exit


def test_missing_and_unknown_arguments_name_the_declared_ones() -> None:
    with pytest.raises(
        LaunchError, match=r"missing argument policy:=.*declared: policy, robot, command_type"
    ):
        resolve_launch(ROOT / "launch" / "deploy_arm.launch.xml")
    with pytest.raises(LaunchError, match=r"unknown argument\(s\) tsk; declared: task, backend, seed"):
        plan("sim_robot.launch.xml", "tsk:=ant")
    with pytest.raises(LaunchError, match=r"name:=value, got 'task=ant'"):
        run_launch(LaunchCmd(str(ROOT / "launch" / "sim_robot.launch.xml"), ("task=ant",), print=True))


def test_launch_file_by_name_and_ros2_launch_form(capsys: pytest.CaptureFixture[str]) -> None:
    assert find_launch_file("sim_robot.launch.xml") == ROOT / "launch" / "sim_robot.launch.xml"
    assert run_launch(LaunchCmd("robolearn", ("sim_robot.launch.xml", "task:=ant"), print=True)) == 0
    assert "-p task:=ant" in capsys.readouterr().out
    with pytest.raises(
        LaunchError, match=r"launch file not found: nope\.launch\.xml .*deploy_arm\.launch\.xml"
    ):
        find_launch_file("nope.launch.xml")


# -- the launch language --------------------------------------------------------------------------

SEMANTICS = """\
    <launch>
      <arg name="mode" default="fast" description="a choice">
        <choice value="fast"/>
        <choice value="slow"/>
      </arg>
      <arg name="use_extra" default="false"/>
      <arg name="ns" default="outer"/>
      <let name="rate" value="$(env ROBOLEARN_TEST_RATE 50)"/>
      <set_env name="ROBOLEARN_TEST_SET" value="from-$(var mode)"/>
      <group>
        <let name="rate" value="999"/>
        <push_ros_namespace namespace="$(var ns)"/>
        <push_ros_namespace namespace="inner"/>
        <node pkg="robolearn" exec="policy_node" name="a" namespace="leaf">
          <param name="rate_hz" value="$(var rate)"/>
          <param name="policy" value=""/>
          <param name="flag" value="$(not $(var use_extra))"/>
          <param name="gains" value="[1.5, 2.0]"/>
          <param name="limits">
            <param name="speed" value="2.5"/>
          </param>
          <env name="NODE_ONLY" value="yes"/>
          <remap from="command" to="/robot/cmd"/>
        </node>
        <node pkg="robolearn" exec="policy_node" name="b" namespace="/absolute"/>
      </group>
      <group scoped="false">
        <let name="leaked" value="$(var rate)"/>
      </group>
      <node pkg="robolearn" exec="policy_node" name="c" if="$(var use_extra)"/>
      <node pkg="robolearn" exec="policy_node" name="d" unless="$(equals $(var mode) slow)">
        <param name="leaked" value="$(var leaked)"/>
        <param name="here" value="$(dirname)"/>
      </node>
    </launch>
"""


def test_substitutions_conditions_scopes_and_namespaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ROBOLEARN_TEST_RATE", raising=False)
    path = write(tmp_path, "semantics.launch.xml", SEMANTICS)
    a, b, d = resolve_launch(path).processes
    params, remaps = ros_args(a)
    assert params == {
        "rate_hz": "999",
        "policy": "''",
        "flag": "true",
        "gains": "[1.5, 2.0]",
        "limits.speed": "2.5",
    }
    assert remaps == {"__node": "a", "__ns": "/outer/inner/leaf", "command": "/robot/cmd"}
    assert a.env["NODE_ONLY"] == "yes" and a.env["ROBOLEARN_TEST_SET"] == "from-fast"
    assert "NODE_ONLY" not in b.env
    assert ros_args(b)[1]["__ns"] == "/absolute"
    # The scoped group's <let> did not leak; the unscoped group's did.
    assert ros_args(d)[0] == {"leaked": "50", "here": str(tmp_path)}
    assert "__ns" not in ros_args(d)[1]

    monkeypatch.setenv("ROBOLEARN_TEST_RATE", "20")
    result = resolve_launch(path, {"use_extra": "True", "mode": "slow", "ns": "/top"})
    assert [p.label for p in result.processes] == ["a", "b", "c"]
    assert ros_args(result.processes[0])[0]["rate_hz"] == "999"
    assert ros_args(result.processes[0])[1]["__ns"] == "/top/inner/leaf"
    assert result.arguments == {"mode": "slow", "use_extra": "True", "ns": "/top"}
    with pytest.raises(LaunchError, match=r"condition must be true, false, 1 or 0"):
        resolve_launch(path, {"use_extra": "maybe"})


def test_include_passes_arguments_and_refuses_cycles(tmp_path: Path) -> None:
    write(
        tmp_path,
        "child.launch.xml",
        """\
        <launch>
          <arg name="who"/>
          <arg name="seed" default="0"/>
          <node pkg="robolearn" exec="sim_robot_node" name="$(var who)">
            <param name="seed" value="$(var seed)"/>
          </node>
        </launch>
        """,
    )
    parent = write(
        tmp_path,
        "parent.launch.xml",
        """\
        <launch>
          <arg name="seed" default="3"/>
          <group>
            <push_ros_namespace namespace="left"/>
            <include file="$(dirname)/child.launch.xml"><arg name="who" value="l"/></include>
          </group>
          <include file="$(dirname)/child.launch.xml"><arg name="who" value="r"/></include>
        </launch>
        """,
    )
    left, right = resolve_launch(parent).processes
    assert ros_args(left)[1] == {"__node": "l", "__ns": "/left"}
    assert ros_args(left)[0]["seed"] == ros_args(right)[0]["seed"] == "3"
    assert ros_args(right)[1] == {"__node": "r"}
    with pytest.raises(LaunchError, match=r"missing argument who:="):
        resolve_launch(tmp_path / "child.launch.xml")
    write(tmp_path, "loop.launch.xml", '<launch><include file="$(filename)"/></launch>')
    with pytest.raises(LaunchError, match="includes itself"):
        resolve_launch(tmp_path / "loop.launch.xml")


def test_parameter_file_executable_command_line_and_prefix(tmp_path: Path) -> None:
    write(tmp_path, "limits.yaml", "/**:\n  ros__parameters:\n    rate_hz: 10.0\n")
    path = write(
        tmp_path,
        "misc.launch.xml",
        """\
        <launch>
          <arg name="word" default="two words"/>
          <node pkg="robolearn" exec="policy_node" launch-prefix="nice -n 5" args="--verbose">
            <param from="$(dirname)/limits.yaml"/>
          </node>
          <executable cmd="echo $(var word) 'quoted arg' x$(var word)y" cwd="$(dirname)"/>
        </launch>
        """,
    )
    node, echo = resolve_launch(path).processes
    assert node.cmd[:3] == ("nice", "-n", "5")
    assert node.cmd[-4:] == ("--verbose", "--ros-args", "--params-file", str(tmp_path / "limits.yaml"))
    assert node.label == "policy_node" and node.node is None
    # A substitution's value stays one word; literal text splits as a shell would.
    assert echo.cmd == ("echo", "two words", "quoted arg", "xtwo wordsy")
    assert echo.cwd == str(tmp_path) and echo.label == "echo"


def test_yaml_launch_file_resolves_like_its_xml_twin(tmp_path: Path) -> None:
    xml = write(
        tmp_path,
        "twin.launch.xml",
        """\
        <launch>
          <arg name="task" default="quadrotor_hover"/>
          <group>
            <push_ros_namespace namespace="sim"/>
            <node pkg="robolearn" exec="sim_robot_node" name="sim_robot" on_exit="shutdown">
              <param name="task" value="$(var task)"/>
              <param name="realtime" value="false"/>
              <remap from="command" to="cmd"/>
            </node>
          </group>
        </launch>
        """,
    )
    yml = write(
        tmp_path,
        "twin.launch.yaml",
        """\
        launch:
          - arg: {name: task, default: quadrotor_hover}
          - group:
              children:
                - push_ros_namespace: {namespace: sim}
                - node:
                    pkg: robolearn
                    exec: sim_robot_node
                    name: sim_robot
                    on_exit: shutdown
                    param: [{name: task, value: $(var task)}, {name: realtime, value: false}]
                    remap: [{from: command, to: cmd}]
        """,
    )
    for args in ({}, {"task": "car_checkpoints"}):
        assert resolve_launch(xml, args).processes == resolve_launch(yml, args).processes


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '<node pkg="robolearn" exec="policy_node" required="true"/>',
            r"attribute\(s\) required not supported",
        ),
        ('<node pkg="robolearn" exec="policy_node" on_exit="restart"/>', "on_exit must be 'shutdown'"),
        (
            '<node pkg="robolearn" exec="no_such_node"/>',
            "executable 'no_such_node' of package 'robolearn' not found",
        ),
        ('<node pkg="robolearn" exec="policy_node" name="bad name"/>', "not a valid ROS name"),
        ('<timer period="1"/>', "tag not supported by robolearn launch"),
        ('<let name="x" value="$(eval 1+1)"/>', "substitution 'eval' is not supported"),
        ('<let name="x" value="$(var nothing)"/>', "no launch argument or <let> named 'nothing'"),
        ('<let name="x" value="$(env ROBOLEARN_SURELY_UNSET)"/>', "ROBOLEARN_SURELY_UNSET is not set"),
        ('<include file="other.launch.py"/>', "Python launch file: it needs the ROS 2 launch library"),
    ],
)
def test_what_cannot_run_is_refused_with_a_message(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, "bad.launch.xml", f"<launch>{text}</launch>")
    with pytest.raises(LaunchError, match=message):
        resolve_launch(path)


def test_python_launch_file_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "bringup.launch.py", "def generate_launch_description(): ...\n")
    with pytest.raises(LaunchError, match=r"bringup.launch.py is a Python launch file.*ros2 launch"):
        run_launch(LaunchCmd(str(path), print=True))


# -- crafted launch files (issue 15) --------------------------------------------------------------
# Each hostile file is refused quickly with one line that names the file and the limit, instead of
# hanging, exhausting memory or ending in a RecursionError.


def refused(path: Path, pattern: str, *, names: str | None = None) -> str:
    """Resolve ``path``, expecting a one-line LaunchError matching ``pattern`` within about a second
    of this process's CPU time (not the wall clock's: a loaded CI machine stretches that, while the
    work a hostile file could blow up is this process's own)."""
    start = time.process_time()
    with pytest.raises(LaunchError) as info:
        resolve_launch(path)
    message = str(info.value)
    assert time.process_time() - start < 1.5, message
    assert "\n" not in message and len(message) < 400, message
    assert (names or path.name) in message
    assert re.search(pattern, message), message
    return message


def nested(depth: int, inner: str = "") -> str:
    return "<launch>" + "<group>" * depth + inner + "</group>" * depth + "</launch>"


# Sizes: one file, all files read, one value, all values.


def test_a_file_over_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "huge.launch.xml"
    path.write_text("<launch>" + " " * DEFAULT_LIMITS.max_file_bytes + "</launch>")
    refused(path, rf"larger than {DEFAULT_LIMITS.max_file_bytes} bytes \(limit")


def test_a_non_utf8_file_is_refused_naming_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "latin1.launch.xml"
    path.write_bytes('<launch><let name="x" value="caf\xe9"/></launch>'.encode("latin-1"))
    refused(path, r"not UTF-8 text \(byte 0xe9 at offset 32\); launch files must be UTF-8")
    assert run_launch_refuses(path, r"not UTF-8")


def run_launch_refuses(path: Path, pattern: str) -> bool:
    """``robolearn launch FILE --print`` refuses with a RobolearnError, which the CLI prints on one line."""
    with pytest.raises(RobolearnError, match=pattern):
        run_launch(LaunchCmd(str(path), print=True))
    return True


def test_includes_reading_too_many_bytes_in_all_are_refused(tmp_path: Path) -> None:
    big = "<launch><!--" + "x" * (DEFAULT_LIMITS.max_file_bytes - 100) + "--></launch>"
    (tmp_path / "big.launch.xml").write_text(big)
    include = '<include file="$(dirname)/big.launch.xml"/>'
    path = write(tmp_path, "many.launch.xml", f"<launch>{include * 5}</launch>")
    refused(path, rf"reads more than {DEFAULT_LIMITS.max_read_bytes} bytes of launch files", names="big")


def test_let_doubling_40_times_is_refused_at_the_value_limit(tmp_path: Path) -> None:
    lets = '<let name="x" value="$(var x)$(var x)"/>' * 40
    path = write(tmp_path, "doubling.launch.xml", f'<launch><let name="x" value="ab"/>{lets}</launch>')
    refused(
        path, rf"'\$\(var x\)\$\(var x\)' expands to more than {DEFAULT_LIMITS.max_value_chars} characters"
    )


def test_many_large_values_are_refused_at_the_total_limit(tmp_path: Path) -> None:
    grow = '<let name="x" value="$(var x)$(var x)"/>' * 16  # 2 * 2^16 = 128 KiB: just inside one value
    copies = "".join(f'<let name="y{i}" value="$(var x)"/>' for i in range(200))
    path = write(tmp_path, "copies.launch.xml", f'<launch><let name="x" value="ab"/>{grow}{copies}</launch>')
    refused(path, rf"values expand to more than {DEFAULT_LIMITS.max_expanded_chars} characters in all")


# Expansion: aliases, entities, includes, processes.

ALIAS_BOMB = """\
launch:
  - let:
      name: x
      value: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]
  - let: {name: b, value: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]}
  - let: {name: c, value: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]}
  - let: {name: d, value: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]}
  - let: {name: e, value: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]}
  - let: {name: f, value: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]}
  - let: {name: g, value: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]}
  - let: {name: h, value: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]}
  - let: {name: i, value: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]}
"""


def test_a_yaml_alias_bomb_is_refused_at_the_first_alias(tmp_path: Path) -> None:
    path = write(tmp_path, "bomb.launch.yaml", ALIAS_BOMB)
    refused(path, r"YAML alias \*a at line 5: aliases are not allowed in launch files")


def test_an_alias_in_a_parameter_value_is_refused(tmp_path: Path) -> None:
    node = '<node pkg="robolearn" exec="policy_node"><param name="p" value="[&amp;a [1, 2], *a]"/></node>'
    path = write(tmp_path, "param_alias.launch.xml", f"<launch>{node}</launch>")
    with pytest.raises(
        LaunchError,
        match=r"^param_alias.launch.xml: parameter p: YAML alias \*a at line 1: aliases are not allowed",
    ):
        resolve_launch(path)


def test_xml_entity_expansion_is_refused(tmp_path: Path) -> None:
    entities = '<!ENTITY a "aaaaaaaaaa">' + "".join(
        f'<!ENTITY {b} "{("&" + a + ";") * 10}">' for a, b in zip("abcdefgh", "bcdefghi", strict=True)
    )
    path = write(
        tmp_path,
        "laughs.launch.xml",
        f'<!DOCTYPE launch [{entities}]><launch><let name="x" value="&i;"/></launch>',
    )
    refused(path, r"XML entity declaration 'a' at line 1: entity declarations are not allowed")


def test_an_external_dtd_is_refused(tmp_path: Path) -> None:
    """expat would read no external DTD and silently drop ``&word;`` from an attribute."""
    text = '<!DOCTYPE launch SYSTEM "http://example.com/x.dtd"><launch><executable cmd="rm &word;"/></launch>'
    path = write(tmp_path, "dtd.launch.xml", text)
    refused(path, r"external DTD 'http://example.com/x.dtd': launch files may not reference one")


def test_includes_fanning_out_2_to_the_25_are_refused_at_the_include_limit(tmp_path: Path) -> None:
    for level in range(25):
        twice = f'<include file="$(dirname)/f{level + 1}.launch.xml"/>' * 2
        write(tmp_path, f"f{level}.launch.xml", f"<launch>{twice}</launch>")
    write(tmp_path, "f25.launch.xml", "<launch/>")
    refused(
        tmp_path / "f0.launch.xml",
        rf"more than {DEFAULT_LIMITS.max_includes} includes in one launch",
        names="f",
    )


def test_more_processes_than_the_limit_are_refused(tmp_path: Path) -> None:
    many = '<executable cmd="true"/>' * (DEFAULT_LIMITS.max_processes + 1)
    path = write(tmp_path, "fork.launch.xml", f"<launch>{many}</launch>")
    refused(path, rf"more than {DEFAULT_LIMITS.max_processes} processes in one launch \(limit\)")


# Depth: XML, YAML, substitutions, includes, groups across includes, parameter values.


def test_5000_nested_groups_are_refused_at_the_depth_limit(tmp_path: Path) -> None:
    path = write(tmp_path, "deep.launch.xml", nested(5000))
    refused(path, rf"tags nested deeper than {DEFAULT_LIMITS.max_depth} levels at line 1")


@pytest.mark.parametrize(
    "body",
    [
        "[" * 3000 + "]" * 3000,  # flow
        "- " * 3000 + "x",  # block: a sequence in a sequence ... on one line
    ],
    ids=["flow", "block"],
)
def test_3000_deep_yaml_is_refused_at_the_depth_limit(tmp_path: Path, body: str) -> None:
    path = tmp_path / "deep.launch.yaml"
    path.write_text(
        "launch:\n  - let:\n      name: x\n      value:\n" + textwrap.indent(body, " " * 8) + "\n"
    )
    refused(path, rf"YAML nested deeper than {DEFAULT_LIMITS.max_depth} levels at line \d+")


def test_5000_nested_substitutions_are_refused(tmp_path: Path) -> None:
    value = "$(not " * 5000 + "true" + ")" * 5000
    path = write(tmp_path, "subs.launch.xml", f'<launch><let name="x" value="{value}"/></launch>')
    refused(path, rf"substitutions nested deeper than {DEFAULT_LIMITS.max_depth} levels")


def test_a_long_include_chain_is_refused_at_the_include_depth_limit(tmp_path: Path) -> None:
    for level in range(40):
        write(
            tmp_path,
            f"c{level}.launch.xml",
            f'<launch><include file="$(dirname)/c{level + 1}.launch.xml"/></launch>',
        )
    write(tmp_path, "c40.launch.xml", "<launch/>")
    refused(
        tmp_path / "c0.launch.xml",
        rf"includes nested deeper than {DEFAULT_LIMITS.max_include_depth} files at c32",
        names="c31.launch.xml",
    )


def test_groups_nested_across_includes_are_refused_at_the_depth_limit(tmp_path: Path) -> None:
    """Each file stays inside the per-file limit; together they would recurse 4 x 90 deep."""
    for level in range(4):
        include = f'<include file="$(dirname)/g{level + 1}.launch.xml"/>'
        write(tmp_path, f"g{level}.launch.xml", nested(90, include))
    write(tmp_path, "g4.launch.xml", "<launch/>")
    refused(
        tmp_path / "g0.launch.xml",
        r"groups and includes nested deeper than 100 levels, counted across",
        names="g",
    )


def test_a_deeply_nested_parameter_value_is_refused(tmp_path: Path) -> None:
    value = "[" * 3000 + "]" * 3000
    node = f'<node pkg="robolearn" exec="policy_node"><param name="p" value="{value}"/></node>'
    path = write(tmp_path, "param_deep.launch.xml", f"<launch>{node}</launch>")
    with pytest.raises(
        LaunchError, match=r"^param_deep.launch.xml: parameter p: YAML nested deeper than 100 levels"
    ):
        resolve_launch(path)


# Values YAML cannot convert end in the same one-line error, not a ValueError traceback.


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("launch:\n  - let: {name: x, value: " + "9" * 5000 + "}\n", r"not valid YAML: Exceeds the limit"),
        ("launch:\n  - let: {name: x, value: 2001-02-30}\n", r"not valid YAML: day is out of range"),
        ("launch: 5\n", r"'launch' must be a list of actions"),
        ("launch:\n  - group: {children: 5}\n", r"'group.children' must be a list of actions"),
        (
            "launch:\n  - let: {name: x, value: !!python/object:os.system ls}\n",
            r"not valid YAML: could not determine",
        ),
    ],
    ids=["long-int", "bad-date", "launch-scalar", "children-scalar", "python-tag"],
)
def test_malformed_yaml_values_are_one_line_errors(tmp_path: Path, text: str, pattern: str) -> None:
    path = tmp_path / "odd.launch.yaml"
    path.write_text(text)
    refused(path, pattern)


def test_limits_leave_the_shipped_files_far_inside() -> None:
    """The bounds are not tight for real files: every shipped file resolves under a tenth of them."""
    tight = LaunchLimits(
        max_file_bytes=DEFAULT_LIMITS.max_file_bytes // 10,
        max_read_bytes=DEFAULT_LIMITS.max_read_bytes // 10,
        max_depth=10,
        max_includes=DEFAULT_LIMITS.max_includes // 10,
        max_include_depth=3,
        max_value_chars=DEFAULT_LIMITS.max_value_chars // 10,
        max_expanded_chars=DEFAULT_LIMITS.max_expanded_chars // 10,
        max_processes=DEFAULT_LIMITS.max_processes // 10,
    )
    for path in LAUNCH_FILES:
        words = [a for a in (NEEDS.get(path.name.removesuffix(".launch.xml")),) if a]
        assert resolve_launch(path, dict(w.split(":=", 1) for w in words), tight).processes


# -- running processes ----------------------------------------------------------------------------

QUITS = "import sys, time; print('up', flush=True); time.sleep({delay}); sys.exit({code})"
# Exits cleanly on SIGINT, as an rclpy node does, after saying so.
WAITS = (
    "import signal, sys, time; "
    "signal.signal(signal.SIGINT, lambda *a: (print('stopping', flush=True), sys.exit(0))); "
    "print('up', flush=True); time.sleep(60)"
)
# Ignores SIGINT and SIGTERM's default is to die: tests the escalation.
STUBBORN = (
    "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "print('up', flush=True); time.sleep(60)"
)


def two_processes(tmp_path: Path, first: str, second: str, *, first_required: bool) -> Path:
    on_exit = ' on_exit="shutdown"' if first_required else ""
    return write(
        tmp_path,
        "two.launch.xml",
        f"""\
        <launch>
          <executable cmd="$(env ROBOLEARN_TEST_PYTHON) -c &quot;{first}&quot;" name="first"{on_exit}/>
          <executable cmd="$(env ROBOLEARN_TEST_PYTHON) -c &quot;{second}&quot;" name="second"/>
        </launch>
        """,
    )


@pytest.fixture
def python_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROBOLEARN_TEST_PYTHON", sys.executable)


def run(path: Path, sigterm_timeout: float = 5.0) -> tuple[int, str, str, float]:
    out, err = io.StringIO(), io.StringIO()
    start = time.monotonic()
    code = run_processes(
        resolve_launch(path).processes, sigterm_timeout=sigterm_timeout, stdout=out, stderr=err
    )
    return code, out.getvalue(), err.getvalue(), time.monotonic() - start


@pytest.mark.usefixtures("python_env")
def test_required_process_exit_stops_the_others_and_sets_the_exit_code(tmp_path: Path) -> None:
    path = two_processes(tmp_path, QUITS.format(delay=0.5, code=3), WAITS, first_required=True)
    code, out, err, elapsed = run(path)
    assert code == 3
    assert "[first] up" in out and "[second] up" in out
    assert "[second] stopping" in out  # stopped by SIGINT, cleanly
    assert "first exited with code 3" in err and "second exited with code 0" in err
    assert elapsed < 10


@pytest.mark.usefixtures("python_env")
def test_stop_escalates_to_sigterm_for_a_process_that_ignores_sigint(tmp_path: Path) -> None:
    path = two_processes(tmp_path, QUITS.format(delay=0.3, code=0), STUBBORN, first_required=True)
    code, _, err, elapsed = run(path, sigterm_timeout=0.5)
    assert code == 0
    assert f"second exited with code {128 + signal.SIGTERM}" in err
    assert elapsed < 5


@pytest.mark.usefixtures("python_env")
def test_without_a_required_process_the_launch_waits_for_all(tmp_path: Path) -> None:
    path = two_processes(
        tmp_path, QUITS.format(delay=0.1, code=4), QUITS.format(delay=0.8, code=0), first_required=False
    )
    code, _, err, elapsed = run(path)
    assert code == 4  # the first failure
    assert "second exited with code 0" in err and elapsed >= 0.8


def test_ctrl_c_stops_every_process(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    child = f"import os, time; open({str(pids)!r}, 'a').write(str(os.getpid()) + ' '); time.sleep(60)"
    path = write(
        tmp_path,
        "sleepers.launch.xml",
        f"""\
        <launch>
          <executable cmd="{sys.executable} -c &quot;{child}&quot;" name="one"/>
          <executable cmd="{sys.executable} -c &quot;{child}&quot;" name="two"/>
        </launch>
        """,
    )
    code = (
        "import sys; from robolearn.cli.launch import LaunchCmd, run_launch; "
        f"sys.exit(run_launch(LaunchCmd({str(path)!r})))"
    )
    launcher = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while (not pids.exists() or len(pids.read_text().split()) < 2) and time.monotonic() < deadline:
        time.sleep(0.05)
    children = [int(p) for p in pids.read_text().split()]
    launcher.send_signal(signal.SIGINT)
    _, err = launcher.communicate(timeout=30)
    assert launcher.returncode == 128 + signal.SIGINT, err
    for pid in children:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


# -- packaging ------------------------------------------------------------------------------------


def test_wheel_installs_launch_files_and_manifest_under_share(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    data = "robolearn-0.1.0.data/data/share/"
    assert f"{data}ament_index/resource_index/packages/robolearn" in names
    assert f"{data}robolearn/package.xml" in names
    for path in LAUNCH_FILES:
        assert f"{data}robolearn/launch/{path.name}" in names
    for path in sorted((ROOT / "hardware" / "config").glob("*.yaml")):
        assert f"{data}robolearn/config/{path.name}" in names


def test_wheel_has_the_node_console_scripts(wheel: Path) -> None:
    entry_points = zipfile.ZipFile(wheel).read("robolearn-0.1.0.dist-info/entry_points.txt").decode()
    for executable in ("policy_node", "sim_robot_node"):
        assert f"{executable} = robolearn.hardware.ros.{executable}:main" in entry_points


def test_package_manifest_is_an_ament_python_package() -> None:
    import xml.etree.ElementTree as ET

    manifest = ET.parse(ROOT / "package.xml").getroot()
    assert manifest.get("format") == "3"
    assert manifest.findtext("name") == "robolearn"
    assert manifest.findtext("export/build_type") == "ament_python"
    depends = {e.text for e in manifest.findall("exec_depend")}
    assert {"rclpy", "std_msgs", "sensor_msgs", "geometry_msgs", "nav_msgs", "trajectory_msgs"} <= depends
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert manifest.findtext("version") == project["version"]
    assert (ROOT / "resource" / "robolearn").is_file()
    # colcon reads setup.cfg instead of running setup.py only when setup() takes no arguments.
    assert "setup()" in (ROOT / "setup.py").read_text()


def test_a_line_without_end_comes_out_in_prefixed_pieces_of_bounded_size() -> None:
    """A process writing 200 kB without a newline costs the launcher at most LINE_BYTES at a time;
    the pieces are prefixed, the continued ones marked, and the next line is whole again."""
    from robolearn.hardware.ros.launch.processes import LINE_BYTES, _pump

    out = io.StringIO()
    _pump(io.BytesIO(b"x" * 200_000 + b"\nnext\n"), "talker", out, threading.Lock())
    lines = out.getvalue().splitlines()
    pieces = [LINE_BYTES, LINE_BYTES, LINE_BYTES, 200_000 - 3 * LINE_BYTES]
    assert [line.count("x") for line in lines[:-1]] == pieces
    assert lines[0].startswith("[talker] x") and all(x.startswith("[talker] ... x") for x in lines[1:-1])
    assert lines[-1] == "[talker] next"
