"""Observation encoders: camera frames and state terms into one feature vector (issue 13).

- :class:`ConvEncoder`: the small convolutional encoder of DrQ (Kostrikov, Yarats and Fergus,
  "Image Augmentation Is All You Need: Regularizing Deep Reinforcement Learning from Pixels", 2020)
  and SERL's DrQ agent: four 3x3 convolutions of 32 channels (the first with stride 2), then a
  linear layer, LayerNorm and tanh. Trained from scratch by the critic's gradients; the actor reads
  its features detached, as DrQ and SERL do.
- :func:`random_shift`: DrQ's augmentation, each image padded by 4 pixels (replicating its edge)
  and cropped back at a random offset; implemented with ``grid_sample`` as DrQ-v2 does (Yarats et
  al., "Mastering Visual Continuous Control: Improved Data-Augmented RL", 2021).
- A frozen pretrained encoder (HIL-SERL uses a frozen ResNet): a :class:`ConvEncoder` whose
  weights come from a local safetensors file (:func:`load_encoder_weights`), never downloaded, and
  are not trained. :func:`save_encoder_weights` writes one from a trained encoder.
- :class:`ObservationEncoder`: one encoder per camera plus the standardized state terms,
  concatenated; the learner and the exported policy share it. Preprocessing (uint8 HWC to float
  CHW in [-0.5, 0.5]) happens inside, so an exported graph takes the camera's bytes as they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from robolearn.errors import CorruptFileError

ENCODER_FILE = "encoder.safetensors"
"""The camera encoders' weights a pixel run or a DrQ-encoder reward classifier writes."""
SHIFT_PAD = 4
"""Pixels of DrQ's random shift (its value for 84x84 images; 64x64 keeps it)."""


def random_shift(images: torch.Tensor, pad: int = SHIFT_PAD) -> torch.Tensor:
    """DrQ's random shift of (B, C, H, W) float images: replicate-pad, crop at a random offset."""
    b, _, h, w = images.shape
    padded = F.pad(images, (pad, pad, pad, pad), mode="replicate")
    # A grid over the padded image's centre crop, moved by whole pixels (DrQ-v2's formulation).
    eps_h, eps_w = 1.0 / (h + 2 * pad), 1.0 / (w + 2 * pad)
    ys = torch.linspace(-1.0 + eps_h, 1.0 - eps_h, h + 2 * pad, device=images.device)[:h]
    xs = torch.linspace(-1.0 + eps_w, 1.0 - eps_w, w + 2 * pad, device=images.device)[:w]
    base = torch.stack(torch.meshgrid(xs, ys, indexing="xy"), dim=-1).unsqueeze(0)  # (1, H, W, 2)
    shift = torch.randint(0, 2 * pad + 1, (b, 1, 1, 2), device=images.device).to(images.dtype)
    shift = shift * torch.tensor([2.0 * eps_w, 2.0 * eps_h], device=images.device, dtype=images.dtype)
    return F.grid_sample(padded, base.to(images.dtype) + shift, padding_mode="zeros", align_corners=False)


def to_float_chw(frames: torch.Tensor) -> torch.Tensor:
    """(B, H, W, C) uint8 camera frames to (B, C, H, W) float in [-0.5, 0.5]."""
    return frames.permute(0, 3, 1, 2).float() / 255.0 - 0.5


