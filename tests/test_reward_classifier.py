"""The learned success classifier: trained on recorded panda_pick_cube episodes, judged on held-out ones."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from robolearn.cli.reward import run_reward_train
from robolearn.data.format import SUCCESS
from robolearn.data.reader import read_dataset
from robolearn.data.writer import DatasetWriter
from robolearn.envs.autoreset import step_info
from robolearn.envs.task_env import TaskEnv
from robolearn.errors import ConfigError, CorruptFileError
from robolearn.hil.config import RecordCmd, RewardTrainCmd
from robolearn.hil.record import record
from robolearn.hil.reward_classifier import (
    _best_threshold,
    load_reward_classifier,
    observed_success,
    train_reward_classifier,
)
from robolearn.tasks import make_task_cfg
from robolearn.tasks.core import TaskCfg

TASK = "pick up the cube"


def _task() -> TaskCfg:
    # Successful episodes go on holding the cube up, so success frames are many, not one per
    # episode (LeRobot's HIL-SERL recorder keeps stepping after success for the same reason).
    return dataclasses.replace(make_task_cfg("panda_pick_cube"), end_on_success=False)


def _record(
    writer: DatasetWriter, env: TaskEnv, policy: Callable[[Any], Any], episodes: int, seed: int, render: bool
) -> None:
    """Roll out ``policy`` in every world and save each finished episode."""
    obs, _ = env.reset(seed=seed)
    pending: list[list[tuple[Any, ...]]] = [[] for _ in range(env.num_envs)]
    image = env.render() if render else None
    saved = 0
    while saved < episodes:
        action = policy(obs)
        next_obs, reward, terminated, truncated, info = env.step(action)
        success = step_info(info, "success", env.num_envs)[0]
        for i in range(env.num_envs):
            step = (
                {k: v[i] for k, v in obs.items()},
                action[i],
                reward[i],
                success[i],
                terminated[i],
            )
            pending[i].append((*step, image))
        image = env.render() if render else None
        for i in np.flatnonzero(terminated | truncated).tolist():
            if saved < episodes:
                for o, a, r, s, t, im in pending[i]:
                    writer.add_frame(o, a, r, s, t, False, im)
                writer.save_episode(TASK)
                saved += 1
            pending[i] = []
        obs = next_obs


def _make_dataset(root: Path, per_kind: int, num_envs: int, image_size: tuple[int, int] | None) -> Path:
    """Expert episodes (they succeed) and uniformly random ones (they fail) of panda_pick_cube."""
    cfg = _task()
    backend = "mujoco_batch" if num_envs > 1 else "mujoco"
    env = TaskEnv(cfg, backend, num_envs, seed=0, render_size=image_size or (320, 240))
    shapes = {k: tuple(s.shape) for k, s in env.single_observation_space.items()}
    image_shape = (image_size[1], image_size[0], 3) if image_size else None
    writer = DatasetWriter.for_task(root, cfg, shapes, repo_id="test/pick", image_shape=image_shape)
    assert cfg.expert is not None
    _record(writer, env, cfg.expert(cfg), per_kind, 0, image_size is not None)
    rng = np.random.default_rng(1)
    low, high = env.single_action_space.low, env.single_action_space.high
    _record(
        writer,
        env,
        lambda _: rng.uniform(low, high, (num_envs, len(low))),
        per_kind,
        1,
        image_size is not None,
    )
    writer.close()
    env.close()
    return root


@pytest.fixture(scope="module")
def pick_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.set_num_threads(1)
    return _make_dataset(tmp_path_factory.mktemp("reward") / "pick", 16, 8, None)


def test_held_out_precision_and_recall(pick_dataset: Path, tmp_path: Path) -> None:
    frames = read_dataset(pick_dataset).frames()
    episodes_with_success = np.unique(frames["episode_index"][frames[SUCCESS]])
    assert len(episodes_with_success) >= 12  # the expert succeeds; random actions never do
    assert episodes_with_success.max() < 16

    summary = train_reward_classifier(RewardTrainCmd(pick_dataset, out=tmp_path / "clf", epochs=40))
    held = summary["held_out"]
    assert summary["held_out_episodes"] == 8 and held["positives"] > 50
    assert held["precision"] >= 0.9 and held["recall"] >= 0.9, held

    clf = load_reward_classifier(tmp_path / "clf")
    assert clf.threshold == summary["threshold"] and not clf.needs_images
    obs = {k.removeprefix("observation."): v for k, v in frames.items() if k.startswith("observation.")}
    p = clf.probability(obs)
    assert p.shape == (len(frames["index"]),) and 0.0 <= p.min() and p.max() <= 1.0
    np.testing.assert_array_equal(clf.reward(obs), (p > clf.threshold).astype(float))
    assert (clf.reward(obs) == observed_success(frames)).mean() > 0.97
    strict = load_reward_classifier(tmp_path / "clf", threshold=0.999)
    assert strict.reward(obs).sum() <= clf.reward(obs).sum()
    with pytest.raises(ConfigError, match=r"observation 'observation\.cube_pos' missing"):
        clf.reward({k: v for k, v in obs.items() if k != "cube_pos"})


def _record_pixels(out: Path, mixture: tuple[tuple[str, float, int], ...], **options: Any) -> None:
    """Record panda_pick_cube_pixels episodes of each (policy, action noise, episodes), the expert
    holding the cube up after success."""
    for policy, noise, episodes in mixture:
        record(
            RecordCmd(
                "panda_pick_cube_pixels",
                policy=policy,
                action_noise=noise,
                episodes=episodes,
                continue_after_success=True,
                out=out,
                display="none",
                **options,
            )
        )


@pytest.fixture(scope="module")
def pixel_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """panda_pick_cube_pixels recorded by ``robolearn record``: the expert (clean and noisy) holding
    the cube up after success, and random episodes; wrist and scene cameras, 64x64."""
    out = tmp_path_factory.mktemp("reward-pixels") / "pick"
    # 15 episodes: with 9 the held-out frame precision ranged 0.54-0.80 over seeds 0-2 on one CPU.
    _record_pixels(out, (("scripted", 0.0, 10), ("scripted", 0.3, 2), ("random", 0.0, 3)), max_steps=80)
    return out


def test_cameras_alone_on_held_out_episodes(
    pixel_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """From the wrist and scene cameras only (no state): one small CNN per camera, trained on some
    episodes, threshold chosen on others, measured on episodes it never saw."""
    torch.set_num_threads(1)
    out = tmp_path / "clf"
    run_reward_train(RewardTrainCmd(pixel_dataset, out=out, epochs=20, state=False, held_out=0.3))
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["inputs"] == []
    assert summary["cameras"] == ["observation.images.wrist", "observation.images.scene"]
    held = summary["held_out"]
    assert summary["held_out_episodes"] >= 3 and held["positives"] > 20, held
    # Measured over seeds 0-3, 20 and 40 epochs (AMD EPYC): precision 0.91-1.0, recall 0.72-0.98; the
    # frames a threshold chosen on validation episodes misses are the first lifted ones. The 0.95 goal is
    # the slow study's, on more episodes (docs/teleop.md).
    assert held["precision"] >= 0.85 and held["recall"] >= 0.7, held
    assert held["episode_precision"] == 1.0 and held["episode_recall"] == 1.0, held

    clf = load_reward_classifier(out)
    assert clf.needs_images and clf.threshold == summary["threshold"]
    ds = read_dataset(pixel_dataset)
    episode = summary["held_out_episode_indices"][0]
    wrist = ds.video_frames(episode, "observation.images.wrist")
    scene = ds.video_frames(episode, "observation.images.scene")
    p = clf.probability({"observation.images.wrist": wrist, "observation.images.scene": scene})
    assert p.shape == (len(wrist),) and np.isfinite(p).all()
    # The task's observation keys (wrist_rgb) work as well: the classifier rewards pixel observations.
    np.testing.assert_allclose(clf.probability({"wrist_rgb": wrist, "scene_rgb": scene}), p, atol=1e-6)
    with pytest.raises(ConfigError, match=r"observation 'observation\.images\.scene' missing"):
        clf.reward({"wrist_rgb": wrist})
    with pytest.raises(
        CorruptFileError, match=r"no cameras \['side'\]; it records cameras \['wrist', 'scene'\]"
    ):
        train_reward_classifier(RewardTrainCmd(pixel_dataset, out=tmp_path / "x", cameras=("side",)))


@pytest.mark.slow
def test_cameras_alone_reach_issue_13s_goal(tmp_path: Path) -> None:
    """Issue 13: precision and recall of at least 0.95 on held-out pick-cube episodes from the wrist
    and scene cameras alone (the study in docs/teleop.md: 144 episodes, about 13 minutes on a core)."""
    torch.set_num_threads(1)
    out = tmp_path / "pick"
    mixture = (("scripted", 0.0, 30), ("scripted", 0.3, 15), ("scripted", 0.6, 15), ("random", 0.0, 12))
    for seed in (0, 500):  # the same mixture twice, from two seed streams
        _record_pixels(out, mixture, seed=seed)
    summary = train_reward_classifier(RewardTrainCmd(out, out=tmp_path / "clf", epochs=25, state=False))
    held = summary["held_out"]
    assert summary["held_out_episodes"] == 37 and held["positives"] > 1000
    assert held["precision"] >= 0.95 and held["recall"] >= 0.95, held


def test_threshold_rules_choose_between_frames_the_grid_could_not() -> None:
    """F1 and balanced (the lower of precision and recall) choose their best cut of the validation
    frames, half-way between the probabilities either side, even above 0.98."""
    p = np.array([0.999, 0.996, 0.995, 0.993, 0.99, 0.985, 0.4, 0.3, 0.2])
    label = np.array([1, 1, 1, 0, 1, 0, 0, 0, 0], bool)
    # Cutting below 0.99 predicts 5 with 4 true (P 0.8, R 1, F1 0.889); below 0.995: 3 of 3 (P 1, R 0.75).
    threshold, f1 = _best_threshold(p, label, "f1")
    assert threshold == pytest.approx(0.9875) and f1 == pytest.approx(8 / 9)
    threshold, score = _best_threshold(p, label, "balanced")
    assert threshold == pytest.approx(0.9875) and score == pytest.approx(0.8)
    # 20 successes: the top 20 frames hold 18 (P 0.9, R 0.9, F1 0.9), the top 24 all 20 (P 0.83,
    # R 1, F1 0.91): F1 takes the loose cut, balanced the one that keeps precision.
    p = 0.999 - 0.001 * np.arange(40)
    label = np.zeros(40, bool)
    label[[i for i in range(20) if i not in (5, 12)] + [22, 23]] = True
    assert _best_threshold(p, label, "f1") == (pytest.approx((p[23] + p[24]) / 2), pytest.approx(40 / 44))
    assert _best_threshold(p, label, "balanced") == (pytest.approx((p[19] + p[20]) / 2), pytest.approx(0.9))
    # 10 successes, 21 failures, 10 successes: balanced scores every cut from 10 to 20 frames 0.5
    # (recall 0.5, precision 1 falling to 0.5); the tie goes to the best F1, not into the failures.
    label = np.zeros(41, bool)
    label[:10] = label[31:] = True
    p = 0.999 - 0.001 * np.arange(41)
    assert _best_threshold(p, label, "balanced") == (pytest.approx((p[9] + p[10]) / 2), pytest.approx(0.5))


def test_labels_are_the_observed_states_success() -> None:
    """A frame is judged by the state it shows: the previous step's next.success, not its own."""
    frames = {
        SUCCESS: np.array([0, 0, 1, 1, 0, 1, 1], bool),
        "episode_index": np.array([0, 0, 0, 0, 1, 1, 1]),
    }
    np.testing.assert_array_equal(observed_success(frames), [0, 0, 0, 1, 0, 0, 1])


