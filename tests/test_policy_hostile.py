"""Exported policies under hostile input: loading never runs code from a file (issue 15).

A policy folder is passed around like any download. Its hashes prove only that nobody changed it
since export, so a folder whose ``policy.json`` was rewritten to match a crafted model must still be
refused: TorchScript programs that touch files (at load time or in ``forward``), ONNX graphs with
operators a policy never has or tensors in external files, metadata no robot could act on, and
files that lead out of the folder. Each case checks that nothing outside the folder was touched.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import pickle
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from robolearn.envs.task_env import TaskEnv
from robolearn.errors import CorruptFileError
from robolearn.policy.export import _write
from robolearn.policy.meta import PolicyMeta, read_meta, task_meta
from robolearn.policy.network import Actor, PolicyNetwork
from robolearn.policy.normalization import ObsLayout
from robolearn.policy.runtime import load_exported
from robolearn.tasks import make_task_cfg

TASK = "panda_reach"


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An honest policy folder (random weights: what is tested is loading, not acting well)."""
    cfg = make_task_cfg(TASK)
    env = TaskEnv(cfg, "mujoco", 1)
    shapes = {k: s.shape for k, s in env.single_observation_space.items()}
    env.close()
    layout = ObsLayout(shapes)
    torch.manual_seed(0)
    net = PolicyNetwork(
        layout, Actor(layout.dim, len(cfg.action.low), (16,)), np.zeros(layout.dim), np.ones(layout.dim),
        cfg.action.low, cfg.action.high,
    ).eval()
    folder = tmp_path_factory.mktemp("clean") / "policy"
    folder.mkdir()
    _write(net, task_meta(cfg, shapes, (16,), "test"), folder, onnx=True)
    return folder


