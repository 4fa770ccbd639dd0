"""Deployable policies: a trained network exported to a self-contained folder, and loaded back.

A policy folder holds ``policy.pt`` (TorchScript: observation standardization, network and action
scaling in one graph, from flattened observations in physical units to actions in physical units),
optionally ``policy.onnx`` (the same graph), and ``policy.json``: the task and embodiment, every
observation term in the order the network reads them (shape, units, offset in the flat vector),
the action's names, units, bounds and neutral value, the control rate, the network's hidden sizes,
versions, the export time and the SHA-256 of every model file.

Loading (:func:`load_exported`) needs neither the learner nor a simulator: it reads JSON, checks each
model file against its recorded hash before opening it, and opens TorchScript with
``torch.jit.load`` (a graph of tensor operations; no Python code from the file runs). A truncated or
altered file, or a malformed ``policy.json``, is refused with one line naming it.

:func:`scripted_policy` wraps a task's scripted expert in the same interface, for demos and tests.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import json
import logging
import math
import os
import shutil
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, NamedTuple, get_args

import numpy as np
import numpy.typing as npt
import torch
import tyro

from robolearn import __version__
from robolearn.rl.replay import CorruptFileError

if TYPE_CHECKING:
    from robolearn.policy.network import Policy
    from robolearn.tasks.core import TaskCfg

log = logging.getLogger(__name__)

FORMAT = "robolearn-policy"
FORMAT_VERSION = 1
META_FILE = "policy.json"
TORCHSCRIPT_FILE = "policy.pt"
ONNX_FILE = "policy.onnx"
Runtime = Literal["auto", "torchscript", "onnx"]
RUNTIMES: tuple[Runtime, ...] = get_args(Runtime)
"""auto: ONNX Runtime where the folder has ``policy.onnx`` and onnxruntime is installed (a control
step's network call costs a third of TorchScript's there), TorchScript otherwise."""
FloatArray = npt.NDArray[np.float64]


class PolicyMismatchError(ValueError):
    """A policy that does not fit the robot or task it is given; the message names the mismatch."""


class ExportError(ValueError):
    """An export or load request that cannot be carried out as asked; the message says why."""


class ObsTermSpec(NamedTuple):
    """One observation term as the policy reads it."""

    name: str
    shape: tuple[int, ...]
    units: str


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

    def to_json(self) -> dict[str, Any]:
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
            "control_hz": self.control_hz,
            "network": {
                "hidden": list(self.hidden),
                "input": "(n, observation_dim) float32: the observation terms in physical units, "
                "flattened and concatenated in the order listed",
                "output": "(n, action dim) float32: the action in physical units, within [low, high]",
            },
            "robolearn_version": self.robolearn_version,
            "torch_version": torch.__version__,
            "exported_at": self.exported_at,
            "source": self.source,
            "files": {name: {"sha256": digest} for name, digest in self.files.items()},
        }

    @classmethod
    def from_json(cls, data: Any, where: Path) -> PolicyMeta:
        """Read and check ``policy.json``; anything malformed is a :class:`CorruptFileError`."""
        try:
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
            )
            offsets = meta.offsets
            for t in data["observation"]:
                if int(t["offset"]) != offsets[str(t["name"])]:
                    raise ValueError(
                        f"observation {t['name']!r} has offset {t['offset']}, not {offsets[t['name']]}"
                    )
            a = len(meta.action_names)
            if (
                not obs
                or a == 0
                or any(
                    len(v) != a
                    for v in (meta.action_units, meta.action_low, meta.action_high, meta.action_neutral)
                )
            ):
                raise ValueError("the observation list is empty or the action fields differ in length")
            if not meta.control_hz > 0:
                raise ValueError(f"control_hz must be positive, got {meta.control_hz}")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise CorruptFileError(f"{where}: malformed policy metadata ({detail})") from None
        return meta


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _first_line(exc: BaseException) -> str:
    """An exception's message cut to one line (torch's and onnxruntime's run to many)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _brackets(items: Sequence[object]) -> str:
    """A shape or a list of names as ``[3]``, ``[speed, steering_angle]``."""
    return f"[{', '.join(str(x) for x in items)}]"


