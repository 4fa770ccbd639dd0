"""The ``pixels`` part of ``robolearn bench learn`` (issue 13): a GPU job, run here on the CPU with
tiny settings so that the part is known to run to its figures."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from robolearn.bench.config import LearnBenchCfg, PixelBenchCfg
from robolearn.bench.learn import format_learn_table, run_learn_bench
from robolearn.errors import ConfigError


def test_pixels_part_runs_to_its_figures_on_cpu(tmp_path: Path) -> None:
    before = torch.get_num_threads()
    cfg = LearnBenchCfg(
        parts=("pixels",),
        pixels=PixelBenchCfg(
            steps=24, demos=1, num_envs=2, learning_starts=20, batch_size=4, eval_every=12, eval_episodes=1
        ),
        device="cpu",
        out=tmp_path,
    )
    try:
        rows, summary = run_learn_bench(cfg)
    finally:
        torch.set_num_threads(before)
    assert [r["part"] for r in rows] == ["pixels"]
    assert summary["pixels_device"].startswith("CPU")
    run = summary["pixels_run"]
    assert run["env_steps"] == 24 and run["updates"] == 3
    assert [e["env_steps"] for e in run["evals"]] == [12, 24]
    assert all(0.0 <= e["success_rate"] <= 1.0 and e["minutes"] >= 0.0 for e in run["evals"])
    # 24 steps of an untrained policy: the figures are there, and say it did not get to 90 %.
    reached = summary["pixels_steps_to_90"]
    assert reached is None or reached in (12, 24)
    assert summary["pixels_meets_goal"] == (reached is not None)
    assert "pixels" in format_learn_table(rows)
    assert (tmp_path / "panda_pick_cube_pixels-s0" / "summary.json").is_file()


def test_pixels_part_refuses_bad_options() -> None:
    with pytest.raises(ConfigError, match=r"--pixels\.batch-size"):
        LearnBenchCfg(parts=("pixels",), pixels=PixelBenchCfg(batch_size=0)).check()
