"""The simulation benchmark runs end to end on a tiny configuration and reports every figure.

Rates are only checked to be positive: the machines are shared, so timing thresholds would be noise.
"""

from __future__ import annotations

import json
import time
from typing import Any

import gymnasium
import numpy as np
import pytest

import robolearn.envs  # noqa: F401  (registers robolearn's Gymnasium ids)
from robolearn.bench.config import SimBenchCfg
from robolearn.bench.report import format_table
from robolearn.bench.sim import (
    CHUNK_SECONDS,
    REPLAY_EPISODES,
    _Contender,
    _EpisodeCycle,
    _GymnasiumReplay,
    _interleaved_rates,
    _RawReplay,
    _without_physics,
    run_sim_bench,
)
from robolearn.errors import ConfigError
from robolearn.tasks import task_names


@pytest.fixture(scope="module")
def bench() -> tuple[list[dict[str, Any]], dict[str, Any], list[str]]:
    messages: list[str] = []
    rows, summary = run_sim_bench(SimBenchCfg(num_envs=2, seconds=0.2, rounds=1), progress=messages.append)
    return rows, summary, messages


def test_summary_has_every_figure(bench: tuple[list[dict[str, Any]], dict[str, Any], list[str]]) -> None:
    _, summary, _ = bench
    json.dumps(summary)  # the CLI prints it as the last line
    assert summary["num_envs"] == 2
    assert summary["machine"]["cpu_count"] >= 1
    assert summary["versions"]["mujoco"] and summary["versions"]["gymnasium"]
    ant = summary["ant"]
    for name in ("robolearn mujoco_batch", "gymnasium async", "raw mujoco.batch"):
        assert ant[name] > 0, name
    assert summary["panda"]["robolearn mujoco_batch"] > 0 and summary["panda"]["raw mujoco.batch"] > 0
    for key in ("ant_vs_raw", "ant_vs_gymnasium", "panda_vs_raw"):
        assert summary[key] > 0, key
    if ant["envpool"] is None:
        assert ant["unavailable"]["envpool"]
        assert summary["ant_vs_envpool"] is None
    else:
        assert summary["ant_vs_envpool"] == pytest.approx(ant["robolearn mujoco_batch"] / ant["envpool"])
    assert summary["ant_vs_raw"] == pytest.approx(ant["robolearn mujoco_batch"] / ant["raw mujoco.batch"])
    assert set(summary["goals"]) == {
        "ant_vs_envpool",
        "ant_vs_raw",
        "panda_vs_raw",
        "one_world_vs_gymnasium",
        "pick_cube_one_world_vs_raw",
    }
    per_cpu = summary["per_cpu_second"]
    for key in ("ant_vs_raw", "ant_vs_gymnasium", "panda_vs_raw"):
        assert per_cpu[key] > 0, key
    assert len(summary["runs"]["ant"]["raw mujoco.batch"]["steps_per_s"]) == 1  # one round


def test_every_task_is_measured_on_one_world(
    bench: tuple[list[dict[str, Any]], dict[str, Any], list[str]],
) -> None:
    _, summary, _ = bench
    assert set(summary["single"]) == set(task_names())
    for task, figures in summary["single"].items():
        assert figures["mujoco"] > 0, task
        # A backend the task does not run on, or one that failed, is null with its reason.
        for backend in ("mujoco", "pybullet"):
            if figures.get(backend) is None:
                assert figures["unavailable"][backend], (task, backend)
    assert summary["single"]["ant"]["pybullet"] is None


def test_one_world_is_compared_with_gymnasium_and_raw_mujoco(
    bench: tuple[list[dict[str, Any]], dict[str, Any], list[str]],
) -> None:
    rows, summary, _ = bench
    ant, pick = summary["one_world"]["ant"], summary["one_world"]["panda_pick_cube"]
    assert ant["robolearn/Ant-v0"] > 0 and ant["Ant-v5"] > 0
    assert pick["robolearn/PandaPickCube-v0"] > 0 and pick["raw mj_step"] > 0
    assert summary["one_world_vs_gymnasium"] == pytest.approx(ant["robolearn/Ant-v0"] / ant["Ant-v5"])
    assert summary["pick_cube_one_world_vs_raw"] == pytest.approx(
        pick["robolearn/PandaPickCube-v0"] / pick["raw mj_step"]
    )
    for key in ("one_world_vs_gymnasium", "pick_cube_one_world_vs_raw"):
        assert summary["goals"][key]["met"] in (True, False), key  # a figure, not a timed assertion
        assert summary["per_cpu_second"][key] > 0, key
    parts = {row["part"] for row in rows}
    assert {"one world ant", "one world panda_pick_cube", "one world outside the engine"} <= parts
    outside = summary["one_world_python_us"]
    assert set(outside) == {"robolearn/Ant-v0", "Ant-v5", "robolearn/PandaPickCube-v0"}
    assert all(us > 0 for us in outside.values())