class DeployedPolicy(ABC):
    """The interface a deployment uses: one observation in, one physical action out."""

    meta: PolicyMeta

    @abstractmethod
    def _act(self, obs: dict[str, npt.NDArray[np.float32]]) -> npt.NDArray[Any]:
        """(n, A) physical actions from checked (n, size) observation terms."""

    def act_batch(self, obs: Mapping[str, npt.ArrayLike]) -> FloatArray:
        """Physical actions (n, A) for observations with a leading batch axis."""
        return self._clip(self._act(self._terms(obs, batched=True)))

    def __call__(self, obs: Mapping[str, npt.ArrayLike]) -> FloatArray:
        """The physical action (A,) for one observation (no batch axis)."""
        return self._clip(self._act(self._terms(obs, batched=False)))[0]

    def _clip(self, action: npt.NDArray[Any]) -> FloatArray:
        return np.clip(np.asarray(action, np.float64), self.meta.action_low, self.meta.action_high)

    def _terms(self, obs: Mapping[str, npt.ArrayLike], batched: bool) -> dict[str, npt.NDArray[np.float32]]:
        """Each term as (n, size) float32, after checking it is present with the expected shape."""
        out: dict[str, npt.NDArray[np.float32]] = {}
        n = None
        for name, shape, units in self.meta.obs:
            if name not in obs:
                raise PolicyMismatchError(
                    f"policy expects observation {name!r} {_brackets(shape)} ({units}) but the observation "
                    f"has only {', '.join(sorted(obs)) or 'nothing'}"
                )
            value = np.asarray(obs[name], np.float32)
            got = value.shape[1:] if batched else value.shape
            size = math.prod(shape)
            # A term may come flat or in its own shape; only its size must agree.
            if math.prod(got) != size or (batched and value.ndim == 0):
                raise PolicyMismatchError(
                    f"policy expects observation {name!r} {_brackets(shape)} but the robot provides "
                    f"{_brackets(got)}{' (with a leading batch axis)' if batched else ''}"
                )
            value = value.reshape(-1 if batched else 1, size)
            if n is not None and len(value) != n:
                raise PolicyMismatchError(f"observation {name!r} has a batch of {len(value)}, the others {n}")
            n = len(value)
            out[name] = value
        return out

    def check_compatible(
        self, task_cfg: TaskCfg, obs_shapes: Mapping[str, Sequence[int]] | None = None
    ) -> None:
        """Refuse a task (or robot) whose observations, action or control rate differ from the policy's.

        ``task_cfg`` gives observation names and units, the action and the control period;
        ``obs_shapes`` (as the robot or simulator provides them) adds a check of every term's shape.
        The robot may provide more observation terms than the policy reads.
        """
        m = self.meta
        problems = []
        if task_cfg.embodiment != m.embodiment:
            problems.append(
                f"policy is for a {m.embodiment}, task {task_cfg.name} for a {task_cfg.embodiment}"
            )
        for name, shape, units in m.obs:
            term = task_cfg.observations.get(name)
            if term is None:
                problems.append(
                    f"policy expects observation {name!r} {_brackets(shape)} ({units}) but robot provides "
                    f"only {', '.join(task_cfg.observations)}"
                )
            elif term.units != units:
                problems.append(
                    f"policy expects observation {name!r} in {units} but robot provides it in {term.units}"
                )
            elif obs_shapes is not None and (
                name not in obs_shapes or math.prod(obs_shapes[name]) != math.prod(shape)
            ):
                got = _brackets(obs_shapes[name]) if name in obs_shapes else "none"
                problems.append(
                    f"policy expects observation {name!r} {_brackets(shape)} but robot provides {got}"
                )
        act = task_cfg.action
        if tuple(act.names) != m.action_names:
            problems.append(
                f"policy acts with {_brackets(m.action_names)} but robot takes {_brackets(act.names)}"
            )
        else:
            if tuple(act.units) != m.action_units:
                problems.append(f"policy's action units {list(m.action_units)}, robot's {list(act.units)}")
            for label, ours, theirs in (("low", m.action_low, act.low), ("high", m.action_high, act.high)):
                if not np.allclose(ours, theirs, rtol=1e-6, atol=1e-9):
                    problems.append(f"policy's action {label} {list(ours)}, robot's {list(theirs)}")
        hz = 1.0 / task_cfg.control_dt
        if not math.isclose(hz, m.control_hz, rel_tol=1e-6):
            problems.append(f"policy acts at {m.control_hz:g} Hz, task {task_cfg.name} at {hz:g} Hz")
        if problems:
            raise PolicyMismatchError(
                f"policy {m.source} does not fit {task_cfg.name}: " + "; ".join(problems)
            )


