"""Demonstrations on disk as a LeRobotDataset v3.0, written and read without the lerobot package.

The layout is LeRobot's (``CODEBASE_VERSION = "v3.0"``), so LeRobot's own ``LeRobotDataset``
loads what this module writes::

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

Crash safety: frames are buffered in memory until :meth:`DatasetWriter.save_episode`, which writes
every new file under a temporary name and renames it into place, then commits the episode by
rewriting the episodes table (the commit point), and only then stats and info. A process killed
during an episode loses that episode only; one killed inside ``save_episode`` can at worst leave
a file no episode refers to, which :meth:`DatasetWriter.open` removes. ``meta/robolearn.json``
holds the SHA-256 and size of every data and video file, so a truncated or altered file is
reported by name instead of being read.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import imageio_ffmpeg
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq
import tyro

from robolearn.data.video import write_mp4
from robolearn.policy.normalization import ActionScaler
from robolearn.rl.replay import Batch, CorruptFileError, ReplayBuffer
from robolearn.tasks.core import TaskCfg

log = logging.getLogger(__name__)

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
_INDEX_FEATURES: dict[str, dict[str, Any]] = {
    "timestamp": {"dtype": "float32", "shape": [1], "names": None},
    "frame_index": {"dtype": "int64", "shape": [1], "names": None},
    "episode_index": {"dtype": "int64", "shape": [1], "names": None},
    "index": {"dtype": "int64", "shape": [1], "names": None},
    "task_index": {"dtype": "int64", "shape": [1], "names": None},
}
_FLAGS = (DONE, SUCCESS, TERMINATED, INTERVENTION)
_VIDEO_COLUMNS = ("chunk_index", "file_index", "from_timestamp", "to_timestamp")

Array = npt.NDArray[Any]


class DatasetError(CorruptFileError):
    """A dataset that is missing, malformed or damaged, or a request it cannot serve; names the file."""


# -- small file helpers ------------------------------------------------------------------------
def _atomic_write(path: Path, data: bytes) -> str:
    """Write bytes under a temporary name, fsync, rename into place; returns their SHA-256."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return hashlib.sha256(data).hexdigest()


def _json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, indent=4, ensure_ascii=False).encode()


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="snappy")
    return bytes(sink.getvalue().to_pybytes())


def _read_parquet(path: Path, expected: Mapping[str, Any] | None = None) -> pa.Table:
    """A parquet file, checked against its recorded hash and size when there is one."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    _check_bytes(path, data, expected)
    try:
        return pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise DatasetError(f"{path}: not a readable parquet file ({_first_line(exc)})") from None


def _check_bytes(path: Path, data: bytes, expected: Mapping[str, Any] | None) -> None:
    if expected is None:
        return
    if len(data) != expected["bytes"]:
        raise DatasetError(f"{path}: {len(data)} bytes where {expected['bytes']} were written (truncated?)")
    if hashlib.sha256(data).hexdigest() != expected["sha256"]:
        raise DatasetError(f"{path}: contents do not match the SHA-256 recorded when it was written")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise DatasetError(f"{path}: missing") from None
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{path}: not readable JSON ({_first_line(exc)})") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _next_file(chunk: int, file: int) -> tuple[int, int]:
    return (chunk + 1, 0) if file == CHUNKS_SIZE - 1 else (chunk, file + 1)


# -- tables --------------------------------------------------------------------------------------
def _arrow_column(values: Array, feature: Mapping[str, Any]) -> pa.Array:
    """A frame column: scalars for shape (1,) features (as LeRobot stores them), else fixed-size lists."""
    arr = np.asarray(values, dtype=np.dtype(feature["dtype"]))
    if list(feature["shape"]) == [1]:
        return pa.array(arr.reshape(-1))
    flat = pa.array(arr.reshape(-1))
    return pa.FixedSizeListArray.from_arrays(flat, type=pa.list_(flat.type, int(np.prod(arr.shape[1:]))))


def _numpy_column(table: pa.Table, name: str, shape: Sequence[int]) -> Array:
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


def _tasks_table(tasks: Sequence[str]) -> pa.Table:
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


def _read_tasks(path: Path) -> list[str]:
    table = _read_parquet(path)
    name = "task" if "task" in table.column_names else "__index_level_0__"
    if name not in table.column_names or "task_index" not in table.column_names:
        raise DatasetError(f"{path}: no task / task_index columns")
    order = np.argsort(np.asarray(table.column("task_index").to_numpy()))
    texts = table.column(name).to_pylist()
    indices = sorted(table.column("task_index").to_pylist())
    if indices != list(range(len(indices))):
        raise DatasetError(f"{path}: task_index values are not 0..{len(indices) - 1}")
    return [str(texts[i]) for i in order]


# -- statistics ------------------------------------------------------------------------------------
def _feature_stats(values: Array) -> dict[str, Array]:
    """LeRobot's per-episode statistics of one feature over its frames (axis 0)."""
    x = np.asarray(values, np.float64)
    if x.ndim == 1:
        x = x[:, None]
    stats = {
        "min": x.min(axis=0),
        "max": x.max(axis=0),
        "mean": x.mean(axis=0),
        "std": x.std(axis=0),
        "count": np.array([len(x)]),
    }
    for q in QUANTILES:
        stats[f"q{round(q * 100):02d}"] = np.quantile(x, q, axis=0)
    return stats