class ConvEncoder(nn.Module):
    """DrQ's encoder: four 3x3 convolutions (32 channels), linear, LayerNorm, tanh."""

    def __init__(self, shape: tuple[int, int, int], features: int = 50, channels: int = 32) -> None:
        super().__init__()
        h, w, c = shape
        self.shape = shape
        self.features = features
        self.convs = nn.Sequential(
            nn.Conv2d(c, channels, 3, stride=2),
            nn.ReLU(),
            nn.Conv2d(channels, channels, 3, stride=1),
            nn.ReLU(),
            nn.Conv2d(channels, channels, 3, stride=1),
            nn.ReLU(),
            nn.Conv2d(channels, channels, 3, stride=1),
            nn.ReLU(),
        )
        with torch.no_grad():
            flat = int(self.convs(torch.zeros(1, c, h, w)).numel())
        self.head = nn.Sequential(nn.Linear(flat, features), nn.LayerNorm(features), nn.Tanh())

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) float images, already preprocessed, to (B, features)."""
        return self.head(self.convs(images).flatten(1))


class ObservationEncoder(nn.Module):
    """Cameras through their encoders, state terms standardized, concatenated in key order.

    Inputs come as one tensor per key, in :attr:`keys` order (images first, then state terms), so
    the module scripts and exports to ONNX with one named input per camera and term.
    """

    state_mean: torch.Tensor
    state_std: torch.Tensor

    def __init__(
        self,
        image_shapes: Mapping[str, tuple[int, int, int]],
        state_sizes: Mapping[str, int],
        *,
        features: int = 50,
        frozen: bool = False,
        obs_clip: float = 10.0,
        channels: int = 32,
    ) -> None:
        super().__init__()
        self.image_keys = list(image_shapes)
        self.state_keys = list(state_sizes)
        self.keys = self.image_keys + self.state_keys
        self.state_sizes = [int(s) for s in state_sizes.values()]
        self.cameras = nn.ModuleList([ConvEncoder(s, features, channels) for s in image_shapes.values()])
        self.image_shapes = {k: tuple(s) for k, s in image_shapes.items()}
        self.features, self.channels = features, channels
        self.frozen = frozen
        if frozen:
            self.cameras.requires_grad_(False)
        state_dim = sum(self.state_sizes)
        self.register_buffer("state_mean", torch.zeros(state_dim))
        self.register_buffer("state_std", torch.ones(state_dim))
        self.obs_clip = obs_clip
        self.feature_dim = features * len(self.cameras) + state_dim

    def set_state_statistics(self, mean: npt.ArrayLike, std: npt.ArrayLike) -> None:
        """Standardize state terms with these (from the first data collected, or a dataset)."""
        self.state_mean.copy_(torch.as_tensor(np.asarray(mean), dtype=torch.float32))
        self.state_std.copy_(torch.as_tensor(np.maximum(np.asarray(std), 1e-6), dtype=torch.float32))

    def encode(self, inputs: Sequence[torch.Tensor], augment: bool = False) -> torch.Tensor:
        """(B, feature_dim) from one tensor per key: uint8 frames (B, H, W, 3), states (B, k)."""
        parts = []
        for encoder, frames in zip(self.cameras, inputs[: len(self.cameras)], strict=True):
            x = to_float_chw(frames)
            if augment:
                x = random_shift(x)
            parts.append(encoder(x))
        state = inputs[len(self.cameras) :]
        if len(state):
            flat = torch.cat([s.reshape(s.shape[0], -1).float() for s in state], dim=1)
            flat = torch.clamp((flat - self.state_mean) / self.state_std, -self.obs_clip, self.obs_clip)
            parts.append(flat)
        return torch.cat(parts, dim=1)

    def forward(self, inputs: list[torch.Tensor]) -> torch.Tensor:
        return self.encode(inputs)

    def tensors(
        self, obs: Mapping[str, npt.NDArray[np.generic]], device: torch.device | str = "cpu"
    ) -> list[torch.Tensor]:
        """A dict observation (numpy, leading batch axis) as the input list, in key order."""
        return [torch.as_tensor(np.ascontiguousarray(obs[k]), device=device) for k in self.keys]

    def camera_state_dict(self) -> dict[str, torch.Tensor]:
        """The camera encoders' weights, by ``<camera key>.<parameter>``."""
        return {
            f"{key}.{name}": value.detach().cpu().contiguous()
            for key, encoder in zip(self.image_keys, self.cameras, strict=True)
            for name, value in encoder.state_dict().items()
        }


def save_encoder_weights(encoder: ObservationEncoder, path: Path) -> None:
    """Write the camera encoders' weights to a safetensors file, to reuse them frozen."""
    save_file(encoder.camera_state_dict(), str(path))


def load_encoder_weights(encoder: ObservationEncoder, path: Path) -> None:
    """Load camera encoders' weights from a local safetensors file (no download ever).

    The file must hold every weight of every camera's encoder, by ``<camera key>.<parameter>``,
    with the encoder's shapes; anything else raises a one-line :class:`CorruptFileError`.
    """
    try:
        tensors = load_file(str(path))
    except (OSError, SafetensorError) as exc:
        raise CorruptFileError(f"{path}: not a readable safetensors file ({exc})") from None
    expected = encoder.camera_state_dict()
    missing = sorted(set(expected) - set(tensors))
    if missing:
        raise CorruptFileError(
            f"{path}: no weight {missing[0]} (and {len(missing) - 1} more); the file holds "
            f"{', '.join(sorted(tensors)[:4]) or 'nothing'}{', ...' if len(tensors) > 4 else ''}"
        )
    for key, value in expected.items():
        if tuple(tensors[key].shape) != tuple(value.shape):
            raise CorruptFileError(
                f"{path}: {key} has shape {tuple(tensors[key].shape)}, the encoder's is {tuple(value.shape)} "
                "(was it trained for another camera resolution?)"
            )
        if not torch.isfinite(tensors[key]).all():
            raise CorruptFileError(f"{path}: {key} holds non-finite values")
    for cam, encoder_module in zip(encoder.image_keys, encoder.cameras, strict=True):
        encoder_module.load_state_dict(
            {k.removeprefix(cam + "."): v for k, v in tensors.items() if k.startswith(cam + ".")}
        )
