"""Replay buffers for dict observations, preallocated in numpy, and symmetric sampling.

A buffer stores whole transitions ``(obs, action, reward, next_obs, terminated)``; actions are kept
in the policy's normalized units ([-1, 1] per component). Saving writes one ``.npz`` (no pickles),
so loading a buffer never executes code.

:class:`DeviceReplayBuffer` is the same ring buffer in a torch device's memory (issue 14): the device
training loop (:mod:`robolearn.rl.device_loop`) writes the worlds' tensors into it and samples from
it without a host round trip; it becomes a :class:`ReplayBuffer` only to be saved in a checkpoint.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import torch

from robolearn.errors import ConfigError, CorruptFileError

Obs = dict[str, npt.NDArray[np.float32]]


class Batch(NamedTuple):
    """A batch of transitions, numpy arrays with a leading batch axis."""

    obs: Obs
    action: npt.NDArray[np.float32]
    reward: npt.NDArray[np.float32]
    next_obs: Obs
    terminated: npt.NDArray[np.float32]
    """1.0 where the next state is terminal (no bootstrap); time-outs are 0."""

    def select(self, idx: npt.NDArray[np.int64]) -> Batch:
        """The transitions at the given positions."""
        return Batch(
            {k: v[idx] for k, v in self.obs.items()},
            self.action[idx],
            self.reward[idx],
            {k: v[idx] for k, v in self.next_obs.items()},
            self.terminated[idx],
        )


class ReplayBuffer:
    """A ring buffer of transitions with preallocated arrays."""

    def __init__(self, capacity: int, obs_shapes: dict[str, tuple[int, ...]], action_dim: int) -> None:
        if capacity < 1:
            raise ConfigError(f"--replay-capacity {capacity}: must be at least 1")
        self.capacity = capacity
        self.obs_shapes = dict(obs_shapes)
        self.action_dim = action_dim
        self.obs = {k: np.zeros((capacity, *s), np.float32) for k, s in obs_shapes.items()}
        self.next_obs = {k: np.zeros((capacity, *s), np.float32) for k, s in obs_shapes.items()}
        self.action = np.zeros((capacity, action_dim), np.float32)
        self.reward = np.zeros(capacity, np.float32)
        self.terminated = np.zeros(capacity, np.float32)
        self.pos = 0
        self.size = 0
        self.total_added = 0

    def __len__(self) -> int:
        return self.size

    def add(self, batch: Batch) -> None:
        """Append n transitions (wrapping around when full)."""
        n = len(batch.reward)
        if n > self.capacity:  # only the newest fit
            batch = Batch(*(_tail(x, self.capacity) for x in batch))
            n = self.capacity
        idx = (self.pos + np.arange(n)) % self.capacity
        for k in self.obs:
            self.obs[k][idx] = batch.obs[k]
            self.next_obs[k][idx] = batch.next_obs[k]
        self.action[idx] = batch.action
        self.reward[idx] = batch.reward
        self.terminated[idx] = batch.terminated
        self.pos = int((self.pos + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)
        self.total_added += n

    def sample(self, batch_size: int, rng: np.random.Generator) -> Batch:
        """Draw transitions uniformly with replacement."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        return self.take(rng.integers(0, self.size, size=batch_size))

    def take(self, idx: npt.NDArray[np.int64]) -> Batch:
        """The transitions at the given slots."""
        return Batch(self.obs, self.action, self.reward, self.next_obs, self.terminated).select(idx)

    # -- persistence ---------------------------------------------------------------------------
    def save(self, path: Path) -> None:
        """Write the filled part to an ``.npz`` file."""
        n = self.size
        meta = {
            "capacity": self.capacity,
            "pos": self.pos,
            "size": n,
            "total_added": self.total_added,
            "obs_shapes": {k: list(s) for k, s in self.obs_shapes.items()},
            "action_dim": self.action_dim,
        }
        arrays: dict[str, Any] = {"meta": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)}
        for k in self.obs:
            arrays[f"obs.{k}"] = self.obs[k][:n]
            arrays[f"next_obs.{k}"] = self.next_obs[k][:n]
        arrays.update(action=self.action[:n], reward=self.reward[:n], terminated=self.terminated[:n])
        with open(path, "wb") as f:
            np.savez(f, **arrays)

    @classmethod
    def load(cls, path: Path) -> ReplayBuffer:
        """Read a buffer written by :meth:`save`; a damaged file raises :class:`CorruptFileError`."""
        try:
            with np.load(path, allow_pickle=False) as data:
                meta = json.loads(bytes(data["meta"]).decode())
                shapes = {k: tuple(s) for k, s in meta["obs_shapes"].items()}
                buf = cls(int(meta["capacity"]), shapes, int(meta["action_dim"]))
                n = int(meta["size"])
                for k in shapes:
                    buf.obs[k][:n] = data[f"obs.{k}"]
                    buf.next_obs[k][:n] = data[f"next_obs.{k}"]
                buf.action[:n] = data["action"]
                buf.reward[:n] = data["reward"]
                buf.terminated[:n] = data["terminated"]
        except (
            OSError,
            KeyError,
            ValueError,
            zipfile.BadZipFile,
            json.JSONDecodeError,
            UnicodeDecodeError,
        ) as exc:
            raise CorruptFileError(
                f"replay buffer {path} is damaged or not a robolearn buffer: {exc}"
            ) from None
        buf.size, buf.pos, buf.total_added = n, int(meta["pos"]), int(meta["total_added"])
        return buf


