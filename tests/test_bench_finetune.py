"""``robolearn.bench.finetune`` (issue 10): its options, the built-in gaps, the goal check, and a
smoke run of the whole pipeline (slow)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from robolearn.bench.config import FinetuneBenchCfg
from robolearn.errors import ConfigError, CorruptFileError
from robolearn.sim.backend import make_backend
from robolearn.tasks import make_task_cfg
from robolearn.tasks.sim_params import apply_sim_params, load_sim_params, save_sim_params


@pytest.mark.parametrize(
    ("field", "value", "option"),
    [
        ("robot_minutes", 0.0, "--robot-minutes"),
        ("episodes", 0, "--episodes"),
        ("obs_noise", -1.0, "--obs-noise"),
        ("goal", 1.5, "--goal"),
        ("stop_episodes", 0, "--stop-episodes"),
        ("gap_strength", 2.0, "--gap-strength"),
        ("calibrate", (0.5, -1.0), "--calibrate"),
        ("embodiments", ("arm", "arm"), "--embodiments"),
        ("embodiments", (), "--embodiments"),
        ("intervene_steps", (40, 40), "--intervene-steps 40 40: must be two steps with 0 <= start < stop"),
        ("intervene_on_disagreement", 0.0, "--intervene-on-disagreement"),
        ("intervene_on_disagreement", 2.5, "--intervene-on-disagreement"),
        ("intervene_hold", 0, "--intervene-hold"),
        ("intervention_share", 1.0, "--intervention-share"),
        ("evaluate_checkpoints", 0, "--evaluate-checkpoints"),
        ("checkpoint_minutes", 0.0, "--checkpoint-minutes"),
    ],
)
def test_options_out_of_range_are_refused_by_name(field: str, value: object, option: str) -> None:
    with pytest.raises(ConfigError, match=option):
        FinetuneBenchCfg(**{field: value}).check()  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("embodiment", "task"),
    [("arm", "panda_pick_cube"), ("drone", "quadrotor_hover"), ("car", "car_checkpoints")],
)
def test_the_built_in_gap_scales_with_its_strength_and_builds_on_pybullet(
    embodiment: str, task: str, tmp_path: Path
) -> None:
    from robolearn.bench.finetune import GAPS, gap_params

    nominal = gap_params(embodiment, task, 0.0)
    assert all(p.value == 1.0 for p in nominal.params.values())
    half, full = gap_params(embodiment, task, 0.5), gap_params(embodiment, task, 1.0)
    for name, value in GAPS[embodiment].items():
        assert full.params[name].value == pytest.approx(value)
        assert half.params[name].value == pytest.approx(1.0 + 0.5 * (value - 1.0))
    # The file sim_robot_node reads: every parameter names something the PyBullet robot has.
    save_sim_params(full, tmp_path / "gap.yaml")
    cfg = apply_sim_params(make_task_cfg(task), load_sim_params(tmp_path / "gap.yaml"))
    sim = make_backend("pybullet", cfg.scene, 1)
    try:
        sim.reset_worlds(np.arange(1))
        sim.step(np.zeros((1, sim.num_controls)), 2)
    finally:
        sim.close()


def _evaluated(rate: float, episodes: int = 20) -> dict[str, float]:
    return {"success_rate": rate, "episodes": episodes}


def test_the_goal_needs_a_gap_the_goal_in_budget_and_a_clear_lead_over_scratch() -> None:
    from robolearn.bench.finetune import goal_check

    cfg = FinetuneBenchCfg(robot_minutes=20.0)
    met = {"zero-shot": _evaluated(0.4), "finetuned": _evaluated(1.0), "scratch": _evaluated(0.3)}
    assert goal_check(cfg, met, 12.0)["goal_met"]
    assert not goal_check(cfg, met | {"zero-shot": _evaluated(0.7)}, 12.0)["gap_matters"]
    assert not goal_check(cfg, met | {"finetuned": _evaluated(0.9)}, 12.0)["finetuned_reaches_goal"]
    assert not goal_check(cfg, met, 25.0)["goal_met"]
    close = goal_check(cfg, met | {"scratch": _evaluated(0.85)}, 12.0)
    assert not close["well_above_scratch"] and not close["goal_met"]
    # Recipes compared without a run from scratch: the comparison is unknown, so the goal is not met.
    alone = goal_check(
        cfg,
        {"zero-shot": _evaluated(0.4), "finetuned-fresh-critics": _evaluated(1.0)},
        12.0,
        "finetuned-fresh-critics",
    )
    assert alone["well_above_scratch"] is None and alone["finetuned_reaches_goal"] and not alone["goal_met"]


def test_the_goal_at_a_checkpoint_is_judged_against_scratch_at_the_same_minute() -> None:
    from robolearn.bench.finetune import first_goal_minute

    cfg = FinetuneBenchCfg(robot_minutes=20.0)
    zero = _evaluated(0.0)
    peaked = {
        "finetuned": {"5.0": _evaluated(0.5), "10.0": _evaluated(0.95), "20.0": _evaluated(0.8)},
        "scratch": {"5.0": _evaluated(0.0), "10.0": _evaluated(0.0), "20.0": _evaluated(0.5)},
    }
    assert first_goal_minute(cfg, zero, peaked) == 10.0
    # Level with scratch at that minute, or past the budget, or without scratch's evaluation there: no.
    level = peaked | {"scratch": peaked["scratch"] | {"10.0": _evaluated(0.9)}}
    assert first_goal_minute(cfg, zero, level) is None
    assert first_goal_minute(FinetuneBenchCfg(robot_minutes=8.0), zero, peaked) is None
    assert first_goal_minute(cfg, zero, peaked | {"scratch": {"20.0": _evaluated(0.5)}}) is None
    assert first_goal_minute(cfg, _evaluated(0.7), peaked) is None


def test_each_row_carries_the_success_and_its_95_percent_interval() -> None:
    from robolearn.bench.finetune import _row, format_finetune_table

    row = _row("arm", "zero-shot", _evaluated(0.45, 40), None, 0.0)
    low, high = row["interval"]
    assert 0.30 < low < 0.45 < high < 0.61  # Wilson's interval of 18 in 40
    assert f"{low:.2f}-{high:.2f}" in format_finetune_table([row])


def test_a_robot_runs_row_says_how_soon_its_policy_worked_on_its_own() -> None:
    from robolearn.bench.finetune import _row, format_finetune_table

    human = {"transitions": 3_000, "success_rate_intervened": 1.0, "success_rate_own": 0.7}
    trained = {"env_steps": 30_000, "robot": {"overruns": 5}, "interventions": human}
    # 10,290 robot steps at the car's 50 Hz: 3.43 robot minutes.
    row = _row(
        "car",
        "finetuned",
        _evaluated(0.9, 40),
        trained | {"interventions": human | {"steps_to_own_success_80": 10_290}},
        11.0,
        "car_checkpoints",
    )
    assert row["own_minutes_to_80"] == pytest.approx(3.43)
    assert "3.43" in format_finetune_table([row])
    never = _row(
        "car",
        "scratch",
        _evaluated(0.2, 40),
        trained | {"interventions": human | {"steps_to_own_success_80": None}},
        11.0,
        "car_checkpoints",
    )
    assert never["own_minutes_to_80"] is None


def test_each_recipe_is_a_robot_run_with_its_own_train_options() -> None:
    from robolearn.bench.finetune import recipe_options, run_name
    from robolearn.rl.config import TrainCfg

    cfg = FinetuneBenchCfg(recipes=("wsrl", "sim_share", "fresh_critics"), sim_share=0.3, actor_hold=700)
    cfg.check()
    assert [run_name(r) for r in cfg.recipes] == [
        "finetuned",
        "finetuned-sim-share",
        "finetuned-fresh-critics",
    ]
    assert recipe_options(cfg, "wsrl") == {}
    train = TrainCfg(task="panda_pick_cube", init_from=Path("run"), **recipe_options(cfg, "fresh_critics"))
    assert (train.init_critics, train.init_actor_hold, train.init_sim_share) == ("fresh", 700, 0.0)
    assert TrainCfg(task="panda_pick_cube", **recipe_options(cfg, "sim_share")).init_sim_share == 0.3
    assert TrainCfg(task="panda_pick_cube", **recipe_options(cfg, "frozen_norm")).init_norm == "frozen"
    assert TrainCfg(task="panda_pick_cube", **recipe_options(cfg, "wsrl")).init_norm == "running"
    for bad, match in (
        ({"recipes": ()}, "--recipes: name wsrl"),
        ({"recipes": ("wsrl", "wsrl")}, "--recipes: name wsrl"),
        ({"sim_share": 1.0}, "--sim-share"),
        ({"actor_hold": -1}, "--actor-hold"),
    ):
        with pytest.raises(ConfigError, match=match):
            FinetuneBenchCfg(**bad).check()  # type: ignore[arg-type]


def test_a_pretrained_run_poor_in_simulation_is_said_to_be() -> None:
    from robolearn.bench.finetune import _warn_if_unfit

    said: list[str] = []
    cfg = FinetuneBenchCfg()
    _warn_if_unfit(cfg, "car", 0.0, said.append)
    assert len(said) == 1 and "car: warning" in said[0] and "--pretrained-car" in said[0], said
    for fit in (0.8, None):  # good enough, or a given run whose success is not known
        _warn_if_unfit(cfg, "arm", fit, said.append)
    assert len(said) == 1
    _warn_if_unfit(cfg, "drone", 0.1, said.append)
    assert len(said) == 2 and "--pretrained-drone" in said[1], said


def test_a_latency_the_robots_watchdog_would_pause_training_on_is_refused() -> None:
    """Measured: at 80 ms against the arm's 100 ms watchdog, robot training paused at every step."""
    from robolearn.bench.finetune import check_latency, run_finetune_bench

    for embodiment in ("arm", "drone", "car"):
        check_latency(FinetuneBenchCfg(obs_latency_ms=60.0), embodiment)  # 60 + 2 x 20 ms fits 100 ms
        refused = r"--obs-latency-ms 80: .*watchdog_timeout of 100 ms.*at most 60 ms"
        with pytest.raises(ConfigError, match=refused):
            check_latency(FinetuneBenchCfg(obs_latency_ms=80.0), embodiment)
    with pytest.raises(ConfigError, match="--obs-latency-ms 61"):
        run_finetune_bench(FinetuneBenchCfg(obs_latency_ms=61.0, embodiments=("car",)))


