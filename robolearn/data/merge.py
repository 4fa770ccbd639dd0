"""Datasets as a whole: merging several into one, and a summary of one."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from robolearn.data.format import CHUNKS_SIZE, DATA_PATH, INTERVENTION, SUCCESS, VIDEO_PATH, DatasetError
from robolearn.data.reader import Dataset, read_dataset
from robolearn.data.writer import DatasetWriter, EpisodeVideo


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
    sidecar = {"repo_id": base.meta.sidecar.get("repo_id", Path(out).name), "units": base.units, "files": {}}
    writer = DatasetWriter.start(Path(out), info, sidecar)
    for ds in sets:
        for ep in ds.episodes:
            columns = ds.episode_frames(ep.index)
            videos = {}
            for key in ds.camera_keys:
                frames, encoded = ds.video(ep.index, key)
                single = ds.video_file_episodes(ep.index, key) == 1
                videos[key] = EpisodeVideo(frames, encoded if single else None)
            writer.commit_episode(columns, [ds.tasks[int(i)] for i in columns["task_index"]], videos)
    writer.close()
    return Path(out)


def _size(root: Path) -> int:
    """Bytes of the files under ``root``; symlinks are neither followed nor counted."""
    total = 0
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            if not path.is_symlink():
                total += path.lstat().st_size
    return total


def dataset_info(root: Path) -> dict[str, Any]:
    """A summary: size, tasks, features, successful episodes, frames a human drove."""
    ds = read_dataset(Path(root))
    frames = ds.frames()
    episode = frames["episode_index"].astype(np.int64)
    n_ep = len(ds.episodes)
    summary: dict[str, Any] = {
        "root": str(ds.root),
        "repo_id": ds.meta.sidecar.get("repo_id"),
        "codebase_version": ds.info["codebase_version"],
        "robot_type": ds.info.get("robot_type"),
        "fps": ds.fps,
        "episodes": n_ep,
        "frames": int(ds.info["total_frames"]),
        "mean_episode_length": float(np.mean([e.length for e in ds.episodes])) if n_ep else 0.0,
        "tasks": ds.tasks,
        "cameras": ds.camera_keys,
        "features": {k: {"dtype": f["dtype"], "shape": list(f["shape"])} for k, f in ds.features.items()},
        "bytes": _size(ds.root),
    }
    if SUCCESS in frames:
        successful = np.bincount(episode, weights=frames[SUCCESS].astype(float), minlength=n_ep) > 0
        summary["successful_episodes"] = int(successful.sum())
    if INTERVENTION in frames:
        summary["intervention_frames"] = int(frames[INTERVENTION].astype(bool).sum())
    return summary
