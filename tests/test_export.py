"""Policy export: the folder loads back to the same actions, refuses a robot it does not fit, refuses
damaged files, and loads without the learner or a simulator."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from robolearn.cli.export import ExportCmd, run_export
from robolearn.envs.task_env import TaskGymEnv
from robolearn.errors import CorruptFileError
from robolearn.policy.export import export_policy
from robolearn.policy.loading import load_policy
from robolearn.policy.meta import ExportError, PolicyMismatchError, read_meta
from robolearn.policy.runtime import load_exported, scripted_policy
from robolearn.rl.config import DistillCmd
from robolearn.rl.distill import distill
from robolearn.tasks import make_task_cfg

TASK = "panda_reach"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real (briefly) distilled run: the export path is the one a deployment takes."""
    cmd = DistillCmd(
        task=TASK,
        num_envs=4,
        iterations=1,
        steps_per_iteration=400,
        updates_per_iteration=100,
        hidden=(32, 32),
        eval_episodes=2,
        final_eval_episodes=2,
        out=tmp_path_factory.mktemp("runs"),
        name="reach",
    )
    return Path(distill(cmd)["run_dir"])


@pytest.fixture(scope="module")
def exported(run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_policy(run_dir, tmp_path_factory.mktemp("export") / "policy")


def _observations(n: int, dim: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.0, 0.2, size=(n, dim)).astype(np.float32)


def test_round_trip_gives_the_policys_actions(run_dir: Path, exported: Path) -> None:
    policy, _ = load_policy(run_dir)
    loaded = load_exported(exported)
    flat = _observations(32, policy.layout.dim)
    with torch.no_grad():
        expected = policy(torch.from_numpy(flat)).numpy()
    obs = {k: flat[:, o : o + 3] for k, o in loaded.meta.offsets.items()}
    np.testing.assert_allclose(loaded.act_batch(obs), expected, atol=1e-5)
    single = loaded({k: v[5] for k, v in obs.items()})
    assert single.shape == (4,)
    np.testing.assert_allclose(single, expected[5], atol=1e-5)
    # The dict path agrees with the policy's own flattening.
    np.testing.assert_allclose(loaded.act_batch(obs), policy.act(obs), atol=1e-5)


def test_metadata_describes_the_task(exported: Path) -> None:
    meta = read_meta(exported)
    cfg = make_task_cfg(TASK)
    assert meta.task == TASK and meta.embodiment == "arm"
    assert [t.name for t in meta.obs] == sorted(cfg.observations)  # the order the network reads
    assert all(t.shape == (3,) and t.units == cfg.observations[t.name].units for t in meta.obs)
    assert meta.offsets == {"ee_pos": 0, "ee_target_offset": 3, "ee_vel": 6, "goal_from_ee": 9}
    assert meta.action_names == cfg.action.names and meta.action_high == cfg.action.high
    assert meta.action_neutral == cfg.action.neutral
    assert meta.control_hz == pytest.approx(50.0) and meta.hidden == (32, 32)
    data = json.loads((exported / "policy.json").read_text())
    assert data["files"]["policy.pt"]["sha256"] == meta.files["policy.pt"]
    assert {"robolearn_version", "exported_at", "torch_version"} <= set(data)


def test_onnx_gives_the_same_actions(run_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    out = export_policy(run_dir, tmp_path / "policy", onnx=True)
    torchscript, onnx = load_exported(out), load_exported(out, "onnx")
    obs = {k: _observations(16, 3, seed=i) for i, k in enumerate(torchscript.meta.offsets)}
    np.testing.assert_allclose(onnx.act_batch(obs), torchscript.act_batch(obs), atol=1e-5)
    # auto takes ONNX Runtime where the folder has the graph, TorchScript where it has not.
    assert load_exported(out, "auto").runtime == "onnx" and torchscript.runtime == "torchscript"
    (out / "policy.onnx").unlink()
    meta = json.loads((out / "policy.json").read_text())
    del meta["files"]["policy.onnx"]
    (out / "policy.json").write_text(json.dumps(meta))
    assert load_exported(out, "auto").runtime == "torchscript"
    with pytest.raises(ExportError, match="unknown runtime 'tensorrt'; choose auto, torchscript, onnx"):
        load_exported(out, "tensorrt")  # type: ignore[arg-type]


def test_check_compatible_names_the_mismatch(exported: Path) -> None:
    policy = load_exported(exported)
    cfg = make_task_cfg(TASK)
    policy.check_compatible(cfg)
    policy.check_compatible(
        cfg, {"ee_pos": (3,), "ee_vel": (3,), "ee_target_offset": (3,), "goal_from_ee": (3,)}
    )

    with pytest.raises(PolicyMismatchError, match=r"policy expects observation 'goal_from_ee' \[3\] \(m\)"):
        policy.check_compatible(make_task_cfg("panda_pick_cube"))
    with pytest.raises(PolicyMismatchError, match=r"'goal_from_ee' \[3\] but robot provides \[4\]"):
        policy.check_compatible(
            cfg, {"ee_pos": (3,), "ee_vel": (3,), "ee_target_offset": (3,), "goal_from_ee": (4,)}
        )
    with pytest.raises(PolicyMismatchError, match="50 Hz, task panda_reach at 25 Hz"):
        policy.check_compatible(dataclasses.replace(cfg, control_dt=0.04))
    wider = dataclasses.replace(cfg.action, high=(0.05, 0.05, 0.05, 0.08))
    with pytest.raises(PolicyMismatchError, match="action high"):
        policy.check_compatible(dataclasses.replace(cfg, action=wider))
    with pytest.raises(PolicyMismatchError, match="policy is for a arm, task quadrotor_hover for a drone"):
        policy.check_compatible(make_task_cfg("quadrotor_hover"))


def test_observations_it_cannot_read_are_refused(exported: Path) -> None:
    policy = load_exported(exported)
    obs = {t.name: np.zeros(3, np.float32) for t in policy.meta.obs}
    with pytest.raises(PolicyMismatchError, match="policy expects observation 'ee_vel'"):
        policy({k: v for k, v in obs.items() if k != "ee_vel"})
    with pytest.raises(PolicyMismatchError, match=r"'goal_from_ee' \[3\] but the robot provides \[2\]"):
        policy(obs | {"goal_from_ee": np.zeros(2)})


@pytest.mark.parametrize("damage", ["flip", "truncate", "json", "field", "shape", "missing"])
def test_damaged_folders_are_refused_in_one_line(exported: Path, tmp_path: Path, damage: str) -> None:
    folder = tmp_path / "policy"
    folder.mkdir()
    for f in exported.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    model, meta = folder / "policy.pt", folder / "policy.json"
    data = json.loads(meta.read_text())
    if damage == "flip":
        blob = bytearray(model.read_bytes())
        blob[len(blob) // 2] ^= 0x01
        model.write_bytes(bytes(blob))
    elif damage == "truncate":
        model.write_bytes(model.read_bytes()[:1000])
    elif damage == "json":
        meta.write_text(meta.read_text()[:-20])
    elif damage == "field":
        del data["action"]["low"]
        meta.write_text(json.dumps(data))
    elif damage == "shape":  # metadata that no longer describes the graph (its hash still holds)
        data["observation"][-1]["shape"] = [4]
        meta.write_text(json.dumps(data))
    else:
        model.unlink()
    expected = {
        "flip": "does not match the SHA-256",
        "truncate": "does not match the SHA-256",
        "json": "not readable JSON",
        "field": "missing field 'low'",
        "shape": "does not take the 13 observation values",
        "missing": "policy.pt is missing",
    }[damage]
    with pytest.raises(CorruptFileError, match=expected) as info:
        load_exported(folder)
    assert "\n" not in str(info.value)


class _RunsCode:
    """Unpickling this runs a shell command: what a pickle-based model file could do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def test_a_model_file_that_would_run_code_is_refused(exported: Path, tmp_path: Path) -> None:
    """Even with its hash recorded (someone rewrote policy.json too), no Python code from it runs."""
    folder, marker = tmp_path / "policy", tmp_path / "ran"
    folder.mkdir()
    (folder / "policy.json").write_bytes((exported / "policy.json").read_bytes())
    with zipfile.ZipFile(exported / "policy.pt") as src, zipfile.ZipFile(folder / "policy.pt", "w") as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename.endswith("/data.pkl"):
                data = pickle.dumps(_RunsCode(marker), protocol=2)
            dst.writestr(item.filename, data)
    data = json.loads((folder / "policy.json").read_text())
    data["files"]["policy.pt"]["sha256"] = hashlib.sha256((folder / "policy.pt").read_bytes()).hexdigest()
    (folder / "policy.json").write_text(json.dumps(data))
    with pytest.raises(CorruptFileError, match="is not a TorchScript policy"):
        load_exported(folder)
    assert not marker.exists()


def test_loading_needs_neither_the_learner_nor_a_simulator(exported: Path) -> None:
    script = f"""
import json, sys
import numpy as np
from robolearn.policy.runtime import load_exported
policy = load_exported({str(exported)!r})
action = policy({{t.name: np.zeros(t.shape, np.float32) for t in policy.meta.obs}})
print(json.dumps({{"action": action.tolist(), "modules": sorted(sys.modules)}}))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(result["action"]) == 4
    modules = set(result["modules"])
    forbidden = {
        "robolearn.rl.train",
        "robolearn.rl.sac",
        "robolearn.policy.network",
        "robolearn.rl.checkpoint",
        "robolearn.envs.task_env",
        "robolearn.rl.distill",
        "robolearn.sim.mujoco_backend",
        "robolearn.sim.pybullet_backend",
        "mujoco",
        "pybullet",
        "safetensors",
    }
    assert not modules & forbidden, sorted(modules & forbidden)
    # Beyond the export module and small numpy-only helpers, only what ``import robolearn`` itself
    # loads (the task registry and the backend interface it names, for Gymnasium registration), and
    # the engine-independent world runner a scripted policy sizes its observations with.
    package = {m for m in modules if m.startswith("robolearn")}
    assert package <= {
        "robolearn",
        "robolearn.errors",
        "robolearn.data",
        "robolearn.data.files",
        "robolearn.data.manifest",
        "robolearn.policy",
        "robolearn.policy.meta",
        "robolearn.policy.runtime",
        "robolearn.tasks",
        "robolearn.tasks.core",
        "robolearn.tasks.plugins",
        "robolearn.tasks.sim_params",
        "robolearn.tasks.one_world",
        "robolearn.tasks.worlds",
        "robolearn.sim",
        "robolearn.sim.backend",
        "robolearn.sim.host_xp",
        "robolearn.sim.scene",
    }, sorted(package)


def test_scripted_policy_solves_its_task_one_observation_at_a_time() -> None:
    policy = scripted_policy(TASK)
    policy.check_compatible(make_task_cfg(TASK))
    assert policy.meta.source == f"scripted:{TASK}" and policy.meta.hidden == ()
    env = TaskGymEnv(TASK)
    successes = 0
    for episode in range(3):
        obs, _ = env.reset(seed=episode)
        for _ in range(100):
            obs, _, terminated, truncated, info = env.step(policy(obs))
            if terminated or truncated:
                successes += info["success"]
                break
    env.close()
    assert successes == 3


def test_export_command(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p"
    run_export(ExportCmd(run=run_dir, out=out))
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["policy"] == str(out) and set(last["files"]) == {"policy.pt"}
    with pytest.raises(ExportError, match="exists"):
        run_export(ExportCmd(run=run_dir, out=out))
    run_export(ExportCmd(run=run_dir, out=out, force=True))
    with pytest.raises(CorruptFileError, match="not a robolearn run"):
        export_policy(tmp_path, tmp_path / "q")