def _image_stats(frames: Array) -> dict[str, Array]:
    """Per-channel statistics in [0, 1] over a sample of frames, shaped (3, 1, 1) as LeRobot's."""
    step = max(1, len(frames) // 100)
    pixels = np.asarray(frames[::step], np.float64).reshape(-1, frames.shape[-1]) / 255.0
    stats = _feature_stats(pixels)
    return {k: v if k == "count" else v.reshape(-1, 1, 1) for k, v in stats.items()}


def _aggregate_stats(per_episode: Sequence[Mapping[str, Mapping[str, Array]]]) -> dict[str, dict[str, Array]]:
    """Dataset statistics from episode statistics: exact mean and std (parallel variance), extreme
    min and max, count-weighted quantiles (as LeRobot aggregates them)."""
    out: dict[str, dict[str, Array]] = {}
    for key in per_episode[0] if per_episode else []:
        parts = [ep[key] for ep in per_episode if key in ep]
        counts = np.array([float(p["count"][0]) for p in parts])
        total = counts.sum()
        w = counts.reshape(-1, *([1] * np.asarray(parts[0]["mean"]).ndim)) / total
        means = np.stack([np.asarray(p["mean"]) for p in parts])
        mean = (w * means).sum(axis=0)
        var = (w * (np.stack([np.asarray(p["std"]) for p in parts]) ** 2 + (means - mean) ** 2)).sum(axis=0)
        agg = {
            "min": np.min(np.stack([np.asarray(p["min"]) for p in parts]), axis=0),
            "max": np.max(np.stack([np.asarray(p["max"]) for p in parts]), axis=0),
            "mean": mean,
            "std": np.sqrt(var),
            "count": np.array([int(total)]),
        }
        for q in [k for k in parts[0] if k.startswith("q")]:
            agg[q] = (w * np.stack([np.asarray(p[q]) for p in parts])).sum(axis=0)
        out[key] = agg
    return out


def _stats_from_row(row: Mapping[str, Any]) -> dict[str, dict[str, Array]]:
    stats: dict[str, dict[str, Array]] = {}
    for col, value in row.items():
        if col.startswith("stats/") and value is not None:
            feature, stat = col[len("stats/") :].rsplit("/", 1)
            stats.setdefault(feature, {})[stat] = np.asarray(value)
    return stats


def _jsonable(stats: Mapping[str, Mapping[str, Array]]) -> dict[str, dict[str, Any]]:
    return {k: {s: np.asarray(v).tolist() for s, v in d.items()} for k, d in stats.items()}


# -- metadata ------------------------------------------------------------------------------------
@dataclass
class _Meta:
    """The metadata files of a dataset, as read."""

    root: Path
    info: dict[str, Any]
    tasks: list[str]
    episodes: list[dict[str, Any]]
    """One row per episode, sorted by ``episode_index``; includes ``stats/...`` columns."""
    sidecar: dict[str, Any]

    @property
    def features(self) -> dict[str, dict[str, Any]]:
        features: dict[str, dict[str, Any]] = self.info["features"]
        return features

    @property
    def video_keys(self) -> list[str]:
        return [k for k, f in self.features.items() if f["dtype"] == "video"]

    @property
    def files(self) -> dict[str, dict[str, Any]]:
        files: dict[str, dict[str, Any]] = self.sidecar.setdefault("files", {})
        return files

    def data_file(self, row: Mapping[str, Any]) -> str:
        return str(self.info["data_path"]).format(
            chunk_index=row["data/chunk_index"], file_index=row["data/file_index"]
        )

    def video_file(self, row: Mapping[str, Any], key: str) -> str:
        return str(self.info["video_path"]).format(
            video_key=key,
            chunk_index=row[f"videos/{key}/chunk_index"],
            file_index=row[f"videos/{key}/file_index"],
        )

    def referenced(self) -> set[str]:
        """Data and video files the committed episodes refer to (relative paths)."""
        files = {self.data_file(r) for r in self.episodes}
        files |= {self.video_file(r, k) for r in self.episodes for k in self.video_keys}
        return files


def _load_meta(root: Path) -> _Meta:
    root = Path(root)
    if not (root / INFO).is_file():
        raise DatasetError(f"{root}: not a LeRobot v3 dataset ({INFO} is missing)")
    info = _read_json(root / INFO)
    required = ("codebase_version", "fps", "features", "data_path", "total_episodes", "total_frames")
    missing = [k for k in required if not isinstance(info, dict) or k not in info]
    if missing:
        raise DatasetError(f"{root / INFO}: missing {', '.join(missing)}")
    if info["codebase_version"] != CODEBASE_VERSION:
        raise DatasetError(
            f"{root / INFO}: codebase_version {info['codebase_version']!r}; only {CODEBASE_VERSION} is read "
            "(convert older datasets with LeRobot's convert_dataset_v21_to_v30)"
        )
    features = info["features"]
    if not isinstance(features, dict) or not all(
        isinstance(f, dict) and {"dtype", "shape"} <= f.keys() for f in features.values()
    ):
        raise DatasetError(f"{root / INFO}: every feature needs a dtype and a shape")
    videos = [k for k, f in features.items() if f["dtype"] == "video"]
    columns = {"episode_index", "length", "dataset_from_index", "dataset_to_index", "data/chunk_index"}
    columns |= {"data/file_index", *(f"videos/{k}/{c}" for k in videos for c in _VIDEO_COLUMNS)}
    tasks = _read_tasks(root / TASKS) if (root / TASKS).is_file() else []
    rows: list[dict[str, Any]] = []
    for path in sorted((root / "meta" / "episodes").glob("*/*.parquet")):
        table = _read_parquet(path)
        missing = sorted(columns - set(table.column_names))
        if missing:
            raise DatasetError(f"{path}: episodes table without columns {missing}")
        rows.extend(table.to_pylist())
    rows.sort(key=lambda r: int(r["episode_index"]))
    sidecar = _read_json(root / SIDECAR) if (root / SIDECAR).is_file() else {}
    return _Meta(root, info, tasks, rows, sidecar)


def _meta_problems(meta: _Meta) -> list[str]:
    """Inconsistencies between info, tasks, episodes and the files on disk (cheap checks)."""
    info, rows, root = meta.info, meta.episodes, meta.root
    problems: list[str] = []
    if info["total_episodes"] != len(rows):
        problems.append(
            f"{root / INFO}: total_episodes is {info['total_episodes']}, the episodes table has {len(rows)}"
        )
    frames = sum(int(r["length"]) for r in rows)
    if info["total_frames"] != frames:
        problems.append(
            f"{root / INFO}: total_frames is {info['total_frames']}, the episodes add up to {frames}"
        )
    if info.get("total_tasks", len(meta.tasks)) != len(meta.tasks):
        problems.append(
            f"{root / INFO}: total_tasks is {info.get('total_tasks')}, {TASKS} has {len(meta.tasks)}"
        )
    if meta.video_keys and not info.get("video_path"):
        problems.append(f"{root / INFO}: video features {meta.video_keys} but no video_path")
    at = 0
    for i, row in enumerate(rows):
        ep = int(row["episode_index"])
        if ep != i:
            problems.append(
                f"{root / 'meta/episodes'}: episode_index {ep} where {i} was expected (they must be 0..n-1)"
            )
            break
        length = int(row["length"])
        lo, hi = int(row["dataset_from_index"]), int(row["dataset_to_index"])
        if lo != at or hi - lo != length or length < 1:
            problems.append(
                f"{root / 'meta/episodes'}: episode {ep} covers frames [{lo}, {hi}) with length {length}; "
                f"expected [{at}, {at + length})"
            )
        at = hi
        unknown = [t for t in row.get("tasks") or [] if t not in meta.tasks]
        if unknown:
            problems.append(
                f"{root / 'meta/episodes'}: episode {ep} names tasks {unknown} missing from {TASKS}"
            )
        for rel in [meta.data_file(row)] + (
            [meta.video_file(row, k) for k in meta.video_keys] if info.get("video_path") else []
        ):
            if not (root / rel).is_file():
                problems.append(f"{root / rel}: missing (episode {ep})")
    return problems


# -- reading ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EpisodeInfo:
    """One episode's entry in the episodes table."""

    index: int
    """Episode index (0..n-1)."""
    length: int
    """Frames in the episode."""
    tasks: tuple[str, ...]
    """Task texts of its frames."""
    frames: tuple[int, int]
    """Global frame index range [from, to)."""


class Dataset:
    """A LeRobot v3 dataset on disk, read without lerobot; every file is checked as it is read."""

    def __init__(self, meta: _Meta) -> None:
        self._meta = meta
        self.root = meta.root
        self.info: dict[str, Any] = meta.info
        self.tasks: list[str] = meta.tasks
        self.episodes = [
            EpisodeInfo(
                int(r["episode_index"]),
                int(r["length"]),
                tuple(r.get("tasks") or ()),
                (int(r["dataset_from_index"]), int(r["dataset_to_index"])),
            )
            for r in meta.episodes
        ]
        self._tables: dict[str, pa.Table] = {}

    @property
    def fps(self) -> int:
        return int(self.info["fps"])

    @property
    def features(self) -> dict[str, dict[str, Any]]:
        return self._meta.features

    @property
    def camera_keys(self) -> list[str]:
        """Video features (``observation.images.<cam>``)."""
        return self._meta.video_keys

    @property
    def obs_keys(self) -> list[str]:
        """Observation terms recorded as their own features (without the ``observation.`` prefix)."""
        return [
            k.removeprefix(OBS)
            for k, f in self.features.items()
            if k.startswith(OBS) and k != STATE and f["dtype"] not in ("video", "image")
        ]

    @property
    def units(self) -> dict[str, list[str]]:
        """Physical units of each component of a feature, where the recorder gave them."""
        units: dict[str, list[str]] = self._meta.sidecar.get("units", {})
        return units

    def _row(self, episode: int) -> dict[str, Any]:
        if not 0 <= episode < len(self.episodes):
            raise DatasetError(
                f"{self.root}: no episode {episode}; it has episodes 0..{len(self.episodes) - 1}"
            )
        return self._meta.episodes[episode]

    def _table(self, rel: str) -> pa.Table:
        if rel not in self._tables:
            self._tables[rel] = _read_parquet(self.root / rel, self._meta.files.get(rel))
        return self._tables[rel]

    def _numeric_features(self) -> dict[str, dict[str, Any]]:
        return {k: f for k, f in self.features.items() if f["dtype"] not in ("video", "image", "string")}

    def episode_frames(self, episode: int) -> dict[str, Array]:
        """Numeric features of one episode's frames, (length, ...) arrays (shape (1,) as (length,))."""
        row = self._row(episode)
        rel = self._meta.data_file(row)
        table = self._table(rel)
        try:
            ep_col = np.asarray(table.column("episode_index").to_numpy())
            rows = np.flatnonzero(ep_col == episode)
            if len(rows) != int(row["length"]):
                raise ValueError(
                    f"{len(rows)} rows for episode {episode}, the episodes table says {row['length']}"
                )
            part = table.take(pa.array(rows))
            out = {k: _numpy_column(part, k, f["shape"]) for k, f in self._numeric_features().items()}
        except (KeyError, ValueError, pa.ArrowException) as exc:
            raise DatasetError(f"{self.root / rel}: {_first_line(exc)}") from None
        if not np.array_equal(out["frame_index"], np.arange(len(rows))) or not np.array_equal(
            out["index"], np.arange(*self.episodes[episode].frames)
        ):
            raise DatasetError(f"{self.root / rel}: frame_index or index of episode {episode} out of order")
        return out

    def frames(self, episodes: Sequence[int] | None = None) -> dict[str, Array]:
        """Numeric features of all frames (or of the given episodes), concatenated in order."""
        chosen = range(len(self.episodes)) if episodes is None else episodes
        parts = [self.episode_frames(i) for i in chosen]
        if not parts:
            return {
                k: np.zeros((0, *([] if f["shape"] == [1] else f["shape"])))
                for k, f in self._numeric_features().items()
            }
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    def video_frames(self, episode: int, key: str) -> npt.NDArray[np.uint8]:
        """One episode's frames of a camera, (length, H, W, 3) uint8, decoded from its mp4."""
        return self._video(episode, key)[0]

    def _video(self, episode: int, key: str) -> tuple[npt.NDArray[np.uint8], bytes]:
        """Decoded frames of one episode and the bytes of the whole (checked) file holding them."""
        if key not in self.camera_keys:
            raise DatasetError(
                f"{self.root}: no camera {key!r}; cameras: {', '.join(self.camera_keys) or 'none'}"
            )
        row = self._row(episode)
        rel = self._meta.video_file(row, key)
        path = self.root / rel
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise DatasetError(f"{path}: cannot be read ({exc.strerror or exc})") from None
        _check_bytes(path, data, self._meta.files.get(rel))
        first = round(float(row[f"videos/{key}/from_timestamp"]) * self.fps)
        length = int(row["length"])
        h, w, c = self.features[key]["shape"]
        frames = []
        try:
            reader = imageio_ffmpeg.read_frames(str(path), pix_fmt="rgb24")
            size = next(reader)["size"]
            if tuple(size) != (w, h):
                raise ValueError(f"frames are {size[0]}x{size[1]}, info.json says {w}x{h}")
            for i, raw in enumerate(reader):
                if i >= first + length:
                    reader.close()
                    break
                if i >= first:
                    frames.append(np.frombuffer(raw, np.uint8).reshape(h, w, c))
        except (RuntimeError, OSError, ValueError, StopIteration) as exc:
            raise DatasetError(f"{path}: not a readable video ({_first_line(exc)})") from None
        if len(frames) != length:
            raise DatasetError(f"{path}: {len(frames)} frames for episode {episode}, which has {length}")
        return np.stack(frames), data

    def _video_file_episodes(self, episode: int, key: str) -> int:
        """How many episodes share the video file that holds this episode's frames."""
        rel = self._meta.video_file(self._meta.episodes[episode], key)
        return sum(self._meta.video_file(r, key) == rel for r in self._meta.episodes)


def read_dataset(root: Path) -> Dataset:
    """Open a dataset for reading; a missing, malformed or inconsistent file raises :class:`DatasetError`."""
    meta = _load_meta(Path(root))
    problems = _meta_problems(meta)
    if problems:
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        raise DatasetError(problems[0] + more)
    return Dataset(meta)


def validate_dataset(root: Path) -> list[str]:
    """Every problem found in a dataset, one line each; an empty list means it is valid.

    Checks the metadata files against each other, every episode's frames (rows, indices,
    timestamps, task indices, feature shapes), file sizes and SHA-256 against ``meta/robolearn.json``,
    the frame count of every video, and files that no episode refers to.
    """
    root = Path(root)
    try:
        meta = _load_meta(root)
    except DatasetError as exc:
        return [str(exc)]
    problems = _meta_problems(meta)
    on_disk = {
        str(p.relative_to(root)) for p in [*root.glob("data/*/*.parquet"), *root.glob("videos/*/*/*.mp4")]
    }
    for rel in sorted(on_disk - meta.referenced()):
        problems.append(
            f"{root / rel}: no episode refers to it (an interrupted save; DatasetWriter.open removes it)"
        )
    if problems:
        return problems
    ds = Dataset(meta)
    fps = ds.fps
    for ep in ds.episodes:
        try:
            frames = ds.episode_frames(ep.index)
        except DatasetError as exc:
            problems.append(str(exc))
            continue
        rel = meta.data_file(meta.episodes[ep.index])
        expected_ts = (np.arange(ep.length) / fps).astype(np.float32)
        if not np.allclose(frames["timestamp"], expected_ts, atol=1e-4):
            problems.append(f"{root / rel}: timestamps of episode {ep.index} are not frame_index / fps")
        task_ix = frames["task_index"]
        if len(task_ix) and (task_ix.min() < 0 or task_ix.max() >= len(ds.tasks)):
            problems.append(f"{root / rel}: episode {ep.index} has task_index outside 0..{len(ds.tasks) - 1}")
        for key in ds.camera_keys:
            try:
                ds.video_frames(ep.index, key)
            except DatasetError as exc:
                problems.append(str(exc))
    for rel, table in ds._tables.items():
        expected = sum(int(r["length"]) for r in meta.episodes if meta.data_file(r) == rel)
        if table.num_rows != expected:
            problems.append(f"{root / rel}: {table.num_rows} rows, its episodes have {expected} frames")
    for key in ds.camera_keys:
        for rel in sorted({meta.video_file(r, key) for r in meta.episodes}):
            expected = sum(int(r["length"]) for r in meta.episodes if meta.video_file(r, key) == rel)
            try:
                count = imageio_ffmpeg.count_frames_and_secs(str(root / rel))[0]
            except (RuntimeError, OSError) as exc:
                count = f"unreadable ({_first_line(exc)})"
            if count != expected:
                problems.append(f"{root / rel}: {count} video frames, its episodes have {expected}")
    return problems


# -- writing ---------------------------------------------------------------------------------------
def _vector_feature(
    shape: Sequence[int], names: Sequence[str] | None, dtype: str = "float32"
) -> dict[str, Any]:
    return {"dtype": dtype, "shape": list(shape), "names": list(names) if names is not None else None}


def _flag_feature(name: str) -> dict[str, Any]:
    return {"dtype": "bool", "shape": [1], "names": [name]}


def _video_feature(shape: tuple[int, int, int], fps: int) -> dict[str, Any]:
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


@dataclass(frozen=True)
class _Video:
    """One episode of a camera, to be written."""

    frames: npt.NDArray[np.uint8]
    """(n, H, W, 3) frames (for statistics, and to encode when ``encoded`` is None)."""
    encoded: bytes | None = None
    """An mp4 holding exactly these frames, copied as is (merging)."""


@dataclass
class _Frame:
    obs: dict[str, Array]
    action: Array
    reward: float
    success: bool
    terminated: bool
    is_intervention: bool
    image: Array | None


class DatasetWriter:
    """Appends episodes to a LeRobot v3 dataset; every :meth:`save_episode` leaves a valid dataset."""

    def __init__(self, meta: _Meta) -> None:
        """Use :meth:`create`, :meth:`for_task` or :meth:`open`."""
        self._meta = meta
        self.root = meta.root
        features = meta.features
        self.obs_shapes: dict[str, tuple[int, ...]] = {
            k.removeprefix(OBS): tuple(f["shape"])
            for k, f in features.items()
            if k.startswith(OBS) and k != STATE and f["dtype"] == "float32"
        }
        self.camera = next((k for k in meta.video_keys), None)
        self.image_shape = tuple(features[self.camera]["shape"]) if self.camera else None
        self._frames: list[_Frame] = []
        self._closed = False
        # This writer's episodes go to a fresh episodes file, rewritten atomically at every save.
        last = max(
            (
                (int(r["meta/episodes/chunk_index"]), int(r["meta/episodes/file_index"]))
                for r in meta.episodes
            ),
            default=None,
        )
        self._episodes_file = (0, 0) if last is None else _next_file(*last)
        self._session_rows: list[dict[str, Any]] = []

    # -- construction --------------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        root: Path,
        *,
        repo_id: str,
        fps: int,
        robot_type: str,
        obs_shapes: Mapping[str, tuple[int, ...]],
        obs_names: Mapping[str, Sequence[str]] | None,
        action_names: Sequence[str],
        image_shape: tuple[int, int, int] | None,
        obs_units: Mapping[str, str] | None = None,
        action_units: Sequence[str] | None = None,
        camera: str = "front",
    ) -> DatasetWriter:
        """Start a new, empty dataset at ``root`` (which must not exist or be empty)."""
        root = Path(root)
        if fps < 1:
            raise DatasetError(f"fps must be a positive integer, got {fps}")
        features: dict[str, dict[str, Any]] = {}
        state_names: list[str] = []
        for key, shape in obs_shapes.items():
            if len(shape) != 1 or "/" in key:
                raise DatasetError(
                    f"observation {key!r}: only 1-D terms without '/' in the name are recorded, got {shape}"
                )
            names = (
                list(obs_names[key])
                if obs_names and key in obs_names
                else [f"{key}_{i}" for i in range(shape[0])]
            )
            if len(names) != shape[0]:
                raise DatasetError(f"observation {key!r}: {len(names)} names for {shape[0]} components")
            features[OBS + key] = _vector_feature(shape, names)
            state_names += names if not obs_names else [f"{key}.{n}" for n in names]
        features[STATE] = _vector_feature((len(state_names),), state_names)
        features[ACTION] = _vector_feature((len(action_names),), action_names)
        features[REWARD] = _vector_feature((1,), None)
        for flag in _FLAGS:
            features[flag] = _flag_feature(flag.rsplit(".", 1)[-1])
        if image_shape is not None:
            h, w, c = image_shape
            if c != 3 or h % 2 or w % 2:
                raise DatasetError(
                    f"image_shape must be (height, width, 3) with even sides (H.264), got {image_shape}"
                )
            features[IMAGES + camera] = _video_feature(image_shape, fps)
        features |= _INDEX_FEATURES
        info = {
            "codebase_version": CODEBASE_VERSION,
            "robot_type": robot_type,
            "total_episodes": 0,
            "total_frames": 0,
            "total_tasks": 0,
            "chunks_size": CHUNKS_SIZE,
            "data_files_size_in_mb": 100,
            "video_files_size_in_mb": 500,
            "fps": fps,
            "splits": {},
            "data_path": DATA_PATH,
            "video_path": VIDEO_PATH if image_shape is not None else None,
            "features": features,
        }
        units: dict[str, list[str]] = {}
        if obs_units:
            units |= {OBS + k: [obs_units[k]] * s[0] for k, s in obs_shapes.items() if k in obs_units}
            if all(k in obs_units for k in obs_shapes):
                units[STATE] = [u for k in obs_shapes for u in units[OBS + k]]
        if action_units:
            units[ACTION] = list(action_units)
        return cls._start(root, info, {"repo_id": repo_id, "units": units, "files": {}})

    @classmethod
    def for_task(
        cls,
        root: Path,
        task: TaskCfg,
        obs_shapes: Mapping[str, tuple[int, ...]],
        *,
        repo_id: str,
        image_shape: tuple[int, int, int] | None = None,
        camera: str = "front",
    ) -> DatasetWriter:
        """A new dataset for a task's observations and actions, with their units and control rate."""
        fps = round(1.0 / task.control_dt)
        if abs(fps * task.control_dt - 1.0) > 1e-6:
            raise DatasetError(f"task {task.name}: control period {task.control_dt} s is not 1/integer Hz")
        return cls.create(
            root,
            repo_id=repo_id,
            fps=fps,
            robot_type=task.scene.robot.name,
            obs_shapes=obs_shapes,
            obs_names=None,
            action_names=task.action.names,
            image_shape=image_shape,
            obs_units={k: t.units for k, t in task.observations.items()},
            action_units=task.action.units,
            camera=camera,
        )

    @classmethod
    def _start(cls, root: Path, info: dict[str, Any], sidecar: dict[str, Any]) -> DatasetWriter:
        if root.exists() and any(root.iterdir()):
            raise DatasetError(f"{root}: exists and is not empty; DatasetWriter.open appends to a dataset")
        root.mkdir(parents=True, exist_ok=True)
        meta = _Meta(root, info, [], [], sidecar)
        _atomic_write(root / TASKS, _parquet_bytes(_tasks_table([])))
        _atomic_write(root / SIDECAR, _json_bytes(sidecar))
        _atomic_write(root / INFO, _json_bytes(info))
        return cls(meta)

    @classmethod
    def open(cls, root: Path) -> DatasetWriter:
        """Append to an existing dataset, first cleaning up after an interrupted save."""
        root = Path(root)
        meta = _load_meta(root)
        missing = sorted({STATE, ACTION, REWARD, *_FLAGS} - set(meta.features))
        if missing:
            raise DatasetError(
                f"{root}: cannot append frames without features {missing} (merge_datasets still works)"
            )
        writer = cls(meta)
        writer._update_totals()  # the episodes table is the commit point; info may lag behind it
        problems = _meta_problems(meta)
        if problems:
            raise DatasetError(problems[0])
        shutil.rmtree(root / TMP, ignore_errors=True)
        referenced = meta.referenced()
        for path in [*root.glob("data/*/*.parquet"), *root.glob("videos/*/*/*.mp4")]:
            if str(path.relative_to(root)) not in referenced:
                log.warning("removing %s: no episode refers to it (an interrupted save)", path)
                path.unlink()
        for rel in [r for r in meta.files if r not in referenced]:
            del meta.files[rel]
        _atomic_write(root / SIDECAR, _json_bytes(meta.sidecar))
        writer._write_totals()
        return writer

    # -- recording -----------------------------------------------------------------------------
    def add_frame(
        self,
        obs: Mapping[str, Array],
        action: Array,
        reward: float,
        success: bool,
        terminated: bool,
        is_intervention: bool,
        image: Array | None = None,
    ) -> None:
        """Buffer one control step (no batch axis): what was seen, what was done, what followed."""
        if self._closed:
            raise DatasetError(f"{self.root}: the writer is closed")
        if set(obs) != set(self.obs_shapes):
            raise DatasetError(
                f"observation keys {sorted(obs)}; this dataset records {sorted(self.obs_shapes)}"
            )
        frame_obs = {}
        for key, shape in self.obs_shapes.items():
            value = np.asarray(obs[key], np.float32)
            if value.shape != shape:
                raise DatasetError(
                    f"observation {key!r} has shape {value.shape}; this dataset records {shape}"
                )
            frame_obs[key] = value
        act = np.asarray(action, np.float32)
        action_shape = tuple(self._meta.features[ACTION]["shape"])
        if act.shape != action_shape:
            raise DatasetError(f"action has shape {act.shape}; this dataset records {action_shape}")
        if (image is None) != (self.image_shape is None):
            raise DatasetError(
                f"image given to a dataset without a camera, or missing for camera {self.camera}"
                if image is not None
                else f"camera {self.camera} needs an image every frame"
            )
        if image is not None:
            image = np.asarray(image)
            if image.shape != self.image_shape or image.dtype != np.uint8:
                raise DatasetError(
                    f"image is {image.dtype} {image.shape}; this dataset records uint8 {self.image_shape}"
                )
        self._frames.append(
            _Frame(
                frame_obs, act, float(reward), bool(success), bool(terminated), bool(is_intervention), image
            )
        )

    @property
    def frames_buffered(self) -> int:
        """Frames of the episode being recorded."""
        return len(self._frames)

    @property
    def num_episodes(self) -> int:
        return len(self._meta.episodes)

    def discard_episode(self) -> None:
        """Drop the frames of the episode being recorded."""
        self._frames = []

    def save_episode(self, task: str) -> int:
        """Write the buffered episode at once (crash-safe); returns its episode index."""
        if not self._frames:
            raise DatasetError("save_episode: no frames were added since the last save")
        frames, self._frames = self._frames, []
        n = len(frames)
        columns: dict[str, Array] = {}
        for key in self.obs_shapes:
            columns[OBS + key] = np.stack([f.obs[key] for f in frames])
        columns[STATE] = np.concatenate([columns[OBS + k] for k in self.obs_shapes], axis=1)
        columns[ACTION] = np.stack([f.action for f in frames])
        columns[REWARD] = np.array([f.reward for f in frames], np.float32)
        columns[SUCCESS] = np.array([f.success for f in frames])
        columns[TERMINATED] = np.array([f.terminated for f in frames])
        columns[DONE] = columns[TERMINATED] | (np.arange(n) == n - 1)
        columns[INTERVENTION] = np.array([f.is_intervention for f in frames])
        videos: dict[str, _Video] = {}
        if self.camera is not None:
            videos[self.camera] = _Video(np.stack([f.image for f in frames if f.image is not None]))
        return self._commit_episode(columns, [task] * n, videos)

    def close(self) -> None:
        """Finish; frames of an unsaved episode are dropped (the dataset on disk is already complete)."""
        if self._frames:
            log.warning("closing %s with %d unsaved frames; they are dropped", self.root, len(self._frames))
        self._frames = []
        self._closed = True

    def __enter__(self) -> DatasetWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- committing ----------------------------------------------------------------------------
    def _commit_episode(
        self, columns: dict[str, Array], frame_tasks: Sequence[str], videos: Mapping[str, _Video]
    ) -> int:
        """Write one episode's files, then commit it: episodes table, then stats and info.

        Each episode gets its own data file and video file (the next file index). v3 allows any
        number of episodes per file; one per episode means a save only ever adds files, so a
        crash can never damage episodes already saved, and no saved file is rewritten (appending
        to a parquet or mp4 file in place is not atomic, rewriting it is quadratic).
        """
        meta, features = self._meta, self._meta.features
        n = len(frame_tasks)
        episode = len(meta.episodes)
        start = int(meta.info["total_frames"])
        for task in dict.fromkeys(frame_tasks):
            if task not in meta.tasks:
                meta.tasks.append(task)
        task_index = {t: i for i, t in enumerate(meta.tasks)}
        columns = dict(columns)
        columns["timestamp"] = (np.arange(n) / meta.info["fps"]).astype(np.float32)
        columns["frame_index"] = np.arange(n, dtype=np.int64)
        columns["episode_index"] = np.full(n, episode, np.int64)
        columns["index"] = np.arange(start, start + n, dtype=np.int64)
        columns["task_index"] = np.array([task_index[t] for t in frame_tasks], np.int64)

        numeric = [k for k, f in features.items() if f["dtype"] not in ("video", "image")]
        table = pa.table({k: _arrow_column(columns[k], features[k]) for k in numeric})
        stats = {k: _feature_stats(columns[k]) for k in numeric}
        last_data = max(
            ((int(r["data/chunk_index"]), int(r["data/file_index"])) for r in meta.episodes), default=None
        )
        data_at = (0, 0) if last_data is None else _next_file(*last_data)
        row: dict[str, Any] = {
            "episode_index": episode,
            "tasks": list(dict.fromkeys(frame_tasks)),
            "length": n,
            "data/chunk_index": data_at[0],
            "data/file_index": data_at[1],
            "dataset_from_index": start,
            "dataset_to_index": start + n,
        }
        data_rel = meta.data_file(row)
        data = _parquet_bytes(table)
        new_files = {data_rel: {"sha256": _atomic_write(self.root / data_rel, data), "bytes": len(data)}}
        for key in meta.video_keys:
            last = max(
                (
                    (int(r[f"videos/{key}/chunk_index"]), int(r[f"videos/{key}/file_index"]))
                    for r in meta.episodes
                ),
                default=None,
            )
            at = (0, 0) if last is None else _next_file(*last)
            row |= {
                f"videos/{key}/chunk_index": at[0],
                f"videos/{key}/file_index": at[1],
                f"videos/{key}/from_timestamp": 0.0,
                f"videos/{key}/to_timestamp": n / meta.info["fps"],
            }
            rel = meta.video_file(row, key)
            video = videos[key]
            stats[key] = _image_stats(video.frames)
            encoded = video.encoded if video.encoded is not None else self._encode(video.frames)
            new_files[rel] = {"sha256": _atomic_write(self.root / rel, encoded), "bytes": len(encoded)}
        row["meta/episodes/chunk_index"], row["meta/episodes/file_index"] = self._episodes_file
        for key, feature_stats in stats.items():
            for stat, value in feature_stats.items():
                row[f"stats/{key}/{stat}"] = np.asarray(value).tolist()

        meta.files.update(new_files)
        _atomic_write(self.root / SIDECAR, _json_bytes(meta.sidecar))
        _atomic_write(self.root / TASKS, _parquet_bytes(_tasks_table(meta.tasks)))
        self._session_rows.append(row)
        episodes_rel = EPISODES_PATH.format(
            chunk_index=self._episodes_file[0], file_index=self._episodes_file[1]
        )
        _atomic_write(self.root / episodes_rel, _parquet_bytes(pa.Table.from_pylist(self._session_rows)))
        meta.episodes.append(row)  # committed
        self._write_totals()
        return episode

    def _encode(self, frames: Array) -> bytes:
        tmp_dir = self.root / TMP
        tmp_dir.mkdir(exist_ok=True)
        tmp = tmp_dir / f"episode-{os.getpid()}.mp4"
        try:
            write_mp4(tmp, list(frames), self._meta.info["fps"])
            return tmp.read_bytes()
        finally:
            tmp.unlink(missing_ok=True)

    def _update_totals(self) -> None:
        """Totals in info from the committed episodes and tasks."""
        meta, n = self._meta, len(self._meta.episodes)
        meta.info |= {
            "total_episodes": n,
            "total_frames": sum(int(r["length"]) for r in meta.episodes),
            "total_tasks": len(meta.tasks),
            "splits": {"train": f"0:{n}"} if n else {},
        }

    def _write_totals(self) -> None:
        """stats.json and info.json from the committed episodes (written after the commit)."""
        stats = _aggregate_stats([_stats_from_row(r) for r in self._meta.episodes])
        _atomic_write(self.root / STATS, _json_bytes(_jsonable(stats)))
        self._update_totals()
        _atomic_write(self.root / INFO, _json_bytes(self._meta.info))