class ExportedPolicy(DeployedPolicy):
    """A loaded policy folder: the network graph and its metadata."""

    def __init__(
        self, meta: PolicyMeta, net: Callable[[npt.NDArray[np.float32]], npt.NDArray[Any]], runtime: Runtime
    ) -> None:
        self.meta = meta
        self._net = net
        self.runtime = runtime
        """What runs the network: torchscript or onnx."""

    def _act(self, obs: dict[str, npt.NDArray[np.float32]]) -> npt.NDArray[Any]:
        return self._net(np.concatenate([obs[t.name] for t in self.meta.obs], axis=1))


class ScriptedPolicy(DeployedPolicy):
    """A task's scripted expert behind the deployed-policy interface (no network)."""

    def __init__(
        self, meta: PolicyMeta, expert: Callable[[dict[str, npt.NDArray[np.float32]]], npt.NDArray[Any]]
    ) -> None:
        self.meta = meta
        self._expert = expert

    def _act(self, obs: dict[str, npt.NDArray[np.float32]]) -> npt.NDArray[Any]:
        return self._expert(obs)


def _verify(folder: Path, meta: PolicyMeta, name: str) -> Path:
    path = folder / name
    if name not in meta.files:
        raise CorruptFileError(
            f"{folder}: {META_FILE} lists no {name} (it lists {', '.join(meta.files) or 'none'})"
        )
    if not path.is_file():
        raise CorruptFileError(f"{folder}: {name} is missing")
    if _sha256(path) != meta.files[name]:
        raise CorruptFileError(f"{path} does not match the SHA-256 in {META_FILE} (truncated or modified)")
    return path


