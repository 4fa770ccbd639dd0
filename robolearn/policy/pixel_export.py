"""Exporting a pixel policy (issue 13): cameras' bytes in, physical actions out, in one graph.

The folder is the one :mod:`robolearn.policy.export` writes (``policy.pt``, optionally
``policy.onnx``, ``policy.json``); the graph takes one (n, H, W, 3) uint8 RGB input per camera,
named by its observation key, then the flat (n, D) state terms as ``obs``. Conversion to float,
channel order and scaling, the camera encoders, state standardization, actor and action scaling
are all inside it, so a robot feeds the camera driver's frames unchanged. ``policy.json`` lists the
cameras (name, resolution, encoding). The export is loaded back through
:func:`~robolearn.policy.runtime.load_exported` (graph allowlists included) and compared with the
policy before the folder is moved into place.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

from robolearn.data.manifest import file_sha256
from robolearn.errors import CorruptFileError
from robolearn.policy.encoders import ObservationEncoder
from robolearn.policy.export import _require, write_policy_folder
from robolearn.policy.meta import (
    META_FILE,
    ONNX_FILE,
    TORCHSCRIPT_FILE,
    CameraSpec,
    ExportError,
    PolicyMeta,
    task_meta,
)
from robolearn.policy.network import Actor
from robolearn.policy.pixel_network import PixelPolicy
from robolearn.policy.runtime import load_exported
from robolearn.tasks import make_task_cfg
from robolearn.tasks.cameras import image_specs
from robolearn.tasks.core import TaskCfg

PIXEL_POLICY_WEIGHTS = "pixel_policy.safetensors"
"""A pixel training run's policy weights (:func:`save_pixel_policy`), for exporting it again."""
PIXEL_POLICY_CONFIG = "pixel_policy.json"
"""The architecture and task beside :data:`PIXEL_POLICY_WEIGHTS`."""
PIXEL_POLICY_FORMAT = "robolearn-pixel-policy"


class _Graph(nn.Module):
    """The exported signature: camera tensors, then the flat state, as positional inputs."""

    def __init__(self, policy: PixelPolicy) -> None:
        super().__init__()
        self.policy = policy

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.policy(list(inputs))


def _hidden(actor: Actor) -> tuple[int, ...]:
    return tuple(m.out_features for m in actor.trunk if isinstance(m, nn.Linear))


def save_pixel_policy(policy: PixelPolicy, task_cfg: TaskCfg, folder: Path) -> None:
    """Write a pixel policy's weights (safetensors) and architecture (JSON) to a run folder, so that
    ``robolearn export RUN`` (ONNX included) can rebuild and export it later."""
    from safetensors.torch import save_file

    enc = policy.encoder
    config = {
        "format": PIXEL_POLICY_FORMAT,
        "task": task_cfg.name,
        "image_shapes": {k: list(s) for k, s in enc.image_shapes.items()},
        "state_sizes": dict(zip(enc.state_keys, enc.state_sizes, strict=True)),
        "features": enc.features,
        "channels": enc.channels,
        "hidden": list(_hidden(policy.actor)),
        "action_dim": int(policy.action_low.numel()),
    }
    weights = {k: v.detach().cpu().contiguous() for k, v in policy.state_dict().items()}
    save_file(weights, str(Path(folder) / PIXEL_POLICY_WEIGHTS))
    (Path(folder) / PIXEL_POLICY_CONFIG).write_text(json.dumps(config, indent=1))


