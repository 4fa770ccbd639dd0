"""Datasets made to break the loader (issue 15): every one refused with one line naming the file.

Classes: paths leading outside the dataset, manifests deleted or emptied, ``meta/stats.json``
damaged or absurd, pickles where JSON belongs, malformed JSON shapes, and a save killed before
its commit.
"""

from __future__ import annotations

import json
import pickle
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from robolearn.cli.dataset import DatasetCmd, DatasetInfoCmd, run_dataset
from robolearn.data.format import REWARD, DatasetError
from robolearn.data.merge import dataset_info
from robolearn.data.reader import read_dataset
from robolearn.data.validate import check_dataset, validate_dataset
from robolearn.data.writer import DatasetWriter
from robolearn.errors import CorruptFileError
from robolearn.policy.normalization import ActionScaler
from robolearn.rl.demos import load_demo_buffer

SHAPES = {"pos": (3,)}
IMAGE = (16, 16, 3)
DATA = "data/chunk-000/file-000.parquet"


def _record(root: Path, episodes: int = 2, camera: bool = False) -> Path:
    writer = DatasetWriter.create(
        root,
        repo_id="t/hostile",
        fps=10,
        robot_type="panda",
        obs_shapes=SHAPES,
        obs_names=None,
        action_names=["a"],
        image_shape=IMAGE if camera else None,
    )
    rng = np.random.default_rng(0)
    for _ in range(episodes):
        for t in range(6):
            image = np.full(IMAGE, 10 * t, np.uint8) if camera else None
            writer.add_frame(
                {"pos": rng.normal(size=3)}, rng.uniform(-1, 1, 1), 0.1 * t, t == 5, t == 5, False, image
            )
        writer.save_episode("reach")
    writer.close()
    return root


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _record(tmp_path_factory.mktemp("clean") / "ds")


@pytest.fixture
def ds(clean: Path, tmp_path: Path) -> Path:
    """A fresh copy of a valid dataset, with a canary file beside it."""
    root = tmp_path / "ds"
    shutil.copytree(clean, root)
    (tmp_path / "canary.parquet").write_bytes((root / DATA).read_bytes())
    return root


def _edit_json(path: Path, change: Any) -> None:
    path.write_text(json.dumps(change(json.loads(path.read_text()))))


def _one_line_refusal(root: Path, match: str) -> None:
    """read, validate, info and the demo buffer all refuse with a one-line CorruptFileError."""
    with pytest.raises(CorruptFileError, match=match) as info:
        read_dataset(root).frames()
    assert "\n" not in str(info.value)
    problems = validate_dataset(root)
    assert problems and any(re.search(match, p) for p in problems), problems
    with pytest.raises(CorruptFileError, match=match):
        dataset_info(root)
    with pytest.raises(CorruptFileError, match=match):
        load_demo_buffer(root, ActionScaler(np.array([-1.0]), np.array([1.0])), SHAPES, 100)


# -- paths leading outside the dataset (6 cases) -----------------------------------------------------
@pytest.mark.parametrize(
    "template",
    [
        "../canary.parquet",
        "data/../../canary.parquet",
        "/etc/passwd",
        "{chunk_index.__class__}/file.parquet",
    ],
)
def test_data_path_outside_the_root_is_refused(ds: Path, template: str) -> None:
    _edit_json(ds / "meta/info.json", lambda info: info | {"data_path": template})
    _one_line_refusal(ds, "data_path")
    before = sorted(p.name for p in ds.rglob("*"))
    with pytest.raises(DatasetError, match="data_path"):
        DatasetWriter.open(ds)  # record appending: nothing deleted, nothing written
    assert sorted(p.name for p in ds.rglob("*")) == before
    assert (ds.parent / "canary.parquet").read_bytes() == (ds / DATA).read_bytes()


def test_symlink_out_of_the_dataset_is_refused(ds: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    shutil.move(ds / "data", outside)
    (ds / "data").symlink_to(outside, target_is_directory=True)
    _one_line_refusal(ds, "leads outside")
    with pytest.raises(DatasetError, match="leads outside"):
        DatasetWriter.open(ds)
    assert (outside / "chunk-000/file-001.parquet").is_file()


def test_video_key_climbing_out_is_refused(tmp_path: Path) -> None:
    root = _record(tmp_path / "cam", episodes=1, camera=True)
    (tmp_path / "canary").mkdir()

    def rename(info: dict[str, Any]) -> dict[str, Any]:
        info["features"]["../../canary"] = info["features"].pop("observation.images.front")
        return info

    _edit_json(root / "meta/info.json", rename)
    with pytest.raises(DatasetError):
        read_dataset(root)
    assert validate_dataset(root)
    assert list((tmp_path / "canary").iterdir()) == []


# -- manifests deleted or emptied (5 cases) ----------------------------------------------------------
def _alter_rewards(root: Path) -> None:
    table = pq.read_table(root / DATA)
    rewards = pa.array(np.full(table.num_rows, 100.0, np.float32))
    pq.write_table(table.set_column(table.column_names.index(REWARD), REWARD, rewards), root / DATA)


def test_altered_rewards_without_the_manifest_are_refused(ds: Path) -> None:
    _alter_rewards(ds)
    (ds / "meta/robolearn.json").unlink()
    _one_line_refusal(ds, r"next\.reward of episode 0 does not match its recorded statistics")


@pytest.mark.parametrize("content", [b"", b"{}", b'{"files": {}}', b"[]"])
def test_emptied_manifest_is_refused(ds: Path, content: bytes) -> None:
    _alter_rewards(ds)
    (ds / "meta/robolearn.json").write_bytes(content)
    _one_line_refusal(ds, "robolearn.json")


# -- meta/stats.json damaged or absurd (8 cases) -----------------------------------------------------
def _stats(change: Any) -> Any:
    def edit(stats: dict[str, Any]) -> dict[str, Any]:
        change(stats[REWARD])
        return stats

    return edit


@pytest.mark.parametrize(
    ("damage", "match"),
    [
        ("truncate", "not readable JSON"),
        ("pickle", "is a Python pickle, not JSON"),
        (_stats(lambda s: s.update(mean=[float("nan")])), "NaN or infinite"),
        (_stats(lambda s: s.update(std=[-1.0])), "std is negative"),
        (_stats(lambda s: s.update(min=[5.0], max=[-5.0])), "min is above its max"),
        (_stats(lambda s: s.update(mean=[[0.1, 0.2]])), "has shape"),
        (_stats(lambda s: s.update(mean=[0.4])), "differ from the statistics of the episodes"),
        (_stats(lambda s: s.pop("std")), "has no std"),
    ],
)
def test_damaged_stats_fail_validate(ds: Path, damage: Any, match: str) -> None:
    path = ds / "meta/stats.json"
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:40])
    elif damage == "pickle":
        path.write_bytes(pickle.dumps(json.loads(path.read_text())))
    else:
        _edit_json(path, damage)
    problems = validate_dataset(ds)
    assert len(problems) == 1 and "meta/stats.json" in problems[0] and match in problems[0], problems


