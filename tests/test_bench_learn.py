"""The learning benchmark runs end to end on a tiny configuration and reports every figure; a training run
stops at the first evaluation that reaches its success target.

Rates are only checked to be positive: the machines are shared, so timing thresholds would be noise.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, get_args

import pytest

import robolearn.rl.train
from robolearn.bench.config import VARIANTS, LearnBenchCfg, Variant, with_variant
from robolearn.bench.learn import _censored_median, format_learn_table, run_learn_bench
from robolearn.errors import ConfigError
from robolearn.rl.config import SACConfig, TrainCfg
from robolearn.rl.train import train

TINY = LearnBenchCfg(
    seeds=1,
    steps=1_200,
    eval_every=600,
    eval_episodes=2,
    num_envs=2,
    updates=3,
    rounds=2,
    warmup_updates=1,
    critics=(2, 3),
    variants=("hl_gauss",),
    e2e_steps=0,
    stop_at_90=True,
)


@pytest.fixture(scope="module")
def bench() -> tuple[list[dict[str, Any]], dict[str, Any], list[str]]:
    messages: list[str] = []
    rows, summary = run_learn_bench(TINY, progress=messages.append)
    return rows, summary, messages


def _number_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, int | float) and math.isfinite(value) and value >= 0)


def test_summary_has_every_figure(bench: tuple[list[dict[str, Any]], dict[str, Any], list[str]]) -> None:
    _, summary, _ = bench
    json.dumps(summary)  # the CLI prints it as the last line
    assert summary["torch_threads"] == 1
    assert summary["machine"]["load_average_1min_at_start"] >= 0
    for key in ("robolearn_2_critics_updates_per_s", "robolearn_3_critics_updates_per_s"):
        assert summary[key] > 0, key
    assert summary["robolearn_2_critics_without_layer_norm_updates_per_s"] > 0
    assert summary["throughput"]["action_dim"] == 4
    assert len(summary["throughput"]["runs"]["robolearn SAC, 2 critics"]["updates_per_s"]) == TINY.rounds
    if summary["sb3_unavailable"] is None:
        assert summary["sb3_updates_per_s"] > 0
        expected = summary["robolearn_2_critics_updates_per_s"] / summary["sb3_updates_per_s"]
        assert summary["updates_vs_sb3"] == pytest.approx(expected)
    else:
        assert summary["updates_vs_sb3"] is None
    assert _number_or_none(summary["pick_cube_steps_to_90"])
    assert _number_or_none(summary["pick_cube_minutes_to_90"])
    # The recipe docs/learner.md measured.
    assert (summary["pick_cube"]["n_step"], summary["pick_cube"]["utd_ratio"]) == (3, 1)
    (run,) = summary["pick_cube"]["runs"]
    assert run["seed"] == 0 and run["env_steps"] == TINY.steps
    assert run["updates"] > 0  # past the 1,000 transitions before learning starts
    assert [point[0] for point in run["curve"]] == [600, 1_200]
    for key in ("steps_to_90", "minutes_to_90", "best_success_rate", "final_success_rate", "loop_minutes"):
        assert _number_or_none(run[key]), key
    assert set(summary["goals"]) == {
        "updates_vs_sb3",
        "pick_cube_steps_to_90",
        "pick_cube_minutes_to_90",
        "pick_cube_steps_to_90_worst",
        "pick_cube_min_success_after_90",
    }
    assert summary["robolearn_hl_gauss_updates_per_s"] > 0
    for key in ("offline_to_online_steps_to_90", "walker2d_iqm_100k", "train_walltime_vs_sb3"):
        assert summary[key] is None, key  # their parts (or the end-to-end run) were not asked for


def test_table_has_a_row_per_contender_and_seed(
    bench: tuple[list[dict[str, Any]], dict[str, Any], list[str]],
) -> None:
    rows, _, messages = bench
    lines = format_learn_table(rows).splitlines()
    assert len(lines) == len(rows) + 2  # header and rule
    # 4 robolearn learners and SB3's (or its reason), a seed and the median.
    assert len(rows) == 7
    assert any(m.startswith("throughput: robolearn SAC, 2 critics, round 2/2") for m in messages)
    assert any(m.startswith("pick_cube seed 0: 1,200 env steps") for m in messages)


SuccessCurve = list[tuple[int, float]]


@pytest.fixture
def success_curve(monkeypatch: pytest.MonkeyPatch) -> Iterator[SuccessCurve]:
    """Training's evaluations return, instantly, the rate of the last (env steps, rate) point reached."""
    curve: SuccessCurve = []

    def evaluate(learner: Any, *args: Any) -> dict[str, Any]:
        rate = [r for steps, r in curve if learner.env_steps >= steps][-1]
        return {
            "success_rate": rate,
            "success_rate_ci95": [rate, rate],
            "return_mean": 0.0,
            "success_defined": True,
        }

    monkeypatch.setattr(robolearn.rl.train, "_evaluate", evaluate)
    yield curve