def load_pixel_policy(folder: Path) -> tuple[PixelPolicy, TaskCfg]:
    """The pixel policy :func:`save_pixel_policy` wrote to ``folder`` and its task (JSON and
    safetensors only, never code); a damaged or foreign file raises a one-line :class:`CorruptFileError`."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    folder = Path(folder)
    try:
        config = json.loads((folder / PIXEL_POLICY_CONFIG).read_text())
        if not isinstance(config, dict) or config.get("format") != PIXEL_POLICY_FORMAT:
            raise ValueError("not a robolearn pixel policy description")
        task_cfg = make_task_cfg(str(config["task"]))
        encoder = ObservationEncoder(
            {k: (int(h), int(w), int(c)) for k, (h, w, c) in config["image_shapes"].items()},
            {k: int(v) for k, v in config["state_sizes"].items()},
            features=int(config["features"]),
            channels=int(config["channels"]),
        )
        actor = Actor(encoder.feature_dim, int(config["action_dim"]), tuple(int(h) for h in config["hidden"]))
        policy = PixelPolicy(encoder, actor, task_cfg.action.low, task_cfg.action.high)
        policy.load_state_dict(load_file(str(folder / PIXEL_POLICY_WEIGHTS)))
    except (OSError, SafetensorError, RuntimeError, KeyError, TypeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CorruptFileError(f"{folder}: cannot rebuild the pixel policy ({first})") from None
    return policy.eval(), task_cfg


def pixel_meta(policy: PixelPolicy, task_cfg: TaskCfg, source: str) -> PolicyMeta:
    """``policy.json``'s content for a pixel policy of a task (cameras from the task's definition)."""
    enc = policy.encoder
    specs = image_specs(task_cfg)
    unknown = [k for k in enc.image_keys if k not in specs or specs[k].kind != "rgb"]
    if unknown:
        raise ExportError(
            f"the policy reads cameras {unknown} that task {task_cfg.name} does not define as RGB "
            f"(it defines {', '.join(specs) or 'none'})"
        )
    shapes = {k: (size,) for k, size in zip(enc.state_keys, enc.state_sizes, strict=True)}
    meta = task_meta(task_cfg, shapes, _hidden(policy.actor), source)
    cameras = tuple(
        CameraSpec(k, specs[k].camera, specs[k].shape[0], specs[k].shape[1], "rgb8") for k in enc.image_keys
    )
    return dataclasses.replace(meta, cameras=cameras)


def export_pixel_policy(
    policy: PixelPolicy,
    task_cfg: TaskCfg,
    out: Path,
    *,
    onnx: bool = False,
    source: str = "",
    force: bool = False,
) -> Path:
    """Write a pixel policy to the policy folder ``out`` (see the module doc); returns ``out``."""
    out = Path(out)
    if out.exists() and not force:
        raise ExportError(f"{out} exists; choose another --out or pass --force to replace it")
    meta = pixel_meta(policy, task_cfg, source or f"pixels:{task_cfg.name}")
    if onnx:
        _require("onnx", "--onnx")
    return write_policy_folder(out, lambda folder: _write(policy, meta, folder, onnx))


def _write(policy: PixelPolicy, meta: PolicyMeta, folder: Path, onnx: bool) -> None:
    graph = _Graph(policy.cpu().eval())
    rng = np.random.default_rng(0)
    n = 4
    frames = {c.name: rng.integers(0, 256, (n, c.height, c.width, 3), dtype=np.uint8) for c in meta.cameras}
    state = rng.normal(0.0, 1.0, (n, meta.obs_dim)).astype(np.float32)
    example = (*(torch.from_numpy(f) for f in frames.values()), torch.from_numpy(state))
    with torch.no_grad():
        traced = torch.jit.trace(graph, example)
        expected = graph(*example).numpy()
    traced.save(str(folder / TORCHSCRIPT_FILE))
    files = [TORCHSCRIPT_FILE]
    if onnx:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            names = [*frames, "obs"]
            torch.onnx.export(
                graph,
                example,
                str(folder / ONNX_FILE),
                dynamo=False,
                input_names=names,
                output_names=["action"],
                dynamic_axes={k: {0: "batch"} for k in [*names, "action"]},
            )
        files.append(ONNX_FILE)
    meta = dataclasses.replace(meta, files={f: file_sha256(folder / f) for f in files})
    (folder / META_FILE).write_text(json.dumps(meta.to_json(torch_version=torch.__version__), indent=1))
    offsets = meta.offsets
    obs = {t.name: state[:, offsets[t.name] : offsets[t.name] + int(np.prod(t.shape))] for t in meta.obs}
    for runtime in ("torchscript", "onnx") if onnx else ("torchscript",):
        got = load_exported(folder, runtime).act_batch({**obs, **frames})
        expected_clipped = np.clip(expected, meta.action_low, meta.action_high)
        err = float(np.max(np.abs(got - expected_clipped)))
        if err > 1e-4 * float(np.max(np.abs(expected)) + 1.0):
            raise RuntimeError(f"the exported {runtime} graph differs from the policy by {err:g}")
