"""A run's trained policy, read from its checkpoint without the learner.

A run folder's ``checkpoints/latest`` names its newest checkpoint; a checkpoint holds the actor's
weights and the observation normalizer in ``model.safetensors`` and the policy record (task,
observation shapes, action bounds, hidden sizes) in ``state.json``, every file listed with its
SHA-256 in ``manifest.json``. Pointers and files are resolved inside the folder they belong to:
``latest`` naming another folder with ``..`` or an absolute path, a checkpoint that is a symlink
elsewhere, or a listed file that leads out of its folder is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from robolearn.data.files import inside, json_field, json_object, read_json
from robolearn.data.manifest import verify_manifest
from robolearn.errors import CorruptFileError
from robolearn.policy.network import PolicyNetwork, policy_from_weights
from robolearn.policy.normalization import ObsLayout

MANIFEST = "manifest.json"
WEIGHTS = "model.safetensors"
STATE = "state.json"
LATEST = "latest"


def resolve_checkpoint(path: Path) -> Path:
    """A checkpoint folder from itself, a run folder or a ``checkpoints`` folder."""
    path = Path(path)
    for root in (path / "checkpoints", path):
        latest = root / LATEST
        if latest.is_file() and not latest.is_symlink():
            name = latest.read_text(errors="replace").strip()
            if "/" in name or name in ("", ".", ".."):
                raise CorruptFileError(
                    f"{latest}: names {name!r}; it should name a checkpoint folder beside it (ckpt-...)"
                )
            ckpt = inside(root, name)
            if ckpt.is_symlink():
                raise CorruptFileError(f"{ckpt}: is a symbolic link; a run's checkpoints are plain folders")
            return ckpt
    if (path / MANIFEST).is_file():
        if path.is_symlink():
            raise CorruptFileError(f"{path}: is a symbolic link; give the checkpoint folder itself")
        return path
    raise CorruptFileError(
        f"{path} is not a robolearn run or checkpoint (no checkpoints/{LATEST} or {MANIFEST})"
    )


def verify_checkpoint(ckpt: Path, required: Iterable[str] = (WEIGHTS, STATE)) -> dict[str, Any]:
    """Check that the manifest covers ``required`` and every listed file matches it; returns it."""
    return verify_manifest(ckpt, MANIFEST, required, "checkpoint")


def read_checkpoint(
    ckpt: Path, required: Iterable[str] = (WEIGHTS, STATE)
) -> tuple[dict[str, torch.Tensor], dict[str, Any], dict[str, Any]]:
    """The tensors, ``state.json`` object and manifest of a checkpoint folder, all verified."""
    manifest = verify_checkpoint(ckpt, required)
    try:
        tensors = load_file(str(ckpt / WEIGHTS))
    except (SafetensorError, OSError) as exc:
        raise CorruptFileError(f"{ckpt / WEIGHTS}: not a safetensors file ({exc})") from None
    what = "the run's counters and policy record (a JSON object)"
    state = json_object(read_json(ckpt / STATE, what), ckpt / STATE)
    return tensors, state, manifest


def load_policy(path: Path) -> tuple[PolicyNetwork, dict[str, Any]]:
    """The deterministic policy of a run folder's latest checkpoint (or of a checkpoint folder)."""
    ckpt = resolve_checkpoint(path)
    tensors, state, _ = read_checkpoint(ckpt)
    where = ckpt / STATE
    meta = json_object(json_field(state, "policy", dict, where), where, "policy")
    for key, kind in (("task", str), ("obs_shapes", dict), ("action_low", list), ("action_high", list)):
        json_field(meta, key, kind, where, "policy")
    json_field(meta, "hidden", list, where, "policy")
    try:
        layout = ObsLayout({str(k): tuple(int(d) for d in v) for k, v in meta["obs_shapes"].items()})
        weights = {k: v.numpy() for k, v in tensors.items() if k.startswith("actor.")}
        mean, var = tensors["obs_norm.mean"].numpy(), tensors["obs_norm.var"].numpy()
        weights["obs_mean"] = mean.astype(np.float32)
        weights["obs_std"] = np.sqrt(var + 1e-6).astype(np.float32)
        policy = policy_from_weights(
            weights, layout, meta["action_low"], meta["action_high"], tuple(int(h) for h in meta["hidden"])
        )
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CorruptFileError(
            f"{ckpt}: the policy's weights do not fit its record in {STATE} ({first})"
        ) from None
    return policy.eval(), meta