def test_refuses_damaged_files(pick_dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "clf"
    train_reward_classifier(RewardTrainCmd(pick_dataset, out=out, epochs=1))
    weights = out / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(CorruptFileError, match=r"model\.safetensors"):
        load_reward_classifier(out)
    (out / "classifier.json").write_text(json.dumps({"format": "something else"}))
    with pytest.raises(CorruptFileError, match="not a robolearn reward classifier"):
        load_reward_classifier(out)
    with pytest.raises(CorruptFileError, match="no observation terms"):
        train_reward_classifier(RewardTrainCmd(pick_dataset, out=out, features=("joint_pos",)))


def test_classifier_is_the_training_reward(
    pick_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``robolearn reward eval`` and ``robolearn train --reward classifier:PATH``."""
    from robolearn.cli import main
    from robolearn.rl.checkpoint import load_checkpoint
    from robolearn.rl.config import SACConfig, TrainCfg
    from robolearn.rl.train import train

    clf = tmp_path / "clf"
    train_reward_classifier(RewardTrainCmd(pick_dataset, out=clf, epochs=20))
    main(["reward", "eval", str(clf), str(pick_dataset)])
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["precision"] >= 0.9 and result["recall"] >= 0.9, result

    summary = train(
        TrainCfg(
            task="panda_pick_cube",
            num_envs=2,
            steps=400,
            out=tmp_path,
            name="clf-reward",
            scripted_demos=2,
            random_steps=100,
            learning_starts=100,
            eval_every=10_000,
            eval_episodes=2,
            final_eval_episodes=2,
            video=False,
            reward=f"classifier:{clf}",
            sac=SACConfig(hidden=(32, 32), batch_size=32),
        )
    )
    online = load_checkpoint(Path(summary["run_dir"])).replay("online")
    assert online is not None and len(online) == 400
    # Rewards are the classifier's verdicts (0 or 1), not the task's shaped reward.
    assert set(np.unique(online.reward[:400]).tolist()) <= {0.0, 1.0}
    # A success the classifier sees ends the episode: those transitions are terminal.
    judged = online.reward[:400] > 0.5
    assert (online.terminated[:400][judged] == 1.0).all()
    demos = load_checkpoint(Path(summary["run_dir"])).replay("demos")
    assert demos is not None and set(np.unique(demos.reward[: len(demos)]).tolist()) == {0.0, 1.0}
    with pytest.raises(ConfigError, match="classifier:PATH"):
        train(TrainCfg(task="panda_pick_cube", out=tmp_path, reward="learned"))


def test_a_camera_classifier_is_the_reward_of_pixel_training(pixel_dataset: Path, tmp_path: Path) -> None:
    """``robolearn train panda_pick_cube_pixels --reward classifier:PATH``: the classifier judges
    each observation reached from its cameras; its verdict is the reward and a success ends the
    episode; demonstrations are relabelled by it."""
    from robolearn.cli.train import pixel_train_cfg
    from robolearn.rl.config import SACConfig, TrainCfg
    from robolearn.rl.drq import train_pixels

    torch.set_num_threads(1)
    clf = tmp_path / "clf"
    train_reward_classifier(RewardTrainCmd(pixel_dataset, out=clf, epochs=2, state=False))
    cmd = TrainCfg(
        task="panda_pick_cube_pixels",
        num_envs=2,
        steps=40,
        learning_starts=36,
        random_steps=36,
        demos=(pixel_dataset,),
        reward=f"classifier:{clf}",
        reward_threshold=0.05,  # a lenient verdict, so that some steps are judged successes
        torch_device="cpu",
        sac=SACConfig(batch_size=8, hidden=(16, 16)),
    )
    run = train_pixels(pixel_train_cfg(cmd, tmp_path / "run"))
    replay = run.replay
    starts = np.flatnonzero(replay.valid[: replay.filled])
    assert len(starts) == 40 and len(run.metrics) == 3
    reward = replay.reward[starts]
    assert set(np.unique(reward).tolist()) <= {0.0, 1.0}  # verdicts, not the task's shaped reward
    assert (replay.terminated[starts][reward > 0.5] == 1.0).all()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["reward"] == f"classifier:{clf}"


def test_a_drq_encoder_pretrained_on_a_dataset_loads_frozen_into_pixel_training(
    pixel_dataset: Path, tmp_path: Path
) -> None:
    """``robolearn reward train --encoder drq`` pretrains DrQ's camera encoders on a recorded dataset
    (success as the pretext task) and writes them as a pixel run's frozen encoder loads them."""
    from robolearn.policy.encoders import ENCODER_FILE, ObservationEncoder, load_encoder_weights
    from robolearn.rl.config import SACConfig
    from robolearn.rl.drq import DrQLearner
    from robolearn.rl.replay import Batch

    torch.set_num_threads(1)
    out = tmp_path / "clf"
    summary = train_reward_classifier(
        RewardTrainCmd(pixel_dataset, out=out, epochs=1, state=False, encoder="drq", hidden=(16,))
    )
    assert summary["encoder"] == str(out / ENCODER_FILE)
    assert load_reward_classifier(out).probability(
        {"wrist_rgb": np.zeros((2, 64, 64, 3), np.uint8), "scene_rgb": np.zeros((2, 64, 64, 3), np.uint8)}
    ).shape == (2,)
    shapes = {"wrist_rgb": (64, 64, 3), "scene_rgb": (64, 64, 3)}
    encoder = ObservationEncoder(shapes, {"ee_pos": 3}, frozen=True)
    load_encoder_weights(encoder, out / ENCODER_FILE)
    net = load_reward_classifier(out).net
    for pretrained, loaded in zip(net.cnns, encoder.cameras, strict=True):
        for a, b in zip(pretrained.parameters(), loaded.parameters(), strict=True):
            assert torch.equal(a, b) and not b.requires_grad
    learner = DrQLearner(encoder, 4, SACConfig(batch_size=4, hidden=(8,)), torch.device("cpu"))
    assert learner.encoder_opt is None
    rng = np.random.default_rng(0)

    def obs() -> dict[str, np.ndarray]:
        frames = {k: rng.integers(0, 256, (4, *s), dtype=np.uint8) for k, s in shapes.items()}
        return frames | {"ee_pos": rng.normal(size=(4, 3)).astype(np.float32)}

    before = [p.clone() for p in encoder.cameras.parameters()]
    batch = Batch(obs(), np.zeros((4, 4), np.float32), np.ones(4, np.float32), obs(), np.zeros(4, np.float32))
    learner.update(batch)
    assert all(torch.equal(a, b) for a, b in zip(before, encoder.cameras.parameters(), strict=True))
    with pytest.raises(ConfigError, match="--encoder drq pretrains camera encoders"):
        train_reward_classifier(
            RewardTrainCmd(pixel_dataset, out=tmp_path / "x", images=False, encoder="drq")
        )