# -- pickles where JSON belongs (3 cases) ------------------------------------------------------------
@pytest.mark.parametrize("name", ["meta/info.json", "meta/robolearn.json", "meta/stats.json"])
def test_pickled_json_names_the_file_and_what_it_should_be(ds: Path, name: str) -> None:
    path = ds / name
    path.write_bytes(pickle.dumps(json.loads(path.read_text())))
    (problem,) = validate_dataset(ds)
    assert problem.startswith(f"{path}: is a Python pickle, not JSON; it should be ")
    assert "UTF-8" not in problem and "codec" not in problem


# -- malformed JSON shapes (10 cases) -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda info: [info], "info.json: is a JSON array where an object was expected"),
        (lambda info: {k: v for k, v in info.items() if k != "fps"}, "info.json: fps is missing"),
        (lambda info: info | {"fps": "fast"}, "info.json: fps is a JSON string; it should be integer"),
        (lambda info: info | {"features": []}, "features is a JSON array; it should be object"),
        (lambda info: info | {"total_frames": None}, "total_frames is a JSON null"),
        (
            lambda info: info | {"features": info["features"] | {"action": 3}},
            r"features\.action is a JSON integer where an object",
        ),
        (
            lambda info: info | {"features": info["features"] | {"action": {"dtype": "float32"}}},
            r"features\.action\.shape is missing",
        ),
        (lambda info: info | {"data_path": 7}, "data_path is a JSON integer; it should be string"),
    ],
)
def test_malformed_info_is_one_line(ds: Path, change: Any, match: str) -> None:
    _edit_json(ds / "meta/info.json", change)
    with pytest.raises(DatasetError, match=match) as info:
        read_dataset(ds)
    assert "\n" not in str(info.value)
    with pytest.raises(DatasetError, match=match):
        run_dataset(DatasetCmd(DatasetInfoCmd(ds)))


def test_manifest_entry_without_bytes_names_the_key(ds: Path) -> None:
    _edit_json(ds / "meta/robolearn.json", lambda s: s | {"files": {DATA: {"sha256": "0" * 64}}})
    with pytest.raises(
        DatasetError, match=r"robolearn.json: files\['data/chunk-000/file-000.parquet'\]\.bytes"
    ):
        read_dataset(ds)


def test_episodes_table_with_wrong_types_is_one_line(ds: Path) -> None:
    path = ds / "meta/episodes/chunk-000/file-000.parquet"
    table = pq.read_table(path)
    column = table.column_names.index("data/chunk_index")
    pq.write_table(table.set_column(column, "data/chunk_index", pa.array(["../../x"] * table.num_rows)), path)
    with pytest.raises(
        DatasetError, match=r"data/chunk_index of an episode is '\.\./\.\./x'; it must be an integer"
    ):
        read_dataset(ds)


# -- a save killed before its commit (2 cases) -------------------------------------------------------
class _Killed(BaseException):
    """Stands in for SIGKILL: nothing after it runs, no handler catches it."""


@pytest.mark.parametrize("kill_at", ["meta/tasks.parquet", "meta/episodes/"])
def test_save_killed_before_its_commit_leaves_a_valid_dataset(
    ds: Path, kill_at: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = DatasetWriter.open(ds)
    write = writer._write

    def dies(rel: str, data: bytes) -> str:
        if rel.startswith(kill_at):
            raise _Killed
        return write(rel, data)

    monkeypatch.setattr(writer, "_write", dies)
    writer.add_frame({"pos": np.zeros(3)}, np.zeros(1), 0.0, False, False, False)
    with pytest.raises(_Killed):
        writer.save_episode("a task no committed episode has")
    found = check_dataset(ds)
    assert found.problems == []
    assert any("file-002.parquet: no episode refers to it" in w for w in found.warnings)
    assert len(read_dataset(ds).episodes) == 2
    DatasetWriter.open(ds).close()  # the next append cleans up
    assert not (ds / "data/chunk-000/file-002.parquet").exists()
    assert validate_dataset(ds) == []