# -- datasets as a whole ---------------------------------------------------------------------------
def _schema(ds: Dataset) -> dict[str, tuple[str, list[int], Any]]:
    return {k: (f["dtype"], list(f["shape"]), f.get("names")) for k, f in ds.features.items()}


def merge_datasets(srcs: Sequence[Path], out: Path) -> Path:
    """Write the episodes of several datasets with the same features and fps into a new one.

    Episodes are re-indexed in the order given, tasks are merged by their text; a video file
    holding exactly one episode is copied as is, one shared by several episodes is re-encoded.
    """
    if not srcs:
        raise DatasetError("merge: give at least one source dataset")
    sets = [read_dataset(Path(s)) for s in srcs]
    base = sets[0]
    for ds in sets:
        odd = [k for k, f in ds.features.items() if f["dtype"] in ("image", "string")]
        if odd:
            raise DatasetError(
                f"{ds.root}: features {odd} are images in parquet or strings; merge copies numbers and videos"
            )
        if ds.fps != base.fps:
            raise DatasetError(
                f"{ds.root}: fps {ds.fps}, {base.root} has {base.fps}; merged datasets need one fps"
            )
        a, b = _schema(base), _schema(ds)
        differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        if differ:
            raise DatasetError(
                f"{ds.root}: features {differ} differ from {base.root}'s; merging needs the same features"
            )
    info = json.loads(json.dumps(base.info))
    info |= {
        "total_episodes": 0,
        "total_frames": 0,
        "total_tasks": 0,
        "splits": {},
        "chunks_size": CHUNKS_SIZE,
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH if base.camera_keys else None,
    }
    sidecar = {"repo_id": base._meta.sidecar.get("repo_id", Path(out).name), "units": base.units, "files": {}}
    writer = DatasetWriter._start(Path(out), info, sidecar)
    for ds in sets:
        for ep in ds.episodes:
            columns = ds.episode_frames(ep.index)
            videos = {}
            for key in ds.camera_keys:
                frames, encoded = ds._video(ep.index, key)
                videos[key] = _Video(frames, encoded if ds._video_file_episodes(ep.index, key) == 1 else None)
            writer._commit_episode(columns, [ds.tasks[int(i)] for i in columns["task_index"]], videos)
    writer.close()
    return Path(out)


