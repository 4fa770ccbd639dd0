"""``--init-from RUN`` (issue 10): a run starts from another's actor, critics and normalization, collects
WSRL's warm-up with the frozen pretrained policy, and optionally keeps that run's buffer at a share."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from robolearn.errors import ConfigError
from robolearn.rl.config import SACConfig, TrainCfg
from robolearn.rl.train import init_run_learner, resolved_cfg, train


def _cfg(tmp_path: Path, **kw: object) -> TrainCfg:
    base = TrainCfg(
        task="gym:Pendulum-v1",
        num_envs=1,
        steps=400,
        out=tmp_path,
        learning_starts=100,
        random_steps=100,
        eval_every=10_000,
        eval_episodes=2,
        final_eval_episodes=2,
        checkpoint_every=10_000,
        video=False,
        sac=SACConfig(hidden=(32, 32), batch_size=32),
    )
    return replace(base, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    return train(_cfg(tmp_path_factory.mktemp("pre"), name="pre"))


def test_a_run_starts_from_the_pretrained_policy_and_keeps_it_frozen_through_the_warm_up(
    tmp_path: Path, pretrained: dict[str, object]
) -> None:
    from robolearn.rl.config import OfflineConfig

    cfg = _cfg(
        tmp_path,
        name="tuned",
        steps=300,
        init_from=Path(str(pretrained["run_dir"])),
        sac=SACConfig(hidden=(64, 64)),  # replaced by the pretrained run's (its networks' shapes)
        offline_cfg=OfflineConfig(warmup_steps=200),
    )
    summary = train(cfg)
    zero_shot = summary["evals"][0]
    assert zero_shot["env_steps"] == 0
    # The same policy, evaluated on the same seeds: the pretrained run's final return, exactly.
    assert zero_shot["return_mean"] == pytest.approx(pretrained["return_mean"])
    # Updates began only once the warm-up was collected: one learner step per transition from then.
    assert summary["updates"] == 300 - 200 + 1


def test_the_simulation_buffer_can_be_kept_at_a_share(tmp_path: Path, pretrained: dict[str, object]) -> None:
    cfg = _cfg(
        tmp_path, name="kept", steps=150, init_from=Path(str(pretrained["run_dir"])), init_sim_share=0.25
    )
    summary = train(cfg)
    assert summary["env_steps"] >= 150


@pytest.mark.parametrize("hold", [1_000, 20])
def test_fresh_critics_learn_under_the_pretrained_actor_held_for_its_steps(
    tmp_path: Path, pretrained: dict[str, object], hold: int
) -> None:
    """``--init-critics fresh``: the pretrained actor and temperature, new critics, and no actor step
    before ``init_actor_hold`` critic steps (101 here: 300 steps, the first 200 the warm-up)."""
    import torch

    from robolearn.rl.checkpoint import load_checkpoint
    from robolearn.rl.config import OfflineConfig

    summary = train(
        _cfg(
            tmp_path,
            name="fresh",
            steps=300,
            init_from=Path(str(pretrained["run_dir"])),
            init_critics="fresh",
            init_actor_hold=hold,
            offline_cfg=OfflineConfig(warmup_steps=200),
        )
    )
    assert summary["updates"] == 101
    before = load_checkpoint(Path(str(pretrained["run_dir"]))).tensors
    after = load_checkpoint(Path(summary["run_dir"])).tensors

    def same(prefix: str) -> bool:
        keys = [k for k in before if k.startswith(prefix)]
        return bool(keys) and all(torch.equal(before[k], after[k]) for k in keys)

    assert not same("critic.") and not same("target_critic.")  # new ones, not the pretrained run's
    assert same("actor.") == (hold > 101)
    assert same("log_alpha") == (hold > 101)


@pytest.mark.parametrize("norm", ["frozen", "running"])
def test_the_pretrained_normalization_runs_on_or_stays_as_trained_when_asked(
    tmp_path: Path, pretrained: dict[str, object], norm: str
) -> None:
    """By default the new data folds into the pretrained run's statistics (``--init-norm running``);
    asked, they stay as the networks were trained on them."""
    import torch

    from robolearn.rl.checkpoint import load_checkpoint

    run = Path(str(pretrained["run_dir"]))
    summary = train(_cfg(tmp_path, name=f"norm-{norm}", steps=150, init_from=run, init_norm=norm))
    before = load_checkpoint(run).tensors
    after = load_checkpoint(Path(summary["run_dir"])).tensors
    for stat in ("mean", "var", "count"):
        unchanged = torch.equal(before[f"obs_norm.{stat}"], after[f"obs_norm.{stat}"])
        assert unchanged == (norm == "frozen"), stat


def test_init_from_refuses_another_task_and_contradicting_options(
    tmp_path: Path, pretrained: dict[str, object]
) -> None:
    with pytest.raises(ConfigError, match="a run of task gym:Pendulum-v1, not panda_reach"):
        train(_cfg(tmp_path, task="panda_reach", init_from=Path(str(pretrained["run_dir"]))))
    with pytest.raises(ConfigError, match=r"--init-from .*checkpoints: not a training run's folder"):
        train(_cfg(tmp_path, init_from=Path(str(pretrained["run_dir"])) / "checkpoints"))
    with pytest.raises(ConfigError, match="needs --init-from"):
        _cfg(tmp_path, init_sim_share=0.5).check()
    with pytest.raises(ConfigError, match=r"--init-critics fresh .* needs --init-from"):
        _cfg(tmp_path, init_critics="fresh").check()
    with pytest.raises(ConfigError, match=r"--init-norm frozen .* needs --init-from"):
        _cfg(tmp_path, init_norm="frozen").check()
    with pytest.raises(ConfigError, match="--init-actor-hold"):
        _cfg(tmp_path, init_actor_hold=-1).check()


def test_init_from_takes_a_checkpoint_the_run_kept_not_only_its_latest(tmp_path: Path) -> None:
    """A run's last checkpoint is not always its best (the drone's evaluations swing between them):
    ``--init-from RUN/checkpoints/ckpt-N`` starts from that one, with the run's settings."""
    from robolearn.rl.config import OfflineConfig

    run = Path(str(train(_cfg(tmp_path, name="kept", checkpoint_every=200, eval_every=200))["run_dir"]))
    early, latest = sorted((run / "checkpoints").glob("ckpt-*"))
    assert early.name == "ckpt-0000000200"

    def zero_shot(init_from: Path, name: str) -> float:
        summary = train(
            _cfg(
                tmp_path,
                name=name,
                steps=120,
                init_from=init_from,
                sac=SACConfig(hidden=(64, 64)),  # replaced by the run's own, read beside the checkpoint
                offline_cfg=OfflineConfig(warmup_steps=120),
            )
        )
        assert summary["evals"][0]["env_steps"] == 0
        return float(summary["evals"][0]["return_mean"])

    # The same policy on the same evaluation seeds returns the same, exactly: the latest checkpoint
    # given by name is the run's own start; the earlier one is another policy.
    from_run = zero_shot(run, "from-run")
    assert zero_shot(latest, "from-latest") == from_run
    assert zero_shot(early, "from-early") != from_run
    with pytest.raises(
        ConfigError,
        match=r"--init-from .*ckpt-0000000300: no such checkpoint; the run holds "
        r"ckpt-0000000200, ckpt-0000000400",
    ):
        train(_cfg(tmp_path, init_from=run / "checkpoints" / "ckpt-0000000300"))


