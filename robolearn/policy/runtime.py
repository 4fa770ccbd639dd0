"""Running an exported policy on a robot: load a policy folder safely, act on observations.

This module imports neither torch nor training code: with ONNX Runtime serving the network (the
``auto`` default where the folder has ``policy.onnx``), a robot computer needs numpy, onnxruntime
and this package's lower layers. torch is imported only to run TorchScript.

Loading never runs code from the file (see ``docs/trust.md``). A model file is first checked
against the SHA-256 in ``policy.json`` (inside the folder, not a symlink), then its graph against an
allowlist of the operators an exported policy uses:

- ONNX: the default domain only, no functions, no external data files (an external tensor names a
  path to read), every node's operator in :data:`ONNX_OPS`.
- TorchScript: the archive is a program, so it is read as one: every method in its code must be a
  ``forward`` (TorchScript runs ``__setstate__`` while loading; none is allowed), then the inlined
  graph of ``forward`` may hold only the operators in :data:`TORCHSCRIPT_OPS` (no file, process or
  custom operators, no calls left after inlining).

Only then is the network run, once, on a zero observation to check its input and output sizes.
"""

from __future__ import annotations

import importlib.util
import math
import re
import zipfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
import numpy.typing as npt

from robolearn.data.files import first_line, inside
from robolearn.data.manifest import file_sha256
from robolearn.errors import CorruptFileError
from robolearn.policy.meta import (
    META_FILE,
    ONNX_FILE,
    TORCHSCRIPT_FILE,
    ExportError,
    PolicyMeta,
    PolicyMismatchError,
    brackets,
    read_meta,
    task_meta,
)
from robolearn.tasks import make_task_cfg
from robolearn.tasks.core import TaskCfg, TaskError
from robolearn.tasks.worlds import TaskWorlds

Runtime = Literal["auto", "torchscript", "onnx"]
RUNTIMES: tuple[Runtime, ...] = get_args(Runtime)
"""auto: ONNX Runtime where the folder has ``policy.onnx`` and onnxruntime is installed (a control
step's network call costs a third of TorchScript's there, and it needs no torch), TorchScript
otherwise."""
FloatArray = npt.NDArray[np.float64]

ONNX_OPS = frozenset(
    {
        "Add", "Sub", "Mul", "Div", "Neg", "Sqrt", "Exp", "Log", "Abs", "Pow", "Max", "Min",
        "Gemm", "MatMul", "Relu", "LeakyRelu", "Elu", "Tanh", "Sigmoid", "Softplus", "Clip",
        "LayerNormalization", "ReduceMean", "Constant", "Identity", "Reshape", "Flatten",
        "Concat", "Slice", "Gather", "Shape", "Unsqueeze", "Squeeze", "Cast", "Transpose",
        "Conv", "ArgMax", "GatherElements", "Greater",
    }
)  # fmt: skip
"""Operators an exported policy's ONNX graph may contain: arithmetic, activations, shapes, the
convolutions of a pixel policy's camera encoders (issue 13; no pooling: the encoders use none), and
the greedy choice of a discrete gripper head (issue 11: argmax, gather, comparison)."""

TORCHSCRIPT_OPS = frozenset(
    {
        "prim::Constant", "prim::GetAttr", "prim::ListConstruct", "prim::TupleConstruct",
        "prim::TupleUnpack", "prim::ListUnpack", "prim::NumToTensor",
        "aten::linear", "aten::addmm", "aten::matmul", "aten::mm", "aten::t", "aten::add",
        "aten::sub", "aten::rsub", "aten::mul", "aten::div", "aten::neg", "aten::sqrt", "aten::exp",
        "aten::log", "aten::abs", "aten::pow", "aten::maximum", "aten::minimum", "aten::relu",
        "aten::leaky_relu", "aten::elu", "aten::tanh", "aten::sigmoid", "aten::softplus",
        "aten::clamp", "aten::clip", "aten::layer_norm", "aten::mean", "aten::cat", "aten::reshape",
        "aten::view", "aten::flatten", "aten::slice", "aten::select", "aten::size", "aten::unsqueeze",
        "aten::squeeze", "aten::contiguous", "aten::Int", "aten::detach",
        "aten::_convolution", "aten::permute", "aten::to",
        "aten::argmax", "aten::gather", "aten::gt",
    }
)  # fmt: skip
"""Operators the ``forward`` graph of an exported TorchScript policy may contain."""

