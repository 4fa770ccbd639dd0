"""What a deployable policy expects and produces: ``policy.json``, read and checked without torch.

The metadata names the task and embodiment, every observation term in the order the network reads
them (shape, units, offset in the flat vector), the action's names, units, bounds and neutral value,
the control rate, the network's hidden sizes, versions, the export time and the SHA-256 of every
model file. A malformed file, or values no robot could act on (a control rate that is not a finite
positive number, bounds that are NaN, infinite or inverted), is refused with one line naming it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from robolearn import __version__
from robolearn.data.files import read_json
from robolearn.errors import CorruptFileError, RobolearnError

if TYPE_CHECKING:
    from robolearn.tasks.core import TaskCfg

FORMAT = "robolearn-policy"
FORMAT_VERSION = 1
META_FILE = "policy.json"
TORCHSCRIPT_FILE = "policy.pt"
ONNX_FILE = "policy.onnx"


class PolicyMismatchError(RobolearnError):
    """A policy that does not fit the robot or task it is given; the message names the mismatch."""


class ExportError(RobolearnError):
    """An export or load request that cannot be carried out as asked; the message says why."""


class ObsTermSpec(NamedTuple):
    """One observation term as the policy reads it."""

    name: str
    shape: tuple[int, ...]
    units: str


ENCODINGS = ("rgb8",)
"""Camera encodings a pixel policy takes: ``rgb8`` is sensor_msgs/Image's name for (H, W, 3) uint8 RGB."""


class CameraSpec(NamedTuple):
    """One camera input of a pixel policy (issue 13)."""

    name: str
    """The observation key and graph input (``wrist_rgb``)."""
    camera: str
    """The task's camera it comes from (``wrist``)."""
    height: int
    width: int
    encoding: str
    """One of :data:`ENCODINGS`."""

    def describe(self) -> str:
        return f"{self.name!r} {self.width}x{self.height} {self.encoding}"


def brackets(items: Sequence[object]) -> str:
    """A shape or a list of names as ``[3]``, ``[speed, steering_angle]``."""
    return f"[{', '.join(str(x) for x in items)}]"


@dataclass(frozen=True)
class PolicyMeta:
    """What a policy expects and produces, as ``policy.json`` records it."""

    task: str
    """Task the policy was trained on."""
    embodiment: str
    """``arm``, ``drone``, ``car`` or ``legged``."""
    obs: tuple[ObsTermSpec, ...]
    """Observation terms in the order the network reads them (flattened and concatenated)."""
    action_names: tuple[str, ...]
    """Name of each action component."""
    action_units: tuple[str, ...]
    """Physical unit of each action component."""
    action_low: tuple[float, ...]
    """Lower bound of each action component (physical units)."""
    action_high: tuple[float, ...]
    """Upper bound of each action component."""
    action_neutral: tuple[float, ...]
    """Hold-still / hover / brake action of the task."""
    control_hz: float
    """Rate at which the policy was trained to act."""
    hidden: tuple[int, ...]
    """Hidden layer widths of the network (empty for a scripted policy)."""
    robolearn_version: str
    """robolearn version that wrote the policy."""
    exported_at: str
    """Export time, ISO 8601 in UTC."""
    source: str
    """Run folder the policy came from, or ``scripted:<task>``."""
    files: Mapping[str, str]
    """Model file name to its SHA-256."""
    cameras: tuple[CameraSpec, ...] = ()
    """Camera inputs, before the flat state vector (empty for a state-only policy)."""

    @property
    def offsets(self) -> dict[str, int]:
        """Where each observation term starts in the flat input vector."""
        out, at = {}, 0
        for term in self.obs:
            out[term.name] = at
            at += math.prod(term.shape)
        return out

    @property
    def obs_dim(self) -> int:
        return sum(math.prod(t.shape) for t in self.obs)

    def to_json(self, **versions: str) -> dict[str, Any]:
        """The ``policy.json`` object; ``versions`` adds e.g. ``torch_version`` of the exporter."""
        offsets = self.offsets
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "task": self.task,
            "embodiment": self.embodiment,
            "observation": [
                {
                    "name": t.name,
                    "shape": list(t.shape),
                    "units": t.units,
                    "offset": offsets[t.name],
                    "size": math.prod(t.shape),
                }
                for t in self.obs
            ],
            "observation_dim": self.obs_dim,
            "action": {
                "names": list(self.action_names),
                "units": list(self.action_units),
                "low": list(self.action_low),
                "high": list(self.action_high),
                "neutral": list(self.action_neutral),
            },
            **({"cameras": [c._asdict() for c in self.cameras]} if self.cameras else {}),
            "control_hz": self.control_hz,
            "network": {
                "hidden": list(self.hidden),
                "input": (
                    "one (n, height, width, 3) uint8 RGB input per camera, named and ordered as listed, then "
                    if self.cameras
                    else ""
                )
                + "(n, observation_dim) float32: the observation terms in physical units, "
                "flattened and concatenated in the order listed",
                "output": "(n, action dim) float32: the action in physical units, within [low, high]",
            },
            "robolearn_version": self.robolearn_version,
            **versions,
            "exported_at": self.exported_at,
            "source": self.source,
            "files": {name: {"sha256": digest} for name, digest in self.files.items()},
        }

    @classmethod
    def from_json(cls, data: Any, where: Path) -> PolicyMeta:
        """Read and check ``policy.json``; anything malformed is a :class:`CorruptFileError`."""
        try:
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            if data.get("format") != FORMAT or data.get("format_version") != FORMAT_VERSION:
                raise ValueError(
                    f"not a {FORMAT} version {FORMAT_VERSION} file "
                    f"(format {data.get('format')!r}, version {data.get('format_version')!r})"
                )
            obs = tuple(
                ObsTermSpec(str(t["name"]), tuple(int(d) for d in t["shape"]), str(t["units"]))
                for t in data["observation"]
            )
            act = data["action"]
            meta = cls(
                task=str(data["task"]),
                embodiment=str(data["embodiment"]),
                obs=obs,
                action_names=tuple(str(n) for n in act["names"]),
                action_units=tuple(str(u) for u in act["units"]),
                action_low=tuple(float(x) for x in act["low"]),
                action_high=tuple(float(x) for x in act["high"]),
                action_neutral=tuple(float(x) for x in act["neutral"]),
                control_hz=float(data["control_hz"]),
                hidden=tuple(int(h) for h in data["network"]["hidden"]),
                robolearn_version=str(data["robolearn_version"]),
                exported_at=str(data["exported_at"]),
                source=str(data["source"]),
                files={str(k): str(v["sha256"]) for k, v in data["files"].items()},
                cameras=tuple(
                    CameraSpec(
                        str(c["name"]),
                        str(c["camera"]),
                        int(c["height"]),
                        int(c["width"]),
                        str(c["encoding"]),
                    )
                    for c in data.get("cameras", [])
                ),
            )
            offsets = meta.offsets
            for t in data["observation"]:
                if int(t["offset"]) != offsets[str(t["name"])]:
                    raise ValueError(
                        f"observation {t['name']!r} has offset {t['offset']}, not {offsets[t['name']]}"
                    )
            meta.check()
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise CorruptFileError(f"{where}: malformed policy metadata ({detail})") from None
        return meta

    def check(self) -> None:
        """Refuse values no robot could act on (raises ValueError with the reason)."""
        a = len(self.action_names)
        if not self.obs or a == 0:
            raise ValueError("the observation or action list is empty")
        fields = (self.action_units, self.action_low, self.action_high, self.action_neutral)
        if any(len(v) != a for v in fields):
            raise ValueError("the action fields differ in length")
        if any(d <= 0 for t in self.obs for d in t.shape) or len({t.name for t in self.obs}) != len(self.obs):
            raise ValueError("an observation term has a non-positive size or a repeated name")
        if not (math.isfinite(self.control_hz) and self.control_hz > 0):
            raise ValueError(f"control_hz must be a finite positive rate, got {self.control_hz}")
        bounds = (*self.action_low, *self.action_high, *self.action_neutral)
        if not all(math.isfinite(x) for x in bounds):
            raise ValueError("action low, high and neutral must be finite numbers")
        for name, lo, hi, mid in zip(
            self.action_names, self.action_low, self.action_high, self.action_neutral, strict=True
        ):
            if not lo <= mid <= hi:
                raise ValueError(f"action {name!r}: need low <= neutral <= high, got {lo}, {mid}, {hi}")
        if any(h <= 0 for h in self.hidden):
            raise ValueError(f"hidden sizes must be positive, got {list(self.hidden)}")
        for cam in self.cameras:
            if cam.encoding not in ENCODINGS or cam.height <= 0 or cam.width <= 0:
                raise ValueError(
                    f"camera {cam.describe()}: need positive sizes and an encoding in {list(ENCODINGS)}"
                )
        names = [c.name for c in self.cameras] + [t.name for t in self.obs]
        if len(set(names)) != len(names):
            raise ValueError("a camera input repeats the name of another input")