def test_on_a_robot_success_is_judged_on_episodes_nobody_drove() -> None:
    from types import SimpleNamespace

    from robolearn.rl.actor_learner import EpisodeStats
    from robolearn.rl.train import RunState, _robot_episodes, _succeeded

    episodes = EpisodeStats(
        returns=[1.0] * 6, lengths=[10] * 6, successes=[True, False, True, True, False, True]
    )
    # The person drove episodes 1 and 4 (half their steps): their outcomes are the person's.
    episodes.interventions.rates = [0.0, 0.5, 0.0, 0.0, 0.5, 0.0]
    learner = SimpleNamespace(episodes=episodes)
    judged = _robot_episodes(learner, 3)  # type: ignore[arg-type]
    assert judged["episodes"] == 3 and judged["success_rate"] == 1.0
    assert _robot_episodes(learner, 10)["episodes"] == 4  # every episode nobody drove
    robot = TrainCfg(task="panda_reach", robot="ros", num_envs=1, eval_episodes=4, stop_at_success=0.95)
    # The early stop waits for a full evaluation's worth of such episodes.
    assert _succeeded(robot, RunState(evals=[_robot_episodes(learner, 4)]))
    assert not _succeeded(robot, RunState(evals=[_robot_episodes(learner, 3)]))
    assert not _succeeded(replace(robot, eval_episodes=5), RunState(evals=[_robot_episodes(learner, 5)]))


