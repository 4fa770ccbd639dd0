"""A learned success detector to use as the reward, as HIL-SERL trains one for real robots.

On hardware nothing measures "the cube is lifted"; HIL-SERL (Luo et al. 2024) instead trains a
binary classifier on recorded success and failure frames and rewards the policy with it. Here
the classifier is an MLP over observation terms, joined by a small CNN per camera when the dataset
has cameras; it can see the cameras alone (``--no-state``), as on an arm without object tracking.

- Labels: a frame is positive when the state it observes is a success, i.e. the previous step's
  ``next.success`` (an episode's first frame is a reset state). The classifier judges observations
  reached (``robolearn train --reward classifier:PATH`` applies it to next observations), so
  labelling a frame by its own step's outcome would put every success boundary one frame late.
- Episodes, not frames, are split: held-out episodes measure precision and recall, validation
  episodes choose the epoch and the threshold (the best F1), the rest train. Frames of one
  episode are near-duplicates, so a frame split would measure memory, not generalization.
- Images get DrQ's random shift during training (:func:`robolearn.policy.encoders.random_shift`),
  and success frames are weighted so both classes count alike.
- With ``encoder`` ``drq`` each camera's CNN is DrQ's :class:`~robolearn.policy.encoders.ConvEncoder`
  and training also writes its weights as ``encoder.safetensors``, in the format a pixel run's
  frozen encoder loads (:func:`~robolearn.policy.encoders.load_encoder_weights`): an encoder
  pretrained by robolearn itself on a recorded dataset, success as the pretext task (issue 13).

The result is a folder with ``model.safetensors`` (weights and input statistics) and
``classifier.json`` (architecture, inputs, threshold, metrics): loading reads tensors and JSON
only, never code.
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
from robolearn.data.reader import Dataset, read_dataset
from robolearn.data.video import episode_video
from robolearn.errors import ConfigError, CorruptFileError
from robolearn.hil.config import RewardEvalCmd, RewardTrainCmd, ThresholdRule
from robolearn.policy.encoders import (
    ENCODER_FILE,
    ConvEncoder,
    ObservationEncoder,
    random_shift,
    save_encoder_weights,
    to_float_chw,
)
from robolearn.sim.scene import RGB

log = logging.getLogger(__name__)

FORMAT = "robolearn-reward-classifier"
VERSION = 2
"""2: one CNN per camera, labels of the observed state (1 saw one camera, labels one step late)."""
WEIGHTS = "model.safetensors"
CONFIG = "classifier.json"
CAMERA_FEATURES = 64
"""Features per camera after its CNN."""
DRQ_FEATURES = 50
"""Features per camera of a DrQ encoder (pixel training's default, ``PixelTrainCfg.features``)."""
ENCODERS = ("small", "drq")


class CameraCNN(nn.Module):
    """Three strided convolutions and a linear layer: a few hundred thousand weights, enough to see
    where the cube is, small enough to train on a CPU in minutes (DrQ's encoder takes ~10 ms per
    64x64 image on a core, this one well under 1 ms)."""

    def __init__(self, shape: Sequence[int]) -> None:
        super().__init__()
        h, w, c = (int(s) for s in shape)
        self.convs = nn.Sequential(
            nn.Conv2d(c, 16, 5, stride=2, padding=2),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 32, 3, stride=2, padding=1),
            nn.ReLU(),
            # Positions matter (how high the cube is in the scene camera): keep an 8x8 map, not a mean.
            nn.AdaptiveAvgPool2d((min(8, math.ceil(h / 8)), min(8, math.ceil(w / 8)))),
            nn.Flatten(),
        )
        with torch.no_grad():
            flat = int(self.convs(torch.zeros(1, c, h, w)).numel())
        self.head = nn.Sequential(nn.Linear(flat, CAMERA_FEATURES), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) preprocessed images to (B, CAMERA_FEATURES)."""
        return self.head(self.convs(x))


class SuccessNet(nn.Module):
    """Logit of success from standardized state features and the images of some cameras."""

    state_mean: torch.Tensor
    state_std: torch.Tensor

    def __init__(
        self,
        state_dim: int,
        hidden: Sequence[int],
        image_shapes: Sequence[Sequence[int]] = (),
        encoder: str = "small",
    ) -> None:
        super().__init__()
        self.register_buffer("state_mean", torch.zeros(state_dim))
        self.register_buffer("state_std", torch.ones(state_dim))
        if encoder not in ENCODERS:
            raise ValueError(f"encoder {encoder!r} is not one of {', '.join(ENCODERS)}")
        self.image_shapes = [tuple(int(x) for x in s) for s in image_shapes]
        if encoder == "drq":
            drq = [ConvEncoder((s[0], s[1], s[2]), DRQ_FEATURES) for s in self.image_shapes]
            self.cnns = nn.ModuleList(drq)
        else:
            self.cnns = nn.ModuleList([CameraCNN(s) for s in self.image_shapes])
        width = state_dim + (DRQ_FEATURES if encoder == "drq" else CAMERA_FEATURES) * len(self.cnns)
        layers: list[nn.Module] = []
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, 1))
        self.head = nn.Sequential(*layers)

    def camera_encoder(self, cameras: Sequence[str]) -> ObservationEncoder:
        """The DrQ encoders of ``cameras`` (dataset keys, in this net's order) as the camera part of
        an :class:`ObservationEncoder` keyed by the task's observation keys (``<camera>_rgb``)."""
        keys = [c.removeprefix(IMAGES) + RGB for c in cameras]
        encoder = ObservationEncoder(
            {k: (s[0], s[1], s[2]) for k, s in zip(keys, self.image_shapes, strict=True)}, {},
            features=DRQ_FEATURES,
        )  # fmt: skip
        for target, source in zip(encoder.cameras, self.cnns, strict=True):
            target.load_state_dict(source.state_dict())
        return encoder

    def forward(
        self, state: torch.Tensor, images: Sequence[torch.Tensor] = (), augment: bool = False
    ) -> torch.Tensor:
        """(n,) logits from (n, D) raw state features and one (n, H, W, C) uint8 tensor per camera."""
        if len(images) != len(self.cnns):
            raise ValueError(f"this classifier needs {len(self.cnns)} cameras' images, got {len(images)}")
        parts = [torch.clamp((state - self.state_mean) / self.state_std, -10.0, 10.0)]
        for cnn, frames in zip(self.cnns, images, strict=True):
            x = to_float_chw(frames)
            parts.append(cnn(random_shift(x) if augment else x))
        return self.head(torch.cat(parts, dim=1)).squeeze(1)


class RewardClassifier:
    """A trained success classifier; ``reward`` is 1.0 where success is more likely than ``threshold``."""

    def __init__(self, net: SuccessNet, config: Mapping[str, Any], threshold: float | None = None) -> None:
        self.net = net.eval()
        self.config = dict(config)
        self.inputs: list[str] = list(config["inputs"])
        """Dataset features the classifier reads, in order (``observation.<term>``)."""
        self.cameras: list[str] = list(config["cameras"])
        """Camera features (``observation.images.<cam>``) it also reads, in order."""
        self.threshold = float(config["threshold"] if threshold is None else threshold)

    @property
    def needs_images(self) -> bool:
        return bool(self.cameras)

    def _tensors(self, obs: Mapping[str, npt.ArrayLike]) -> tuple[torch.Tensor, list[torch.Tensor]]:
        def get(feature: str, *aliases: str) -> npt.NDArray[Any]:
            for key in (feature, *aliases):
                if key in obs:
                    return np.asarray(obs[key])
            raise ConfigError(f"reward classifier: observation {feature!r} missing; got {sorted(obs)}")

        # A camera is found by its dataset feature, its name, or the task's observation key (<name>_rgb).
        images = [
            torch.as_tensor(get(c, c.removeprefix(IMAGES), c.removeprefix(IMAGES) + "_rgb"))
            for c in self.cameras
        ]
        values = [np.asarray(get(k, k.removeprefix(OBS)), np.float32) for k in self.inputs]
        n = len(values[0]) if values else len(images[0]) if images else 0
        state = np.concatenate([v.reshape(n, -1) for v in values] or [np.zeros((n, 0), np.float32)], axis=1)
        return torch.as_tensor(state), images

    @torch.no_grad()
    def probability(self, obs: Mapping[str, npt.ArrayLike]) -> npt.NDArray[np.float64]:
        """(n,) probability of success for a batch of observations (dict of (n, ...) arrays)."""
        state, images = self._tensors(obs)
        return torch.sigmoid(self.net(state, images)).double().numpy()

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
    if config.get("version") != VERSION:
        raise CorruptFileError(
            f"{path / CONFIG}: classifier format version {config.get('version', 1)}, this robolearn reads "
            f"{VERSION}: train it again with robolearn reward train"
        )
    try:
        net = SuccessNet(
            int(config["state_dim"]), config["hidden"], config["image_shapes"], config.get("encoder", "small")
        )
        net.load_state_dict(load_file(str(path / WEIGHTS)))
    except (OSError, SafetensorError, RuntimeError, KeyError, TypeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CorruptFileError(
            f"{path / WEIGHTS}: does not hold this classifier's weights ({first})"
        ) from None
    return RewardClassifier(net, config, threshold)


def observed_success(frames: Mapping[str, npt.NDArray[Any]]) -> npt.NDArray[np.bool_]:
    """Per frame, whether the state it observes is a success: the previous frame's ``next.success``
    within its episode, False for an episode's first frame (a reset state)."""
    success = np.asarray(frames[SUCCESS], bool)
    episode = np.asarray(frames["episode_index"])
    first = np.r_[True, episode[1:] != episode[:-1]] if len(episode) else np.zeros(0, bool)
    return np.where(first, False, np.r_[False, success[:-1]])


def _precision_recall(
    predicted: npt.NDArray[np.bool_], label: npt.NDArray[np.bool_], episode: npt.NDArray[np.int64]
) -> dict[str, Any]:
    """Frame-level precision and recall (None where undefined: nothing predicted, no successes), and
    the same for episodes (an episode is judged successful where any of its frames is)."""
    tp, predicted_n, positives = int((predicted & label).sum()), int(predicted.sum()), int(label.sum())
    ids = np.unique(episode)
    ep_pred = np.array([predicted[episode == e].any() for e in ids], bool)
    ep_true = np.array([label[episode == e].any() for e in ids], bool)
    ep_tp = int((ep_pred & ep_true).sum())
    return {
        "precision": tp / predicted_n if predicted_n else None,
        "recall": tp / positives if positives else None,
        "accuracy": float((predicted == label).mean()) if len(label) else None,
        "positives": positives,
        "frames": len(label),
        "episodes": len(ids),
        "episode_precision": ep_tp / int(ep_pred.sum()) if ep_pred.any() else None,
        "episode_recall": ep_tp / int(ep_true.sum()) if ep_true.any() else None,
    }


def _split_episodes(
    success: npt.NDArray[np.bool_], share: float, rng: np.random.Generator, among: npt.NDArray[np.bool_]
) -> npt.NDArray[np.bool_]:
    """A mask over episodes picking ``share`` of those in ``among``, successful and failed alike;
    each class keeps at least one episode outside the mask."""
    picked = np.zeros(len(success), bool)
    for group in (np.flatnonzero(among & success), np.flatnonzero(among & ~success)):
        k = min(len(group) - 1, math.ceil(share * len(group))) if len(group) > 1 else 0
        picked[rng.permutation(group)[:k]] = True
    return picked


def _score(
    rule: ThresholdRule, tp: npt.NDArray[np.float64], predicted: npt.NDArray[np.float64], positives: float
) -> npt.NDArray[np.float64]:
    """The rule's score of cuts with ``tp`` true of ``predicted`` successes: F1, or the lower of
    precision and recall (``balanced``)."""
    if rule == "f1":
        return 2 * tp / np.maximum(predicted + positives, 1.0)
    return np.minimum(tp / np.maximum(predicted, 1.0), tp / max(positives, 1.0))


def _score_at(rule: ThresholdRule, predicted: npt.NDArray[np.bool_], label: npt.NDArray[np.bool_]) -> float:
    """The rule's score of one set of predictions."""
    tp = np.array([(predicted & label).sum()], np.float64)
    return float(_score(rule, tp, np.array([predicted.sum()], np.float64), float(label.sum()))[0])


def _best_threshold(
    p: npt.NDArray[np.float64], label: npt.NDArray[np.bool_], rule: ThresholdRule = "f1"
) -> tuple[float, float]:
    """The threshold with the best score of ``rule`` on these frames, and that score.

    Every distinct cut between two sorted probabilities is a candidate (a fixed grid cannot place a
    threshold between two frames at 0.985 and 0.995), half-way between the probabilities either
    side. Ties go to the better F1 (the lower of precision and recall stays level while the other
    falls, over every extra failure frame predicted), then to the middle of the tied cuts.
    """
    order = np.argsort(-p, kind="stable")
    ps, hit = p[order], label[order].astype(np.float64)
    # Cut k predicts the k most probable frames successful; only cuts between distinct values count.
    k = np.concatenate([[0], np.flatnonzero(np.diff(ps) < 0) + 1, [len(ps)]])
    tp = np.concatenate([[0.0], np.cumsum(hit)])[k]
    predicted, positives = k.astype(np.float64), float(hit.sum())
    score = _score(rule, tp, predicted, positives)
    best = np.flatnonzero(score >= score.max() - 1e-12)
    f1 = _score("f1", tp[best], predicted[best], positives)
    best = best[f1 >= f1.max() - 1e-12]
    cut = int(k[best[len(best) // 2]])
    above = ps[cut - 1] if cut > 0 else 1.0
    below = ps[cut] if cut < len(ps) else 0.0
    return float((above + below) / 2), float(score.max())


def _cameras(cmd: RewardTrainCmd, ds: Dataset) -> list[str]:
    if not cmd.images:
        return []
    if not cmd.cameras:
        return list(ds.camera_keys)
    have = [k.removeprefix(IMAGES) for k in ds.camera_keys]
    unknown = [c for c in cmd.cameras if c not in have]
    if unknown:
        raise DatasetError(f"{ds.root}: no cameras {unknown}; it records cameras {have or 'none'}")
    return [IMAGES + c for c in cmd.cameras]


def _images(ds: Dataset, cameras: Sequence[str]) -> list[torch.Tensor]:
    """Every episode's frames of each camera, decoded, as (n, H, W, 3) uint8 tensors."""
    return [
        torch.as_tensor(np.concatenate([episode_video(ds, e.index, c) for e in ds.episodes])) for c in cameras
    ]


class _Frames:
    """The inputs of all frames, indexable by batch."""

    def __init__(self, state: npt.NDArray[np.float32], images: list[torch.Tensor]) -> None:
        self.state = torch.as_tensor(state)
        self.images = images

    def probability(self, net: SuccessNet, idx: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        with torch.no_grad():
            chunks = [
                torch.sigmoid(net(self.state[c], [im[c] for im in self.images]))
                for c in torch.as_tensor(idx).split(1024)
            ]
        return torch.cat(chunks).double().numpy() if chunks else np.zeros(0)


def train_reward_classifier(cmd: RewardTrainCmd) -> dict[str, Any]:
    """Train, choose epoch and threshold on validation episodes, measure held-out ones, save;
    returns the summary (also in ``classifier.json``)."""
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
    cameras = _cameras(cmd, ds)
    if not inputs and not cameras:
        raise DatasetError(f"{ds.root}: the classifier would see nothing (no terms, no camera)")
    if cmd.encoder == "drq" and not cameras:
        raise ConfigError(
            f"--encoder drq pretrains camera encoders; {ds.root} gives the classifier no camera"
        )

    frames = ds.frames()
    n = len(frames["index"])
    state = np.concatenate([frames[k].reshape(n, -1) for k in inputs] or [np.zeros((n, 0))], axis=1)
    state = state.astype(np.float32)
    label = observed_success(frames)
    episode = frames["episode_index"].astype(np.int64)
    episode_success = np.bincount(episode, weights=label.astype(float), minlength=len(ds.episodes)) > 0
    if episode_success.all() or not label.any():
        raise DatasetError(f"{ds.root}: needs both successful and failed frames to learn from")
    data = _Frames(state, _images(ds, cameras))

    rng = np.random.default_rng(cmd.seed)
    torch.manual_seed(cmd.seed)
    everyone = np.ones(len(episode_success), bool)
    held_episodes = _split_episodes(episode_success, cmd.held_out, rng, everyone)
    val_episodes = _split_episodes(episode_success, cmd.validation, rng, ~held_episodes)
    held, val = held_episodes[episode], val_episodes[episode]
    train_idx = np.flatnonzero(~held & ~val)
    val_idx, test_idx = np.flatnonzero(val), np.flatnonzero(held)

    image_shapes = [list(ds.features[c]["shape"]) for c in cameras]
    net = SuccessNet(state.shape[1], cmd.hidden, image_shapes, cmd.encoder)
    net.state_mean.copy_(torch.as_tensor(state[train_idx].mean(axis=0)))
    net.state_std.copy_(torch.as_tensor(state[train_idx].std(axis=0) + 1e-6))
    label_t = torch.as_tensor(label, dtype=torch.float32)
    positives = float(label[train_idx].sum())
    # Success frames are a minority; weight them so both classes count alike.
    loss_fn = nn.BCEWithLogitsLoss(
        pos_weight=torch.tensor((len(train_idx) - positives) / max(positives, 1.0))
    )
    optimizer = torch.optim.Adam(net.parameters(), lr=cmd.lr)
    # (validation score, epoch, threshold, weights) of the best epoch so far
    best: tuple[float, int, float, dict[str, torch.Tensor]] | None = None
    for epoch in range(cmd.epochs):
        net.train()
        for batch in np.array_split(rng.permutation(train_idx), max(1, len(train_idx) // cmd.batch_size)):
            b = torch.as_tensor(batch)
            logits = net(data.state[b], [im[b] for im in data.images], augment=cmd.augment)
            loss = loss_fn(logits, label_t[b])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        net.eval()
        if len(val_idx) and label[val_idx].any():
            p, rule = data.probability(net, val_idx), cmd.threshold_rule
            if cmd.threshold is None:
                threshold, score = _best_threshold(p, label[val_idx], rule)
            else:
                threshold = cmd.threshold
                score = _score_at(rule, p > threshold, label[val_idx])
            log.info("epoch %d: validation %s %.3f at threshold %.3f", epoch, rule, score, threshold)
            if best is None or score > best[0]:
                best = (score, epoch, threshold, {k: v.clone() for k, v in net.state_dict().items()})
    if best is not None:
        net.load_state_dict(best[3])
    threshold = best[2] if best is not None else (cmd.threshold if cmd.threshold is not None else 0.5)

    def measure(idx: npt.NDArray[np.int64]) -> dict[str, Any]:
        return _precision_recall(data.probability(net, idx) > threshold, label[idx], episode[idx])

    summary: dict[str, Any] = {
        "dataset": str(ds.root),
        "inputs": inputs,
        "cameras": cameras,
        "threshold": threshold,
        "best_epoch": best[1] if best is not None else cmd.epochs - 1,
        "train_episodes": int((~held_episodes & ~val_episodes).sum()),
        "validation_episodes": int(val_episodes.sum()),
        "held_out_episodes": int(held_episodes.sum()),
        "held_out_episode_indices": np.flatnonzero(held_episodes).tolist(),
        "held_out": measure(test_idx),
        "validation": measure(val_idx),
        "train": measure(train_idx),
    }
    out = cmd.folder
    out.mkdir(parents=True, exist_ok=True)
    config = {
        "format": FORMAT,
        "version": VERSION,
        "robolearn_version": __version__,
        "state_dim": int(state.shape[1]),
        "hidden": list(cmd.hidden),
        "image_shapes": image_shapes,
        "encoder": cmd.encoder,
        "train_config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cmd).items()},
        **summary,
    }
    save_file({k: v.detach().contiguous() for k, v in net.state_dict().items()}, str(out / WEIGHTS))
    (out / CONFIG).write_text(json.dumps(config, indent=1))
    if cmd.encoder == "drq" and cameras:  # the cameras' encoders, for a pixel run to load frozen
        save_encoder_weights(net.camera_encoder(cameras), out / ENCODER_FILE)
        summary["encoder"] = str(out / ENCODER_FILE)
    summary |= {"out": str(out), "seconds": time.perf_counter() - started}
    return summary


def evaluate_reward_classifier(cmd: RewardEvalCmd) -> dict[str, Any]:
    """Frame-level (and episode-level) precision and recall of a trained classifier on a dataset,
    against the success of each frame's observed state."""
    cmd.check()
    classifier = load_reward_classifier(cmd.classifier, cmd.threshold)
    ds = read_dataset(cmd.dataset)
    if SUCCESS not in ds.features:
        raise DatasetError(f"{ds.root}: no {SUCCESS} feature to compare with")
    missing = [c for c in classifier.cameras if c not in ds.camera_keys]
    if missing:
        raise DatasetError(f"{ds.root}: no cameras {missing}; it records {ds.camera_keys or 'none'}")
    frames: dict[str, Any] = dict(ds.frames())
    for camera, images in zip(classifier.cameras, _images(ds, classifier.cameras), strict=True):
        frames[camera] = images.numpy()
    n = len(frames["index"])
    predicted = np.concatenate(
        [classifier.reward({k: v[i : i + 1024] for k, v in frames.items()}) > 0.5 for i in range(0, n, 1024)]
    )
    episode = frames["episode_index"].astype(np.int64)
    return _precision_recall(predicted, observed_success(frames), episode) | {
        "classifier": str(cmd.classifier),
        "dataset": str(ds.root),
        "threshold": classifier.threshold,
    }