def test_raw_pick_cube_steps_through_the_environments_states() -> None:
    """pick_cube_one_world_vs_raw compares equal physics work: the raw loop repeats the
    environment's cycle of episodes state for state, resets included, bit for bit."""
    cycle = _EpisodeCycle("panda_pick_cube", np.random.default_rng(0), seed=3)
    raw = _RawReplay(cycle)
    sim = cycle.env.unwrapped.vec.sim  # type: ignore[attr-defined]
    assert len(cycle.resets) == REPLAY_EPISODES and cycle.cycle >= REPLAY_EPISODES
    moved = False
    for i in range(cycle.cycle + 50):  # across the cycle's end, where both start over
        cycle.step_env(i)
        raw.step(i)
        assert np.array_equal(sim.data.qpos, raw.data.qpos), i
        assert np.array_equal(sim.data.qvel, raw.data.qvel), i
        moved = moved or not np.allclose(sim.data.qpos, sim.index.home_qpos)
    assert moved
    cycle.env.close()


def test_gymnasium_ant_steps_through_the_environments_states() -> None:
    """one_world_vs_gymnasium compares equal physics work: Gymnasium's Ant-v5, started from each of
    robolearn's reset states, goes through robolearn/Ant-v0's episodes bit for bit, its episodes
    ending where robolearn's do (the ratio once compared Ant-v5's own, shorter episodes)."""
    cycle = _EpisodeCycle("ant", np.random.default_rng(0), seed=3)
    gym_ant = _GymnasiumReplay(cycle, "Ant-v5")
    ours, theirs = cycle.env.unwrapped.vec.sim.data, gym_ant.env.unwrapped.data  # type: ignore[attr-defined]
    assert len(cycle.resets) == REPLAY_EPISODES
    ends = 0
    for i in range(cycle.cycle + 50):  # across the cycle's end, where both start over
        ended = cycle.step_env(i)
        assert gym_ant.step(i) == ended, i
        assert np.array_equal(ours.qpos, theirs.qpos) and np.array_equal(ours.qvel, theirs.qvel), i
        ends += any(ended)
    assert ends >= REPLAY_EPISODES
    cycle.env.close()
    gym_ant.env.close()


@pytest.mark.parametrize("env_id", ["robolearn/Ant-v0", "Ant-v5"])
def test_outside_the_engine_steps_leave_the_state_alone(env_id: str) -> None:
    """The "outside the engine" contenders run everything but the physics: the state never moves."""
    env = gymnasium.make(env_id)
    env.reset(seed=0)
    inner = env.unwrapped
    data = inner.vec.sim.data if hasattr(inner, "vec") else inner.data  # type: ignore[attr-defined]
    _without_physics(env)
    qpos, time_before = data.qpos.copy(), data.time
    for _ in range(5):
        _, reward, terminated, truncated, _ = env.step(env.action_space.high)
        assert not terminated and not truncated and np.isfinite(reward)
    assert np.array_equal(data.qpos, qpos) and data.time == time_before
    env.close()


def test_table_has_a_row_per_contender(bench: tuple[list[dict[str, Any]], dict[str, Any], list[str]]) -> None:
    rows, _, messages = bench
    table = format_table(rows)
    lines = table.splitlines()
    assert len(lines) == len(rows) + 2  # header and rule
    assert "envpool" in table and "gymnasium async" in table and "raw mujoco.batch" in table
    assert any(m.startswith("ant: robolearn mujoco_batch, round 1/1") for m in messages)


def test_one_world_contenders_take_turns() -> None:
    """The one-world ratios come from interleaved turns (issue 18): both contenders step in
    alternating chunks over the same stretch of time, each through its actions in order."""
    turns: list[str] = []
    seen: dict[str, list[int]] = {"a": [], "b": []}

    def stepper(name: str, seconds: float) -> Any:
        def step(i: int) -> None:
            seen[name].append(i)
            if not turns or turns[-1] != name:
                turns.append(name)
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                pass

        return step

    contenders = [
        _Contender("a", stepper("a", 2e-4), 1, "", lambda: None),
        _Contender("b", stepper("b", 4e-4), 1, "", lambda: None),
    ]
    seconds = 10 * CHUNK_SECONDS
    rates = _interleaved_rates(contenders, seconds)
    for (name, calls), (wall_rate, cpu_rate) in zip(seen.items(), rates, strict=True):
        probe = calls.index(0, 1)  # the probe's calls, then the measured ones from 0 again
        measured = len(calls) - probe
        assert calls[probe:] == list(range(measured)), name
        assert wall_rate > 0 and cpu_rate > 0 and measured / wall_rate >= seconds, name
    # Turns, not one run after the other: the probe (a, b), round 1 (a, b), round 2 reversed (b,
    # merged with the last, then a), ... Only a turn ten times its planned length would leave a
    # single round.
    assert turns[:2] == ["a", "b"] and len(turns) >= 5


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"--seconds 0\.0: must be in \(0, 3600\]"):
        run_sim_bench(SimBenchCfg(seconds=0.0))
    with pytest.raises(ConfigError, match="--rounds 0: must be at least 1"):
        run_sim_bench(SimBenchCfg(rounds=0))
