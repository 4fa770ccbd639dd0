"""``robolearn.bench.finetune`` (issue 10): its options, and a smoke run of the whole pipeline (slow)."""

from __future__ import annotations

from pathlib import Path

import pytest

from robolearn.bench.config import FinetuneBenchCfg
from robolearn.errors import ConfigError


@pytest.mark.parametrize(
    ("field", "value", "option"),
    [
        ("robot_minutes", 0.0, "--robot-minutes"),
        ("episodes", 0, "--episodes"),
        ("obs_noise", -1.0, "--obs-noise"),
    ],
)
def test_options_out_of_range_are_refused_by_name(field: str, value: float, option: str) -> None:
    with pytest.raises(ConfigError, match=option):
        FinetuneBenchCfg(**{field: value}).check()  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.ros
def test_the_bench_runs_end_to_end_on_a_tiny_budget(tmp_path: Path) -> None:
    pytest.importorskip("rclpy", reason="needs rclpy: install robolearn[ros]")
    from robolearn.bench.finetune import format_finetune_table, run_finetune_bench

    cfg = FinetuneBenchCfg(
        pretrain_steps=600,
        pretrain_demos=2,
        robot_minutes=0.1,
        warmup_steps=100,
        episodes=2,
        work_dir=tmp_path,
    )
    rows, summary = run_finetune_bench(cfg)
    for key in ("zero_shot_success", "finetuned_success", "scratch_success", "robot_minutes"):
        assert key in summary
    assert [r["policy"] for r in rows] == ["zero-shot", "finetuned", "scratch"]
    assert rows[1]["robot_steps"] >= 300 and "finetuned" in format_finetune_table(rows)
