"""Replays recorded episodes of a LeRobot dataset as if their person were driving again.

Each :meth:`~PlaybackDevice.reset` moves to the next chosen episode (the first read before any
reset starts the first). Every step reports the recorded action and the recorded intervention
flag as ``intervening``, so re-recording a dataset keeps its flags. Past an episode's last frame
it reports no action and the recorded outcome as an event (SUCCESS if a frame recorded success,
else FAILURE), which ends the episode where the recording ended; after the last chosen episode
it reports QUIT. With the same task, backend and reset seed, the simulation replays the recording.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from robolearn.sim.backend import FloatArray
from robolearn.tasks.core import TaskCfg
from robolearn.teleop.device import Device, DeviceError, ObsDict, TeleopCommand, TeleopEvent


class PlaybackDevice(Device):
    """Plays the actions of recorded episodes of the dataset at ``root``."""

    name = "replay"

    def __init__(self, task_cfg: TaskCfg, *, root: Path | str, episodes: Sequence[int] | None = None) -> None:
        self.task_cfg, self.root = task_cfg, Path(root)
        self.chosen = list(episodes) if episodes is not None else None
        self._episodes: list[tuple[FloatArray, np.ndarray, bool]] = []
        self._current = -1
        self._step = 0

    def connect(self) -> None:
        from robolearn.data.format import ACTION, INTERVENTION, SUCCESS, DatasetError
        from robolearn.data.reader import read_dataset

        try:
            ds = read_dataset(self.root)
        except DatasetError as exc:
            raise DeviceError(f"replay: {exc}") from None
        names = ds.features.get(ACTION, {}).get("names")
        if names != list(self.task_cfg.action.names):
            raise DeviceError(
                f"replay: {self.root} records actions {names}; task {self.task_cfg.name} has "
                f"{list(self.task_cfg.action.names)}"
            )
        chosen = self.chosen if self.chosen is not None else range(len(ds.episodes))
        bad = [i for i in chosen if not 0 <= i < len(ds.episodes)]
        if bad:
            raise DeviceError(f"replay: {self.root} has episodes 0..{len(ds.episodes) - 1}; asked for {bad}")
        self._episodes = []
        for i in chosen:
            frames = ds.episode_frames(i)
            flags = (
                frames[INTERVENTION].astype(bool)
                if INTERVENTION in frames
                else np.ones(len(frames[ACTION]), bool)
            )
            success = bool(frames[SUCCESS].any()) if SUCCESS in frames else False
            self._episodes.append((frames[ACTION].astype(np.float64), flags, success))
        self._current, self._step = -1, 0

    def reset(self) -> None:
        self._current += 1
        self._step = 0

    def read(self, obs: ObsDict) -> TeleopCommand:
        if self._current < 0:
            self.reset()
        if self._current >= len(self._episodes):
            return TeleopCommand(None, False, frozenset({TeleopEvent.QUIT}))
        actions, flags, success = self._episodes[self._current]
        t = self._step
        self._step += 1
        if t >= len(actions):
            return TeleopCommand(
                None, False, frozenset({TeleopEvent.SUCCESS if success else TeleopEvent.FAILURE})
            )
        intervening = bool(flags[t])
        return TeleopCommand(
            actions[t].copy(), intervening, frozenset({TeleopEvent.INTERVENE}) if intervening else frozenset()
        )

    def disconnect(self) -> None:
        self._episodes = []
