"""Every option checked where it enters (issue 15): a hostile value ends in one line naming the option,
exit code 2, before anything runs; an OS error about the user's paths names the path."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import robolearn.cli
from robolearn.cli import main
from robolearn.options import physical_memory

LONG = "n" * 300  # longer than any filesystem's name limit (255 bytes on ext4, xfs, btrfs, tmpfs)


def _unwritable(tmp_path: Path) -> Path:
    """A folder this process cannot write in: root writes anywhere but in /sys."""
    if os.geteuid() == 0:
        return Path("/sys/robolearn-runs")
    folder = tmp_path / "locked"
    folder.mkdir(mode=0o500)
    return folder / "runs"


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "a-file"
    path.write_text("not a folder")
    return path


# (argv, the text the one-line message must hold); paths are filled in from tmp_path.
Case = tuple[Callable[[Path], list[str]], str]


def _train(*args: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["train", "panda_reach", "--out", str(tmp / "runs"), *args]


TRAIN: list[Case] = [
    (_train("--sac.gamma", "inf"), "--sac.gamma inf: must be a finite number in [0, 1)"),
    (_train("--sac.gamma", "1.5"), "--sac.gamma 1.5: must be in [0, 1)"),
    (_train("--sac.tau", "nan"), "--sac.tau nan: must be a finite number in (0, 1]"),
    (_train("--sac.actor-lr", "-1"), "--sac.actor-lr -1.0: must be in (0, 1]"),
    (_train("--sac.batch-size", "0"), "--sac.batch-size 0: must be at least 1"),
    (_train("--sac.num-critics", "0"), "--sac.num-critics 0: must be at least 1"),
    (_train("--sac.demo-fraction", "1"), "--sac.demo-fraction 1.0: must be in [0, 1)"),
    (_train("--sac.init-temperature", "-inf"), "--sac.init-temperature -inf"),
    (_train("--sac.hidden", "0"), "--sac.hidden 0: every width must be in [1, 65536]"),
    (_train("--sac.hidden", "256", "-5"), "--sac.hidden 256 -5: every width must be in [1, 65536]"),
    (_train("--sac.hidden"), "--sac.hidden"),
    (_train("--eval-every", "-100"), "--eval-every -100: must be at least 1"),
    (_train("--eval-every", "0"), "--eval-every 0: must be at least 1"),
    (_train("--checkpoint-every", "-100"), "--checkpoint-every -100: must be at least 1"),
    (_train("--checkpoint-every", "0"), "--checkpoint-every 0: must be at least 1"),
    (_train("--scripted-demos", "-1"), "--scripted-demos -1: must be at least 0"),
    (_train("--reward-threshold", "nan"), "--reward-threshold nan: must be a finite number in [0, 1]"),
    (_train("--seed", "-1"), "--seed -1: must be in [0, 4294967295]"),
    (_train("--seed", str(2**64)), "--seed 18446744073709551616: must be in [0, 4294967295]"),
    (_train("--num-envs", "1000000000"), "--num-envs 1000000000: must be in [1, 65536]"),
    (_train("--num-envs", "0"), "--num-envs 0: must be in [1, 65536]"),
    (_train("--num-envs", "1e9"), "--num-envs"),
    (_train("--steps", "0"), "--steps 0: must be at least 1"),
    (_train("--stop-at-success", "0"), "--stop-at-success 0.0: must be in (0, 1]"),
    (_train("--intervene-probability", "2"), "--intervene-probability 2.0: must be in [0, 1]"),
    (_train("--intervene-steps", "10", "5"), "--intervene-steps 10 5"),
    (_train("--intervene-on-disagreement", "0"), "--intervene-on-disagreement 0.0: must be in (0, 2]"),
    (_train("--intervene-patience", "0"), "--intervene-patience 0: must be at least 1"),
    (_train("--torch-threads", "-1"), "--torch-threads -1: must be in [0, 1024]"),
    (_train("--eval-episodes", "0"), "--eval-episodes 0: must be at least 1"),
    (_train("--learning-starts", "-1"), "--learning-starts -1: must be at least 0"),
    (_train("--replay-capacity", "0"), "--replay-capacity 0: must be at least 1"),
    (_train("--replay-capacity", "1000000000000000"), "--replay-capacity 1000000000000000: needs at least"),
    (_train("--replay-capacity", "1e15"), "--replay-capacity"),
    (_train("--reward", "learned"), "--reward must be 'task' or 'classifier:PATH'"),
    (lambda tmp: ["train", "panda_reach", "--out", str(_file(tmp))], "is a file; give a folder"),
    (
        lambda tmp: ["train", "panda_reach", "--out", str(_file(tmp) / "runs")],
        "which is a file; give a folder",
    ),
    (lambda tmp: ["train", "panda_reach", "--out", str(_unwritable(tmp))], "cannot write in"),
    (lambda tmp: ["train", "panda_reach", "--out", str(tmp / LONG)], "--out: the name nnnn"),
    (_train("--name", LONG), "--name: the name nnnn"),
]


def _record(*args: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["record", "panda_reach", "--out", str(tmp / "d"), *args]


def _distill(*args: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["distill", "panda_reach", "--out", str(tmp), *args]


RECORD: list[Case] = [
    (_record(*args), message)
    for args, message in [
        (("--fps", "nan"), "--fps nan: must be a finite number in [0, 10000]"),
        (("--fps", "-1"), "--fps -1.0: must be in [0, 10000]"),
        (("--fps", "inf"), "--fps inf"),
        (("--episodes", "0"), "--episodes 0: must be at least 1"),
        (("--max-steps", "0"), "--max-steps 0: must be at least 1"),
        (("--seed", "-1"), "--seed -1"),
        (("--image-size", "3", "3"), "--image-size 3 3: must be two even numbers of pixels in [2, 4096]"),
        (("--image-size", "100000", "100000"), "--image-size 100000 100000"),
        (("--intervene-prob", "nan"), "--intervene-prob nan"),
        (("--intervene-every", "0"), "--intervene-every 0"),
        (("--scale", "0"), "--scale 0.0: must be in (0, 1]"),
        (("--png-every", "-1"), "--png-every -1.0: must be at least 0"),
        (("--png-every", "nan"), "--png-every nan"),
    ]
] + [
    (lambda tmp: ["record", "panda_reach", "--out", str(_file(tmp))], "is a file; give a folder"),
    (lambda tmp: ["record", "panda_reach", "--out", str(tmp / LONG)], "--out: the name nnnn"),
]

OTHERS: list[Case] = [
    (_distill(*args), message)
    for args, message in [
        (("--lr", "nan"), "--lr nan"),
        (("--beta-decay", "inf"), "--beta-decay inf"),
        (("--num-envs", "0"), "--num-envs 0"),
        (("--hidden", "0"), "--hidden 0"),
        (("--seed", "-1"), "--seed -1"),
        (("--stop-at-success", "nan"), "--stop-at-success nan"),
    ]
] + [
    (lambda tmp: ["distill", "panda_reach", "--out", str(_file(tmp))], "is a file; give a folder"),
    (lambda tmp: ["eval", "panda_reach", "--episodes", "0"], "--episodes 0: must be at least 1"),
    (lambda tmp: ["eval", "panda_reach", "--num-envs", "1000000000"], "--num-envs 1000000000"),
    (lambda tmp: ["eval", "panda_reach", "--seed", "-1"], "--seed -1"),
    (lambda tmp: ["eval", "panda_reach", "--video-episodes", "0"], "--video-episodes 0"),
    (lambda tmp: ["eval", "panda_reach", "--video", str(tmp)], "--video"),
    (lambda tmp: ["bench", "sim", "--seconds", "nan"], "--seconds nan"),
    (lambda tmp: ["bench", "sim", "--num-envs", "1000000000"], "--num-envs 1000000000"),
    (lambda tmp: ["bench", "sim", "--rounds", "0"], "--rounds 0"),
    (lambda tmp: ["bench", "learn", "--seeds", "0"], "--seeds 0"),
    (lambda tmp: ["bench", "learn", "--critics", "0"], "--critics 0"),
    (lambda tmp: ["bench", "deploy", "--latency-samples", "0"], "--latency-samples 0"),
    (lambda tmp: ["bench", "deploy", "--priority", "100"], "--priority 100"),
    (lambda tmp: ["bench", "transfer", "--obs-noise", "nan"], "--obs-noise nan"),
    (lambda tmp: ["bench", "transfer", "--obs-latency-ms", "-1"], "--obs-latency-ms -1.0"),
    (lambda tmp: ["reward", "train", str(tmp), "--held-out", "1.5"], "--held-out 1.5"),
    (lambda tmp: ["reward", "train", str(tmp), "--threshold", "nan"], "--threshold nan"),
    (lambda tmp: ["reward", "train", str(tmp), "--epochs", "0"], "--epochs 0"),
    (lambda tmp: ["reward", "eval", str(tmp), str(tmp), "--threshold", "2"], "--threshold 2.0"),
]


@pytest.fixture
def nothing_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every subcommand's run function fails the test: a refusal must come before anything runs."""
    load = robolearn.cli._load

    def checked_only(name: str) -> tuple[type[Any], Callable[[Any], None]]:
        spec, _ = load(name)

        def run(cmd: object) -> None:
            pytest.fail(f"{name} ran with {cmd}: its options were not refused first")

        return spec, run

    monkeypatch.setattr(robolearn.cli, "_load", checked_only)