def _tail(x: Any, n: int) -> Any:
    return {k: v[-n:] for k, v in x.items()} if isinstance(x, dict) else x[-n:]


def demo_count(online: int, demos: int, batch_size: int, demo_fraction: float) -> int:
    """How many of a batch RLPD's symmetric sampling draws from the demonstrations, given how many
    transitions each buffer holds: the fixed share, or all of it from the one buffer that has data."""
    if demos == 0:
        return 0
    return batch_size if online == 0 else round(batch_size * demo_fraction)


def sample_symmetric(
    online: ReplayBuffer,
    demos: ReplayBuffer | None,
    batch_size: int,
    demo_fraction: float,
    rng: np.random.Generator,
) -> Batch:
    """RLPD's symmetric sampling: a fixed share of every batch from the demonstrations.

    Ball et al., "Efficient Online Reinforcement Learning with Offline Data" (ICML 2023) draw half
    of each batch from the offline data and half from the online data. With no demonstrations
    (or an empty online buffer) the whole batch comes from the buffer that has data.
    """
    n_demo = demo_count(len(online), 0 if demos is None else len(demos), batch_size, demo_fraction)
    if demos is None or n_demo == 0:
        return online.sample(batch_size, rng)
    if n_demo == batch_size:
        return demos.sample(batch_size, rng)
    a, b = demos.sample(n_demo, rng), online.sample(batch_size - n_demo, rng)
    return Batch(
        {k: np.concatenate([a.obs[k], b.obs[k]]) for k in a.obs},
        np.concatenate([a.action, b.action]),
        np.concatenate([a.reward, b.reward]),
        {k: np.concatenate([a.next_obs[k], b.next_obs[k]]) for k in a.next_obs},
        np.concatenate([a.terminated, b.terminated]),
    )


def take_n_step(
    buffer: ReplayBuffer, idx: npt.NDArray[np.int64], n_step: int, gamma: float, stride: int
) -> tuple[Batch, npt.NDArray[np.float32]]:
    """The transitions at ``idx`` with n-step returns, and each one's bootstrap discount.

    A transition's successor in the same world is ``stride`` slots on (an actor adds one transition
    per world per step). The sum of rewards stops early at a terminal state, at the end of an
    episode (the successor's observation is not this transition's next observation), or at the
    newest data; the discount is ``gamma ** k`` for the k rewards summed. ``n_step`` 1 is the
    ordinary one-step transition with discount ``gamma``.
    """
    if n_step == 1:
        return buffer.take(idx), np.full(len(idx), gamma, np.float32)
    reward = buffer.reward[idx].astype(np.float64)
    last = idx.copy()
    count = np.ones(len(idx), np.int64)
    alive = buffer.terminated[idx] < 0.5
    age = (buffer.pos - 1 - idx) % buffer.capacity  # 0: the newest slot
    for k in range(1, n_step):
        j = (idx + k * stride) % buffer.capacity
        ok = alive & (k * stride <= age)
        for key in buffer.obs:
            ok &= (buffer.obs[key][j] == buffer.next_obs[key][last]).reshape(len(idx), -1).all(axis=1)
        reward[ok] += gamma**k * buffer.reward[j[ok]]
        last[ok], count[ok] = j[ok], k + 1
        alive = ok & (buffer.terminated[j] < 0.5)
    batch = Batch(
        {k: v[idx] for k, v in buffer.obs.items()},
        buffer.action[idx],
        reward.astype(np.float32),
        {k: v[last] for k, v in buffer.next_obs.items()},
        buffer.terminated[last],
    )
    return batch, (gamma**count).astype(np.float32)


