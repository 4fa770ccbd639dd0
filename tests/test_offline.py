"""Offline pretraining (Cal-QL, IQL) and WSRL's warm-up, issue 11."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from robolearn.errors import ConfigError, RobolearnError
from robolearn.hil.config import RecordCmd
from robolearn.hil.record import record
from robolearn.policy.normalization import ActionScaler
from robolearn.rl import train as train_module
from robolearn.rl.checkpoint import load_checkpoint
from robolearn.rl.config import OfflineConfig, SACConfig, TrainCfg
from robolearn.rl.demos import load_demo_buffer
from robolearn.rl.offline import IQL, CalQL, returns_to_go
from robolearn.rl.replay import LearnerBatch
from robolearn.rl.sac import SAC
from robolearn.rl.train import train

# A low initial temperature: Cal-QL's actor maximizes Q - alpha log pi, and with SAC's alpha of 1
# it stayed near-uniform for the first thousands of steps on this small dataset (0.1 success after
# 1,500 steps at alpha 1, 0.95 after 2,000 at 0.05).
SMALL = SACConfig(hidden=(64, 64), batch_size=128, init_temperature=0.05)


@pytest.fixture(autouse=True)
def _one_thread() -> Any:
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # as training runs; more threads spin against each other on 2 cores
    yield
    torch.set_num_threads(before)


def _dataset(n: int = 128) -> tuple[LearnerBatch, torch.Tensor]:
    """Transitions and their Monte-Carlo returns."""
    torch.manual_seed(0)
    obs, act = torch.randn(n, 5), torch.rand(n, 2) * 2 - 1
    rew = obs[:, 0] - act[:, 0].square()
    term = torch.zeros(n)
    return LearnerBatch(obs, act, rew, torch.randn(n, 5), term, torch.full((n,), 0.9)), rew * 2


def _fit(algo: str, cql_alpha: float = 5.0) -> tuple[SAC, dict[str, float], dict[str, float]]:
    torch.manual_seed(1)
    # SAC's former initial temperature, 1.0: the actor's loss is then mostly its entropy term, which
    # falls; at 0.01 it is -Q, which Cal-QL's conservative critic lowers as it learns (measured:
    # -0.31 to -0.28 over these updates), so "the actor's loss falls" would test the critic.
    sac = SACConfig(hidden=(32, 32), batch_size=128, init_temperature=1.0)
    agent = SAC(5, 2, sac, torch.device("cpu"))
    cfg = OfflineConfig(cql_alpha=cql_alpha)
    method = CalQL(agent, cfg) if algo == "calql" else IQL(agent, 5, cfg)
    batch, mc_return = _dataset()
    first = method.update(batch, mc_return)
    for _ in range(150):
        last = method.update(batch, mc_return)
    return agent, first, last


def _gap(agent: SAC) -> float:
    """Q of the data's actions minus Q of uniformly random actions."""
    obs, act = _dataset()[0][:2]
    torch.manual_seed(2)
    with torch.no_grad():
        q_data = agent.q_values(agent.critic, obs, act).mean()
        q_random = agent.q_values(agent.critic, obs, torch.rand_like(act) * 2 - 1).mean()
    return float(q_data - q_random)


@pytest.mark.parametrize("algo", ["calql", "iql"])
def test_offline_losses_fall_on_a_tiny_dataset(algo: str) -> None:
    agent, first, last = _fit(algo)
    assert last["critic_loss"] < 0.5 * first["critic_loss"], (first, last)
    assert last["actor_loss"] < first["actor_loss"]
    if algo == "calql":  # conservative: actions outside the data are valued lower than without it
        plain, _, _ = _fit(algo, cql_alpha=0.0)
        assert _gap(agent) > _gap(plain) + 0.05
    else:
        assert last["value_loss"] < first["value_loss"]


def test_returns_to_go_restart_at_each_episode() -> None:
    rtg = returns_to_go(np.array([1.0, 1.0, 1.0, 2.0]), np.array([False, True, False, True]), 0.5)
    np.testing.assert_allclose(rtg, [1.5, 1.0, 2.0, 2.0])


def test_offline_options_are_checked() -> None:
    with pytest.raises(ConfigError, match="--offline-steps needs --offline"):
        TrainCfg(task="panda_reach", offline_steps=10).check()
    with pytest.raises(ConfigError, match="--online-steps is the online phase"):
        TrainCfg(task="panda_reach", online_steps=10).check()
    with pytest.raises(ConfigError, match="expectile"):
        OfflineConfig(expectile=1.0).check()


@pytest.fixture(scope="module")
def expert_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("offline") / "reach"
    record(RecordCmd("panda_reach", device="scripted", episodes=20, out=out, display="none", seed=3))
    return out


def _cfg(tmp_path: Path, dataset: Path, **kw: Any) -> TrainCfg:
    base: dict[str, Any] = dict(
        task="panda_reach",
        backend="mujoco_batch",
        num_envs=4,
        seed=0,
        out=tmp_path,
        name="run",
        offline=(dataset,),
        eval_episodes=10,
        final_eval_episodes=20,
        checkpoint_every=100_000,
        video=False,
        sac=SMALL,
    )
    return TrainCfg(**(base | kw))