def dataset_info(root: Path) -> dict[str, Any]:
    """A summary: size, tasks, features, successful episodes, frames a human drove."""
    ds = read_dataset(Path(root))
    frames = ds.frames()
    episode = frames["episode_index"].astype(np.int64)
    n_ep = len(ds.episodes)
    summary: dict[str, Any] = {
        "root": str(ds.root),
        "repo_id": ds._meta.sidecar.get("repo_id"),
        "codebase_version": ds.info["codebase_version"],
        "robot_type": ds.info.get("robot_type"),
        "fps": ds.fps,
        "episodes": n_ep,
        "frames": int(ds.info["total_frames"]),
        "mean_episode_length": float(np.mean([e.length for e in ds.episodes])) if n_ep else 0.0,
        "tasks": ds.tasks,
        "cameras": ds.camera_keys,
        "features": {k: {"dtype": f["dtype"], "shape": list(f["shape"])} for k, f in ds.features.items()},
        "bytes": sum(p.stat().st_size for p in ds.root.rglob("*") if p.is_file()),
    }
    if SUCCESS in frames:
        successful = np.bincount(episode, weights=frames[SUCCESS].astype(float), minlength=n_ep) > 0
        summary["successful_episodes"] = int(successful.sum())
    if INTERVENTION in frames:
        summary["intervention_frames"] = int(frames[INTERVENTION].astype(bool).sum())
    return summary