def sample_training_batch(
    online: ReplayBuffer,
    demos: ReplayBuffer | None,
    batch_size: int,
    demo_fraction: float,
    rng: np.random.Generator,
    *,
    n_step: int = 1,
    gamma: float = 0.99,
    online_stride: int = 1,
) -> tuple[Batch, npt.NDArray[np.float32]]:
    """:func:`sample_symmetric` with n-step returns: the batch and each transition's discount.

    Demonstrations are stored episode by episode (stride 1); the online buffer holds the worlds of
    each actor step side by side (``online_stride``).
    """
    parts: list[tuple[Batch, npt.NDArray[np.float32]]] = []
    n_demo = demo_count(len(online), 0 if demos is None else len(demos), batch_size, demo_fraction)
    if demos is not None and n_demo:
        parts.append(take_n_step(demos, rng.integers(0, len(demos), n_demo), n_step, gamma, 1))
    if batch_size - n_demo:
        if len(online) == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        idx = rng.integers(0, len(online), batch_size - n_demo)
        parts.append(take_n_step(online, idx, n_step, gamma, online_stride))
    if len(parts) == 1:
        return parts[0]
    (a, da), (b, db) = parts
    return (
        Batch(
            {k: np.concatenate([a.obs[k], b.obs[k]]) for k in a.obs},
            np.concatenate([a.action, b.action]),
            np.concatenate([a.reward, b.reward]),
            {k: np.concatenate([a.next_obs[k], b.next_obs[k]]) for k in a.next_obs},
            np.concatenate([a.terminated, b.terminated]),
        ),
        np.concatenate([da, db]),
    )


class DeviceBatch(NamedTuple):
    """A batch of transitions as tensors on one device, observations flattened (see :class:`Batch`)."""

    obs: torch.Tensor
    """(n, obs_dim) float32, the observation's keys side by side in the layout's order."""
    action: torch.Tensor
    reward: torch.Tensor
    next_obs: torch.Tensor
    terminated: torch.Tensor


class LearnerBatch(NamedTuple):
    """A learner's batch: tensors on its device, observations flattened and normalized."""

    obs: torch.Tensor
    action: torch.Tensor
    reward: torch.Tensor
    next_obs: torch.Tensor
    terminated: torch.Tensor
    """1.0 where the next state is terminal (no bootstrap); time-outs are 0."""
    discount: torch.Tensor
    """Each transition's bootstrap discount: ``gamma ** k`` after k summed rewards."""

    @classmethod
    def one_step(cls, batch: DeviceBatch, gamma: float) -> LearnerBatch:
        """``batch`` with the one-step discount ``gamma`` for every transition."""
        return cls(*batch, torch.full_like(batch.reward, gamma))

    def rows(self, s: slice) -> LearnerBatch:
        """The transitions ``s`` selects (a critic step's slice of an update's batch)."""
        # Unpacked, not a generator over the fields: this also runs inside the compiled update (rl/fused.py).
        obs, act, rew, next_obs, term, discount = self
        return LearnerBatch(obs[s], act[s], rew[s], next_obs[s], term[s], discount[s])