def read_meta(folder: Path) -> PolicyMeta:
    """The checked metadata of a policy folder."""
    path = Path(folder) / META_FILE
    if not path.is_file():
        raise CorruptFileError(f"{folder} is not a policy folder (no {META_FILE})")
    return PolicyMeta.from_json(read_json(path, "a policy's metadata (JSON)"), path)


def task_meta(
    task_cfg: TaskCfg, obs_shapes: Mapping[str, Sequence[int]], hidden: Sequence[int], source: str
) -> PolicyMeta:
    """Metadata of a policy for a task, its observation terms in ``obs_shapes``' order."""
    units = {k: t.units for k, t in task_cfg.observations.items()}
    missing = [k for k in obs_shapes if k not in units]
    if missing:
        raise PolicyMismatchError(
            f"the policy reads observations {missing} that task {task_cfg.name} no longer defines "
            f"(it defines {', '.join(units)})"
        )
    act = task_cfg.action
    return PolicyMeta(
        task=task_cfg.name,
        embodiment=task_cfg.embodiment,
        obs=tuple(ObsTermSpec(k, tuple(int(d) for d in s), units[k]) for k, s in obs_shapes.items()),
        action_names=tuple(act.names),
        action_units=tuple(act.units),
        action_low=tuple(float(x) for x in act.low),
        action_high=tuple(float(x) for x in act.high),
        action_neutral=tuple(float(x) for x in act.neutral),
        control_hz=1.0 / task_cfg.control_dt,
        hidden=tuple(int(h) for h in hidden),
        robolearn_version=__version__,
        exported_at=datetime.now(UTC).isoformat(timespec="seconds"),
        source=source,
        files={},
    )


def run_policy_record(
    task: str,
    obs_shapes: Mapping[str, Sequence[int]],
    action_low: Sequence[float],
    action_high: Sequence[float],
    hidden: Sequence[int],
    rate_limits: bool = False,
) -> dict[str, Any]:
    """The policy record a run's ``state.json`` keeps: what rebuilds the network without the learner,
    and (``rate_limits: true``) that it was trained under its robot's rate limits, which
    ``robolearn eval`` then applies too."""
    record = {
        "task": task,
        "obs_shapes": {k: [int(d) for d in s] for k, s in obs_shapes.items()},
        "action_low": [float(x) for x in action_low],
        "action_high": [float(x) for x in action_high],
        "hidden": [int(h) for h in hidden],
    }
    return record | {"rate_limits": True} if rate_limits else record