class DemoBuffer(ReplayBuffer):
    """Transitions from recorded episodes, and which of them a human drove."""

    def __init__(self, capacity: int, obs_shapes: dict[str, tuple[int, ...]], action_dim: int) -> None:
        super().__init__(capacity, obs_shapes, action_dim)
        self.is_intervention = np.zeros(capacity, bool)
        """Per slot: the action came from a human (HIL-SERL's intervention), not the policy."""


def load_demo_buffer(
    root: Path,
    scaler: ActionScaler,
    obs_shapes: Mapping[str, tuple[int, ...]],
    capacity: int,
    *,
    successful_only: bool = False,
) -> DemoBuffer:
    """Recorded episodes as transitions for the demonstration buffer.

    A transition's next observation is the next frame's. An episode's last frame becomes a
    transition only if it ended in a terminal state (its next observation is then never used);
    a truncated episode's last frame has no recorded successor and is left out. Actions are mapped
    to [-1, 1] by ``scaler``. ``successful_only`` keeps episodes in which ``next.success`` held.
    """
    ds = read_dataset(Path(root))
    for key, shape in obs_shapes.items():
        feature = ds.features.get(OBS + key)
        if feature is None or int(np.prod(feature["shape"])) != int(np.prod(shape)):
            have = {k: tuple(ds.features[OBS + k]["shape"]) for k in ds.obs_keys}
            raise DatasetError(f"{ds.root}: no observation {key!r} of shape {shape}; it records {have}")
    action_dim = len(scaler.low)
    if ds.features.get(ACTION, {}).get("shape") != [action_dim]:
        raise DatasetError(
            f"{ds.root}: actions are {ds.features.get(ACTION, {}).get('shape')}, the task's have {action_dim}"
        )
    frames = ds.frames()
    n = len(frames["index"])
    episode = frames["episode_index"].astype(np.int64)
    last = np.r_[episode[1:] != episode[:-1], True] if n else np.zeros(0, bool)
    terminated = frames[TERMINATED if TERMINATED in frames else DONE].astype(bool)
    keep = ~last | terminated
    if successful_only:
        success = np.bincount(episode, weights=frames[SUCCESS].astype(float), minlength=len(ds.episodes)) > 0
        keep &= success[episode]
    idx = np.flatnonzero(keep)
    nxt = np.where(last[idx], idx, idx + 1)
    obs = {k: frames[OBS + k].reshape(n, *shape).astype(np.float32) for k, shape in obs_shapes.items()}
    buffer = DemoBuffer(capacity, dict(obs_shapes), action_dim)
    if len(idx):
        buffer.add(
            Batch(
                {k: v[idx] for k, v in obs.items()},
                scaler.to_unit(frames[ACTION][idx]),
                frames[REWARD][idx].astype(np.float32),
                {k: v[nxt] for k, v in obs.items()},
                terminated[idx].astype(np.float32),
            )
        )
        flags = frames[INTERVENTION][idx].astype(bool) if INTERVENTION in frames else np.zeros(len(idx), bool)
        buffer.is_intervention[: len(buffer)] = flags[-len(buffer) :]
    return buffer