class DeviceReplayBuffer:
    """:class:`ReplayBuffer` in a torch device's memory, observations flattened (issue 14).

    Written and sampled with tensors on ``device`` only; the position and size are host integers
    (they follow from how many transitions were added), so neither adding nor sampling waits for
    the device. :meth:`to_host` and :meth:`from_host` convert for checkpoints.
    """

    def __init__(
        self, capacity: int, obs_shapes: dict[str, tuple[int, ...]], action_dim: int, device: torch.device
    ) -> None:
        if capacity < 1:
            raise ConfigError(f"--replay-capacity {capacity}: must be at least 1")
        self.capacity = capacity
        self.obs_shapes = dict(obs_shapes)
        self.sizes = [int(np.prod(s)) for s in obs_shapes.values()]
        self.action_dim = action_dim
        self.device = device
        dim = sum(self.sizes)

        def zeros(*shape: int) -> torch.Tensor:
            return torch.zeros(shape, dtype=torch.float32, device=device)

        self.obs, self.next_obs = zeros(capacity, dim), zeros(capacity, dim)
        self.action, self.reward, self.terminated = (
            zeros(capacity, action_dim),
            zeros(capacity),
            zeros(capacity),
        )
        self.pos = 0
        self.size = 0
        self.total_added = 0

    def __len__(self) -> int:
        return self.size

    def add(self, batch: DeviceBatch) -> None:
        """Append n transitions (wrapping around when full)."""
        n = int(batch.reward.shape[0])
        if n > self.capacity:  # only the newest fit
            batch = DeviceBatch(*(x[-self.capacity :] for x in batch))
            n = self.capacity
        idx = (self.pos + torch.arange(n, device=self.device)) % self.capacity
        self.obs[idx] = batch.obs
        self.next_obs[idx] = batch.next_obs
        self.action[idx] = batch.action
        self.reward[idx] = batch.reward
        self.terminated[idx] = batch.terminated
        self.pos = (self.pos + n) % self.capacity
        self.size = min(self.size + n, self.capacity)
        self.total_added += n

    def sample(self, batch_size: int, generator: torch.Generator) -> DeviceBatch:
        """Draw transitions uniformly with replacement, indices drawn on the device."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        idx = torch.randint(0, self.size, (batch_size,), generator=generator, device=self.device)
        return self.take(idx)

    def take(self, idx: torch.Tensor) -> DeviceBatch:
        """The transitions at the given slots."""
        return DeviceBatch(
            self.obs[idx], self.action[idx], self.reward[idx], self.next_obs[idx], self.terminated[idx]
        )

    def to_host(self) -> ReplayBuffer:
        """A host copy of the filled slots with dict observations, as a checkpoint saves it (its
        capacity is what it holds: a checkpoint of a large, partly filled buffer stays small)."""
        n = self.size
        out = ReplayBuffer(max(n, 1), self.obs_shapes, self.action_dim)

        def host(x: torch.Tensor) -> npt.NDArray[np.float32]:
            return x[:n].detach().cpu().numpy()

        obs, next_obs = host(self.obs), host(self.next_obs)
        start = 0
        for (key, shape), size in zip(self.obs_shapes.items(), self.sizes, strict=True):
            out.obs[key][:n] = obs[:, start : start + size].reshape(n, *shape)
            out.next_obs[key][:n] = next_obs[:, start : start + size].reshape(n, *shape)
            start += size
        out.action[:n], out.reward[:n], out.terminated[:n] = (
            host(self.action),
            host(self.reward),
            host(self.terminated),
        )
        out.size, out.pos, out.total_added = n, self.pos % out.capacity, self.total_added
        return out

    @classmethod
    def from_host(
        cls, buffer: ReplayBuffer, device: torch.device, capacity: int | None = None
    ) -> DeviceReplayBuffer:
        """A host buffer's transitions on ``device`` (in ``capacity`` slots; default: the buffer's)."""
        out = cls(capacity or buffer.capacity, buffer.obs_shapes, buffer.action_dim, device)
        n = len(buffer)
        if n == 0:
            return out

        def dev(x: npt.NDArray[Any]) -> torch.Tensor:
            return torch.as_tensor(np.ascontiguousarray(x[:n], np.float32), device=device)

        def flat(obs: Obs) -> torch.Tensor:
            return torch.cat([dev(obs[k]).reshape(n, -1) for k in buffer.obs_shapes], dim=1)

        # Oldest first, so that a buffer that had wrapped around keeps its order of arrival.
        order = (np.arange(n) + (buffer.pos if n == buffer.capacity else 0)) % n
        batch = DeviceBatch(
            flat(buffer.obs),
            dev(buffer.action),
            dev(buffer.reward),
            flat(buffer.next_obs),
            dev(buffer.terminated),
        )
        out.add(DeviceBatch(*(x[torch.as_tensor(order, device=device)] for x in batch)))
        out.total_added = buffer.total_added
        return out


def sample_symmetric_device(
    online: DeviceReplayBuffer,
    demos: DeviceReplayBuffer | None,
    batch_size: int,
    demo_fraction: float,
    generator: torch.Generator,
) -> DeviceBatch:
    """:func:`sample_symmetric` on the device: RLPD's share of every batch from the demonstrations."""
    n_demo = demo_count(len(online), 0 if demos is None else len(demos), batch_size, demo_fraction)
    if demos is None or n_demo == 0:
        return online.sample(batch_size, generator)
    if n_demo == batch_size:
        return demos.sample(batch_size, generator)
    a, b = demos.sample(n_demo, generator), online.sample(batch_size - n_demo, generator)
    return DeviceBatch(*(torch.cat([x, y]) for x, y in zip(a, b, strict=True)))
