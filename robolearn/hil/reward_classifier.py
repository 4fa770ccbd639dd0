"""A learned success detector to use as the reward, as HIL-SERL trains one for real robots.

On hardware nothing measures "the cube is lifted"; HIL-SERL (Luo et al. 2024) instead trains a
binary classifier on recorded success and failure frames and rewards the policy with it. Here
the classifier is an MLP over observation terms, joined by a small CNN over the camera images
when the dataset has them. Frames are labelled by ``next.success`` and split by episode, so the
held-out precision and recall measure episodes the classifier never saw. The result is a folder
with ``model.safetensors`` (weights and input statistics) and ``classifier.json`` (architecture,
inputs, threshold, metrics): loading reads tensors and JSON only, never code.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from robolearn import __version__
from robolearn.data.format import IMAGES, OBS, STATE, SUCCESS, DatasetError
from robolearn.data.reader import read_dataset
from robolearn.errors import ConfigError, CorruptFileError
from robolearn.hil.config import RewardEvalCmd, RewardTrainCmd

log = logging.getLogger(__name__)

FORMAT = "robolearn-reward-classifier"
WEIGHTS = "model.safetensors"
CONFIG = "classifier.json"


class SuccessNet(nn.Module):
    """Logit of success from standardized state features and, optionally, one camera image."""

    state_mean: torch.Tensor
    state_std: torch.Tensor

    def __init__(self, state_dim: int, hidden: Sequence[int], image_shape: Sequence[int] | None) -> None:
        super().__init__()
        self.register_buffer("state_mean", torch.zeros(state_dim))
        self.register_buffer("state_std", torch.ones(state_dim))
        self.cnn: nn.Module | None = None
        width = state_dim
        if image_shape is not None:
            channels = int(image_shape[2])
            # Three strided convolutions and a 4x4 pool: a few thousand weights, enough to see
            # where an object is, small enough to train on a CPU in seconds.
            self.cnn = nn.Sequential(
                nn.Conv2d(channels, 16, 5, stride=2, padding=2),
                nn.ReLU(),
                nn.Conv2d(16, 32, 3, stride=2, padding=1),
                nn.ReLU(),
                nn.Conv2d(32, 32, 3, stride=2, padding=1),
                nn.ReLU(),
                nn.AdaptiveAvgPool2d(4),
                nn.Flatten(),
                nn.Linear(32 * 16, 64),
                nn.ReLU(),
            )
            width += 64
        layers: list[nn.Module] = []
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, 1))
        self.head = nn.Sequential(*layers)

    def forward(self, state: torch.Tensor, image: torch.Tensor | None = None) -> torch.Tensor:
        """(n,) logits from (n, D) raw state features and (n, H, W, C) uint8 images."""
        parts = [torch.clamp((state - self.state_mean) / self.state_std, -10.0, 10.0)]
        if self.cnn is not None:
            if image is None:
                raise ValueError("this classifier needs camera images")
            parts.append(self.cnn(image.permute(0, 3, 1, 2).float() / 255.0))
        return self.head(torch.cat(parts, dim=1)).squeeze(1)


class RewardClassifier:
    """A trained success classifier; ``reward`` is 1.0 where success is more likely than ``threshold``."""

    def __init__(self, net: SuccessNet, config: Mapping[str, Any], threshold: float | None = None) -> None:
        self.net = net.eval()
        self.config = dict(config)
        self.inputs: list[str] = list(config["inputs"])
        """Dataset features the classifier reads, in order (``observation.<term>``)."""
        self.camera: str | None = config.get("camera")
        """Camera feature (``observation.images.<cam>``) it also reads, or None."""
        self.threshold = float(config["threshold"] if threshold is None else threshold)

    @property
    def needs_images(self) -> bool:
        return self.camera is not None

    def _tensors(self, obs: Mapping[str, npt.ArrayLike]) -> tuple[torch.Tensor, torch.Tensor | None]:
        def get(feature: str, *aliases: str) -> npt.NDArray[Any]:
            for key in (feature, *aliases):
                if key in obs:
                    return np.asarray(obs[key])
            raise ConfigError(f"reward classifier: observation {feature!r} missing; got {sorted(obs)}")

        image = None
        if self.camera is not None:
            image = torch.as_tensor(get(self.camera, self.camera.removeprefix(IMAGES), "image"))
        values = [np.asarray(get(k, k.removeprefix(OBS)), np.float32) for k in self.inputs]
        n = len(values[0]) if values else len(image) if image is not None else 0
        state = np.concatenate([v.reshape(n, -1) for v in values] or [np.zeros((n, 0), np.float32)], axis=1)
        return torch.as_tensor(state), image

    @torch.no_grad()
    def probability(self, obs: Mapping[str, npt.ArrayLike]) -> npt.NDArray[np.float64]:
        """(n,) probability of success for a batch of observations (dict of (n, ...) arrays)."""
        state, image = self._tensors(obs)
        return torch.sigmoid(self.net(state, image)).double().numpy()

    def reward(self, obs: Mapping[str, npt.ArrayLike]) -> npt.NDArray[np.float64]:
        """(n,) 1.0 where the probability of success is above the threshold, else 0.0."""
        return (self.probability(obs) > self.threshold).astype(np.float64)


def load_reward_classifier(path: Path, threshold: float | None = None) -> RewardClassifier:
    """Read a classifier folder (JSON and safetensors only); ``threshold`` overrides the saved one."""
    path = Path(path)
    try:
        config = json.loads((path / CONFIG).read_text())
    except (OSError, ValueError) as exc:
        raise CorruptFileError(f"{path / CONFIG}: not a readable classifier description ({exc})") from None
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise CorruptFileError(f"{path / CONFIG}: not a robolearn reward classifier")
    try:
        net = SuccessNet(int(config["state_dim"]), config["hidden"], config.get("image_shape"))
        net.load_state_dict(load_file(str(path / WEIGHTS)))
    except (OSError, SafetensorError, RuntimeError, KeyError, TypeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CorruptFileError(
            f"{path / WEIGHTS}: does not hold this classifier's weights ({first})"
        ) from None
    return RewardClassifier(net, config, threshold)


def _precision_recall(predicted: npt.NDArray[np.bool_], label: npt.NDArray[np.bool_]) -> dict[str, Any]:
    """Frame-level precision and recall (None where undefined: nothing predicted, no successes)."""
    tp, predicted_n, positives = int((predicted & label).sum()), int(predicted.sum()), int(label.sum())
    return {
        "precision": tp / predicted_n if predicted_n else None,
        "recall": tp / positives if positives else None,
        "accuracy": float((predicted == label).mean()) if len(label) else None,
        "positives": positives,
        "frames": len(label),
    }


def _split_episodes(
    success: npt.NDArray[np.bool_], share: float, rng: np.random.Generator
) -> npt.NDArray[np.bool_]:
    """Held-out mask over episodes: the same share of successful and failed ones."""
    held = np.zeros(len(success), bool)
    for group in (np.flatnonzero(success), np.flatnonzero(~success)):
        k = min(len(group) - 1, math.ceil(share * len(group))) if len(group) > 1 else 0
        held[rng.permutation(group)[:k]] = True
    return held


def train_reward_classifier(cmd: RewardTrainCmd) -> dict[str, Any]:
    """Train, evaluate on held-out episodes, save; returns the summary (also in ``classifier.json``)."""
    cmd.check()
    if cmd.torch_threads > 0:
        torch.set_num_threads(cmd.torch_threads)
    started = time.perf_counter()
    ds = read_dataset(cmd.dataset)
    if SUCCESS not in ds.features:
        raise DatasetError(f"{ds.root}: no {SUCCESS} feature to learn from")
    terms = (list(cmd.features) or ds.obs_keys) if cmd.state else []
    unknown = [t for t in terms if OBS + t not in ds.features or OBS + t == STATE]
    if unknown:
        raise DatasetError(f"{ds.root}: no observation terms {unknown}; it records {ds.obs_keys}")
    inputs = [OBS + t for t in terms]
    camera = ds.camera_keys[0] if cmd.images and ds.camera_keys else None
    if not inputs and camera is None:
        raise DatasetError(f"{ds.root}: the classifier would see nothing (no terms, no camera)")

    frames = ds.frames()
    n = len(frames["index"])
    state = np.concatenate([frames[k].reshape(n, -1) for k in inputs] or [np.zeros((n, 0))], axis=1)
    state = state.astype(np.float32)
    label = frames[SUCCESS].astype(bool)
    episode = frames["episode_index"].astype(np.int64)
    episode_success = np.bincount(episode, weights=label.astype(float), minlength=len(ds.episodes)) > 0
    if episode_success.all() or not label.any():
        raise DatasetError(f"{ds.root}: needs both successful and failed frames to learn from")
    images = np.concatenate([ds.video_frames(e.index, camera) for e in ds.episodes]) if camera else None

    rng = np.random.default_rng(cmd.seed)
    torch.manual_seed(cmd.seed)
    held_episodes = _split_episodes(episode_success, cmd.held_out, rng)
    held = held_episodes[episode]
    train_idx, test_idx = np.flatnonzero(~held), np.flatnonzero(held)

    image_shape = list(ds.features[camera]["shape"]) if camera else None
    net = SuccessNet(state.shape[1], cmd.hidden, image_shape)
    net.state_mean.copy_(torch.as_tensor(state[train_idx].mean(axis=0)))
    net.state_std.copy_(torch.as_tensor(state[train_idx].std(axis=0) + 1e-6))
    state_t = torch.as_tensor(state)
    label_t = torch.as_tensor(label, dtype=torch.float32)
    images_t = torch.as_tensor(images) if images is not None else None
    positives = float(label[train_idx].sum())
    # Success frames are a minority; weight them so both classes count alike.
    loss_fn = nn.BCEWithLogitsLoss(
        pos_weight=torch.tensor((len(train_idx) - positives) / max(positives, 1.0))
    )
    optimizer = torch.optim.Adam(net.parameters(), lr=cmd.lr)
    net.train()
    for _ in range(cmd.epochs):
        for batch in np.array_split(rng.permutation(train_idx), max(1, len(train_idx) // cmd.batch_size)):
            b = torch.as_tensor(batch)
            logits = net(state_t[b], images_t[b] if images_t is not None else None)
            loss = loss_fn(logits, label_t[b])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    net.eval()

    def predict(idx: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        with torch.no_grad():
            chunks = [
                torch.sigmoid(net(state_t[c], images_t[c] if images_t is not None else None))
                for c in torch.as_tensor(idx).split(1024)
            ]
        return (torch.cat(chunks).numpy() > cmd.threshold) if chunks else np.zeros(0, bool)

    summary: dict[str, Any] = {
        "dataset": str(ds.root),
        "inputs": inputs,
        "camera": camera,
        "held_out_episodes": int(held_episodes.sum()),
        "train_episodes": int((~held_episodes).sum()),
        "held_out": _precision_recall(predict(test_idx), label[test_idx]),
        "train": _precision_recall(predict(train_idx), label[train_idx]),
    }
    out = cmd.out or Path("runs") / f"reward-{ds.root.name}"
    out.mkdir(parents=True, exist_ok=True)
    config = {
        "format": FORMAT,
        "robolearn_version": __version__,
        "state_dim": int(state.shape[1]),
        "hidden": list(cmd.hidden),
        "image_shape": image_shape,
        "threshold": cmd.threshold,
        "train_config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cmd).items()},
        **summary,
    }
    save_file({k: v.detach().contiguous() for k, v in net.state_dict().items()}, str(out / WEIGHTS))
    (out / CONFIG).write_text(json.dumps(config, indent=1))
    summary |= {"out": str(out), "seconds": time.perf_counter() - started}
    return summary


def evaluate_reward_classifier(cmd: RewardEvalCmd) -> dict[str, Any]:
    """Frame-level precision and recall of a trained classifier on a labelled dataset."""
    cmd.check()
    classifier = load_reward_classifier(cmd.classifier, cmd.threshold)
    ds = read_dataset(cmd.dataset)
    if SUCCESS not in ds.features:
        raise DatasetError(f"{ds.root}: no {SUCCESS} feature to compare with")
    frames: dict[str, Any] = dict(ds.frames())
    if classifier.camera is not None:
        if classifier.camera not in ds.camera_keys:
            raise DatasetError(f"{ds.root}: no camera {classifier.camera}; it records {ds.camera_keys}")
        frames[classifier.camera] = np.concatenate(
            [ds.video_frames(e.index, classifier.camera) for e in ds.episodes]
        )
    n = len(frames["index"])
    predicted = np.concatenate(
        [classifier.reward({k: v[i : i + 1024] for k, v in frames.items()}) > 0.5 for i in range(0, n, 1024)]
    )
    return _precision_recall(predicted, frames[SUCCESS].astype(bool)) | {
        "classifier": str(cmd.classifier),
        "dataset": str(ds.root),
        "threshold": classifier.threshold,
    }
