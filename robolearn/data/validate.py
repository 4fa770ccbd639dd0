"""``dataset validate``: every problem of a dataset, file by file, and what is merely left over.

A problem makes the dataset unusable or untrustworthy (a missing, damaged or altered file,
metadata that contradict each other, statistics LeRobot would normalize with that are absurd or
not the episodes'). A warning is something a crash can leave behind without harming the committed
episodes: a data or video file that no episode refers to (a save killed after writing it but before
its commit; :meth:`~robolearn.data.writer.DatasetWriter.open` removes it), or a task no episode uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import imageio_ffmpeg
import numpy as np

from robolearn.data import files
from robolearn.data.files import first_line
from robolearn.data.format import STATS, TASKS, DatasetError
from robolearn.data.reader import Dataset, DatasetMeta, load_meta, meta_problems, unused_tasks
from robolearn.data.stats import (
    BASIC,
    aggregate_stats,
    feature_stats,
    stats_differ,
    stats_from_row,
    stats_problems,
)


@dataclass
class Validation:
    """What :func:`check_dataset` found."""

    problems: list[str] = field(default_factory=list)
    """One line each; any problem makes the dataset invalid."""
    warnings: list[str] = field(default_factory=list)
    """Leftovers of an interrupted save; the committed episodes are valid."""


def validate_dataset(root: Path) -> list[str]:
    """Every problem found in a dataset, one line each; an empty list means it is valid."""
    return check_dataset(root).problems


def _leftovers(meta: DatasetMeta) -> list[str]:
    root = meta.root
    on_disk = {
        str(p.relative_to(root)) for p in [*root.glob("data/*/*.parquet"), *root.glob("videos/*/*/*.mp4")]
    }
    warnings = [
        f"{root / rel}: no episode refers to it (an interrupted save; DatasetWriter.open removes it)"
        for rel in sorted(on_disk - meta.referenced())
    ]
    unused = unused_tasks(meta)
    if unused:
        warnings.append(f"{root / TASKS}: tasks {unused} are named by no episode (an interrupted save)")
    return warnings


def check_dataset(root: Path) -> Validation:
    """Check a dataset file by file.

    The metadata files against each other, every episode's frames (rows, indices, timestamps,
    task indices, feature shapes, their statistics in the episodes table), file sizes and SHA-256
    against ``meta/robolearn.json``, the frame count of every video, and ``meta/stats.json`` (what
    LeRobot normalizes with) against the episodes' statistics.
    """
    root = Path(root)
    out = Validation()
    try:
        meta = load_meta(root)
        out.problems = meta_problems(meta)
        out.warnings = _leftovers(meta)
    except DatasetError as exc:
        out.problems.append(str(exc))
        return out
    if out.problems:
        return out
    ds = Dataset(meta)
    for ep in ds.episodes:
        out.problems += _episode_problems(ds, ep.index)
    for rel, table in ds.tables.items():
        expected = sum(int(r["length"]) for r in meta.episodes if meta.data_file(r) == rel)
        if table.num_rows != expected:
            out.problems.append(f"{root / rel}: {table.num_rows} rows, its episodes have {expected} frames")
    if meta.info.get("video_path"):
        for key in ds.camera_keys:
            for rel in sorted({meta.video_file(r, key) for r in meta.episodes}):
                expected = sum(int(r["length"]) for r in meta.episodes if meta.video_file(r, key) == rel)
                try:
                    count = imageio_ffmpeg.count_frames_and_secs(str(root / rel))[0]
                except (RuntimeError, OSError) as exc:
                    count = f"unreadable ({first_line(exc)})"
                if count != expected:
                    out.problems.append(f"{root / rel}: {count} video frames, its episodes have {expected}")
    out.problems += _stats_file_problems(meta)
    return out


def _episode_problems(ds: Dataset, episode: int) -> list[str]:
    meta, root = ds.meta, ds.root
    try:
        frames = ds.episode_frames(episode)
    except DatasetError as exc:
        return [str(exc)]
    problems = []
    row = meta.episodes[episode]
    rel = meta.data_file(row)
    length = int(row["length"])
    expected_ts = (np.arange(length) / ds.fps).astype(np.float32)
    if not np.allclose(frames["timestamp"], expected_ts, atol=1e-4):
        problems.append(f"{root / rel}: timestamps of episode {episode} are not frame_index / fps")
    task_ix = frames["task_index"]
    if len(task_ix) and (task_ix.min() < 0 or task_ix.max() >= len(ds.tasks)):
        problems.append(f"{root / rel}: episode {episode} has task_index outside 0..{len(ds.tasks) - 1}")
    recorded = stats_from_row(row)
    for key, values in frames.items():
        if key in recorded:
            differ = stats_differ(feature_stats(values), recorded[key], BASIC)
            if differ:
                problems.append(
                    f"{root / 'meta/episodes'}: statistics of {key} in episode {episode} "
                    f"({', '.join(differ)}) are not those of its frames in {rel}"
                )
    for key in ds.camera_keys:
        try:
            ds.video_frames(episode, key)
        except DatasetError as exc:
            problems.append(str(exc))
    return problems


def _stats_file_problems(meta: DatasetMeta) -> list[str]:
    """``meta/stats.json``: readable JSON (never a pickle), sane values, the episodes' aggregate."""
    path = meta.root / STATS
    if not meta.episodes and not path.exists():
        return []
    try:
        raw = files.read_json(path, "LeRobot's per-feature statistics object", DatasetError)
    except DatasetError as exc:
        return [str(exc)]
    expected = aggregate_stats([stats_from_row(r) for r in meta.episodes])
    return stats_problems(raw, meta.features, expected, path)