def test_init_from_takes_the_runs_networks_and_this_runs_training_settings(
    tmp_path: Path, pretrained: dict[str, object]
) -> None:
    """WSRL fine-tunes at a higher update-to-data ratio than it pretrains: the settings of how the
    learner trains, given, are the fine-tuning run's; the networks' shapes stay the pretrained run's."""
    from robolearn.rl.config import OfflineConfig

    summary = train(
        _cfg(
            tmp_path,
            name="utd",
            steps=300,
            init_from=Path(str(pretrained["run_dir"])),
            sac=SACConfig(hidden=(64, 64), utd_ratio=3, critic_lr=1e-3),
            offline_cfg=OfflineConfig(warmup_steps=200),
        )
    )
    sac = json.loads((Path(summary["run_dir"]) / "config.json").read_text())["sac"]
    assert sac["hidden"] == [32, 32] and sac["batch_size"] == 32  # the pretrained run's (not given)
    assert sac["utd_ratio"] == 3 and sac["critic_lr"] == 1e-3
    # The same merge, for a run from scratch to be compared with it (robolearn bench finetune).
    learner = init_run_learner(Path(str(pretrained["run_dir"])), SACConfig(utd_ratio=3), "gym:Pendulum-v1")
    assert (learner.hidden, learner.batch_size, learner.utd_ratio) == ((32, 32), 32, 3)
    # The interventions' share of every batch is the fine-tuning run's to set, but not beside
    # --init-sim-share, which sets the same share for the simulation's buffer.
    run = Path(str(pretrained["run_dir"]))
    assert init_run_learner(run, SACConfig(demo_fraction=0.0), "gym:Pendulum-v1").demo_fraction == 0.0
    with pytest.raises(ConfigError, match=r"--sac.demo-fraction 0.1 and --init-sim-share 0.25: both"):
        resolved_cfg(_cfg(tmp_path, init_from=run, init_sim_share=0.25, sac=SACConfig(demo_fraction=0.1)))
    kept = resolved_cfg(_cfg(tmp_path, init_from=run, init_sim_share=0.25))
    assert kept.sac.demo_fraction == 0.25 and resolved_cfg(kept) == kept  # resolving twice changes nothing
    # 101 learner steps from the end of the warm-up, three critic updates each.
    assert summary["updates"] == 3 * 101


def test_a_setting_named_on_the_command_line_replaces_the_runs_own_even_at_the_default(
    tmp_path: Path, pretrained: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--sac.demo-fraction 0.5`` over a run that had another share brings back 0.5: the command
    line's names count, not only values away from ``SACConfig``'s default."""
    import shutil

    import robolearn.cli.train
    from robolearn.cli import main

    run = tmp_path / "share"
    shutil.copytree(Path(str(pretrained["run_dir"])), run)
    config = json.loads((run / "config.json").read_text())
    config["sac"]["demo_fraction"] = 0.2
    (run / "config.json").write_text(json.dumps(config))
    task = "gym:Pendulum-v1"
    assert init_run_learner(run, SACConfig(), task).demo_fraction == 0.2  # not given: the run's own
    assert init_run_learner(run, SACConfig(), task, ("demo_fraction",)).demo_fraction == 0.5
    # The command line names them (a boolean's --sac.no-X too), and --init-from takes them.
    seen: list[TrainCfg] = []
    monkeypatch.setattr(robolearn.cli.train, "run_train", seen.append)
    args = ["train", task, "--init-from", str(run), "--sac.demo-fraction", "0.5", "--sac.no-layer-norm"]
    main([*args, "--sac.utd-ratio=2"])
    assert seen[0].sac_given == ("demo_fraction", "layer_norm", "utd_ratio")
    assert resolved_cfg(seen[0]).sac.demo_fraction == 0.5
    with pytest.raises(ConfigError, match=r"--sac.demo-fraction 0.5 and --init-sim-share 0.25: both"):
        resolved_cfg(replace(seen[0], init_sim_share=0.25))
    main(["train", task, "--init-from", str(run)])
    assert seen[1].sac_given == () and resolved_cfg(seen[1]).sac.demo_fraction == 0.2