def test_the_first_evaluation_at_90_percent_counts_and_stops_the_run(
    success_curve: SuccessCurve, tmp_path: Path
) -> None:
    success_curve += [(0, 0.2), (200, 0.88), (300, 0.9), (400, 1.0)]
    cfg = LearnBenchCfg(
        parts=("pick_cube",), seeds=2, steps=2_000, eval_every=100, num_envs=2, out=tmp_path, stop_at_90=True
    )
    rows, summary = run_learn_bench(cfg)
    runs = summary["pick_cube"]["runs"]
    assert [run["steps_to_90"] for run in runs] == [300, 300]
    assert [run["env_steps"] for run in runs] == [300, 300]  # stopped there, well before the budget
    assert [run["seed"] for run in runs] == [0, 1]
    assert summary["pick_cube_steps_to_90"] == 300
    assert 0 < summary["pick_cube_minutes_to_90"] < 15
    assert summary["goals"]["pick_cube_steps_to_90"]["met"] is True
    assert rows[-1]["note"] == "2 of 2 seeds reached 90% within 2,000 env steps"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["panda_pick_cube-s0", "panda_pick_cube-s1"]


def test_train_stops_early_only_when_asked(success_curve: SuccessCurve, tmp_path: Path) -> None:
    success_curve.append((0, 1.0))
    cfg = TrainCfg(
        task="panda_reach",
        num_envs=2,
        steps=400,
        eval_every=100,
        checkpoint_every=1_000,
        video=False,
        out=tmp_path,
    )
    assert train(replace(cfg, name="all"))["env_steps"] == 400
    assert train(replace(cfg, name="stop", stop_at_success=1.0))["env_steps"] == 100


def test_medians_count_a_seed_that_never_got_there_as_slowest() -> None:
    assert _censored_median([4_000, None, 2_000]) == 4_000
    assert _censored_median([None, None, 2_000]) is None
    assert _censored_median([1.0, 3.0]) == 2.0
    assert _censored_median([1.0, None]) is None


def test_bad_configuration_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--seeds 0: must be at least 1"):
        run_learn_bench(LearnBenchCfg(seeds=0))
    with pytest.raises(ConfigError, match="unknown benchmark parts"):
        run_learn_bench(LearnBenchCfg(parts=("speed",)))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="critics must be ensemble sizes"):
        run_learn_bench(LearnBenchCfg(critics=()))
    with pytest.raises(ConfigError, match="--gym-envs and --gym-learners: name at least one"):
        run_learn_bench(LearnBenchCfg(parts=("gym",), gym_learners=()))
    with pytest.raises(ConfigError, match=r"--stop-at-success 1\.5: must be in"):
        train(TrainCfg(task="panda_reach", stop_at_success=1.5, out=tmp_path))
    with pytest.raises(ConfigError, match="--gym-random-episode-steps -1: must be at least 0"):
        run_learn_bench(LearnBenchCfg(gym_random_episode_steps=-1))
    with pytest.raises(ConfigError, match="--random-episode-steps -5: must be at least 0"):
        train(TrainCfg(task="panda_reach", random_episode_steps=-5, out=tmp_path))