_DEF = re.compile(r"^\s*def\s+(\w+)\s*\(", re.MULTILINE)


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

    def _terms(self, obs: Mapping[str, npt.ArrayLike], batched: bool) -> dict[str, npt.NDArray[Any]]:
        """Each term as (n, size) float32 and each camera as (n, H, W, 3) uint8, after checking it is
        present with the expected shape."""
        out: dict[str, npt.NDArray[Any]] = _camera_inputs(self.meta, obs, batched)
        n = None
        for name, shape, units in self.meta.obs:
            if name not in obs:
                raise PolicyMismatchError(
                    f"policy expects observation {name!r} {brackets(shape)} ({units}) but the observation "
                    f"has only {', '.join(sorted(obs)) or 'nothing'}"
                )
            value = np.asarray(obs[name], np.float32)
            got = value.shape[1:] if batched else value.shape
            size = math.prod(shape)
            # A term may come flat or in its own shape; only its size must agree.
            if math.prod(got) != size or (batched and value.ndim == 0):
                raise PolicyMismatchError(
                    f"policy expects observation {name!r} {brackets(shape)} but the robot provides "
                    f"{brackets(got)}{' (with a leading batch axis)' if batched else ''}"
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
                    f"policy expects observation {name!r} {brackets(shape)} ({units}) but robot provides "
                    f"only {', '.join(task_cfg.observations)}"
                )
            elif term.units != units:
                problems.append(
                    f"policy expects observation {name!r} in {units} but robot provides it in {term.units}"
                )
            elif obs_shapes is not None and (
                name not in obs_shapes or math.prod(obs_shapes[name]) != math.prod(shape)
            ):
                got = brackets(obs_shapes[name]) if name in obs_shapes else "none"
                problems.append(
                    f"policy expects observation {name!r} {brackets(shape)} but robot provides {got}"
                )
        for cam in m.cameras:
            have = task_cfg.cameras.get(cam.camera)
            if have is None or (have.height, have.width) != (cam.height, cam.width):
                got = f"{have.width}x{have.height}" if have is not None else "no such camera"
                problems.append(f"policy expects camera {cam.describe()} but robot provides {got}")
        act = task_cfg.action
        if tuple(act.names) != m.action_names:
            problems.append(
                f"policy acts with {brackets(m.action_names)} but robot takes {brackets(act.names)}"
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


def _camera_inputs(
    meta: PolicyMeta, obs: Mapping[str, npt.ArrayLike], batched: bool
) -> dict[str, npt.NDArray[Any]]:
    """Each camera image of a pixel policy as (n, H, W, 3) uint8; a missing camera, another
    resolution or another encoding is refused with one line naming it."""
    out: dict[str, npt.NDArray[Any]] = {}
    for cam in meta.cameras:
        if cam.name not in obs:
            raise PolicyMismatchError(
                f"policy expects camera {cam.describe()} but the observation has only "
                f"{', '.join(sorted(obs)) or 'nothing'}"
            )
        image = np.asarray(obs[cam.name])
        shape = image.shape[1:] if batched else image.shape
        if image.dtype != np.uint8 or shape != (cam.height, cam.width, 3):
            got = "x".join(str(d) for d in shape)
            raise PolicyMismatchError(
                f"policy expects camera {cam.describe()} (uint8, height x width x 3) "
                f"but gets {image.dtype} {got}"
            )
        out[cam.name] = image if batched else image[None]
    return out


Net = Callable[[npt.NDArray[np.float32], Mapping[str, npt.NDArray[np.uint8]]], npt.NDArray[Any]]
"""A loaded graph: (flat state terms, camera images by input name) to actions."""


class ExportedPolicy(DeployedPolicy):
    """A loaded policy folder: the network graph and its metadata."""

    def __init__(self, meta: PolicyMeta, net: Net, runtime: Runtime) -> None:
        self.meta = meta
        self._net = net
        self.runtime = runtime
        """What runs the network: torchscript or onnx."""

    def _act(self, obs: dict[str, npt.NDArray[Any]]) -> npt.NDArray[Any]:
        images = {c.name: obs[c.name] for c in self.meta.cameras}
        return self._net(np.concatenate([obs[t.name] for t in self.meta.obs], axis=1), images)


class ScriptedPolicy(DeployedPolicy):
    """A task's scripted expert behind the deployed-policy interface (no network)."""

    def __init__(
        self, meta: PolicyMeta, expert: Callable[[dict[str, npt.NDArray[np.float32]]], npt.NDArray[Any]]
    ) -> None:
        self.meta = meta
        self._expert = expert

    def _act(self, obs: dict[str, npt.NDArray[np.float32]]) -> npt.NDArray[Any]:
        return self._expert(obs)


def verified_file(folder: Path, meta: PolicyMeta, name: str) -> Path:
    """A model file of a policy folder: listed in ``policy.json``, inside the folder, its hash matching."""
    if name not in meta.files:
        raise CorruptFileError(
            f"{folder}: {META_FILE} lists no {name} (it lists {', '.join(meta.files) or 'none'})"
        )
    path = inside(folder, name)
    if path.is_symlink():
        raise CorruptFileError(
            f"{path}: is a symbolic link; a policy folder's files are read only as plain files"
        )
    if not path.is_file():
        raise CorruptFileError(f"{folder}: {name} is missing")
    if file_sha256(path) != meta.files[name]:
        raise CorruptFileError(f"{path} does not match the SHA-256 in {META_FILE} (truncated or modified)")
    return path


def check_onnx_graph(path: Path) -> None:
    """Refuse an ONNX file that is not a plain feed-forward policy graph (see the module's docs)."""
    try:
        import onnx
    except ImportError:
        raise ExportError(
            f"{path}: checking an ONNX policy needs the onnx package: pip install 'robolearn[onnx]'"
        ) from None
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf's decode errors have no common base class
        raise CorruptFileError(f"{path} is not an ONNX model ({first_line(exc)})") from None
    graph = model.graph
    problems = []
    domains = {o.domain for o in model.opset_import} - {"", "ai.onnx"}
    if domains or model.functions:
        problems.append(f"custom operator domains or functions ({', '.join(sorted(domains)) or 'functions'})")
    tensors = [*graph.initializer, *(a.t for n in graph.node for a in n.attribute if a.HasField("t"))]
    if any(t.data_location == onnx.TensorProto.EXTERNAL or t.external_data for t in tensors):
        problems.append("tensors stored in external files")
    for node in graph.node:
        if node.domain not in ("", "ai.onnx") or node.op_type not in ONNX_OPS:
            problems.append(f"operator {node.domain + '.' if node.domain else ''}{node.op_type}")
        if any(a.HasField("g") or len(a.graphs) for a in node.attribute):
            problems.append(f"a subgraph in {node.op_type}")
    if problems:
        raise CorruptFileError(
            f"{path}: refused, the graph holds {'; '.join(sorted(set(problems)))}, which an exported "
            f"policy never contains (allowed operators: {', '.join(sorted(ONNX_OPS))})"
        )


def check_torchscript_archive(path: Path) -> None:
    """Refuse a TorchScript archive whose code defines any method but ``forward`` (before loading it)."""
    try:
        with zipfile.ZipFile(path) as z:
            names = [n for n in z.namelist() if "/code/" in n and n.endswith(".py")]
            if not names:
                raise CorruptFileError(f"{path} is not a TorchScript archive (no code in it)")
            for name in names:
                extra = {m for m in _DEF.findall(z.read(name).decode("utf-8", "replace")) if m != "forward"}
                if extra:
                    raise CorruptFileError(
                        f"{path}: refused, its code defines {', '.join(sorted(extra))} in {name}; an "
                        "exported policy has only forward methods (TorchScript runs __setstate__ on load)"
                    )
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise CorruptFileError(f"{path} is not a TorchScript archive ({first_line(exc)})") from None


def check_torchscript_graph(path: Path, module: Any) -> None:
    """Refuse a loaded TorchScript module whose inlined ``forward`` uses operators outside the allowlist."""
    kinds: set[str] = set()
    blocks = [module.inlined_graph]
    while blocks:
        for node in blocks.pop().nodes():
            kinds.add(node.kind())
            blocks.extend(node.blocks())
    refused = sorted(kinds - TORCHSCRIPT_OPS)
    if refused:
        raise CorruptFileError(
            f"{path}: refused, its forward graph uses {', '.join(refused)}, which an exported policy "
            f"never contains (allowed: {', '.join(sorted(TORCHSCRIPT_OPS))})"
        )


def _torchscript_net(model: Path) -> Net:
    check_torchscript_archive(model)
    import torch  # only here: an ONNX deployment never imports torch

    try:
        module = torch.jit.load(str(model), map_location="cpu").eval()
    except RuntimeError as exc:
        raise CorruptFileError(f"{model} is not a TorchScript policy ({first_line(exc)})") from None
    check_torchscript_graph(model, module)

    @torch.inference_mode()
    def net(x: npt.NDArray[np.float32], images: Mapping[str, npt.NDArray[np.uint8]]) -> npt.NDArray[Any]:
        # Cameras first, in policy.json's order (a dict keeps it), then the state vector.
        frames = [torch.from_numpy(np.ascontiguousarray(v)) for v in images.values()]
        return module(*frames, torch.from_numpy(x)).numpy()

    return net


def _onnx_net(model: Path) -> Net:
    check_onnx_graph(model)
    if importlib.util.find_spec("onnxruntime") is None:
        raise ExportError("runtime onnx needs the onnxruntime package: pip install 'robolearn[onnx]'")
    import onnxruntime

    try:
        options = onnxruntime.SessionOptions()
        # One thread that sleeps when idle: a control loop's core is not for spinning workers.
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own exception types for a bad graph
        raise CorruptFileError(f"{model} is not an ONNX policy ({first_line(exc)})") from None

    def net(x: npt.NDArray[np.float32], images: Mapping[str, npt.NDArray[np.uint8]]) -> npt.NDArray[Any]:
        return np.asarray(session.run(None, {**images, "obs": x})[0])

    return net


def load_exported(path: Path, runtime: Runtime = "torchscript") -> ExportedPolicy:
    """Load a policy folder, checking every file and graph first; ``runtime`` as :data:`RUNTIMES` says."""
    folder = Path(path)
    meta = read_meta(folder)
    if runtime == "auto":
        has_ort = importlib.util.find_spec("onnxruntime") is not None
        runtime = "onnx" if ONNX_FILE in meta.files and has_ort else "torchscript"
    if runtime == "torchscript":
        model = verified_file(folder, meta, TORCHSCRIPT_FILE)
        net = _torchscript_net(model)
    elif runtime == "onnx":
        model = verified_file(folder, meta, ONNX_FILE)
        net = _onnx_net(model)
    else:
        raise ExportError(f"unknown runtime {runtime!r}; choose {', '.join(RUNTIMES)}")
    probe = np.zeros((1, meta.obs_dim), np.float32)
    frames = {c.name: np.zeros((1, c.height, c.width, 3), np.uint8) for c in meta.cameras}
    try:
        out = np.asarray(net(probe, frames))
    except Exception as exc:  # the graph's own error for an input it was not made for
        raise CorruptFileError(
            f"{model} does not take the {meta.obs_dim} observation values {META_FILE} declares "
            f"({first_line(exc)})"
        ) from None
    if out.shape != (1, len(meta.action_names)):
        raise CorruptFileError(
            f"{model} returns actions of shape {list(out.shape[1:])}, {META_FILE} declares "
            f"{len(meta.action_names)} ({', '.join(meta.action_names)})"
        )
    return ExportedPolicy(meta, net, runtime)


def scripted_policy(task_name: str) -> ScriptedPolicy:
    """A task's scripted expert with the deployed-policy interface and metadata."""
    cfg = make_task_cfg(task_name)
    if cfg.expert is None:
        raise TaskError(f"task {task_name} has no scripted expert")
    # Observation sizes come from the terms evaluated on the nominal state, as environments compute them.
    worlds = TaskWorlds(cfg, "mujoco", 1)
    shapes = {k: (size,) for k, size in worlds.observation_sizes.items()}
    worlds.close()
    return ScriptedPolicy(task_meta(cfg, shapes, (), f"scripted:{task_name}"), cfg.expert(cfg))