# -- command line ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class DatasetInfoCmd:
    """Summarize a dataset: episodes, frames, tasks, features, successful episodes, interventions."""

    root: tyro.conf.Positional[Path]
    """Dataset folder (LeRobotDataset v3.0)."""


@dataclass(frozen=True)
class DatasetValidateCmd:
    """Check a dataset file by file; prints every problem and exits with code 2 if there is one."""

    root: tyro.conf.Positional[Path]
    """Dataset folder (LeRobotDataset v3.0)."""


@dataclass(frozen=True)
class DatasetMergeCmd:
    """Merge datasets with the same features and fps into a new one, re-indexing episodes and tasks."""

    sources: tyro.conf.Positional[tuple[Path, ...]]
    """Dataset folders, merged in this order."""
    out: Path
    """New dataset folder (must not exist or be empty)."""


@dataclass(frozen=True)
class DatasetCmd:
    """Inspect, check and merge demonstration datasets (LeRobotDataset v3.0 on disk)."""

    what: tyro.conf.OmitSubcommandPrefixes[
        Annotated[DatasetInfoCmd, tyro.conf.subcommand("info")]
        | Annotated[DatasetValidateCmd, tyro.conf.subcommand("validate")]
        | Annotated[DatasetMergeCmd, tyro.conf.subcommand("merge")]
    ]