def test_the_run_from_scratch_trains_with_the_fine_tuned_runs_learner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Measured: with a --pretrained-car run of three-step returns and no --learner-variant, the run
    from scratch trained with SAC's one-step defaults, so the comparison was of learners too."""
    import contextlib
    import dataclasses

    import robolearn.bench.finetune as bench
    import robolearn.rl.train as training
    from robolearn.rl.config import SACConfig, TrainCfg

    pre = tmp_path / "pre"
    pre.mkdir()
    saved = TrainCfg(task="car_checkpoints", sac=SACConfig(n_step=3, hidden=(64, 64), demo_fraction=0.25))
    (pre / "config.json").write_text(json.dumps(dataclasses.asdict(saved), default=str))
    started: list[TrainCfg] = []
    monkeypatch.setattr(training, "train", lambda run, progress: started.append(run) or {"run_dir": "r"})
    monkeypatch.setattr(bench, "_gapped_robot", lambda *a: contextlib.nullcontext())
    for variant, share in ((None, None), ("utd_2", 0.0)):
        cfg = FinetuneBenchCfg(pretrained_car=pre, learner_variant=variant, intervention_share=share)
        for init in (pre, None):
            bench._train_on_robot(cfg, "car_checkpoints", {}, tmp_path, "x", init, None, pre, print)
        fine, scratch = started[-2:]
        assert fine.init_from == pre and scratch.init_from is None
        # The fine-tuned run's learner, as robolearn train --init-from makes it, is the scratch run's.
        assert training.init_run_learner(pre, fine.sac, "car_checkpoints") == scratch.sac
        assert (scratch.sac.n_step, scratch.sac.hidden) == (3, (64, 64))
        # The interventions' share of every batch: the pretrained run's, or the one given.
        expected = (1, 0.25) if variant is None else (2, 0.0)
        assert (scratch.sac.utd_ratio, scratch.sac.demo_fraction) == expected
    with pytest.raises(ConfigError, match="--intervention-share with --recipes sim_share"):
        FinetuneBenchCfg(intervention_share=0.0, recipes=("wsrl", "sim_share")).check()