def read_meta(folder: Path) -> PolicyMeta:
    """The checked metadata of a policy folder."""
    path = Path(folder) / META_FILE
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise CorruptFileError(f"{folder} is not a policy folder: {exc.strerror} ({path})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CorruptFileError(f"{path} is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise CorruptFileError(f"{path}: malformed policy metadata (not a JSON object)")
    return PolicyMeta.from_json(data, path)


def load_exported(path: Path, runtime: Runtime = "torchscript") -> ExportedPolicy:
    """Load a policy folder, checking every file first; ``runtime="onnx"`` runs ``policy.onnx``
    instead, ``"auto"`` picks as :data:`RUNTIMES` says."""
    folder = Path(path)
    meta = read_meta(folder)
    if runtime == "auto":
        has_ort = importlib.util.find_spec("onnxruntime") is not None
        runtime = "onnx" if ONNX_FILE in meta.files and has_ort else "torchscript"
    if runtime == "torchscript":
        model = _verify(folder, meta, TORCHSCRIPT_FILE)
        try:
            module = torch.jit.load(str(model), map_location="cpu").eval()
        except RuntimeError as exc:
            raise CorruptFileError(f"{model} is not a TorchScript policy ({_first_line(exc)})") from None

        @torch.inference_mode()
        def net(x: npt.NDArray[np.float32]) -> npt.NDArray[Any]:
            return module(torch.from_numpy(x)).numpy()

    elif runtime == "onnx":
        model = _verify(folder, meta, ONNX_FILE)
        _require("onnxruntime", "runtime onnx")
        import onnxruntime

        try:
            options = onnxruntime.SessionOptions()
            # One thread that sleeps when idle: a control loop's core is not for spinning workers.
            options.intra_op_num_threads = options.inter_op_num_threads = 1
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            session = onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types for a bad graph
            raise CorruptFileError(f"{model} is not an ONNX policy ({_first_line(exc)})") from None

        def net(x: npt.NDArray[np.float32]) -> npt.NDArray[Any]:
            return np.asarray(session.run(None, {"obs": x})[0])

    else:
        raise ExportError(f"unknown runtime {runtime!r}; choose {', '.join(RUNTIMES)}")
    policy = ExportedPolicy(meta, net, runtime)
    probe = np.zeros((1, meta.obs_dim), np.float32)
    try:
        out = net(probe)
    except Exception as exc:  # the graph's own error for an input it was not made for
        raise CorruptFileError(
            f"{model} does not take the {meta.obs_dim} observation values {META_FILE} declares "
            f"({_first_line(exc)})"
        ) from None
    if out.shape != (1, len(meta.action_names)):
        raise CorruptFileError(
            f"{model} returns actions of shape {list(out.shape[1:])}, {META_FILE} declares "
            f"{len(meta.action_names)} ({', '.join(meta.action_names)})"
        )
    return policy


def _task_meta(
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


def scripted_policy(task_name: str) -> ScriptedPolicy:
    """A task's scripted expert with the deployed-policy interface and metadata."""
    from robolearn.envs.task_env import TaskEnv
    from robolearn.tasks import make_task_cfg
    from robolearn.tasks.core import TaskError

    cfg = make_task_cfg(task_name)
    if cfg.expert is None:
        raise TaskError(f"task {task_name} has no scripted expert")
    # Observation sizes come from the terms evaluated on the nominal state, as TaskEnv computes them.
    env = TaskEnv(cfg, "mujoco", 1)
    obs, _ = env.reset(seed=0)
    shapes = {k: v.shape[1:] for k, v in obs.items()}
    env.close()
    return ScriptedPolicy(_task_meta(cfg, shapes, (), f"scripted:{task_name}"), cfg.expert(cfg))


def export_policy(run_dir: Path, out: Path, *, onnx: bool = False, force: bool = False) -> Path:
    """Write the policy of a run folder (or checkpoint) to the policy folder ``out``; returns ``out``.

    The folder is written beside ``out`` and renamed into place, so a crash leaves no half policy.
    The exported graph is checked against the run's policy on random observations before that.
    """
    from robolearn.envs.gym_adapter import gym_env_id
    from robolearn.rl.train import load_policy
    from robolearn.tasks import make_task_cfg

    out = Path(out)
    if out.exists() and not force:
        raise ExportError(f"{out} exists; choose another --out or pass --force to replace it")
    policy, run_meta = load_policy(run_dir)
    if gym_env_id(run_meta["task"]) is not None:
        raise ExportError(
            f"{run_dir} was trained on {run_meta['task']}; only robolearn tasks (with units and an "
            "embodiment) can be exported"
        )
    cfg = make_task_cfg(run_meta["task"])
    meta = _task_meta(cfg, run_meta["obs_shapes"], run_meta["hidden"], str(run_dir))
    if not np.allclose(run_meta["action_low"], meta.action_low) or not np.allclose(
        run_meta["action_high"], meta.action_high
    ):
        raise PolicyMismatchError(
            f"{run_dir} was trained with action bounds {run_meta['action_low']}..{run_meta['action_high']}, "
            f"task {cfg.name} now has {list(meta.action_low)}..{list(meta.action_high)}"
        )

    if onnx:
        _require("onnx", "--onnx")
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        example = torch.zeros(1, meta.obs_dim)
        with torch.no_grad():
            traced = torch.jit.trace(policy, example)
        traced.save(str(tmp / TORCHSCRIPT_FILE))
        files = [TORCHSCRIPT_FILE]
        if onnx:
            _export_onnx(policy, example, tmp / ONNX_FILE)
            files.append(ONNX_FILE)
        meta = dataclasses.replace(meta, files={f: _sha256(tmp / f) for f in files})
        (tmp / META_FILE).write_text(json.dumps(meta.to_json(), indent=1))

        probe = _probe_observations(policy, np.random.default_rng(0))
        with torch.no_grad():
            expected = policy(torch.from_numpy(probe)).numpy()
        for runtime in ("torchscript", "onnx") if onnx else ("torchscript",):
            got = load_exported(tmp, runtime).act_batch(_split(probe, meta))
            err = float(np.max(np.abs(got - expected)))
            if err > 1e-4 * float(np.max(np.abs(expected)) + 1.0):
                raise RuntimeError(f"the exported {runtime} graph differs from the policy by {err:g}")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)
    return out


def _require(module: str, what: str) -> None:
    """Refuse ``what`` with an install hint when an optional package is missing."""
    try:
        importlib.import_module(module)
    except ImportError:
        raise ExportError(f"{what} needs the {module} package: pip install {module}") from None


def _export_onnx(policy: Policy, example: torch.Tensor, path: Path) -> None:
    with warnings.catch_warnings():
        # The TorchScript-based exporter needs only onnx; torch.export's (the default, which warns
        # about this one) needs onnxscript too.
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            policy,
            (example,),
            str(path),
            dynamo=False,
            input_names=["obs"],
            output_names=["action"],
            dynamic_axes={"obs": {0: "batch"}, "action": {0: "batch"}},
        )


