"""Replay for image observations: every step's frames stored once, as uint8 (issue 13).

A transition's next observation is the next step's observation, so :class:`FrameReplay` keeps
observations, not transitions: a ring of slots, each holding one step's observation (state terms
as float32, camera frames as uint8) and, when a transition starts there, its action, reward,
terminal flag and the slot of its next observation. A step of a running episode takes one slot per
world; an ended episode takes one more, for its final observation. DrQ (Kostrikov et al., 2020)
and DrQ-v2 (Yarats et al., 2021) store frames the same way, indexed by step; storing ``next_obs``
beside ``obs`` would double the memory images take.

Capacity is chosen from a memory budget (:func:`capacity_for_budget`); :attr:`FrameReplay.bytes_per_slot`
reports what one step costs. A learner on a GPU keeps a copy of the observations in the GPU's memory
(:meth:`FrameReplay.keep_on`) and gathers its batches there (:meth:`FrameReplay.take_tensors`): on
the host, a batch of 256 transitions of two 64x64 cameras is 12.6 MB of frames gathered and copied
over at every update. Recorded episodes whose cameras went to LeRobot mp4 files become image
observations with :func:`load_image_demos`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import torch

from robolearn.data.format import ACTION, DONE, IMAGES, OBS, REWARD, TERMINATED, DatasetError
from robolearn.data.reader import read_dataset
from robolearn.data.video import episode_video
from robolearn.errors import ConfigError
from robolearn.policy.normalization import ActionScaler
from robolearn.rl.replay import Batch

log = logging.getLogger(__name__)


def _dtype_of(shape: tuple[int, ...]) -> type[np.generic]:
    """Frames (H, W, 3) are uint8; every other term is float32."""
    return np.uint8 if len(shape) == 3 and shape[-1] == 3 else np.float32


def slot_bytes(obs_shapes: Mapping[str, tuple[int, ...]], action_dim: int) -> int:
    """Bytes one slot takes: one observation, an action, a reward, flags and a successor index."""
    obs = sum(int(np.prod(s)) * np.dtype(_dtype_of(tuple(s))).itemsize for s in obs_shapes.values())
    return obs + 4 * action_dim + 4 + 4 + 8 + 1


def capacity_for_budget(budget_bytes: int, obs_shapes: Mapping[str, tuple[int, ...]], action_dim: int) -> int:
    """The most slots that fit in ``budget_bytes``; :class:`ConfigError` if not even a few do."""
    per = slot_bytes(obs_shapes, action_dim)
    capacity = int(budget_bytes // per)
    if capacity < 16:
        raise ConfigError(
            f"a replay memory budget of {budget_bytes} bytes holds {capacity} steps of {per} bytes; "
            f"give at least {16 * per} bytes"
        )
    return capacity


class TensorBatch(NamedTuple):
    """A batch of transitions as tensors on the learner's device (frames uint8, terms float32)."""

    obs: dict[str, torch.Tensor]
    action: torch.Tensor
    reward: torch.Tensor
    next_obs: dict[str, torch.Tensor]
    terminated: torch.Tensor

    @staticmethod
    def of(batch: Batch, device: torch.device) -> TensorBatch:
        """A numpy batch copied to ``device``."""

        def tensor(x: npt.NDArray[Any]) -> torch.Tensor:
            return torch.as_tensor(np.ascontiguousarray(x), device=device)

        return TensorBatch(
            {k: tensor(v) for k, v in batch.obs.items()},
            tensor(batch.action),
            tensor(batch.reward),
            {k: tensor(v) for k, v in batch.next_obs.items()},
            tensor(batch.terminated),
        )

    @staticmethod
    def cat(parts: Sequence[TensorBatch], groups: int = 1) -> TensorBatch:
        """The batches one after another, in ``groups`` consecutive groups that each hold an equal
        share of every part (so that each critic step's slice mixes the parts as the whole does)."""

        def join(xs: list[torch.Tensor]) -> torch.Tensor:
            split = [x.reshape(groups, len(x) // groups, *x.shape[1:]) for x in xs]
            return torch.cat(split, dim=1).reshape(-1, *xs[0].shape[1:])

        first = parts[0]
        return TensorBatch(
            {k: join([p.obs[k] for p in parts]) for k in first.obs},
            join([p.action for p in parts]),
            join([p.reward for p in parts]),
            {k: join([p.next_obs[k] for p in parts]) for k in first.next_obs},
            join([p.terminated for p in parts]),
        )


class FrameReplay:
    """A ring of observation slots; transitions point at their next observation's slot."""

    def __init__(self, capacity: int, obs_shapes: Mapping[str, tuple[int, ...]], action_dim: int) -> None:
        if capacity < 16:
            raise ConfigError(f"replay capacity {capacity}: must be at least 16 steps")
        self.capacity = capacity
        self.obs_shapes = {k: tuple(s) for k, s in obs_shapes.items()}
        self.action_dim = action_dim
        self.obs = {k: np.zeros((capacity, *s), _dtype_of(s)) for k, s in self.obs_shapes.items()}
        self.action = np.zeros((capacity, action_dim), np.float32)
        self.reward = np.zeros(capacity, np.float32)
        self.terminated = np.zeros(capacity, np.float32)
        self.next_slot = np.zeros(capacity, np.int64)
        self.valid = np.zeros(capacity, bool)
        """A transition starts at this slot (its successor is still stored)."""
        self.pos = 0
        self.filled = 0
        self.total_added = 0
        self._current: npt.NDArray[np.int64] = np.zeros(0, np.int64)
        """Per world, the slot holding its current observation (-1: not stored yet)."""
        self._mirror: dict[str, torch.Tensor] = {}
        """The observations again, in a learner's device memory (:meth:`keep_on`)."""

    def keep_on(self, device: torch.device) -> None:
        """Keep a copy of the observations on ``device``, written with them from now on, so that
        :meth:`take_tensors` gathers batches there (a learner on the CPU has no need of it)."""
        self._mirror = {k: torch.from_numpy(store).to(device, copy=True) for k, store in self.obs.items()}

    @property
    def bytes_per_slot(self) -> int:
        """Memory of one step: one observation's frames and terms plus the transition's fields."""
        return slot_bytes(self.obs_shapes, self.action_dim)

    @property
    def nbytes(self) -> int:
        """Memory the buffer holds."""
        arrays = [*self.obs.values(), self.action, self.reward, self.terminated, self.next_slot, self.valid]
        return int(sum(a.nbytes for a in arrays))

    def __len__(self) -> int:
        """Stored transitions."""
        return int(self.valid.sum())

    def _allocate(self, n: int) -> npt.NDArray[np.int64]:
        slots = (self.pos + np.arange(n)) % self.capacity
        # Slots are taken in order and a transition's successor is taken after it, so a transition
        # is always overwritten before its successor: clearing the slots' own flags is enough.
        self.valid[slots] = False
        self._current[np.isin(self._current, slots)] = -1
        self.pos = int((self.pos + n) % self.capacity)
        self.filled = min(self.filled + n, self.capacity)
        return slots

    def _write(self, slots: npt.NDArray[np.int64], obs: Mapping[str, npt.NDArray[Any]]) -> None:
        for k, store in self.obs.items():
            store[slots] = obs[k]
        if self._mirror:
            device = next(iter(self._mirror.values())).device
            at = torch.as_tensor(slots, device=device)
            for k, copy in self._mirror.items():
                copy[at] = torch.as_tensor(np.ascontiguousarray(self.obs[k][slots]), device=device)

    def add(
        self,
        obs: Mapping[str, npt.NDArray[Any]],
        action: npt.NDArray[np.float32],
        reward: npt.NDArray[np.floating],
        next_obs: Mapping[str, npt.NDArray[Any]],
        terminated: npt.NDArray[np.bool_],
        ended: npt.NDArray[np.bool_],
    ) -> None:
        """One step of ``n`` worlds. ``next_obs`` is each transition's successor (an ended episode's
        final observation); ``ended`` marks episodes that ended, whose next ``obs`` is a fresh reset.

        A world's ``obs`` is stored only when it is not already the last step's ``next_obs``.
        """
        n = len(reward)
        if self.capacity < 3 * n:
            raise ConfigError(f"replay capacity {self.capacity} is below 3 slots per world ({n} worlds)")
        if len(self._current) != n:
            self._current = np.full(n, -1, np.int64)
        missing = np.flatnonzero(self._current < 0)
        if len(missing):
            slots = self._allocate(len(missing))
            self._write(slots, {k: v[missing] for k, v in obs.items()})
            self._current[missing] = slots
        start = self._current.copy()
        nxt = self._allocate(n)
        self._write(nxt, next_obs)
        self.action[start] = action
        self.reward[start] = reward
        self.terminated[start] = terminated
        self.next_slot[start] = nxt
        self.valid[start] = True
        self._current = np.where(np.asarray(ended, bool), -1, nxt)
        self.total_added += n

    def add_episode(
        self,
        obs: Mapping[str, npt.NDArray[Any]],
        action: npt.NDArray[np.float32],
        reward: npt.NDArray[np.floating],
        terminal: bool,
    ) -> None:
        """A recorded episode of L steps: L slots, L - 1 transitions, one more if it ended in a
        terminal state (its successor is never read: it is its own)."""
        length = len(reward)
        if length == 0:
            return
        if length > self.capacity:
            raise ConfigError(f"an episode of {length} steps does not fit a replay of {self.capacity}")
        self._current = np.zeros(0, np.int64)  # online streams restart after recorded data
        slots = self._allocate(length)
        self._write(slots, obs)
        self.action[slots] = action
        self.reward[slots] = reward
        self.terminated[slots] = 0.0
        self.next_slot[slots[:-1]] = slots[1:]
        self.valid[slots[:-1]] = True
        if terminal:
            self.terminated[slots[-1]] = 1.0
            self.next_slot[slots[-1]] = slots[-1]
            self.valid[slots[-1]] = True
        self.total_added += length

    def relabel(
        self, reward_fn: Callable[[dict[str, npt.NDArray[Any]]], npt.NDArray[np.floating]], chunk: int = 512
    ) -> None:
        """Give every stored transition the reward ``reward_fn`` gives its next observation (a
        learned reward, as SERL relabels demonstrations); a reward above 0.5 makes it terminal."""
        starts = np.flatnonzero(self.valid[: self.filled])
        for i in range(0, len(starts), chunk):
            idx = starts[i : i + chunk]
            nxt = self.next_slot[idx]
            reward = np.asarray(reward_fn({k: v[nxt] for k, v in self.obs.items()}), np.float32)
            self.reward[idx] = reward
            self.terminated[idx] = np.maximum(self.terminated[idx], reward > 0.5)

    def sample_slots(self, batch_size: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        """Slots of transitions drawn uniformly with replacement."""
        candidates = np.flatnonzero(self.valid[: self.filled])
        if len(candidates) == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        return candidates[rng.integers(0, len(candidates), size=batch_size)]

    def sample(self, batch_size: int, rng: np.random.Generator) -> Batch:
        """Transitions drawn uniformly with replacement; frames gathered from their slots."""
        return self.take(self.sample_slots(batch_size, rng))

    def take(self, idx: npt.NDArray[np.int64]) -> Batch:
        """The transitions starting at the given slots."""
        nxt = self.next_slot[idx]
        return Batch(
            {k: v[idx] for k, v in self.obs.items()},
            self.action[idx],
            self.reward[idx],
            {k: v[nxt] for k, v in self.obs.items()},
            self.terminated[idx],
        )

    def take_tensors(self, idx: npt.NDArray[np.int64], device: torch.device) -> TensorBatch:
        """:meth:`take` as tensors on ``device``, the frames gathered there if :meth:`keep_on` put
        a copy there (only the indices and the small fields cross from the host)."""
        mirror = self._mirror
        if not mirror or next(iter(mirror.values())).device != device:
            return TensorBatch.of(self.take(idx), device)
        at, nxt = (torch.as_tensor(i, device=device) for i in (idx, self.next_slot[idx]))

        def small(x: npt.NDArray[Any]) -> torch.Tensor:
            return torch.as_tensor(x[idx], device=device)

        return TensorBatch(
            {k: v[at] for k, v in mirror.items()},
            small(self.action),
            small(self.reward),
            {k: v[nxt] for k, v in mirror.items()},
            small(self.terminated),
        )


def load_image_demos(
    root: Path,
    scaler: ActionScaler,
    obs_shapes: Mapping[str, tuple[int, ...]],
    cameras: Mapping[str, str],
    capacity: int,
) -> FrameReplay:
    """Recorded episodes, cameras included, as a :class:`FrameReplay`.

    ``cameras`` maps an image observation key (``wrist_rgb``) to the dataset's camera
    (``observation.images.<camera>``); each camera's mp4 must hold frames of the observation's
    resolution. A missing camera or term, a wrong resolution or a damaged video raises a one-line
    :class:`~robolearn.data.format.DatasetError`. A truncated episode's last frame has no recorded
    successor and is left out; a terminal one is kept.
    """
    ds = read_dataset(Path(root))
    state_keys = [k for k in obs_shapes if k not in cameras]
    for key in state_keys:
        feature = ds.features.get(OBS + key)
        if feature is None or int(np.prod(feature["shape"])) != int(np.prod(obs_shapes[key])):
            have = {k: tuple(ds.features[OBS + k]["shape"]) for k in ds.obs_keys}
            raise DatasetError(
                f"{ds.root}: no observation {key!r} of shape {obs_shapes[key]}; it records {have}"
            )
    for key, camera in cameras.items():
        feature = ds.features.get(IMAGES + camera)
        if feature is None:
            cams = [k.removeprefix(IMAGES) for k in ds.camera_keys]
            raise DatasetError(
                f"{ds.root}: no camera {camera!r} for {key}; it records cameras {cams or 'none'}"
            )
        if tuple(feature["shape"]) != tuple(obs_shapes[key]):
            raise DatasetError(
                f"{ds.root}: camera {camera!r} records {_size(feature['shape'])} frames; "
                f"the task's {key} is {_size(obs_shapes[key])} (height x width x channels)"
            )
    action_dim = len(scaler.low)
    if ds.features.get(ACTION, {}).get("shape") != [action_dim]:
        raise DatasetError(
            f"{ds.root}: actions are {ds.features.get(ACTION, {}).get('shape')}, the task's have {action_dim}"
        )
    buffer = FrameReplay(capacity, obs_shapes, action_dim)
    for episode in range(len(ds.episodes)):
        frames = ds.episode_frames(episode)
        n = len(frames["index"])
        obs: dict[str, npt.NDArray[Any]] = {
            k: frames[OBS + k].reshape(n, *obs_shapes[k]).astype(np.float32) for k in state_keys
        }
        for key, camera in cameras.items():
            obs[key] = episode_video(ds, episode, camera)
        done = frames[TERMINATED if TERMINATED in frames else DONE].astype(bool)
        terminal = bool(done[-1]) if n else False
        if n < 2 and not terminal:
            continue
        # A truncated episode's last frame stays as the successor of the one before, with no transition.
        buffer.add_episode(obs, scaler.to_unit(frames[ACTION]), frames[REWARD].astype(np.float32), terminal)
    log.info("%d demonstration transitions with images from %s", len(buffer), ds.root)
    return buffer


def _size(shape: Sequence[int]) -> str:
    return "x".join(str(int(s)) for s in shape)