def test_a_robot_runs_last_checkpoints_are_each_evaluated_on_the_robot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Measured: a run's own last 15 laps succeeded 12 times, its final policy 3 of 20 evaluated; the
    policies the run had just before tell a bad last update from a bad run."""
    import contextlib
    import dataclasses

    import robolearn.bench.finetune as bench
    import robolearn.rl.train as training
    from robolearn.rl.config import TrainCfg

    pre = tmp_path / "pre"
    pre.mkdir()
    (pre / "config.json").write_text(
        json.dumps(dataclasses.asdict(TrainCfg(task="car_checkpoints")), default=str)
    )
    started: list[TrainCfg] = []
    monkeypatch.setattr(training, "train", lambda run, progress: started.append(run) or {"run_dir": "r"})
    monkeypatch.setattr(bench, "_gapped_robot", lambda *a: contextlib.nullcontext())
    cfg = FinetuneBenchCfg(robot_minutes=10, evaluate_checkpoints=3, checkpoint_minutes=1.5)
    # Earlier checkpoints are spaced within the budget; the final one alone needs no spacing, so a
    # budget under the default minute is fine (the end-to-end test's 0.1 minutes was refused).
    with pytest.raises(ConfigError, match=r"--checkpoint-minutes 30.0: must be in \(0, 10\]"):
        replace(cfg, checkpoint_minutes=30.0).check()
    FinetuneBenchCfg(robot_minutes=0.1).check()
    bench._train_on_robot(cfg, "car_checkpoints", {}, tmp_path, "x", None, None, pre, print)
    dt = make_task_cfg("car_checkpoints").control_dt
    run = started[-1]
    assert (run.checkpoint_every, run.keep_checkpoints) == (round(90 / dt), 3)
    one = replace(cfg, evaluate_checkpoints=1)
    bench._train_on_robot(one, "car_checkpoints", {}, tmp_path, "x", None, None, pre, print)
    assert started[-1].checkpoint_every == round(600 / dt)

    # The kept checkpoints before the final one, oldest first, each a row and a success by minute.
    run_dir = tmp_path / "run"
    for steps in (3000, 6000, 9000, 10000):
        (run_dir / "checkpoints" / f"ckpt-{steps:010d}").mkdir(parents=True)
    evaluated: list[str] = []

    def success(path: Path, name: str, *rest: object) -> dict[str, object]:
        evaluated.append(path.name)
        return {"success_rate": 0.5, "episodes": 4, "successes": 2}

    monkeypatch.setattr(bench, "_robot_success", success)
    rows, by_minute = bench._earlier_checkpoints(
        cfg, "car", run_dir, "finetuned", "car_checkpoints", tmp_path, {}, print
    )
    assert evaluated == ["ckpt-0000006000", "ckpt-0000009000"]
    assert [r["policy"] for r in rows] == [
        f"finetuned @ {6000 * dt / 60:.1f} min",
        f"finetuned @ {9000 * dt / 60:.1f} min",
    ]
    assert [r["robot_steps"] for r in rows] == [6000, 9000]
    assert {m: e["success_rate"] for m, e in by_minute.items()} == {
        f"{6000 * dt / 60:.1f}": 0.5,
        f"{9000 * dt / 60:.1f}": 0.5,
    }
    assert bench._earlier_checkpoints(one, "car", run_dir, "f", "car_checkpoints", tmp_path, {}, print) == (
        [],
        {},
    )


def test_the_runs_success_by_robot_minute_is_drawn_in_the_work_folder_only(tmp_path: Path) -> None:
    import robolearn.bench.finetune as bench

    def evaluated(successes: int) -> dict[str, object]:
        return {"success_rate": successes / 20, "episodes": 20}

    runs = {
        "finetuned": {"8.0": evaluated(17), "9.0": evaluated(19), "10.0": evaluated(18)},
        "scratch": {"8.0": evaluated(9), "10.0": evaluated(15)},
    }
    cfg = FinetuneBenchCfg(work_dir=tmp_path)
    path = bench._plot(cfg, "car", evaluated(2), runs, tmp_path / "car")
    assert path == str(tmp_path / "car" / "success_by_minute.png")
    assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert bench._plot(FinetuneBenchCfg(), "car", evaluated(2), runs, tmp_path / "tmp") is None
    assert not (tmp_path / "tmp").exists()


def test_a_pretrained_folder_that_is_not_a_run_of_the_task_is_refused_before_any_robot_run(
    tmp_path: Path,
) -> None:
    """Measured: a run's checkpoints/ given as --pretrained ran the zero-shot evaluation, then failed."""
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"--pretrained .*checkpoints: not a training run's folder"):
        FinetuneBenchCfg(pretrained=run / "checkpoints").check()
    (run / "config.json").write_text("{not json")
    with pytest.raises(
        CorruptFileError, match=r"--pretrained-car .*run: config.json is unreadable \(JSONDecodeError"
    ):
        FinetuneBenchCfg(pretrained_car=run).check()
    (run / "config.json").write_bytes(b"\xff\xfe{")
    with pytest.raises(
        CorruptFileError, match=r"--pretrained .*run: config.json is unreadable \(UnicodeDecodeError"
    ):
        FinetuneBenchCfg(pretrained=run).check()
    (run / "config.json").write_text('["panda_pick_cube"]')  # read as "a run of task None" before
    with pytest.raises(
        CorruptFileError, match=r"--pretrained .*run: config.json holds no object of settings"
    ):
        FinetuneBenchCfg(pretrained=run).check()
    (run / "config.json").write_text(json.dumps({"task": "panda_pick_cube"}))
    FinetuneBenchCfg(pretrained=run).check()
    # One of the run's checkpoints, with the run's settings; one it does not hold is named as such.
    (run / "checkpoints" / "ckpt-0000001000").mkdir()
    FinetuneBenchCfg(pretrained=run / "checkpoints" / "ckpt-0000001000").check()
    with pytest.raises(
        ConfigError, match=r"--pretrained .*ckpt-2: no such checkpoint; the run holds ckpt-0000001000"
    ):
        FinetuneBenchCfg(pretrained=run / "checkpoints" / "ckpt-2").check()
    with pytest.raises(
        ConfigError, match=r"--pretrained-car .*: a run of task panda_pick_cube, not car_checkpoints"
    ):
        FinetuneBenchCfg(pretrained_car=run).check()
    with pytest.raises(
        ConfigError, match=r"--pretrained-drone .*: a run of task panda_pick_cube, not quadrotor_hover"
    ):
        FinetuneBenchCfg(pretrained_drone=run).check()