@pytest.mark.usefixtures("nothing_runs")
@pytest.mark.parametrize(
    ("argv", "message"), TRAIN + RECORD + OTHERS, ids=[m for _, m in TRAIN + RECORD + OTHERS]
)
def test_a_hostile_option_is_refused_in_one_line_naming_it(
    argv: Callable[[Path], list[str]], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = argv(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("robolearn: error: "), lines
    assert message in lines[0], lines[0]
    assert not (tmp_path / "runs").exists() and not (tmp_path / "d").exists()  # nothing written


def test_the_memory_message_says_what_is_needed_against_what_there_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["train", "panda_reach", "--out", str(tmp_path), "--replay-capacity", str(10**15)])
    line = capsys.readouterr().err.strip()
    have = physical_memory() / 2**30
    assert "needs at least" in line and "PiB of memory" in line
    assert f"this machine has {have:.1f} GiB" in line


def test_a_full_disk_during_training_names_the_path_and_keeps_earlier_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import robolearn.rl.train

    def full(folder: Path, *args: object, **kwargs: object) -> Path:
        raise OSError(errno.ENOSPC, "No space left on device", str(folder / "model.safetensors"))

    monkeypatch.setattr(robolearn.rl.train, "save_checkpoint", full)
    argv = ["train", "panda_reach", "--out", str(tmp_path), "--name", "r", "--steps", "40", "--num-envs", "2"]
    argv += ["--checkpoint-every", "20", "--random-steps", "40", "--no-video", "--eval-every", "1000"]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    checkpoint = tmp_path / "r" / "checkpoints" / "model.safetensors"
    assert lines[-1] == f"robolearn: error: No space left on device: {checkpoint}"
    assert json.loads((tmp_path / "r" / "config.json").read_text())["steps"] == 40  # written before: intact


def test_a_full_disk_while_recording_names_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import robolearn.hil.record

    data = tmp_path / "d" / "data" / "chunk-000" / "file-000.parquet"

    def full(cmd: object, progress: object = None) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(data))

    monkeypatch.setattr(robolearn.hil.record, "record", full)
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "record",
                "panda_reach",
                "--device",
                "scripted",
                "--out",
                str(tmp_path / "d"),
                "--display",
                "none",
            ]
        )
    assert exc.value.code == 2
    assert (
        capsys.readouterr().err.strip().splitlines()[-1]
        == f"robolearn: error: No space left on device: {data}"
    )