# Cal-QL (29 s) under `slow`: the default run keeps IQL (14 s) for the offline path they share.
@pytest.mark.parametrize("algo", ["iql", pytest.param("calql", marks=pytest.mark.slow)])
def test_pure_offline_rl_learns_reach_from_expert_episodes(
    tmp_path: Path, expert_dataset: Path, algo: str
) -> None:
    steps = 1_500
    # Four sampled actions per state in Cal-QL's regularizer (10 by default) keep the test short.
    offline_cfg = OfflineConfig(cql_samples=4)
    cfg = _cfg(tmp_path, expert_dataset, offline_algo=algo, offline_steps=steps, online_steps=0)
    summary = train(replace(cfg, offline_cfg=offline_cfg))
    # A uniformly random policy succeeded in 0 of 20 panda_reach episodes; these reached 0.85 (IQL)
    # and 0.7 to 0.85 (Cal-QL) when they were written.
    assert summary["success_rate"] >= 0.5, summary
    assert summary["env_steps"] == 0 and summary["updates"] == steps


def test_wsrl_warm_up_acts_with_the_frozen_pretrained_policy(
    tmp_path: Path, expert_dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    acted: list[tuple[float, np.ndarray]] = []  # (checksum of the weights, physical actions) when exploring
    build = train_module.policy_from_weights

    def recording(weights: Any, *args: Any) -> Any:
        policy = build(weights, *args)
        act = policy.act

        def record_act(obs: Any, explore: bool = False) -> np.ndarray:
            action = act(obs, explore)
            if explore:
                checksum = float(sum(p.detach().double().abs().sum() for p in policy.actor.parameters()))
                acted.append((checksum, action))
            return action

        policy.act = record_act
        return policy

    monkeypatch.setattr(train_module, "policy_from_weights", recording)
    warmup, after = 120, 8  # env steps; 4 worlds
    cfg = _cfg(
        tmp_path,
        expert_dataset,
        offline_algo="calql",
        offline_steps=50,
        online_steps=warmup + after,
        offline_cfg=OfflineConfig(warmup_steps=warmup),
    )
    train(cfg)
    weights = [w for w, _ in acted]
    # Every warm-up step acted with the same weights (the pretrained policy, frozen); the steps after
    # it with weights the online updates published.
    assert len(set(weights[: warmup // 4])) == 1
    assert weights[warmup // 4] != weights[0]
    loaded = load_checkpoint(tmp_path / "run")
    online = loaded.replay("online")
    assert online is not None and len(online) == warmup + after
    low, high, shapes = _spaces()
    scaler = ActionScaler(low, high)
    actions = scaler.to_unit(np.concatenate([a for _, a in acted]))
    np.testing.assert_allclose(online.action[: len(online)], actions)
    # The observation statistics stay the offline data's, which the pretrained networks expect.
    offline = load_demo_buffer(expert_dataset, scaler, shapes, 100_000)
    assert loaded.tensors["obs_norm.count"].item() == len(offline)


def _spaces() -> tuple[np.ndarray, np.ndarray, dict[str, tuple[int, ...]]]:
    from robolearn.envs.task_env import TaskEnv

    env = TaskEnv("panda_reach", "mujoco_batch", 1)
    low, high = env.single_action_space.low, env.single_action_space.high
    shapes = {k: tuple(s.shape) for k, s in env.single_observation_space.items()}
    env.close()
    return low, high, shapes


def test_rlpd_mode_keeps_the_offline_data(tmp_path: Path, expert_dataset: Path) -> None:
    cfg = _cfg(
        tmp_path, expert_dataset, offline_algo="iql", offline_steps=250, online_steps=40, online_mode="rlpd"
    )
    cfg = replace(cfg, learning_starts=20)
    heard: list[tuple[int, dict[str, float]]] = []
    summary = train(cfg, lambda state, live: heard.append((state.env_steps, dict(live))))
    assert summary["updates"] > 250  # online updates followed the offline ones
    # Pretraining reported its progress every 100 updates and at its end, before any environment step.
    offline = [(steps, live) for steps, live in heard if "offline_updates" in live]
    assert [live["offline_updates"] for _, live in offline] == [100, 200, 250]
    for steps, live in offline:
        assert steps == 0 and live["offline_total"] == 250 and live["updates_per_s"] > 0
    assert heard.index(offline[-1]) == len(offline) - 1 and heard[-1][0] == 40
    # The online rate counts online updates only (at most one per transition after learning starts).
    assert heard[-1][1]["updates_per_s"] <= heard[-1][1]["steps_per_s"]
    demos = load_checkpoint(tmp_path / "run").replay("demos")
    assert demos is not None and len(demos) > 100


def test_a_missing_or_foreign_offline_dataset_is_refused(tmp_path: Path, expert_dataset: Path) -> None:
    cfg = _cfg(tmp_path, tmp_path / "nowhere", offline_steps=10, online_steps=0)
    with pytest.raises(RobolearnError, match="nowhere"):
        train(cfg)
    assert not (tmp_path / "run").exists()  # refused before anything was written
    # panda_reach's episodes do not fit panda_pick_cube's observations (found once the task is built).
    foreign = _cfg(
        tmp_path, expert_dataset, offline_steps=10, online_steps=0, task="panda_pick_cube", name="foreign"
    )
    with pytest.raises(RobolearnError, match="observation"):
        train(foreign)
