"""Writing a LeRobot v3 dataset: episodes appended one at a time, each save crash-safe.

Frames are buffered in memory until :meth:`DatasetWriter.save_episode`, which writes every new
file under a temporary name and renames it into place, then commits the episode by rewriting the
episodes table (the commit point), and only then stats and info. A process killed during an
episode loses that episode only; one killed inside ``save_episode`` can at worst leave a file no
episode refers to (``dataset validate`` warns of it), which :meth:`DatasetWriter.open` removes.
``meta/robolearn.json`` holds the SHA-256 and size of every data and video file, so a truncated
or altered file is reported by name instead of being read. Recorders write through
:class:`robolearn.data.episodes.EpisodeWriter`, which batches worlds on top of this.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from robolearn.data import files
from robolearn.data.files import atomic_write, json_bytes
from robolearn.data.format import (
    ACTION,
    CHUNKS_SIZE,
    CODEBASE_VERSION,
    DATA_PATH,
    DONE,
    EPISODES_PATH,
    FLAGS,
    IMAGES,
    INDEX_FEATURES,
    INFO,
    INTERVENTION,
    OBS,
    REWARD,
    SIDECAR,
    STATE,
    STATS,
    SUCCESS,
    TASKS,
    TERMINATED,
    TMP,
    VIDEO_PATH,
    Array,
    DatasetError,
    NonFiniteFrameError,
    arrow_column,
    flag_feature,
    next_file,
    parquet_bytes,
    tasks_table,
    vector_feature,
    video_feature,
)
from robolearn.data.reader import DatasetMeta, load_meta, meta_problems
from robolearn.data.stats import aggregate_stats, feature_stats, image_stats, jsonable, stats_from_row
from robolearn.data.video import write_mp4
from robolearn.tasks.core import TaskCfg

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EpisodeVideo:
    """One episode of a camera, to be written."""

    frames: npt.NDArray[np.uint8]
    """(n, H, W, 3) frames (for statistics, and to encode when ``encoded`` is None)."""
    encoded: bytes | None = None
    """An mp4 holding exactly these frames, copied as is (merging)."""


@dataclass
class Frame:
    """One control step, checked against the dataset's features (see :meth:`DatasetWriter.check_frame`)."""

    obs: dict[str, Array]
    action: Array
    reward: float
    success: bool
    terminated: bool
    is_intervention: bool
    image: Mapping[str, Array] | None
    """Camera frames by video feature (``observation.images.<cam>``), or None without cameras."""


