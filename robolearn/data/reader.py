"""Reading a LeRobot v3 dataset without the lerobot package; every file is checked as it is read.

What is trusted (the dataset trust model, see also ``docs/``): a dataset is data, never code, and
nothing it names is read or written outside its root (path templates and feature names are
resolved and refused if they leave it, symlinks included). Integrity comes from two manifests:

* ``meta/robolearn.json`` (written by robolearn) holds the size and SHA-256 of every data and video
  file. Where it exists it must be well formed and cover every file an episode refers to; an
  emptied or truncated one refuses the dataset rather than verifying nothing.
* The episodes table's per-episode statistics (LeRobot writes them too) cover the numeric frames:
  a data file without a recorded hash (a dataset made by LeRobot, or one whose
  ``meta/robolearn.json`` was deleted) has its frames checked against them as they are read, so
  altered rewards or actions are refused either way. ``meta/stats.json`` and ``info.json`` are
  checked against the episodes table by :func:`robolearn.data.validate.validate_dataset`.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import imageio_ffmpeg
import numpy as np
import numpy.typing as npt
import pyarrow as pa

from robolearn.data import files
from robolearn.data.files import first_line, json_field, json_object
from robolearn.data.format import (
    CODEBASE_VERSION,
    INFO,
    NOT_NUMERIC,
    OBS,
    SIDECAR,
    STATE,
    TASKS,
    VIDEO_COLUMNS,
    Array,
    DatasetError,
    numpy_column,
    read_parquet,
)
from robolearn.data.stats import feature_stats, stats_differ, stats_from_row

_TEMPLATE_FIELDS = {
    "data_path": {"chunk_index", "file_index"},
    "video_path": {"video_key", "chunk_index", "file_index"},
}
_INT_COLUMNS = (
    "episode_index",
    "length",
    "dataset_from_index",
    "dataset_to_index",
    "data/chunk_index",
    "data/file_index",
)
_CHECKED_STATS = ("min", "max", "mean", "std", "count")
"""Per-episode statistics compared with the frames read (quantile algorithms vary by LeRobot version)."""


@dataclass
class DatasetMeta:
    """The metadata files of a dataset, as read."""

    root: Path
    info: dict[str, Any]
    tasks: list[str]
    episodes: list[dict[str, Any]]
    """One row per episode, sorted by ``episode_index``; includes ``stats/...`` columns."""
    sidecar: dict[str, Any]
    manifest: bool = field(default=True)
    """``meta/robolearn.json`` exists, so every data and video file must have a recorded hash."""

    @property
    def features(self) -> dict[str, dict[str, Any]]:
        features: dict[str, dict[str, Any]] = self.info["features"]
        return features

    @property
    def video_keys(self) -> list[str]:
        return [k for k, f in self.features.items() if f["dtype"] == "video"]

    @property
    def files(self) -> dict[str, dict[str, Any]]:
        recorded: dict[str, dict[str, Any]] = self.sidecar.setdefault("files", {})
        return recorded

    def path(self, rel: str) -> Path:
        """``root / rel``, refused if it leads outside the dataset."""
        return files.inside(self.root, rel, DatasetError)

    def data_file(self, row: Mapping[str, Any]) -> str:
        """The data file of an episode (relative to the root, checked to stay inside it)."""
        return self._format(
            "data_path", chunk_index=row["data/chunk_index"], file_index=row["data/file_index"]
        )

    def video_file(self, row: Mapping[str, Any], key: str) -> str:
        return self._format(
            "video_path",
            video_key=key,
            chunk_index=row[f"videos/{key}/chunk_index"],
            file_index=row[f"videos/{key}/file_index"],
        )

    def _format(self, template: str, **values: Any) -> str:
        try:
            rel = str(self.info[template]).format(**values)
        except (KeyError, ValueError, IndexError, TypeError) as exc:
            raise DatasetError(
                f"{self.root / INFO}: {template} cannot be filled in ({first_line(exc)})"
            ) from None
        self.path(rel)
        return rel

    def referenced(self) -> set[str]:
        """Data and video files the committed episodes refer to (relative paths)."""
        refs = {self.data_file(r) for r in self.episodes}
        if self.info.get("video_path"):
            refs |= {self.video_file(r, k) for r in self.episodes for k in self.video_keys}
        return refs


def _check_template(path: Path, info: Mapping[str, Any], key: str) -> None:
    """A path template names only its own fields, plainly, and is a relative path without ``..``."""
    template = info.get(key)
    if template is None and key == "video_path":
        return
    if not isinstance(template, str) or not template:
        raise DatasetError(f"{path}: {key} must be a path template (a string), got {template!r}")
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise DatasetError(f"{path}: {key} {template!r} is not a template ({first_line(exc)})") from None
    allowed = _TEMPLATE_FIELDS[key]
    odd = [f for f in fields if f not in allowed]
    if odd:
        raise DatasetError(f"{path}: {key} {template!r} uses fields {odd}; allowed: {sorted(allowed)}")
    parts = Path(template).parts
    if Path(template).is_absolute() or ".." in parts or template.startswith("~"):
        raise DatasetError(
            f"{path}: {key} {template!r} must be a path inside the dataset (relative, no '..')"
        )


def _check_info(path: Path, raw: Any) -> dict[str, Any]:
    info = json_object(raw, path, error=DatasetError)
    for key, kind in (
        ("codebase_version", str),
        ("fps", int),
        ("features", dict),
        ("data_path", str),
        ("total_episodes", int),
        ("total_frames", int),
    ):
        json_field(info, key, kind, path, error=DatasetError)
    if "total_tasks" in info:
        json_field(info, "total_tasks", int, path, error=DatasetError)
    if info["codebase_version"] != CODEBASE_VERSION:
        raise DatasetError(
            f"{path}: codebase_version {info['codebase_version']!r}; only {CODEBASE_VERSION} is read "
            "(convert older datasets with LeRobot's convert_dataset_v21_to_v30)"
        )
    if info["fps"] < 1:
        raise DatasetError(f"{path}: fps must be a positive integer, got {info['fps']}")
    for name, feature in info["features"].items():
        json_object(feature, path, f"features.{name}", DatasetError)
        json_field(feature, "dtype", str, path, f"features.{name}", DatasetError)
        shape = json_field(feature, "shape", list, path, f"features.{name}", DatasetError)
        if not shape or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in shape):
            raise DatasetError(
                f"{path}: features.{name}.shape must be a list of positive integers, got {shape}"
            )
        if feature["dtype"] == "video" and len(shape) != 3:
            raise DatasetError(
                f"{path}: features.{name} is a video, its shape must be [height, width, channels]"
            )
    _check_template(path, info, "data_path")
    _check_template(path, info, "video_path")
    return info


def _check_sidecar(path: Path, raw: Any) -> dict[str, Any]:
    sidecar = json_object(raw, path, error=DatasetError)
    recorded = json_field(sidecar, "files", dict, path, error=DatasetError)
    for rel, entry in recorded.items():
        json_object(entry, path, f"files[{rel!r}]", DatasetError)
        json_field(entry, "sha256", str, path, f"files[{rel!r}]", DatasetError)
        json_field(entry, "bytes", int, path, f"files[{rel!r}]", DatasetError)
    if "units" in sidecar:
        json_field(sidecar, "units", dict, path, error=DatasetError)
    return sidecar


def read_tasks(path: Path) -> list[str]:
    table = read_parquet(path, error=DatasetError)
    name = "task" if "task" in table.column_names else "__index_level_0__"
    if name not in table.column_names or "task_index" not in table.column_names:
        raise DatasetError(f"{path}: no task / task_index columns")
    indices = table.column("task_index").to_pylist()
    if not all(isinstance(i, int) for i in indices) or sorted(indices) != list(range(len(indices))):
        raise DatasetError(f"{path}: task_index values are not 0..{len(indices) - 1}")
    texts = table.column(name).to_pylist()
    return [str(texts[i]) for i in np.argsort(np.asarray(indices, np.int64))]


def _check_rows(path: Path, rows: list[dict[str, Any]], video_keys: Sequence[str]) -> None:
    int_columns = [
        *_INT_COLUMNS,
        *(f"videos/{k}/{c}" for k in video_keys for c in ("chunk_index", "file_index")),
    ]
    for row in rows:
        for col in int_columns:
            if not isinstance(row[col], int) or isinstance(row[col], bool):
                raise DatasetError(f"{path}: {col} of an episode is {row[col]!r}; it must be an integer")
        for key in video_keys:
            for col in (f"videos/{key}/from_timestamp", f"videos/{key}/to_timestamp"):
                if not isinstance(row[col], (int, float)) or isinstance(row[col], bool):
                    raise DatasetError(f"{path}: {col} of an episode is {row[col]!r}; it must be a number")
        tasks = row.get("tasks")
        if tasks is not None and not (isinstance(tasks, list) and all(isinstance(t, str) for t in tasks)):
            raise DatasetError(f"{path}: tasks of episode {row['episode_index']} must be a list of strings")


def load_meta(root: Path) -> DatasetMeta:
    """The metadata files, each checked for its shape (a malformed one names the file and key)."""
    root = Path(root)
    if not (root / INFO).is_file():
        raise DatasetError(f"{root}: not a LeRobot v3 dataset ({INFO} is missing)")
    info = _check_info(root / INFO, files.read_json(root / INFO, "LeRobot's info object", DatasetError))
    videos = [k for k, f in info["features"].items() if f["dtype"] == "video"]
    columns = {"episode_index", "length", "dataset_from_index", "dataset_to_index", "data/chunk_index"}
    columns |= {"data/file_index", *(f"videos/{k}/{c}" for k in videos for c in VIDEO_COLUMNS)}
    tasks = read_tasks(root / TASKS) if (root / TASKS).is_file() else []
    rows: list[dict[str, Any]] = []
    for path in sorted((root / "meta" / "episodes").glob("*/*.parquet")):
        table = read_parquet(
            files.inside(root, path.relative_to(root), DatasetError), error=DatasetError
        )
        missing = sorted(columns - set(table.column_names))
        if missing:
            raise DatasetError(f"{path}: episodes table without columns {missing}")
        part = table.to_pylist()
        _check_rows(path, part, videos)
        rows.extend(part)
    rows.sort(key=lambda r: int(r["episode_index"]))
    manifest = (root / SIDECAR).exists()
    sidecar = (
        _check_sidecar(
            root / SIDECAR, files.read_json(root / SIDECAR, "robolearn's manifest object", DatasetError)
        )
        if manifest
        else {}
    )
    return DatasetMeta(root, info, tasks, rows, sidecar, manifest)


def meta_problems(meta: DatasetMeta) -> list[str]:
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
    # A save interrupted before its commit may leave new tasks that no episode uses yet: harmless.
    unused = len(unused_tasks(meta))
    if info.get("total_tasks", len(meta.tasks)) not in range(len(meta.tasks) - unused, len(meta.tasks) + 1):
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
            elif meta.manifest and rel not in meta.files:
                problems.append(
                    f"{root / rel}: {SIDECAR} records no SHA-256 for it (a manifest covers every file read)"
                )
    return problems


def unused_tasks(meta: DatasetMeta) -> list[str]:
    """Tasks at the end of the tasks table that no committed episode names."""
    used = {t for r in meta.episodes for t in r.get("tasks") or []}
    tail = []
    for task in reversed(meta.tasks):
        if task in used:
            break
        tail.append(task)
    return tail[::-1]


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

    def __init__(self, meta: DatasetMeta) -> None:
        self.meta = meta
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
        self.tables: dict[str, pa.Table] = {}
        """Data files read so far, by relative path."""

    @property
    def fps(self) -> int:
        return int(self.info["fps"])

    @property
    def features(self) -> dict[str, dict[str, Any]]:
        return self.meta.features

    @property
    def camera_keys(self) -> list[str]:
        """Video features (``observation.images.<cam>``)."""
        return self.meta.video_keys

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
        units: dict[str, list[str]] = self.meta.sidecar.get("units", {})
        return units

    def _row(self, episode: int) -> dict[str, Any]:
        if not 0 <= episode < len(self.episodes):
            raise DatasetError(
                f"{self.root}: no episode {episode}; it has episodes 0..{len(self.episodes) - 1}"
            )
        return self.meta.episodes[episode]

    def _table(self, rel: str) -> pa.Table:
        if rel not in self.tables:
            self.tables[rel] = read_parquet(self.meta.path(rel), self.meta.files.get(rel), DatasetError)
        return self.tables[rel]

    def numeric_features(self) -> dict[str, dict[str, Any]]:
        return {k: f for k, f in self.features.items() if f["dtype"] not in NOT_NUMERIC}

    def episode_frames(self, episode: int) -> dict[str, Array]:
        """Numeric features of one episode's frames, (length, ...) arrays (shape (1,) as (length,))."""
        row = self._row(episode)
        rel = self.meta.data_file(row)
        table = self._table(rel)
        try:
            ep_col = np.asarray(table.column("episode_index").to_numpy())
            rows = np.flatnonzero(ep_col == episode)
            if len(rows) != int(row["length"]):
                raise ValueError(
                    f"{len(rows)} rows for episode {episode}, the episodes table says {row['length']}"
                )
            part = table.take(pa.array(rows))
            out = {k: numpy_column(part, k, f["shape"]) for k, f in self.numeric_features().items()}
        except (KeyError, ValueError, TypeError, pa.ArrowException) as exc:
            raise DatasetError(f"{self.root / rel}: {first_line(exc)}") from None
        if not np.array_equal(out["frame_index"], np.arange(len(rows))) or not np.array_equal(
            out["index"], np.arange(*self.episodes[episode].frames)
        ):
            raise DatasetError(f"{self.root / rel}: frame_index or index of episode {episode} out of order")
        if rel not in self.meta.files:
            self._check_against_stats(episode, rel, out)
        return out

    def _check_against_stats(self, episode: int, rel: str, frames: Mapping[str, Array]) -> None:
        """Frames of a file without a recorded hash must match the episode's recorded statistics."""
        recorded = stats_from_row(self.meta.episodes[episode])
        for key, values in frames.items():
            if key not in recorded:
                continue
            differ = stats_differ(feature_stats(values), recorded[key], _CHECKED_STATS)
            if differ:
                raise DatasetError(
                    f"{self.root / rel}: {key} of episode {episode} does not match its recorded "
                    f"statistics ({', '.join(differ)}): the frames were altered"
                )

    def frames(self, episodes: Sequence[int] | None = None) -> dict[str, Array]:
        """Numeric features of all frames (or of the given episodes), concatenated in order."""
        chosen = range(len(self.episodes)) if episodes is None else episodes
        parts = [self.episode_frames(i) for i in chosen]
        if not parts:
            return {
                k: np.zeros((0, *([] if f["shape"] == [1] else f["shape"])))
                for k, f in self.numeric_features().items()
            }
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    def video_frames(self, episode: int, key: str) -> npt.NDArray[np.uint8]:
        """One episode's frames of a camera, (length, H, W, 3) uint8, decoded from its mp4."""
        return self.video(episode, key)[0]

    def video(self, episode: int, key: str) -> tuple[npt.NDArray[np.uint8], bytes]:
        """Decoded frames of one episode and the bytes of the whole (checked) file holding them."""
        if key not in self.camera_keys:
            raise DatasetError(
                f"{self.root}: no camera {key!r}; cameras: {', '.join(self.camera_keys) or 'none'}"
            )
        row = self._row(episode)
        rel = self.meta.video_file(row, key)
        path = self.meta.path(rel)
        data = files.read_bytes(path, self.meta.files.get(rel), DatasetError)
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
            raise DatasetError(f"{path}: not a readable video ({first_line(exc)})") from None
        if len(frames) != length:
            raise DatasetError(f"{path}: {len(frames)} frames for episode {episode}, which has {length}")
        return np.stack(frames), data

    def video_file_episodes(self, episode: int, key: str) -> int:
        """How many episodes share the video file that holds this episode's frames."""
        rel = self.meta.video_file(self.meta.episodes[episode], key)
        return sum(self.meta.video_file(r, key) == rel for r in self.meta.episodes)


def read_dataset(root: Path) -> Dataset:
    """Open a dataset for reading; a missing, malformed or inconsistent file raises :class:`DatasetError`."""
    meta = load_meta(Path(root))
    problems = meta_problems(meta)
    if problems:
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        raise DatasetError(problems[0] + more)
    return Dataset(meta)
