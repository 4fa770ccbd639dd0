"""The deployment benchmarks end to end, at small sizes: their figures exist and are sane.

Timing goals are the benchmarks' business (``robolearn bench deploy``); on a shared test machine
these tests hold the figures to loose bounds that only a broken pipeline would cross.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="needs rclpy: install robolearn[ros] or source a ROS 2 installation")

from robolearn.bench.config import DeployBenchCfg, TransferBenchCfg
from robolearn.bench.deploy import format_deploy_table, run_deploy_bench
from robolearn.bench.transfer import format_transfer_table, run_transfer_bench
from robolearn.errors import ConfigError

pytestmark = [pytest.mark.ros, pytest.mark.filterwarnings("ignore::DeprecationWarning:lark")]


def test_deploy_bench_measures_latency_and_jitter_of_mlp_and_pixel_policy_nodes(tmp_path: Path) -> None:
    cfg = DeployBenchCfg(
        hidden=(32, 32),
        latency_samples=100,
        jitter_seconds=1.0,
        pixel_samples=50,
        priority=0,
        work_dir=tmp_path,
    )
    rows, summary = run_deploy_bench(cfg)
    assert summary["latency_samples"] + summary["latency_unanswered"] == 100
    # Most samples answered within the 10 ms between them, even on a loaded machine (a broken node
    # answers none); the tail is the machine's business, not this test's.
    assert summary["latency_samples"] >= 50
    assert 0.05 < summary["latency_p50_ms"] < 10.0
    assert summary["latency_p50_ms"] <= summary["latency_p99_ms"] <= summary["latency_max_ms"]
    # The stages policy_node timed fit inside the latency they make up.
    stages = ("arrival", "read", "observe", "policy", "safety", "publish")
    assert all(0.0 <= summary[f"stage_{s}_p50_ms"] <= summary[f"stage_{s}_p99_ms"] for s in stages)
    assert summary["stage_step_p50_ms"] < summary["latency_p50_ms"]
    assert (
        summary["stage_observe_p50_ms"] + summary["stage_policy_p50_ms"]
        <= summary["stage_step_p50_ms"] + 1e-9
    )
    assert summary["latency_deadline_misses"] >= 0 and "preempt_rt" in summary["realtime"]
    assert [r["part"] for r in rows[1:3]] == ["policy alone", "policy after idle"]
    assert 0.0 < summary["policy_after_idle_ms_p50"] <= summary["policy_after_idle_ms_p99"]
    assert [r["part"].strip() for r in rows[3:11]] == [*stages, "step", "return"]
    # How evenly the commands come is the machine's business (three busy processes on two cores put
    # the median 14 ms off at 50 Hz): here only that they are figures; the count below is the check.
    for key in ("jitter_arm_100hz", "jitter_drone_50hz", "jitter_car_50hz"):
        assert 0.0 <= summary[f"{key}_p50_ms"] <= summary[f"{key}_p99_ms"] < math.inf, key
    assert summary["jitter_p99_ms"] == max(
        summary[k] for k in ("jitter_arm_100hz_p99_ms", "jitter_drone_50hz_p99_ms", "jitter_car_50hz_p99_ms")
    )
    jitter = [r for r in rows if r["part"] == "jitter"]
    assert [r["rate_hz"] for r in jitter] == [100.0, 50.0, 50.0]
    assert all(r["samples"] >= 0.5 * r["rate_hz"] for r in jitter)  # about a second of commands each
    assert "latency" in format_deploy_table(rows)

    # The pixel policy, its two 64x64 cameras sent raw, then as JPEG: most samples answered within
    # the task's 20 ms period, the frames' decoding timed, and JPEG far smaller than raw.
    assert summary["pixels_task"] == "panda_pick_cube_pixels"
    assert summary["pixels_cameras"] == ["wrist", "scene"] and summary["pixels_camera_size"] == ["64x64"]
    for transport in ("raw", "compressed"):
        key = f"pixels_{transport}"
        assert summary[f"{key}_latency_samples"] + summary[f"{key}_latency_unanswered"] == 50
        assert summary[f"{key}_latency_samples"] >= 25
        # Figures, not a timing check (a loaded machine measured p99 21 ms): the counts above check.
        assert 0.05 < summary[f"{key}_latency_p50_ms"] <= summary[f"{key}_latency_p99_ms"] < math.inf
        assert 0.0 < summary[f"{key}_stage_images_p50_ms"] <= summary[f"{key}_stage_images_p99_ms"]
        assert summary[f"{key}_stage_step_p50_ms"] < summary[f"{key}_latency_p50_ms"]
    assert summary["pixels_raw_image_bytes"] == 64 * 64 * 3
    assert 0 < summary["pixels_compressed_image_bytes"] < 0.5 * summary["pixels_raw_image_bytes"]
    # Decoding two JPEGs costs more than viewing two raw buffers.
    assert summary["pixels_compressed_stage_images_p50_ms"] > summary["pixels_raw_stage_images_p50_ms"]
    parts = [r["part"].strip() for r in rows]
    for transport in ("raw", "compressed"):
        at = parts.index(f"pixels {transport}")
        assert parts[at + 1 : at + 10] == ["arrival", "read", "images", *stages[2:], "step", "return"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"latency_samples": 0}, "latency-samples"),
        ({"pixel_samples": -1}, "pixel-samples"),
        (
            {"camera_size": (640, 0)},
            r"--camera-size \(640, 0\): width and height must each be in \[8, 4096\]",
        ),
    ],
)
def test_deploy_bench_refuses_bad_options(change: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        run_deploy_bench(DeployBenchCfg(**change))  # type: ignore[arg-type]


@pytest.mark.slow
def test_transfer_bench_deploys_each_embodiment_to_pybullet(tmp_path: Path) -> None:
    cfg = TransferBenchCfg(
        arm_policy="scripted:panda_reach",
        drone_policy="scripted:quadrotor_hover",
        car_policy="scripted:car_checkpoints",
        embodiments=("arm", "drone", "car"),  # a pixel policy needs training (distilled here: minutes)
        episodes=2,
        mujoco_episodes=4,
        work_dir=tmp_path,
    )
    rows, summary = run_transfer_bench(cfg)
    for embodiment in ("arm", "drone", "car"):
        assert summary[f"success_mujoco_{embodiment}"] == 1.0
        assert summary[f"success_ros_pybullet_{embodiment}"] >= 0.5
        ratio = summary[f"transfer_ratio_{embodiment}"]
        assert not math.isnan(ratio) and ratio >= 0.5
    assert [r["embodiment"] for r in rows] == ["arm", "drone", "car"]
    assert "ROS 2 + PyBullet" in format_transfer_table(rows)