class DatasetWriter:
    """Appends episodes to a LeRobot v3 dataset; every :meth:`save_episode` leaves a valid dataset."""

    def __init__(self, meta: DatasetMeta) -> None:
        """Use :meth:`create`, :meth:`for_task` or :meth:`open`."""
        self._meta = meta
        self.root = meta.root
        features = meta.features
        self.obs_shapes: dict[str, tuple[int, ...]] = {
            k.removeprefix(OBS): tuple(f["shape"])
            for k, f in features.items()
            if k.startswith(OBS) and k != STATE and f["dtype"] == "float32"
        }
        self.cameras: dict[str, tuple[int, ...]] = {k: tuple(features[k]["shape"]) for k in meta.video_keys}
        """Video features (``observation.images.<cam>``) and their (H, W, 3) frame shapes."""
        self._frames: list[Frame] = []
        self._closed = False
        # This writer's episodes go to a fresh episodes file, rewritten atomically at every save.
        last = max(
            (
                (int(r["meta/episodes/chunk_index"]), int(r["meta/episodes/file_index"]))
                for r in meta.episodes
            ),
            default=None,
        )
        self._episodes_file = (0, 0) if last is None else next_file(*last)
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
        cameras: Mapping[str, tuple[int, int, int]] | None = None,
    ) -> DatasetWriter:
        """Start a new, empty dataset at ``root`` (which must not exist or be empty).

        ``image_shape`` records one camera named ``camera``; ``cameras`` (name to (H, W, 3)) records
        several, each as its own video feature ``observation.images.<name>``.
        """
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
            features[OBS + key] = vector_feature(shape, names)
            state_names += names if not obs_names else [f"{key}.{n}" for n in names]
        features[STATE] = vector_feature((len(state_names),), state_names)
        features[ACTION] = vector_feature((len(action_names),), action_names)
        features[REWARD] = vector_feature((1,), None)
        for flag in FLAGS:
            features[flag] = flag_feature(flag.rsplit(".", 1)[-1])
        videos = dict(cameras or {})
        if image_shape is not None:
            videos[camera] = image_shape
        for name, shape in videos.items():
            h, w, c = shape
            if c != 3 or h % 2 or w % 2 or not name or "/" in name:
                raise DatasetError(
                    f"camera {name!r}: frames must be (height, width, 3) with even sides (H.264) and the "
                    f"name non-empty without '/', got {tuple(shape)}"
                )
            features[IMAGES + name] = video_feature((h, w, c), fps)
        features |= INDEX_FEATURES
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
            "video_path": VIDEO_PATH if videos else None,
            "features": features,
        }
        units: dict[str, list[str]] = {}
        if obs_units:
            units |= {OBS + k: [obs_units[k]] * s[0] for k, s in obs_shapes.items() if k in obs_units}
            if all(k in obs_units for k in obs_shapes):
                units[STATE] = [u for k in obs_shapes for u in units[OBS + k]]
        if action_units:
            units[ACTION] = list(action_units)
        return cls.start(root, info, {"repo_id": repo_id, "units": units, "files": {}})

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
        cameras: Mapping[str, tuple[int, int, int]] | None = None,
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
            cameras=cameras,
        )

    @classmethod
    def start(cls, root: Path, info: dict[str, Any], sidecar: dict[str, Any]) -> DatasetWriter:
        if root.exists() and any(root.iterdir()):
            raise DatasetError(f"{root}: exists and is not empty; DatasetWriter.open appends to a dataset")
        root.mkdir(parents=True, exist_ok=True)
        meta = DatasetMeta(root, info, [], [], sidecar)
        writer = cls(meta)
        writer._write(TASKS, parquet_bytes(tasks_table([])))
        writer._write(SIDECAR, json_bytes(sidecar))
        writer._write(INFO, json_bytes(info))
        return writer

    @classmethod
    def open(cls, root: Path) -> DatasetWriter:
        """Append to an existing dataset, first cleaning up after an interrupted save."""
        root = Path(root)
        meta = load_meta(root)
        missing = sorted({STATE, ACTION, REWARD, *FLAGS} - set(meta.features))
        if missing:
            raise DatasetError(
                f"{root}: cannot append frames without features {missing} (merge_datasets still works)"
            )
        writer = cls(meta)
        writer._update_totals()  # the episodes table is the commit point; info may lag behind it
        problems = meta_problems(meta)
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
        if not meta.manifest:
            # A dataset robolearn did not write (LeRobot's): its files are hashed as they are now, so
            # the manifest covers every file from here on.
            for rel in sorted(referenced):
                data = files.read_bytes(meta.path(rel), error=DatasetError)
                meta.files[rel] = {"sha256": files.sha256(data), "bytes": len(data)}
            meta.manifest = True
        writer._write(SIDECAR, json_bytes(meta.sidecar))
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
        image: Array | Mapping[str, Array] | None = None,
    ) -> None:
        """Buffer one control step (no batch axis): what was seen, what was done, what followed.

        ``image`` is the frame of a dataset's only camera, or frames by camera name (``wrist``).
        """
        self._frames.append(
            self.check_frame(obs, action, reward, success, terminated, is_intervention, image)
        )

    def check_frame(
        self,
        obs: Mapping[str, Array],
        action: Array,
        reward: float,
        success: bool,
        terminated: bool,
        is_intervention: bool,
        image: Array | Mapping[str, Array] | None = None,
    ) -> Frame:
        """One control step as this dataset records it; bad shapes are refused here, not at the save."""
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
        values: dict[str, Any] = {f"observation {k!r}": v for k, v in frame_obs.items()}
        values |= {"the action": act, "the reward": np.float32(reward)}
        for what, value in values.items():
            if not np.isfinite(value).all():
                raise NonFiniteFrameError(f"{what} is not finite ({np.array2string(value, threshold=8)})")
        images = self._check_images(image)
        return Frame(
            frame_obs, act, float(reward), bool(success), bool(terminated), bool(is_intervention), images
        )

    def _check_images(self, image: Array | Mapping[str, Array] | None) -> dict[str, Array] | None:
        """Frames by video feature, each uint8 of its camera's shape; every camera needs one."""
        names = [k.removeprefix(IMAGES) for k in self.cameras]
        if image is None:
            if self.cameras:
                raise DatasetError(f"cameras {names} need an image every frame")
            return None
        if not self.cameras:
            raise DatasetError("image given to a dataset without a camera")
        if not isinstance(image, Mapping):
            if len(self.cameras) != 1:
                raise DatasetError(
                    f"an image without a camera name; this dataset records cameras {names or 'none'}"
                )
            image = {names[0]: image}
        if sorted(image) != sorted(names):
            raise DatasetError(f"images of cameras {sorted(image)}; this dataset records {sorted(names)}")
        out = {}
        for key, shape in self.cameras.items():
            frame = np.asarray(image[key.removeprefix(IMAGES)])
            if frame.shape != shape or frame.dtype != np.uint8:
                raise DatasetError(
                    f"image of {key} is {frame.dtype} {frame.shape}; this dataset records uint8 {shape}"
                )
            out[key] = frame
        return out

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
        frames, self._frames = self._frames, []
        return self.save_frames(frames, task)

    def save_frames(
        self, frames: Sequence[Frame], task: str, episode_meta: Mapping[str, Any] | None = None
    ) -> int:
        """Write one episode from checked frames at once (crash-safe); returns its episode index.

        ``episode_meta`` adds columns to the episode's row of the episodes table (how it was
        recorded: ``robolearn/policy``, ``robolearn/action_noise``); LeRobot ignores them.
        """
        if not frames:
            raise DatasetError("save_episode: no frames were added since the last save")
        if self._closed:
            raise DatasetError(f"{self.root}: the writer is closed")
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
        videos: dict[str, EpisodeVideo] = {}
        for key in self.cameras:
            videos[key] = EpisodeVideo(np.stack([f.image[key] for f in frames if f.image is not None]))
        return self.commit_episode(columns, [task] * n, videos, episode_meta)

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
    def commit_episode(
        self,
        columns: dict[str, Array],
        frame_tasks: Sequence[str],
        videos: Mapping[str, EpisodeVideo],
        episode_meta: Mapping[str, Any] | None = None,
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
        table = pa.table({k: arrow_column(columns[k], features[k]) for k in numeric})
        stats = {k: feature_stats(columns[k]) for k in numeric}
        last_data = max(
            ((int(r["data/chunk_index"]), int(r["data/file_index"])) for r in meta.episodes), default=None
        )
        data_at = (0, 0) if last_data is None else next_file(*last_data)
        row: dict[str, Any] = {
            "episode_index": episode,
            "tasks": list(dict.fromkeys(frame_tasks)),
            "length": n,
            "data/chunk_index": data_at[0],
            "data/file_index": data_at[1],
            "dataset_from_index": start,
            "dataset_to_index": start + n,
            **(episode_meta or {}),
        }
        data_rel = meta.data_file(row)
        data = parquet_bytes(table)
        new_files = {data_rel: {"sha256": self._write(data_rel, data), "bytes": len(data)}}
        for key in meta.video_keys:
            last = max(
                (
                    (int(r[f"videos/{key}/chunk_index"]), int(r[f"videos/{key}/file_index"]))
                    for r in meta.episodes
                ),
                default=None,
            )
            at = (0, 0) if last is None else next_file(*last)
            row |= {
                f"videos/{key}/chunk_index": at[0],
                f"videos/{key}/file_index": at[1],
                f"videos/{key}/from_timestamp": 0.0,
                f"videos/{key}/to_timestamp": n / meta.info["fps"],
            }
            rel = meta.video_file(row, key)
            video = videos[key]
            stats[key] = image_stats(video.frames)
            encoded = video.encoded if video.encoded is not None else self._encode(video.frames)
            new_files[rel] = {"sha256": self._write(rel, encoded), "bytes": len(encoded)}
        row["meta/episodes/chunk_index"], row["meta/episodes/file_index"] = self._episodes_file
        for key, per_stat in stats.items():
            for stat, value in per_stat.items():
                row[f"stats/{key}/{stat}"] = np.asarray(value).tolist()

        meta.files.update(new_files)
        self._write(SIDECAR, json_bytes(meta.sidecar))
        self._write(TASKS, parquet_bytes(tasks_table(meta.tasks)))
        self._session_rows.append(row)
        episodes_rel = EPISODES_PATH.format(
            chunk_index=self._episodes_file[0], file_index=self._episodes_file[1]
        )
        self._write(episodes_rel, parquet_bytes(pa.Table.from_pylist(self._session_rows)))
        meta.episodes.append(row)  # committed
        self._write_totals()
        return episode

    def _write(self, rel: str, data: bytes) -> str:
        """Write a file of the dataset atomically, never outside its root; returns its SHA-256."""
        return atomic_write(files.inside(self.root, rel, DatasetError), data)

    def _encode(self, frames: Array) -> bytes:
        tmp_dir = files.inside(self.root, TMP, DatasetError)
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
        stats = aggregate_stats([stats_from_row(r) for r in self._meta.episodes])
        self._write(STATS, json_bytes(jsonable(stats)))
        self._update_totals()
        self._write(INFO, json_bytes(self._meta.info))
