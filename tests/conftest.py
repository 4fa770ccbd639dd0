"""Shared fixtures: the built wheel and a distilled panda_reach student."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from robolearn.rl.config import DistillCmd
from robolearn.rl.distill import distill

os.environ.setdefault("MUJOCO_GL", "egl")

if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
    import torch

    # pytest-xdist workers share the cores: each gets its share for torch's pool, not every core.
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """robolearn built as a wheel, once for the packaging and launch tests."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    return next(out.glob("robolearn-*.whl"))


@pytest.fixture(scope="session")
def reach_student(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The summary of a small DAgger run on panda_reach under domain randomization, once for the
    distillation test (what the run holds) and the end-to-end deployment (exported, over ROS)."""
    cmd = DistillCmd(
        task="panda_reach",
        num_envs=8,
        iterations=3,
        steps_per_iteration=1_600,
        updates_per_iteration=400,
        hidden=(64, 64),
        eval_episodes=8,
        final_eval_episodes=24,
        out=tmp_path_factory.mktemp("student"),
        name="reach",
    )
    return distill(cmd)


@pytest.fixture
def cuda_strict_tensors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tensors refuse numpy's implicit conversion (``np.asarray(t)``, ``np.diff(t)``), as CUDA tensors
    do: a Warp CPU-device run then fails where the same code on a GPU would. Explicit copies
    (``t.cpu().numpy()``) still work. (A CUDA-only crash of the device loop went unseen without it.)"""
    import torch

    def refuse(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"implicit numpy conversion of a {self.device} tensor: it fails on CUDA")

    monkeypatch.setattr(torch.Tensor, "__array__", refuse)
