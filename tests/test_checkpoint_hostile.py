"""Checkpoints and run folders under hostile input (issue 15): nothing outside the run is read.

A run folder may come from someone else. Its ``latest`` pointer, its checkpoint folders and the
files its manifest lists must stay inside it; a manifest must cover every file that is read; a
malformed manifest or ``state.json`` is a one-line error naming the file, never a traceback.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from robolearn.errors import CorruptFileError
from robolearn.policy.loading import load_policy
from robolearn.policy.normalization import RunningNorm
from robolearn.rl.checkpoint import load_checkpoint, save_checkpoint
from robolearn.rl.replay import DeviceBatch, LearnerBatch, ReplayBuffer
from robolearn.rl.sac import SAC, SACConfig

CFG = SACConfig(hidden=(16,), batch_size=8, num_critics=2)
POLICY = {"task": "gym:Pendulum-v1", "obs_shapes": {"obs": [3]}, "action_low": [-2.0],
          "action_high": [2.0], "hidden": [16]}  # fmt: skip


def _run(root: Path, name: str = "run") -> Path:
    """A run folder with one real checkpoint."""
    torch.manual_seed(0)
    agent = SAC(3, 1, CFG, torch.device("cpu"))
    x = torch.randn(8, 3)
    agent.update(
        LearnerBatch.one_step(DeviceBatch(x, torch.zeros(8, 1), torch.ones(8), x, torch.zeros(8)), 0.99)
    )
    norm = RunningNorm(3)
    norm.update(np.random.default_rng(0).normal(size=(20, 3)))
    run = root / name
    save_checkpoint(
        run / "checkpoints", 100, agent=agent, obs_norm=norm, online=ReplayBuffer(10, {"obs": (3,)}, 1),
        demos=None, state={"run": {}, "policy": POLICY},
    )
    return run


def _ckpt(run: Path) -> Path:
    return run / "checkpoints" / (run / "checkpoints" / "latest").read_text()


def _refused(run: Path, expected: str) -> None:
    for load in (load_checkpoint, load_policy):
        with pytest.raises(CorruptFileError, match=expected) as info:
            load(run)
        assert "\n" not in str(info.value)


def test_an_honest_run_loads(tmp_path: Path) -> None:
    run = _run(tmp_path)
    assert load_checkpoint(run).state["policy"] == POLICY
    policy, meta = load_policy(run)
    assert meta["task"] == POLICY["task"] and policy.layout.dim == 3


@pytest.mark.parametrize("pointer", ["../other/checkpoints/ckpt-0000000100", "ABSOLUTE", "..", ""])
def test_latest_naming_another_folder_is_refused(tmp_path: Path, pointer: str) -> None:
    other, run = _run(tmp_path, "other"), _run(tmp_path)
    if pointer == "ABSOLUTE":
        pointer = str(_ckpt(other))
    (run / "checkpoints" / "latest").write_text(pointer)
    _refused(run, "latest: names")


def test_a_checkpoint_folder_that_is_a_symlink_elsewhere_is_refused(tmp_path: Path) -> None:
    other, run = _run(tmp_path, "other"), _run(tmp_path)
    ckpt = _ckpt(run)
    shutil.rmtree(ckpt)
    os.symlink(_ckpt(other), ckpt)
    _refused(run, "leads outside|symbolic link")


@pytest.mark.parametrize("name", ["model.safetensors", "state.json"])
def test_a_file_that_is_a_symlink_out_of_its_folder_is_refused(tmp_path: Path, name: str) -> None:
    other, run = _run(tmp_path, "other"), _run(tmp_path)
    target = _ckpt(run) / name
    target.unlink()
    os.symlink(_ckpt(other) / name, target)
    _refused(run, "leads outside|symbolic link")


def _manifest(run: Path, edit: Callable[[dict[str, object]], object]) -> None:
    path = _ckpt(run) / "manifest.json"
    path.write_text(json.dumps(edit(json.loads(path.read_text()))))


@pytest.mark.parametrize(
    "edit,expected",
    [
        (lambda m: {}, "lists no model.safetensors, state.json"),
        (lambda m: [*m], "is a JSON array where an object was expected"),
        (lambda m: "model.safetensors", "is a JSON string where an object was expected"),
        (lambda m: {k: {"sha256": v["sha256"]} for k, v in m.items()}, "should be"),
        (lambda m: {**m, "../../other/x": m["state.json"]}, "leads outside"),
        (lambda m: {k: v for k, v in m.items() if k != "model.safetensors"}, "lists no model.safetensors"),
    ],
    ids=["empty", "list", "string", "no-bytes", "dotdot-entry", "weights-left-out"],
)
def test_a_manifest_that_does_not_cover_what_is_read_is_refused(
    tmp_path: Path, edit: Callable[[dict[str, object]], object], expected: str
) -> None:
    run = _run(tmp_path)
    _manifest(run, edit)
    _refused(run, expected)


def _rehash_state(run: Path, state: bytes) -> None:
    import hashlib

    ckpt = _ckpt(run)
    (ckpt / "state.json").write_bytes(state)
    _manifest(
        run,
        lambda m: {**m, "state.json": {"sha256": hashlib.sha256(state).hexdigest(), "bytes": len(state)}},
    )


@pytest.mark.parametrize(
    "state,expected",
    [
        (pickle.dumps({"policy": POLICY}), r"state\.json: is a Python pickle, not JSON"),
        (b"[1, 2]", "is a JSON array where an object was expected"),
        (json.dumps({"run": {}}).encode(), "policy is missing"),
        (json.dumps({"policy": {**POLICY, "obs_shapes": [3]}}).encode(), "obs_shapes is a JSON array"),
        (json.dumps({"policy": {**POLICY, "hidden": [99]}}).encode(), "do not fit its record"),
    ],
    ids=["pickle", "list", "no-policy", "shapes-list", "wrong-hidden"],
)
def test_a_malformed_state_is_one_line_naming_the_file(tmp_path: Path, state: bytes, expected: str) -> None:
    run = _run(tmp_path)
    _rehash_state(run, state)
    with pytest.raises(CorruptFileError, match=expected) as info:
        load_policy(run)
    assert "state.json" in str(info.value) or "checkpoint" in str(info.value)
    assert "\n" not in str(info.value)
