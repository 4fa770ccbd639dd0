"""The robolearn command as a user runs it: listings, evaluation, videos, one-line errors."""

from __future__ import annotations

import ast
import errno
import inspect
import itertools
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import imageio.v2 as imageio
import pytest

import robolearn.cli
import robolearn.cli.tasks
from robolearn.cli import COMMANDS, main
from robolearn.errors import ConfigError

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
    assert set(pick["backends"]) == {"mujoco", "mujoco_batch", "mujoco_warp", "pybullet"}
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
        (("eval", "panda_reach", "--episodes", "0"), "--episodes 0: must be at least 1"),
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


# -- one error hierarchy: bad input is one line and exit 2, a bug keeps its traceback -------------
def _exit_code(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert isinstance(exc.value.code, int)
    return exc.value.code


def test_a_robolearn_error_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse(cmd: object) -> None:
        raise ConfigError("--json: refused\nfor a reason on a second line")

    monkeypatch.setattr(robolearn.cli.tasks, "run_tasks", refuse)
    assert _exit_code(["tasks"]) == 2
    err = capsys.readouterr().err
    assert err == "robolearn: error: --json: refused for a reason on a second line\n"


@pytest.mark.parametrize(
    "bug",
    [
        KeyError("policy"),
        ValueError("math domain error"),
        ZeroDivisionError(),
        OSError(errno.EBADF, "bad fd"),
    ],
)
def test_a_bug_keeps_its_traceback(
    bug: Exception, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(cmd: object) -> None:
        raise bug

    monkeypatch.setattr(robolearn.cli.tasks, "run_tasks", broken)
    with pytest.raises(type(bug)):
        main(["tasks"])
    assert "robolearn: error" not in capsys.readouterr().err


def test_a_bug_in_the_command_exits_nonzero_with_a_traceback() -> None:
    code = textwrap.dedent(
        """
        import robolearn.cli.tasks as tasks
        def broken(cmd):
            return {}["injected bug"]
        tasks.run_tasks = broken
        from robolearn.cli import main
        main(["tasks"])
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode not in (0, 2)
    assert "Traceback" in out.stderr and "KeyError: 'injected bug'" in out.stderr
    assert "robolearn: error" not in out.stderr


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (
            OSError(errno.ENOSPC, "No space left on device", "/data/run/x.parquet"),
            "No space left on device: /data/run/x.parquet",
        ),
        (OSError(errno.EACCES, "Permission denied", "/root/runs"), "Permission denied: /root/runs"),
        (OSError(errno.ENOSPC, "No space left on device"), "No space left on device: while writing under"),
    ],
)
def test_an_os_error_about_the_users_paths_is_one_line_naming_the_path(
    error: OSError,
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    import robolearn.cli.train

    def full_disk(cmd: object) -> None:
        raise error

    monkeypatch.setattr(robolearn.cli.train, "run_train", full_disk)
    assert _exit_code(["train", "panda_reach", "--out", str(tmp_path)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"robolearn: error: {message}"), lines


# -- start-up cost (issue 9) ---------------------------------------------------------------------
@pytest.mark.parametrize("args", [("--help",), ("tasks",), ("train", "--help"), ("bench", "sim", "--help")])
def test_help_and_tasks_import_neither_torch_nor_pyarrow(args: tuple[str, ...]) -> None:
    out = subprocess.run(
        [sys.executable, "-X", "importtime", *ROBOLEARN[1:], *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    imported = set(re.findall(r"^import time:.*\|\s+([\w.]+)$", out.stderr, re.MULTILINE))
    assert "robolearn.cli" in imported
    assert not {"torch", "pyarrow"} & imported


def test_only_the_subcommand_run_is_imported(tmp_path: Path) -> None:
    # importlib.import_module bypasses -X importtime's log, so ask sys.modules after the command.
    code = textwrap.dedent(
        """
        import json, sys
        from robolearn.cli import main
        main(["tasks", "--json"])
        print(json.dumps(sorted(sys.modules)), file=sys.stderr)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = set(json.loads(out.stderr.strip().splitlines()[-1]))
    assert "robolearn.cli.tasks" in loaded
    assert not {entry.module for name, entry in COMMANDS.items() if name != "tasks"} & loaded
    assert not {"torch", "pyarrow"} & loaded


# -- the CLI's own words (issue 12) --------------------------------------------------------------
def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert _exit_code([*argv, "--help"]) == 0
    return capsys.readouterr().out


def _description(text: str) -> str:
    """The help's first description line: the paragraph after the usage lines."""
    paragraphs = re.split(r"\n\s*\n", text.strip())
    assert paragraphs[0].startswith("usage:"), text
    return " ".join(paragraphs[1].split())


def _field_docstrings() -> set[str]:
    """Every dataclass field docstring in the modules the CLI reads options from."""
    docs: set[str] = set()
    modules = {sys.modules[robolearn.cli._load(name)[0].__module__] for name in COMMANDS}
    for module in modules | {sys.modules[robolearn.cli._load(n)[1].__module__] for n in COMMANDS}:
        for node in ast.walk(ast.parse(inspect.getsource(module))):
            if isinstance(node, ast.ClassDef):
                for a, b in itertools.pairwise(node.body):
                    doc = (
                        b.value.value
                        if isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant)
                        else None
                    )
                    if isinstance(a, ast.AnnAssign) and isinstance(doc, str):
                        docs.add(" ".join(doc.split()))
    return docs


def test_every_subcommand_says_what_it_does(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # one description line, not wrapped
    paths: list[list[str]] = []
    for name in COMMANDS:
        text = _help([name], capsys)
        nested = re.match(r"usage: robolearn \S+ \[-h\] \{([\w,]+)\}", text)
        paths += [[name, sub] for sub in nested.group(1).split(",")] if nested else [[name]]
    assert {"bench", "reward", "dataset"} <= {p[0] for p in paths if len(p) == 2}
    descriptions = {" ".join(p): _description(_help(p, capsys)) for p in paths}
    fields = _field_docstrings()
    for path, line in descriptions.items():
        assert line and line not in fields, (path, line)
        assert not line.startswith("What to measure"), path
    assert len(set(descriptions.values())) == len(descriptions), descriptions