def _probe_observations(policy: Policy, rng: np.random.Generator) -> npt.NDArray[np.float32]:
    """Observations around the policy's normalization statistics, to compare graphs on."""
    mean, std = policy.obs_mean.numpy(), policy.obs_std.numpy()
    return (mean + std * rng.normal(0.0, 2.0, size=(64, len(mean)))).astype(np.float32)


def _split(flat: npt.NDArray[np.float32], meta: PolicyMeta) -> dict[str, npt.NDArray[np.float32]]:
    """A flat (n, D) batch as a dict of (n, *shape) terms."""
    out, offsets = {}, meta.offsets
    for t in meta.obs:
        at = offsets[t.name]
        out[t.name] = flat[:, at : at + math.prod(t.shape)].reshape(len(flat), *t.shape)
    return out


@dataclass(frozen=True)
class ExportCmd:
    """Export a trained policy to a self-contained folder: TorchScript (and optionally ONNX) plus metadata.

    The folder loads with ``robolearn.policy.export.load_exported`` without the learner or a simulator.
    """

    run: tyro.conf.Positional[Annotated[Path, tyro.conf.arg(metavar="RUN")]]
    """Run folder (or checkpoint) of a trained or distilled policy."""
    out: Path | None = None
    """Policy folder to write (default: ``policy`` inside the run folder)."""
    onnx: bool = False
    """Also write ``policy.onnx`` (needs the onnx package)."""
    force: bool = False
    """Replace an existing policy folder."""


def run_export(cmd: ExportCmd) -> None:
    """The ``export`` subcommand: write the folder, print what it holds (last line JSON)."""
    out = export_policy(cmd.run, cmd.out or cmd.run / "policy", onnx=cmd.onnx, force=cmd.force)
    meta = read_meta(out)
    obs = ", ".join(f"{t.name}{_brackets(t.shape)} {t.units}" for t in meta.obs)
    print(f"{meta.task} [{meta.embodiment}] policy from {cmd.run} -> {out}")
    print(f"    observation: {obs}")
    print(f"    action:      {', '.join(meta.action_names)} at {meta.control_hz:g} Hz")
    for name, digest in meta.files.items():
        print(f"    {name}  sha256 {digest}")
    print(json.dumps({"policy": str(out), "task": meta.task, "files": dict(meta.files)}))
