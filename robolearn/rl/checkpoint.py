"""Checkpoints: everything a run needs to continue, written atomically, loaded without executing code.

A checkpoint is a folder ``ckpt-<env steps>`` holding tensors in safetensors, optimizer state
(``torch.load(weights_only=True)``), both replay buffers as ``.npz`` (no pickles), counters and
RNG states as JSON, and a manifest with the SHA-256 of every file. It is written to a temporary
folder and renamed into place; ``latest`` names the newest. A truncated or altered file fails the
manifest check with a message that names it.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from robolearn.policy.normalization import RunningNorm
from robolearn.rl.replay import CorruptFileError, ReplayBuffer
from robolearn.rl.sac import SAC

MANIFEST = "manifest.json"
KEEP = 2
"""Checkpoints kept in a run; older ones are removed once a newer one is complete."""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(
    root: Path,
    env_steps: int,
    *,
    agent: SAC,
    obs_norm: RunningNorm,
    online: ReplayBuffer,
    demos: ReplayBuffer | None,
    state: dict[str, Any],
) -> Path:
    """Write a checkpoint under ``root`` and point ``latest`` at it; returns its folder."""
    root.mkdir(parents=True, exist_ok=True)
    name = f"ckpt-{env_steps:010d}"
    tmp = root / f".{name}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    tensors = {f"actor.{k}": v for k, v in agent.actor.state_dict().items()}
    tensors |= {f"critic.{k}": v for k, v in agent.critic.state_dict().items()}
    tensors |= {f"target_critic.{k}": v for k, v in agent.target_critic.state_dict().items()}
    tensors["log_alpha"] = agent.log_alpha.detach()
    tensors |= {f"obs_norm.{k}": torch.as_tensor(v) for k, v in obs_norm.state().items()}
    tensors["torch_rng"] = torch.get_rng_state()
    save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, str(tmp / "model.safetensors"))
    torch.save(agent.optimizer_state(), tmp / "optimizer.pt")
    online.save(tmp / "replay_online.npz")
    if demos is not None:
        demos.save(tmp / "replay_demos.npz")
    (tmp / "state.json").write_text(json.dumps(state))
    files = sorted(p for p in tmp.iterdir())
    manifest = {p.name: {"sha256": _sha256(p), "bytes": p.stat().st_size} for p in files}
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1))
    for p in [*files, tmp / MANIFEST]:
        _fsync(p)
    final = root / name
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)
    pointer = root / "latest.tmp"
    pointer.write_text(name)
    os.replace(pointer, root / "latest")
    for old in sorted(root.glob("ckpt-*"))[:-KEEP]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def resolve(path: Path) -> Path:
    """A checkpoint folder from itself, a run folder or a ``checkpoints`` folder."""
    path = Path(path)
    for root in (path / "checkpoints", path):
        latest = root / "latest"
        if latest.is_file():
            return root / latest.read_text().strip()
    if (path / MANIFEST).is_file():
        return path
    raise CorruptFileError(
        f"{path} is not a robolearn run or checkpoint (no checkpoints/latest or {MANIFEST})"
    )


def verify(ckpt: Path) -> dict[str, Any]:
    """Check every file against the manifest; return the manifest."""
    try:
        manifest: dict[str, Any] = json.loads((ckpt / MANIFEST).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CorruptFileError(f"checkpoint {ckpt}: unreadable manifest ({exc})") from None
    for name, entry in manifest.items():
        path = ckpt / name
        if not path.is_file():
            raise CorruptFileError(f"checkpoint {ckpt}: {name} is missing")
        if path.stat().st_size != entry["bytes"] or _sha256(path) != entry["sha256"]:
            raise CorruptFileError(
                f"checkpoint {ckpt}: {name} does not match its manifest (truncated or modified)"
            )
    return manifest


@dataclass
class Loaded:
    """The parts of a verified checkpoint."""

    path: Path
    tensors: dict[str, torch.Tensor]
    state: dict[str, Any]

    def optimizer_state(self) -> dict[str, Any]:
        # weights_only: tensors and plain containers only, never arbitrary objects.
        try:
            result: dict[str, Any] = torch.load(
                self.path / "optimizer.pt", weights_only=True, map_location="cpu"
            )
        except (pickle.UnpicklingError, RuntimeError, EOFError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CorruptFileError(f"checkpoint {self.path}: optimizer.pt refused ({first})") from None
        return result

    def replay(self, which: str) -> ReplayBuffer | None:
        path = self.path / f"replay_{which}.npz"
        return ReplayBuffer.load(path) if path.is_file() else None


def load_checkpoint(path: Path) -> Loaded:
    """Verify and read a checkpoint (a run folder picks its latest)."""
    ckpt = resolve(path)
    verify(ckpt)
    try:
        tensors = load_file(str(ckpt / "model.safetensors"))
        state = json.loads((ckpt / "state.json").read_text())
    except (SafetensorError, OSError, json.JSONDecodeError) as exc:
        raise CorruptFileError(f"checkpoint {ckpt}: {exc}") from None
    return Loaded(ckpt, tensors, state)


def restore_agent(agent: SAC, obs_norm: RunningNorm, loaded: Loaded) -> None:
    """Put a checkpoint's weights, optimizer state, normalizer and torch RNG into place."""
    t = loaded.tensors

    def part(prefix: str) -> dict[str, torch.Tensor]:
        return {k.removeprefix(prefix): v for k, v in t.items() if k.startswith(prefix)}

    try:
        agent.actor.load_state_dict(part("actor."))
        agent.critic.load_state_dict(part("critic."))
        agent.target_critic.load_state_dict(part("target_critic."))
        with torch.no_grad():
            agent.log_alpha.copy_(t["log_alpha"])
        agent.load_optimizer_state(loaded.optimizer_state())
    except (RuntimeError, KeyError) as exc:
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
