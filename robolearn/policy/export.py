"""Exporting a trained policy to a self-contained folder that a robot loads without the learner.

A policy folder holds ``policy.pt`` (TorchScript: observation standardization, network and action
scaling in one graph, from flattened observations in physical units to actions in physical units),
optionally ``policy.onnx`` (the same graph), and ``policy.json`` (:mod:`robolearn.policy.meta`).
:mod:`robolearn.policy.runtime` loads it back; the export is checked by loading it that way, graph
checks included, and comparing its actions with the run's policy before the folder is renamed into
place, so a crash leaves no half policy.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch

from robolearn.data.manifest import file_sha256
from robolearn.policy.loading import load_policy
from robolearn.policy.meta import (
    META_FILE,
    ONNX_FILE,
    TORCHSCRIPT_FILE,
    ExportError,
    PolicyMeta,
    PolicyMismatchError,
    task_meta,
)
from robolearn.policy.network import PolicyNetwork
from robolearn.policy.runtime import load_exported
from robolearn.tasks import make_task_cfg, task_names


def export_policy(run_dir: Path, out: Path, *, onnx: bool = False, force: bool = False) -> Path:
    """Write the policy of a run folder (or checkpoint) to the policy folder ``out``; returns ``out``."""
    out = Path(out)
    if out.exists() and not force:
        raise ExportError(f"{out} exists; choose another --out or pass --force to replace it")
    policy, run_meta = load_policy(run_dir)
    if run_meta["task"] not in task_names():
        raise ExportError(
            f"{run_dir} was trained on {run_meta['task']}; only robolearn tasks (with units and an "
            "embodiment) can be exported"
        )
    cfg = make_task_cfg(run_meta["task"])
    meta = task_meta(cfg, run_meta["obs_shapes"], run_meta["hidden"], str(run_dir))
    if not np.allclose(run_meta["action_low"], meta.action_low) or not np.allclose(
        run_meta["action_high"], meta.action_high
    ):
        raise PolicyMismatchError(
            f"{run_dir} was trained with action bounds {run_meta['action_low']}..{run_meta['action_high']}, "
            f"task {cfg.name} now has {list(meta.action_low)}..{list(meta.action_high)}"
        )
    if onnx:
        _require("onnx", "--onnx")
    return write_policy_folder(out, lambda folder: _write(policy, meta, folder, onnx))


def write_policy_folder(out: Path, write: Callable[[Path], None]) -> Path:
    """Run ``write`` on a folder beside ``out`` and rename it into place; returns ``out``.

    A crash or a failed check leaves no half policy: the temporary folder is removed and ``out``
    keeps what it had.
    """
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        write(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)
    return out


def _write(policy: PolicyNetwork, meta: PolicyMeta, folder: Path, onnx: bool) -> None:
    """Write the graphs and ``policy.json`` into ``folder`` and check them against ``policy``."""
    example = torch.zeros(1, meta.obs_dim)
    with torch.no_grad():
        traced = torch.jit.trace(policy, example)
    traced.save(str(folder / TORCHSCRIPT_FILE))
    files = [TORCHSCRIPT_FILE]
    if onnx:
        _export_onnx(policy, example, folder / ONNX_FILE)
        files.append(ONNX_FILE)
    meta = dataclasses.replace(meta, files={f: file_sha256(folder / f) for f in files})
    (folder / META_FILE).write_text(json.dumps(meta.to_json(torch_version=torch.__version__), indent=1))

    probe = _probe_observations(policy, np.random.default_rng(0))
    with torch.no_grad():
        expected = policy(torch.from_numpy(probe)).numpy()
    for runtime in ("torchscript", "onnx") if onnx else ("torchscript",):
        got = load_exported(folder, runtime).act_batch(_split(probe, meta))
        err = float(np.max(np.abs(got - expected)))
        if err > 1e-4 * float(np.max(np.abs(expected)) + 1.0):
            raise RuntimeError(f"the exported {runtime} graph differs from the policy by {err:g}")


def _require(module: str, what: str) -> None:
    """Refuse ``what`` with an install hint when an optional package is missing."""
    try:
        importlib.import_module(module)
    except ImportError:
        raise ExportError(f"{what} needs the {module} package: pip install 'robolearn[onnx]'") from None


def _export_onnx(policy: PolicyNetwork, example: torch.Tensor, path: Path) -> None:
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


def _probe_observations(policy: PolicyNetwork, rng: np.random.Generator) -> npt.NDArray[np.float32]:
    """Observations around the policy's normalization statistics, to compare graphs on."""
    mean, std = policy.obs_mean.numpy(), policy.obs_std.numpy()
    return (mean + std * rng.normal(0.0, 2.0, size=(64, len(mean)))).astype(np.float32)


def _split(flat: npt.NDArray[np.float32], meta: PolicyMeta) -> dict[str, npt.NDArray[np.float32]]:
    """A flat (n, D) batch as a dict of (n, *shape) terms."""
    out, offsets = {}, meta.offsets
    for t in meta.obs:
        at = offsets[t.name]
        out[t.name] = flat[:, at : at + int(np.prod(t.shape))].reshape(len(flat), *t.shape)
    return out
