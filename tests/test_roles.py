"""The actor and learner roles and their exchange, each on its own (the end-to-end tests only pass
through them): what crosses the exchange, what lands in which buffer, when weights are used."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from robolearn.envs.task_env import TaskEnv
from robolearn.hil.interventions import Interventions
from robolearn.policy.network import policy_from_weights
from robolearn.policy.normalization import ActionScaler, ObsLayout, RunningNorm
from robolearn.rl.actor_learner import ActorRole, LearnerRole, LocalExchange, Transitions, Weights
from robolearn.rl.replay import ReplayBuffer
from robolearn.rl.sac import SAC, SACConfig
from robolearn.tasks import make_task_cfg
from robolearn.teleop.scripted import InterventionSchedule, ScriptedDevice

TASK = "panda_reach"
CFG = SACConfig(hidden=(16, 16), batch_size=8, num_critics=2)


def _env(n: int = 3) -> TaskEnv:
    return TaskEnv(TASK, "mujoco_batch", n, seed=0)


def _roles(
    env: TaskEnv,
    *,
    random_steps: int = 0,
    random_episode_steps: int = 0,
    interventions: Interventions | None = None,
) -> tuple[ActorRole, LearnerRole, LocalExchange]:
    shapes = {k: tuple(s.shape) for k, s in env.single_observation_space.items()}
    layout = ObsLayout(shapes)
    scaler = ActionScaler(env.single_action_space.low, env.single_action_space.high)
    torch.manual_seed(0)
    agent = SAC(layout.dim, len(scaler.low), CFG, torch.device("cpu"))
    exchange = LocalExchange()
    online = ReplayBuffer(1000, shapes, len(scaler.low))
    learner = LearnerRole(agent, layout, online, None, RunningNorm(layout.dim), exchange, seed=1)

    def make_policy(weights: Weights):  # type: ignore[no-untyped-def]
        return policy_from_weights(weights, layout, scaler.low, scaler.high, CFG.hidden).act

    actor = ActorRole(
        env,
        exchange,
        make_policy,
        scaler,
        seed=2,
        random_steps=random_steps,
        random_episode_steps=random_episode_steps,
        interventions=interventions,
    )
    return actor, learner, exchange


def test_the_actor_acts_at_random_until_weights_arrive_then_with_them() -> None:
    env = _env()
    actor, learner, exchange = _roles(env)
    actor.step()
    sent = exchange.receive_transitions()
    assert len(sent) == 1 and sent[0].policy_version == 0 and sent[0].env_steps == 3
    low, high = env.single_action_space.low, env.single_action_space.high
    # Random actions cover the range (in the learner's unit scale: [-1, 1]).
    assert np.all(np.abs(sent[0].batch.action) <= 1.0)
    learner.publish()
    actor.step()
    (item,) = exchange.receive_transitions()
    assert item.policy_version == 1 and actor.policy is not None
    # With weights, the actions are the published policy's (exploring): inside the bounds.
    assert np.all(actor.scaler.to_physical(item.batch.action) >= low - 1e-6)
    assert np.all(actor.scaler.to_physical(item.batch.action) <= high + 1e-6)
    env.close()


def test_the_warm_ups_episodes_end_early_as_truncations_and_later_ones_run_their_length() -> None:
    env = _env(2)
    actor, learner, exchange = _roles(env, random_steps=120, random_episode_steps=25)
    items: list[Transitions] = []
    while actor.env_steps < 120:  # 60 steps of two worlds, all in the warm-up
        actor.step()
        (item,) = exchange.receive_transitions()
        items.append(item)
        if item.episodes.lengths:
            # A truncation: the value bootstraps, and the next state continues the cut episode...
            assert not item.batch.terminated.any()
            step = np.linalg.norm(item.batch.next_obs["ee_pos"] - item.batch.obs["ee_pos"], axis=1)
            assert np.all(step < 0.05), step
            # ...while the actor goes on from a reset: a new goal.
            assert (
                not np.isclose(actor.obs["goal_from_ee"], item.batch.next_obs["goal_from_ee"])
                .all(axis=1)
                .any()
            )
    assert [n for item in items for n in item.episodes.lengths] == [25] * 4  # each world cut at 25 and 50
    learner.publish()  # the policy acts from here: episodes run to the task's 100 steps
    items = []
    for _ in range(90):
        actor.step()
        items += exchange.receive_transitions()
    assert [n for item in items for n in item.episodes.lengths] == [100, 100]
    env.close()


def test_transitions_that_end_an_episode_carry_the_final_observation() -> None:
    """Same-step autoreset: the next state of an ending transition is the episode's last, not the
    first observation of the next episode (which is what the actor continues from)."""
    env = _env(2)
    actor, _, exchange = _roles(env, random_steps=10**6)
    length = env.cfg.episode_length
    items: list[Transitions] = []
    for _ in range(length):
        actor.step()
        items += exchange.receive_transitions()
    last = items[-1]
    assert len(last.episodes.lengths) == 2 and set(last.episodes.lengths) == {length}
    # One control step moves the tool at most a few centimetres: the ending transition's next state
    # continues its state; the new episode's first observation (the actor's now) starts elsewhere.
    step = np.linalg.norm(last.batch.next_obs["ee_pos"] - last.batch.obs["ee_pos"], axis=1)
    jump = np.linalg.norm(actor.obs["ee_pos"] - last.batch.obs["ee_pos"], axis=1)
    assert np.all(step < 0.05), step
    goal_moved = ~np.isclose(actor.obs["goal_from_ee"], last.batch.next_obs["goal_from_ee"]).all(axis=1)
    assert np.all(goal_moved | (jump > step)), (step, jump)
    assert sum(len(i.batch.reward) for i in items) == 2 * length
    env.close()


def test_the_learner_ingests_updates_and_publishes() -> None:
    env = _env()
    actor, learner, exchange = _roles(env, random_steps=10**6)
    for _ in range(5):
        actor.step()
    assert learner.ingest() == 15
    assert len(learner.online) == 15 and learner.env_steps == 15
    assert learner.obs_norm.count >= 15
    before = {k: v.copy() for k, v in learner.weights().items()}
    losses = learner.update()
    assert {"critic_loss", "actor_loss"} <= set(losses) and all(np.isfinite(list(losses.values())))
    learner.publish()
    version, weights = exchange.latest_weights(0) or (0, {})
    assert version == 1
    assert any(not np.array_equal(before[k], weights[k]) for k in before if k.startswith("actor."))
    assert exchange.latest_weights(1) is None  # nothing newer than what the actor has
    env.close()


def test_a_threaded_actor_feeds_the_learner_through_the_exchange() -> None:
    env = _env()
    actor, learner, _ = _roles(env, random_steps=10**6)
    stop = threading.Event()
    thread = threading.Thread(target=actor.run, args=(stop, 60))
    thread.start()
    received = 0
    while received < 60:
        received += learner.ingest(block=True, timeout=30.0)
    thread.join(timeout=30.0)
    assert not thread.is_alive() and received == 60 == actor.env_steps
    env.close()


def test_intervened_transitions_join_both_buffers() -> None:
    """HIL-SERL's rule: a human's transitions go to the online and the demonstration buffer."""
    env = _env(2)
    cfg = make_task_cfg(TASK)
    # A scripted person watches world 1 only, taking over steps [0, 3) of every episode.
    person = ScriptedDevice(cfg, schedule=InterventionSchedule(steps=(0, 3)))
    interventions = Interventions([None, person])
    interventions.connect()
    actor, learner, _ = _roles(env, random_steps=10**6, interventions=interventions)
    for _ in range(5):
        actor.step()
    learner.ingest()
    assert len(learner.online) == 10
    assert learner.demos is not None and len(learner.demos) == 3 == learner.intervened_transitions
    interventions.disconnect()
    env.close()


@pytest.mark.parametrize("block", [False, True])
def test_an_empty_exchange_returns_nothing_and_does_not_hang(block: bool) -> None:
    exchange = LocalExchange()
    assert exchange.receive_transitions(block=block, timeout=0.05) == []
    assert exchange.latest_weights(-1) is None