@pytest.mark.slow
@pytest.mark.ros
def test_the_bench_runs_end_to_end_on_a_tiny_budget(tmp_path: Path) -> None:
    pytest.importorskip("rclpy", reason="needs rclpy: install robolearn[ros]")
    from robolearn.bench.finetune import format_finetune_table, run_finetune_bench

    cfg = FinetuneBenchCfg(
        embodiments=("arm",),
        pretrain_steps=600,
        pretrain_demos=2,
        pretrain_rate_limits=True,
        learner_variant="crossq_recipe",
        intervene_on_disagreement=0.3,
        intervene_hold=5,
        robot_minutes=0.1,
        warmup_steps=100,
        recipes=("wsrl", "fresh_critics"),
        actor_hold=50,
        episodes=2,
        work_dir=tmp_path,
    )
    said: list[str] = []
    rows, summary = run_finetune_bench(cfg, said.append)
    # The long runs (pretraining, each robot run) show their progress.
    for run in ("pretrained-arm", "finetuned", "finetuned-fresh-critics", "scratch"):
        assert any(line.startswith(f"{run}: ") and " steps, " in line for line in said), (run, said)
    for key in ("zero_shot_success", "finetuned_success", "scratch_success", "robot_minutes", "goal_met"):
        assert key in summary
    assert set(summary["finetuned_success_by_recipe"]) == {"wsrl", "fresh_critics"}
    assert Path(summary["success_plot"]) == tmp_path / "arm" / "success_by_minute.png"
    assert set(summary["success_by_checkpoint"]) == {"finetuned", "finetuned-fresh-critics", "scratch"}
    assert 0 < summary["finetuned_minutes"] <= 0.1 + 1e-9
    assert [r["policy"] for r in rows] == ["zero-shot", "finetuned", "finetuned-fresh-critics", "scratch"]
    assert rows[1]["robot_steps"] >= 300 and "finetuned" in format_finetune_table(rows)
    fresh = json.loads((tmp_path / "arm" / "finetuned-fresh-critics" / "config.json").read_text())
    assert (fresh["init_critics"], fresh["sac"]["actor_starts"]) == ("fresh", 50)
    # Calibration: zero-shot only, one row per gap strength, from the run pretrained above.
    pretrained = next(tmp_path.glob("arm/pretrained-arm*"))
    assert json.loads((pretrained / "config.json").read_text())["rate_limits"] is True
    # The learner variant: pretraining and the run from scratch with it, the fine-tuned run by inheritance.
    for run in (pretrained, tmp_path / "arm" / "finetuned", tmp_path / "arm" / "scratch"):
        sac = json.loads((run / "config.json").read_text())["sac"]
        assert (sac["adam_beta1"], sac["actor_every"], sac["target_network"]) == (0.5, 3, False), run
    assert summary["learner_variant"] == "crossq_recipe"
    # The person steps in on disagreement: never for a whole episode (the policy drives the steps
    # before each takeover), and the runs say so.
    for row in rows[1:]:
        assert 0.0 <= row["person_share"] < 1.0, row
        assert all(row[k] is None or 0.0 <= row[k] <= 1.0 for k in ("person_success", "own_success")), row
        assert row["own_minutes_to_80"] is None or 0.0 < row["own_minutes_to_80"] <= 0.1 + 1e-9, row
    assert summary["finetuned_minutes_to_own_80"] == rows[1]["own_minutes_to_80"]
    assert summary["scratch_minutes_to_own_80"] == rows[-1]["own_minutes_to_80"]
    assert (summary["intervene_on_disagreement"], summary["intervene_hold"]) == (0.3, 5)
    config = json.loads((tmp_path / "arm" / "finetuned" / "config.json").read_text())
    assert (config["intervene_on_disagreement"], config["intervene_hold"]) == (0.3, 5)
    # The person knows the gapped robot: both robot runs get the gap's parameter file.
    assert summary["person_knows_robot"] is True
    for run in ("finetuned", "scratch"):
        config = json.loads((tmp_path / "arm" / run / "config.json").read_text())
        assert Path(config["sim_params"]).name == "gap-arm-1.yaml", run
    rows, summary = run_finetune_bench(
        replace(cfg, pretrained=pretrained, calibrate=(0.0, 1.0), work_dir=tmp_path / "calibrate")
    )
    assert set(summary["zero_shot_by_gap"]) == {"0", "1"} and len(rows) == 2
