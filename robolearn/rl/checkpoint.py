"""Checkpoints: everything a run needs to continue, written atomically, loaded without executing code.

A checkpoint is a folder ``ckpt-<env steps>`` holding tensors in safetensors, optimizer state
(``torch.load(weights_only=True)``), both replay buffers as ``.npz`` (no pickles), counters and
RNG states as JSON, and a manifest with the SHA-256 of every file. It is written to a temporary
folder and renamed into place; ``latest`` names the newest. A truncated or altered file fails the
manifest check with a message that names it.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save_file

from robolearn.data.manifest import write_manifest
from robolearn.errors import CorruptFileError
from robolearn.policy.loading import (
    LATEST,
    MANIFEST,
    STATE,
    WEIGHTS,
    read_checkpoint,
    resolve_checkpoint,
)
from robolearn.policy.normalization import RunningNorm
from robolearn.rl.replay import ReplayBuffer
from robolearn.rl.sac import SAC

KEEP = 2
"""Checkpoints kept in a run; older ones are removed once a newer one is complete."""
OPTIMIZER = "optimizer.pt"
PREFIX = "ckpt-"


def checkpoint_name(env_steps: int) -> str:
    """A checkpoint folder's name: zero-padded so that names sort as their steps do."""
    return f"{PREFIX}{env_steps:010d}"


def checkpoint_steps(path: Path) -> int:
    """The environment steps a checkpoint folder was written at, from its name."""
    digits = path.name.removeprefix(PREFIX)
    if not path.name.startswith(PREFIX) or not digits.isdigit():
        raise ValueError(f"{path} is not a checkpoint folder (expected {PREFIX}<env steps>)")
    return int(digits)


def checkpoints(root: Path) -> list[Path]:
    """A run's complete checkpoint folders under ``root``, oldest first."""
    return sorted(p for p in root.glob(f"{PREFIX}*") if p.is_dir())


def save_checkpoint(
    root: Path,
    env_steps: int,
    *,
    agent: SAC,
    obs_norm: RunningNorm,
    online: ReplayBuffer,
    demos: ReplayBuffer | None,
    state: dict[str, Any],
    keep: int = KEEP,
) -> Path:
    """Write a checkpoint under ``root`` and point ``latest`` at it, keeping the newest ``keep``;
    returns its folder."""
    root.mkdir(parents=True, exist_ok=True)
    name = checkpoint_name(env_steps)
    tmp = root / f".{name}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    tensors = {f"actor.{k}": v for k, v in agent.actor.state_dict().items()}
    tensors |= {f"critic.{k}": v for k, v in agent.critic.state_dict().items()}
    tensors |= {f"target_critic.{k}": v for k, v in agent.target_critic.state_dict().items()}
    if agent.gripper_target is not None:
        tensors |= {f"gripper_target.{k}": v for k, v in agent.gripper_target.state_dict().items()}
    tensors["log_alpha"] = agent.log_alpha.detach()
    tensors |= {f"obs_norm.{k}": torch.as_tensor(v) for k, v in obs_norm.state().items()}
    if agent.reward_scale is not None:
        tensors |= {f"reward_scale.{k}": torch.as_tensor(v) for k, v in agent.reward_scale.state().items()}
    tensors["torch_rng"] = torch.get_rng_state()
    save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, str(tmp / WEIGHTS))
    torch.save(agent.optimizer_state(), tmp / OPTIMIZER)
    online.save(tmp / "replay_online.npz")
    if demos is not None:
        demos.save(tmp / "replay_demos.npz")
    (tmp / STATE).write_text(json.dumps(state))
    write_manifest(tmp, MANIFEST)
    final = root / name
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)
    pointer = root / f"{LATEST}.tmp"
    pointer.write_text(name)
    os.replace(pointer, root / LATEST)
    for old in checkpoints(root)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


@dataclass
class Loaded:
    """The parts of a verified checkpoint."""

    path: Path
    tensors: dict[str, torch.Tensor]
    state: dict[str, Any]
    manifest: dict[str, Any]

    def optimizer_state(self) -> dict[str, Any]:
        # weights_only: tensors and plain containers only, never arbitrary objects.
        try:
            result: dict[str, Any] = torch.load(self.path / OPTIMIZER, weights_only=True, map_location="cpu")
        except (pickle.UnpicklingError, RuntimeError, EOFError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CorruptFileError(f"checkpoint {self.path}: optimizer.pt refused ({first})") from None
        return result

    def replay(self, which: str) -> ReplayBuffer | None:
        name = f"replay_{which}.npz"
        if name not in self.manifest:
            return None
        return ReplayBuffer.load(self.path / name)


def load_checkpoint(path: Path) -> Loaded:
    """Verify and read a checkpoint (a run folder picks its latest); the manifest must cover
    the weights, the state and the optimizer state it is resumed with."""
    ckpt = resolve_checkpoint(path)
    tensors, state, manifest = read_checkpoint(ckpt, (WEIGHTS, STATE, OPTIMIZER))
    return Loaded(ckpt, tensors, state, manifest)


def restore_agent(agent: SAC, obs_norm: RunningNorm, loaded: Loaded, critics: bool = True) -> None:
    """Put a checkpoint's weights, optimizer state, normalizer and torch RNG into place; without
    ``critics``, the agent's continuous critics and their optimizer stay as they are (the gripper's
    critic is the gripper's policy, part of the actor)."""
    t = loaded.tensors

    def part(prefix: str) -> dict[str, torch.Tensor]:
        return {k.removeprefix(prefix): v for k, v in t.items() if k.startswith(prefix)}

    try:
        agent.actor.load_state_dict(part("actor."))
        if critics:
            agent.critic.load_state_dict(part("critic."))
            agent.target_critic.load_state_dict(part("target_critic."))
        if agent.gripper_target is not None:
            agent.gripper_target.load_state_dict(part("gripper_target."))
        with torch.no_grad():
            agent.log_alpha.copy_(t["log_alpha"])
        agent.load_optimizer_state(loaded.optimizer_state(), critics=critics)
        if agent.reward_scale is not None:  # the critics learnt values in these statistics' units
            scale = part("reward_scale.")
            if not scale:
                raise KeyError("reward scale statistics (saved without --sac.reward-scale returns)")
            agent.reward_scale.load_state({k: v.numpy() for k, v in scale.items()})
    except (RuntimeError, KeyError, ValueError) as exc:
        raise CorruptFileError(
            f"checkpoint {loaded.path} does not fit this configuration: {str(exc).splitlines()[0]}"
        ) from None
    obs_norm.load_state({k: v.numpy() for k, v in part("obs_norm.").items()})
    torch.set_rng_state(t["torch_rng"])


def rng_state(rng: np.random.Generator) -> dict[str, Any]:
    """A numpy generator's state as JSON-ready data."""
    return dict(rng.bit_generator.state)


def set_rng_state(rng: np.random.Generator, state: dict[str, Any]) -> None:
    rng.bit_generator.state = state