def _print_summary(summary: Mapping[str, Any]) -> None:
    print(
        f"{summary['root']}: {summary['episodes']} episodes, {summary['frames']} frames "
        f"at {summary['fps']} Hz ({summary['robot_type']}), {len(summary['tasks'])} tasks, "
        f"{summary['bytes'] / 1e6:.1f} MB"
    )
    if "successful_episodes" in summary:
        print(f"    successful episodes: {summary['successful_episodes']} of {summary['episodes']}")
    if "intervention_frames" in summary:
        print(f"    frames a human drove: {summary['intervention_frames']}")
    features = ", ".join(f"{k}{v['shape']}" for k, v in summary["features"].items())
    print(f"    features: {features}")


def run_dataset(cmd: DatasetCmd) -> None:
    """``robolearn dataset info | validate | merge``; the last line printed is one JSON object."""
    what = cmd.what
    if isinstance(what, DatasetInfoCmd):
        summary = dataset_info(what.root)
        _print_summary(summary)
        print(json.dumps(summary))
    elif isinstance(what, DatasetValidateCmd):
        problems = validate_dataset(what.root)
        for problem in problems:
            print(problem)
        if problems:
            raise DatasetError(f"{what.root}: {len(problems)} problem(s) found")
        summary = dataset_info(what.root)
        print(f"{what.root}: valid ({summary['episodes']} episodes, {summary['frames']} frames)")
        print(json.dumps({"root": str(what.root), "valid": True, "episodes": summary["episodes"]}))
    else:
        out = merge_datasets(what.sources, what.out)
        summary = dataset_info(out)
        _print_summary(summary)
        print(json.dumps(summary))
