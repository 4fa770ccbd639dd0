"""The LeRobotDataset v3.0 layout: paths, feature names and the feature dictionaries of ``info.json``.

The layout is LeRobot's (``CODEBASE_VERSION = "v3.0"``), so LeRobot's own ``LeRobotDataset``
loads what :mod:`robolearn.data.writer` writes::

    meta/info.json                      fps, robot_type, totals, path templates, features
    meta/stats.json                     per-feature min/max/mean/std/count/q01..q99
    meta/tasks.parquet                  task text (the pandas index) -> task_index
    meta/episodes/chunk-000/file-000.parquet   one row per episode: length, tasks, where its
                                        frames and video live, its per-feature stats
    data/chunk-000/file-000.parquet     frames: one row per control step
    videos/observation.images.<cam>/chunk-000/file-000.mp4

A frame is what the robot saw and did at one control step: every observation term as its own
feature ``observation.<term>`` (physical units, listed in ``meta/robolearn.json``) and all of them
concatenated as ``observation.state``; ``action`` in physical units; what the step led to as
``next.reward``, ``next.success``, ``next.terminated`` (a true terminal state) and ``next.done``
(the episode ended there); ``complementary_info.is_intervention`` (a human was driving), named as
LeRobot's HIL-SERL port names it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from robolearn.data.files import ErrorType, first_line, read_bytes
from robolearn.errors import CorruptFileError

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000
"""Files per chunk folder (LeRobot's default)."""
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
INFO = "meta/info.json"
STATS = "meta/stats.json"
TASKS = "meta/tasks.parquet"
SIDECAR = "meta/robolearn.json"
"""robolearn's own metadata (repo id, units, file hashes); LeRobot ignores it."""
TMP = ".robolearn-tmp"
QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)

OBS = "observation."
STATE = "observation.state"
IMAGES = "observation.images."
ACTION = "action"
REWARD = "next.reward"
DONE = "next.done"
SUCCESS = "next.success"
TERMINATED = "next.terminated"
INTERVENTION = "complementary_info.is_intervention"
INDEX_FEATURES: dict[str, dict[str, Any]] = {
    "timestamp": {"dtype": "float32", "shape": [1], "names": None},
    "frame_index": {"dtype": "int64", "shape": [1], "names": None},
    "episode_index": {"dtype": "int64", "shape": [1], "names": None},
    "index": {"dtype": "int64", "shape": [1], "names": None},
    "task_index": {"dtype": "int64", "shape": [1], "names": None},
}
FLAGS = (DONE, SUCCESS, TERMINATED, INTERVENTION)
VIDEO_COLUMNS = ("chunk_index", "file_index", "from_timestamp", "to_timestamp")
NOT_NUMERIC = ("video", "image", "string")
"""Feature dtypes that are not stored as numbers in the data files."""

Array = npt.NDArray[Any]


class DatasetError(CorruptFileError):
    """A dataset that is missing, malformed or damaged, or a request it cannot serve; names the file."""


class NonFiniteFrameError(DatasetError):
    """A frame with NaN or infinity in an observation, the action or the reward: written, it would
    turn the dataset's statistics (LeRobot's stats.json, a learner's normalization) into NaN."""


def next_file(chunk: int, file: int) -> tuple[int, int]:
    """The (chunk, file) index after this one."""
    return (chunk + 1, 0) if file == CHUNKS_SIZE - 1 else (chunk, file + 1)


# -- features --------------------------------------------------------------------------------------
def vector_feature(
    shape: Sequence[int], names: Sequence[str] | None, dtype: str = "float32"
) -> dict[str, Any]:
    return {"dtype": dtype, "shape": list(shape), "names": list(names) if names is not None else None}


def flag_feature(name: str) -> dict[str, Any]:
    return {"dtype": "bool", "shape": [1], "names": [name]}


def video_feature(shape: tuple[int, int, int], fps: int) -> dict[str, Any]:
    h, w, c = shape
    return {
        "dtype": "video",
        "shape": [h, w, c],
        "names": ["height", "width", "channels"],
        "info": {
            "video.height": h,
            "video.width": w,
            "video.codec": "h264",
            "video.pix_fmt": "yuv420p",
            "video.is_depth_map": False,
            "video.fps": fps,
            "video.channels": c,
            "has_audio": False,
        },
    }


# -- tables ----------------------------------------------------------------------------------------
def arrow_column(values: Array, feature: dict[str, Any]) -> pa.Array:
    """A frame column: scalars for shape (1,) features (as LeRobot stores them), else fixed-size lists."""
    arr = np.asarray(values, dtype=np.dtype(feature["dtype"]))
    if list(feature["shape"]) == [1]:
        return pa.array(arr.reshape(-1))
    flat = pa.array(arr.reshape(-1))
    return pa.FixedSizeListArray.from_arrays(flat, type=pa.list_(flat.type, int(np.prod(arr.shape[1:]))))


def numpy_column(table: pa.Table, name: str, shape: Sequence[int]) -> Array:
    """A column as a (rows, *shape) array (shape (1,) as (rows,)); ValueError if it has gaps."""
    col = table.column(name).combine_chunks()
    if col.null_count:
        raise ValueError(f"column {name} has missing values")
    if (
        pa.types.is_list(col.type)
        or pa.types.is_fixed_size_list(col.type)
        or pa.types.is_large_list(col.type)
    ):
        return np.asarray(col.flatten().to_numpy(zero_copy_only=False)).reshape(len(col), *shape)
    return np.asarray(col.to_numpy(zero_copy_only=False))


def tasks_table(tasks: Sequence[str]) -> pa.Table:
    """``meta/tasks.parquet`` as pandas writes a frame indexed by task text (LeRobot reads it so)."""
    table = pa.table(
        {"task_index": pa.array(range(len(tasks)), pa.int64()), "task": pa.array(tasks, pa.string())}
    )
    pandas_meta = {
        "index_columns": ["task"],
        "column_indexes": [
            {
                "name": None,
                "field_name": None,
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": {"encoding": "UTF-8"},
            }
        ],
        "columns": [
            {
                "name": "task_index",
                "field_name": "task_index",
                "pandas_type": "int64",
                "numpy_type": "int64",
                "metadata": None,
            },
            {
                "name": "task",
                "field_name": "task",
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": None,
            },
        ],
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.3",
    }
    return table.replace_schema_metadata({b"pandas": json.dumps(pandas_meta).encode()})


def parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="snappy")
    return bytes(sink.getvalue().to_pybytes())


def read_parquet(
    path: Path, expected: Mapping[str, Any] | None = None, error: ErrorType = CorruptFileError
) -> pa.Table:
    """A parquet file, checked against its recorded hash and size when there is one."""
    data = read_bytes(path, expected, error)
    try:
        return pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise error(f"{path}: not a readable parquet file ({first_line(exc)})") from None