def _copy(clean: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "policy"
    shutil.copytree(clean, folder)
    return folder


def _drop_onnx(folder: Path) -> None:
    (folder / "policy.onnx").unlink()
    data = json.loads((folder / "policy.json").read_text())
    del data["files"]["policy.onnx"]
    (folder / "policy.json").write_text(json.dumps(data))


def _rehash(folder: Path, name: str) -> None:
    """What an attacker does: record the crafted file's hash in policy.json."""
    data = json.loads((folder / "policy.json").read_text())
    data["files"][name] = {"sha256": hashlib.sha256((folder / name).read_bytes()).hexdigest()}
    (folder / "policy.json").write_text(json.dumps(data))


class _WritesAFile(torch.nn.Module):
    """forward maps a file shared and writes into it: a TorchScript program with a side effect."""

    def __init__(self, path: str, dim: int) -> None:
        super().__init__()
        self.path, self.dim = path, dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = torch.from_file(self.path, True, 4, dtype=torch.uint8)
        t.fill_(65)
        return x[:, : self.dim] + t[0].float() * 0.0


class _WritesOnLoad(torch.nn.Module):
    """__setstate__ runs while torch.jit.load reads the archive, before anyone calls forward."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, :4]

    @torch.jit.export
    def __getstate__(self) -> tuple[str, bool]:
        return (self.path, self.training)

    @torch.jit.export
    def __setstate__(self, state: tuple[str, bool]) -> None:
        self.path = state[0]
        self.training = state[1]
        torch.from_file(state[0], True, 4, dtype=torch.uint8).fill_(66)


def _torchscript_case(kind: str, canary: Path) -> torch.jit.ScriptModule:
    if kind == "forward":
        return torch.jit.script(_WritesAFile(str(canary), 4))
    return torch.jit.script(_WritesOnLoad(str(canary)))


@pytest.mark.parametrize("kind", ["forward", "setstate"])
@pytest.mark.parametrize("runtime", ["torchscript", "auto"])
def test_a_torchscript_program_that_writes_files_is_refused(
    clean: Path, tmp_path: Path, kind: str, runtime: str
) -> None:
    folder, canary = _copy(clean, tmp_path), tmp_path / "outside" / "canary"
    canary.parent.mkdir()
    _torchscript_case(kind, canary).save(str(folder / "policy.pt"))
    _rehash(folder, "policy.pt")
    if runtime == "auto":  # policy_node's default falls back to TorchScript without an ONNX graph
        _drop_onnx(folder)
    with pytest.raises(CorruptFileError, match="refused") as info:
        load_exported(folder, runtime)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)
    assert not canary.exists()


def test_policy_node_refuses_the_program_too(clean: Path, tmp_path: Path) -> None:
    from robolearn.hardware.ros.policy_node import load_policy_spec

    folder, canary = _copy(clean, tmp_path), tmp_path / "canary"
    _torchscript_case("forward", canary).save(str(folder / "policy.pt"))
    _rehash(folder, "policy.pt")
    _drop_onnx(folder)
    with pytest.raises(CorruptFileError, match=r"aten::from_file"):
        load_policy_spec(str(folder), "auto")
    assert not canary.exists()


def _onnx_with(clean: Path, edit: Callable[[object], None], folder: Path) -> None:
    import onnx

    model = onnx.load(str(clean / "policy.onnx"))
    edit(model)
    onnx.save(model, str(folder / "policy.onnx"))
    _rehash(folder, "policy.onnx")


def _custom_domain(model: object) -> None:
    import onnx

    m: onnx.ModelProto = model  # type: ignore[assignment]
    node = m.graph.node[0]
    node.domain = "evil.ops"
    m.opset_import.append(onnx.helper.make_opsetid("evil.ops", 1))


def _foreign_op(model: object) -> None:
    m = model
    m.graph.node[-1].op_type = "RandomNormalLike"  # type: ignore[attr-defined]


def _external_tensor(model: object) -> None:
    import onnx

    m: onnx.ModelProto = model  # type: ignore[assignment]
    t = m.graph.initializer[0]
    t.ClearField("raw_data")
    t.data_location = onnx.TensorProto.EXTERNAL
    entry = t.external_data.add()
    entry.key, entry.value = "location", "../../../../etc/passwd"


@pytest.mark.parametrize(
    "edit,expected",
    [(_custom_domain, "custom operator domains"), (_foreign_op, "RandomNormalLike"),
     (_external_tensor, "external files")],
)  # fmt: skip
def test_an_onnx_graph_a_policy_never_has_is_refused(
    clean: Path, tmp_path: Path, edit: Callable[[object], None], expected: str
) -> None:
    folder = _copy(clean, tmp_path)
    _onnx_with(clean, edit, folder)
    with pytest.raises(CorruptFileError, match=expected) as info:
        load_exported(folder, "onnx")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "field,value,expected",
    [
        ("control_hz", math.inf, "finite positive rate"),
        ("control_hz", 0.0, "finite positive rate"),
        ("low", math.nan, "must be finite"),
        ("high", math.inf, "must be finite"),
        ("inverted", None, "low <= neutral <= high"),
    ],
)
def test_metadata_no_robot_could_act_on_is_refused(
    clean: Path, tmp_path: Path, field: str, value: float | None, expected: str
) -> None:
    folder = _copy(clean, tmp_path)
    data = json.loads((folder / "policy.json").read_text())
    if field == "control_hz":
        data["control_hz"] = value
    elif field == "inverted":
        data["action"]["low"], data["action"]["high"] = data["action"]["high"], data["action"]["low"]
    else:
        data["action"][field][0] = value
    (folder / "policy.json").write_text(json.dumps(data))  # json writes NaN and Infinity as tokens
    with pytest.raises(CorruptFileError, match=expected) as info:
        read_meta(folder)
    assert "policy.json" in str(info.value) and "\n" not in str(info.value)


def test_a_pickle_as_metadata_is_named(clean: Path, tmp_path: Path) -> None:
    folder = _copy(clean, tmp_path)
    (folder / "policy.json").write_bytes(pickle.dumps({"format": "robolearn-policy"}))
    with pytest.raises(CorruptFileError, match=r"policy\.json: is a Python pickle, not JSON"):
        read_meta(folder)


@pytest.mark.parametrize("how", ["symlink", "dotdot", "absolute"])
def test_a_model_file_outside_the_folder_is_refused(clean: Path, tmp_path: Path, how: str) -> None:
    folder = _copy(clean, tmp_path)
    elsewhere = tmp_path / "elsewhere.onnx"
    shutil.copy(folder / "policy.onnx", elsewhere)
    data = json.loads((folder / "policy.json").read_text())
    if how == "symlink":
        (folder / "policy.onnx").unlink()
        os.symlink(elsewhere, folder / "policy.onnx")
        expected = "symbolic link|leads outside"
    else:
        name = "../elsewhere.onnx" if how == "dotdot" else str(elsewhere)
        data["files"] = {name: data["files"]["policy.onnx"], **data["files"]}
        expected = "leads outside|must be relative"
    (folder / "policy.json").write_text(json.dumps(data))
    if how == "symlink":
        with pytest.raises(CorruptFileError, match=expected):
            load_exported(folder, "onnx")
    else:
        # The runtime reads only its own file names; a listed path that leaves the folder is refused
        # wherever the metadata is read.
        from robolearn.policy.runtime import verified_file

        meta = read_meta(folder)
        with pytest.raises(CorruptFileError, match=expected):
            verified_file(folder, meta, name)


def test_the_honest_folder_loads_on_both_runtimes(clean: Path) -> None:
    """The checks refuse only what they should: the exported graphs pass them."""
    meta: PolicyMeta = read_meta(clean)
    obs = {t.name: np.zeros(t.shape, np.float32) for t in meta.obs}
    a = load_exported(clean, "torchscript")(obs)
    b = load_exported(clean, "onnx")(obs)
    np.testing.assert_allclose(a, b, atol=1e-5)


def test_an_onnx_deployment_imports_no_torch(clean: Path) -> None:
    """What a robot computer runs: the runtime on ONNX Runtime, without torch or training code."""
    script = f"""
import json, sys
import numpy as np
from robolearn.policy.runtime import load_exported
policy = load_exported({str(clean)!r}, "auto")
action = policy({{t.name: np.zeros(t.shape, np.float32) for t in policy.meta.obs}})
print(json.dumps({{"runtime": policy.runtime, "modules": sorted(sys.modules)}}))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["runtime"] == "onnx"
    assert not {"torch", "tyro", "robolearn.rl", "robolearn.envs"} & set(result["modules"])
