"""The one writer of demonstrations: steps of one or many worlds in, whole episodes out.

``robolearn record`` (one simulated world, a person at a device), training with ``--hil`` (every
world of a vector environment), and the ROS 2 ``demo_recorder`` (a real robot) all write through
:class:`EpisodeWriter`. Each step carries, per world, what was seen, what was done and what followed
(reward, success, a true terminal state, whether a human drove, camera frames); a world's frames
wait in memory until its episode ends and then go out as one committed episode, so the dataset on
disk only ever holds whole episodes (a kill loses the episodes in progress, nothing else).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

from robolearn.data.format import Array, NonFiniteFrameError
from robolearn.data.writer import DatasetWriter, Frame

log = logging.getLogger(__name__)


class EpisodeWriter:
    """Buffers the episodes of ``num_worlds`` worlds and saves each to ``writer`` when it ends."""

    def __init__(
        self,
        writer: DatasetWriter,
        task: str,
        num_worlds: int = 1,
        episode_meta: Mapping[str, Any] | None = None,
    ) -> None:
        """``task`` is the task text every saved frame carries (LeRobot's language instruction);
        ``episode_meta`` goes into each saved episode's row (see :meth:`DatasetWriter.save_frames`)."""
        self.writer = writer
        self.task = task
        self.episode_meta = dict(episode_meta or {})
        self._frames: list[list[Frame]] = [[] for _ in range(num_worlds)]
        self._spoiled = [False] * num_worlds
        self.episodes_written = 0
        """Episodes saved through this writer."""
        self.episodes_dropped = 0
        """Episodes not saved because a frame held NaN or infinity."""

    @property
    def num_episodes(self) -> int:
        """Episodes in the dataset (including those there before this writer opened it)."""
        return self.writer.num_episodes

    def add(
        self,
        obs: Mapping[str, Array],
        action: Array,
        reward: Array,
        success: Array,
        terminated: Array,
        ended: Array,
        intervened: Array,
        images: Array | Mapping[str, Array] | None = None,
    ) -> list[int]:
        """One step of every world (arrays with a leading world axis); ``ended`` closes a world's
        episode, which is saved at once. Returns the indices of the episodes saved."""
        saved = []
        for i in range(len(self._frames)):
            self.add_frame(
                i,
                {k: np.asarray(v[i]) for k, v in obs.items()},
                np.asarray(action[i]),
                float(reward[i]),
                bool(success[i]),
                bool(terminated[i]),
                bool(intervened[i]),
                None if images is None else _world(images, i),
            )
            if ended[i]:
                index = self.end_episode(i)
                if index is not None:
                    saved.append(index)
        return saved

    def add_frame(
        self,
        world: int,
        obs: Mapping[str, Array],
        action: Array,
        reward: float,
        success: bool,
        terminated: bool,
        is_intervention: bool,
        image: Array | Mapping[str, Array] | None = None,
    ) -> None:
        """One step of one world (no world axis), checked against the dataset's features now.

        A frame with NaN or infinity spoils its episode: the episode is not saved (it would poison the
        dataset's statistics), said once with what was not finite, and the others go on."""
        if self._spoiled[world]:
            return
        try:
            frame = self.writer.check_frame(obs, action, reward, success, terminated, is_intervention, image)
        except NonFiniteFrameError as exc:
            log.warning("%s: world %d's episode is not saved: %s", self.writer.root, world, exc)
            self._spoiled[world], self._frames[world] = True, []
            return
        self._frames[world].append(frame)

    def end_episode(self, world: int = 0) -> int | None:
        """Save the episode of ``world`` (crash-safe) and start its next one; returns its index, None
        for an episode not saved because a frame was not finite."""
        frames, self._frames[world] = self._frames[world], []
        if self._spoiled[world]:
            self._spoiled[world] = False
            self.episodes_dropped += 1
            return None
        index = self.writer.save_frames(frames, self.task, self.episode_meta)
        self.episodes_written += 1
        return index

    def discard(self, world: int = 0) -> None:
        """Drop the frames of the episode in progress of ``world`` (re-recording it, or quitting)."""
        self._frames[world], self._spoiled[world] = [], False

    def close(self) -> None:
        """Close the dataset; episodes still in progress are dropped (the dataset holds whole ones)."""
        unsaved = sum(len(f) for f in self._frames)
        if unsaved:
            log.info("%s: %d frames of unfinished episodes are dropped", self.writer.root, unsaved)
        self._frames = [[] for _ in self._frames]
        self._spoiled = [False] * len(self._frames)
        self.writer.close()

    def __enter__(self) -> EpisodeWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _world(images: Array | Mapping[str, Array], i: int) -> Array | dict[str, Array]:
    """World ``i``'s frame of every camera."""
    return {k: v[i] for k, v in images.items()} if isinstance(images, Mapping) else images[i]