def test_gym_part_trains_the_chosen_envs_and_reports_their_returns(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    sb3_evaluation = pytest.importorskip("stable_baselines3.common.evaluation")

    def evaluate(learner: Any, *args: Any) -> dict[str, Any]:
        rate = {"success_rate": 0.0, "success_rate_ci95": [0.0, 0.0], "success_defined": False}
        return rate | {"return_mean": 123.0}

    # Both learners train for real; only their final evaluations (10 episodes of 1,000 steps) are
    # replaced by fixed returns.
    monkeypatch.setattr(robolearn.rl.train, "_evaluate", evaluate)
    monkeypatch.setattr(sb3_evaluation, "evaluate_policy", lambda *args, **kw: (456.0, 0.0))
    messages: list[str] = []
    cfg = LearnBenchCfg(
        parts=("gym",),
        gym_steps=1_100,
        gym_random_steps=500,
        gym_random_episode_steps=50,
        gym_utd_ratio=3,
        gym_seeds=1,
        seed=4,
        gym_envs=("HalfCheetah-v5",),
        out=tmp_path,
    )
    rows, summary = run_learn_bench(cfg, progress=messages.append)
    # The run is kept under --out, and its random phase is the part's.
    run = json.loads((tmp_path / "HalfCheetah-v5-s4" / "config.json").read_text())
    assert run["random_steps"] == run["learning_starts"] == 500 == summary["gym"]["random_steps"]
    # Its random episodes are cut at the part's length (robolearn's; SB3 has no such option).
    assert run["random_episode_steps"] == 50
    assert summary["gym"]["random_episode_steps"] == {"robolearn": 50, "sb3": 0}
    # robolearn's critic takes the part's updates per step; SB3 keeps its own default of one.
    assert run["sac"]["utd_ratio"] == 3 and summary["gym"]["utd_ratio"] == {"robolearn": 3, "sb3": 1}
    # Its critic is the part's HL-Gauss classifier over rewards scaled by return statistics, its bins
    # over SimbaV2's (-5, 5); SB3's regresses on the rewards as they are.
    assert run["sac"]["critic_loss"] == "hl_gauss" and run["sac"]["value_range"] == [-5.0, 5.0]
    assert run["sac"]["reward_scale"] == "returns"
    assert summary["gym"]["critic_loss"] == {"robolearn": "hl_gauss", "sb3": "mse"}
    assert summary["gym"]["reward_scale"] == {"robolearn": "returns", "sb3": "none"}
    assert summary["halfcheetah_iqm_1100"] == 123.0 and summary["sb3_halfcheetah_iqm_1100"] == 456.0
    assert "walker2d_iqm_1100" not in summary and summary["walker2d_iqm_100k"] is None
    detail = summary["gym"]["halfcheetah"]
    assert detail["seeds"] == [4]
    assert detail["robolearn"]["returns"] == [123.0] and len(detail["robolearn"]["minutes"]) == 1
    assert detail["sb3"]["returns"] == [456.0] and len(detail["sb3"]["minutes"]) == 1
    assert [row["contender"] for row in rows] == ["HalfCheetah-v5 robolearn SAC", "HalfCheetah-v5 SB3 SAC"]
    assert rows[0]["note"] == (
        "IQM of final return 123 over 1 seeds at 1,100 steps, 3 critic updates per step, HL-Gauss critic, "
        "rewards scaled by return statistics"
    )
    assert rows[-1]["note"] == "IQM of final return 456 over 1 seeds at 1,100 steps, 1 critic update per step"
    # Each run says how far it is every tenth of its steps, then its final return.
    for label in ("gym: robolearn HalfCheetah-v5 seed 4: ", "gym: SB3 HalfCheetah-v5 seed 4: "):
        lines = [m for m in messages if m.startswith(label)]
        assert sum("env steps" in m for m in lines) >= 5, lines
        assert lines[-1].startswith(label + "final return "), lines

    assert summary["gym"]["learner_variant"] == "default"

    # One learner alone, with a critic option.
    messages.clear()
    alone = replace(
        cfg,
        gym_learners=("robolearn",),
        learner_variant="bro",
        gym_critic_loss="mse",
        gym_reward_scale="none",
        out=None,
    )
    rows, summary = run_learn_bench(alone, progress=messages.append)
    assert summary["gym"]["critic_loss"] == {"robolearn": "mse", "sb3": "mse"}
    assert summary["gym"]["reward_scale"] == {"robolearn": "none", "sb3": "none"}
    assert rows[0]["note"].endswith("3 critic updates per step")
    assert "sb3" not in summary["gym"]["halfcheetah"] and "sb3_halfcheetah_iqm_1100" not in summary
    assert not any(m.startswith("gym: SB3") for m in messages)
    assert summary["gym"]["learner_variant"] == "bro"


def test_an_hl_gauss_critic_covers_the_locomotion_returns_in_the_gym_part(tmp_path: Path) -> None:
    """HL-Gauss classifies values into bins over a fixed range: (-100, 100), its default, would clip
    HalfCheetah's values (about 700 at a return of 7,000), so the gym part gives its own range."""
    from robolearn.bench.learn import GYM_VALUE_RANGE, _bench_sac, _gym_sac, _gym_train_cfg

    def sac(variant: str | None) -> SACConfig:
        return _gym_train_cfg(LearnBenchCfg(), "HalfCheetah-v5", 1_000, 0, tmp_path, _bench_sac(variant)).sac

    assert sac("hl_gauss").critic_loss == "hl_gauss" and sac("hl_gauss").value_range == GYM_VALUE_RANGE
    assert GYM_VALUE_RANGE[1] >= 11 / (1 - sac("hl_gauss").gamma)  # 11 per step, HalfCheetah at 11 m/s
    assert sac(None).critic_loss == "mse" and sac(None).value_range == SACConfig.value_range
    # With SimbaV2's reward scaling the returns are scaled into (-5, 5): the variant's and the part's.
    part = _gym_sac(LearnBenchCfg(gym_utd_ratio=2, gym_critic_loss="hl_gauss", gym_reward_scale="returns"))
    assert part.reward_scale == "returns" and part.value_range == (-5.0, 5.0) and part.utd_ratio == 2
    scaled = sac("hl_gauss_scaled")
    assert (scaled.critic_loss, scaled.reward_scale) == ("hl_gauss", "returns")
    assert scaled.value_range == (-5.0, 5.0)


def test_end_to_end_run_times_both_loops_and_says_what_they_learned(monkeypatch: pytest.MonkeyPatch) -> None:
    sb3_evaluation = pytest.importorskip("stable_baselines3.common.evaluation")
    returns = {"return_mean": 123.0, "success_rate": 0.0, "success_rate_ci95": [0.0, 0.0]}
    monkeypatch.setattr(robolearn.rl.train, "_evaluate", lambda *a: returns | {"success_defined": False})
    monkeypatch.setattr(sb3_evaluation, "evaluate_policy", lambda *args, **kw: (456.0, 0.0))
    cfg = LearnBenchCfg(
        parts=("throughput",),
        critics=(2,),
        variants=(),
        rounds=1,
        updates=2,
        warmup_updates=1,
        e2e_steps=1_100,
        e2e_threaded=True,
    )
    messages: list[str] = []
    _, summary = run_learn_bench(cfg, progress=messages.append)
    e2e = summary["train_walltime"]
    assert e2e["robolearn_threaded"] is True and e2e["steps"] == 1_100
    assert e2e["robolearn_return"] == 123.0 and e2e["sb3_return"] == 456.0
    assert summary["train_walltime_vs_sb3"] == pytest.approx(e2e["sb3_seconds"] / e2e["robolearn_seconds"])
    assert any(m.startswith("throughput: end to end, robolearn ") for m in messages)


def test_every_variant_option_names_a_learner_change() -> None:
    """The options' choices (``Variant``) and the changes (``VARIANTS``) are one list, and each
    change is a valid SACConfig."""
    assert set(get_args(Variant)) == set(VARIANTS)
    for name in VARIANTS:
        with_variant(SACConfig(), name).check()
