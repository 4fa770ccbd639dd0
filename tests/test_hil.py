"""Human-in-the-loop training with a scripted person who intervenes on a schedule."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from robolearn.data.reader import read_dataset
from robolearn.data.validate import validate_dataset
from robolearn.errors import ConfigError, CorruptFileError
from robolearn.hil.interventions import InterventionStats
from robolearn.rl.actor_learner import EpisodeStats
from robolearn.rl.checkpoint import load_checkpoint
from robolearn.rl.config import SACConfig, TrainCfg
from robolearn.rl.train import RunState, steps_to_own_success, train


def _hil_cfg(tmp_path: Path, **overrides: object) -> TrainCfg:
    base = TrainCfg(
        task="panda_reach",
        num_envs=2,
        steps=800,
        seed=3,
        out=tmp_path,
        name="hil",
        random_steps=200,
        learning_starts=200,
        eval_every=10_000,
        eval_episodes=2,
        final_eval_episodes=2,
        video=False,
        hil=True,
        device="scripted",
        hil_worlds="all",
        intervene_every=2,
        intervene_steps=(10, 40),
        sac=SACConfig(hidden=(32, 32), batch_size=32),
    )
    return TrainCfg(**{**base.__dict__, **overrides})


def test_intervened_transitions_land_in_both_buffers_and_are_flagged(tmp_path: Path) -> None:
    summary = train(_hil_cfg(tmp_path))
    run = Path(summary["run_dir"])
    ckpt = load_checkpoint(run)
    online, demos = ckpt.replay("online"), ckpt.replay("demos")
    assert online is not None and demos is not None
    assert len(online) == 800  # every transition, intervened or not, is in the online buffer

    root = run / "episodes"
    assert validate_dataset(root) == []
    data = read_dataset(root)
    flagged_total = 0
    for ep in range(len(data.episodes)):
        frames = data.episode_frames(ep)
        flags = np.asarray(frames["complementary_info.is_intervention"]).reshape(-1).astype(bool)
        steps = np.asarray(frames["frame_index"]).reshape(-1)
        # The schedule: steps [10, 40) of every second episode of each world, nothing else.
        assert not flags[(steps < 10) | (steps >= 40)].any()
        window = (steps >= 10) & (steps < 40)
        assert flags[window].all() or not flags.any()
        flagged_total += int(flags.sum())
    assert flagged_total > 0
    # Episodes still running at the end are not in the dataset, so the buffer holds at least as many.
    assert len(demos) >= flagged_total
    assert summary["interventions"]["transitions"] == len(demos)
    assert 0.0 < summary["interventions"]["mean_rate"] < 1.0
    assert Path(summary["interventions"]["plot"]).stat().st_size > 0
    # Success by who drove, over the run, as the dataset tells it episode by episode.
    by_person: dict[bool, list[bool]] = {True: [], False: []}
    for ep in range(len(data.episodes)):
        frames = data.episode_frames(ep)
        flags = np.asarray(frames["complementary_info.is_intervention"]).reshape(-1)
        by_person[bool(flags.any())].append(bool(np.asarray(frames["next.success"]).any()))
    assert by_person[True] and by_person[False]
    for person, key in ((True, "success_rate_intervened"), (False, "success_rate_own")):
        assert summary["interventions"][key] == pytest.approx(np.mean(by_person[person])), key
    to_own = summary["interventions"]["steps_to_own_success_80"]
    assert to_own is None or 0 < to_own <= summary["env_steps"]

    # Each demonstration transition is a flagged frame of the dataset (same observation).
    flagged_obs = np.concatenate(
        [
            np.asarray(data.episode_frames(ep)["observation.goal_from_ee"])[
                np.asarray(data.episode_frames(ep)["complementary_info.is_intervention"]).reshape(-1) > 0
            ]
            for ep in range(len(data.episodes))
        ]
    )
    demo_goal = demos.obs["goal_from_ee"][: len(demos)]
    matches = [np.abs(demo_goal - row).max(axis=1).min() < 1e-6 for row in flagged_obs]
    assert all(matches)


def test_steps_to_own_success_counts_every_episode_and_judges_the_own_ones() -> None:
    def episodes(outcomes: list[tuple[int, bool, float]]) -> EpisodeStats:
        lengths, successes, rates = (list(column) for column in zip(*outcomes, strict=True))
        return EpisodeStats(
            lengths=lengths, successes=successes, interventions=InterventionStats(rates=rates)
        )

    # Own episodes of 100 steps (the 3rd and 6th failing) and a person's failed one of 50 steps after
    # the 4th, which counts in the steps but not in the window: 8 of 10 own at the 10th own one.
    own = [(100, ok, 0.0) for ok in (True, True, False, True, True, False, True, True, True, True)]
    person = [(50, False, 1.0)]
    assert steps_to_own_success(episodes(own[:4] + person + own[4:])) == 1_050
    # A third failure in the window: not yet, until an eleventh own success pushes it out.
    worse = [(100, False, 0.0), *own[1:]]
    assert steps_to_own_success(episodes(worse)) is None
    assert steps_to_own_success(episodes([*worse, (100, True, 0.0)])) == 1_100
    assert steps_to_own_success(EpisodeStats()) is None


def test_hil_needs_a_robolearn_task(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="need a robolearn task"):
        train(_hil_cfg(tmp_path, task="gym:Pendulum-v1"))


def test_human_devices_watch_one_world(tmp_path: Path) -> None:
    from robolearn.tasks.core import TaskError

    with pytest.raises(ConfigError, match="one person watches one world"):
        train(_hil_cfg(tmp_path, device="keyboard"))
    with pytest.raises(TaskError, match="needs a display"):
        train(_hil_cfg(tmp_path, device="keyboard", hil_worlds="first", hil_display="png"))
    assert not (tmp_path / "hil").exists()  # refused before anything is written


@pytest.mark.slow
def test_scripted_interventions_beat_no_interventions_on_pick_cube(tmp_path: Path) -> None:
    """Same env-step budget, no demonstrations: a scripted person's interventions help."""
    common = {
        "task": "panda_pick_cube",
        "num_envs": 4,
        "steps": 20_000,
        "seed": 0,
        "out": tmp_path,
        "eval_every": 2_000,
        "eval_episodes": 20,
        "final_eval_episodes": 50,
        "video": False,
    }
    plain = train(TrainCfg(name="plain", **common))  # type: ignore[arg-type]
    hil = train(
        TrainCfg(  # type: ignore[arg-type]
            name="hil", hil=True, device="scripted", hil_worlds="all", intervene_every=3, **common
        )
    )
    (tmp_path / "comparison.json").write_text(json.dumps({"plain": plain["evals"], "hil": hil["evals"]}))
    best_plain = max(e["success_rate"] for e in plain["evals"])
    best_hil = max(e["success_rate"] for e in hil["evals"])
    assert hil["success_rate"] > plain["success_rate"] + 0.1
    assert best_hil > best_plain


def test_a_person_at_the_keyboard_takes_over_and_marks_success(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys posted to the (dummy-driver) window: hold w for 10 steps, then mark success with y."""
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    pg = pytest.importorskip("pygame")
    script = {20: ["+w"], 30: ["-w"], 40: ["+y", "-y"]}

    def press(state: RunState, live: object) -> None:
        for key in script.pop(state.env_steps, []):
            kind = pg.KEYDOWN if key[0] == "+" else pg.KEYUP
            pg.event.post(pg.event.Event(kind, key=pg.key.key_code(key[1:])))

    summary = train(
        _hil_cfg(
            tmp_path, num_envs=1, steps=120, device="keyboard", hil_worlds="first", hil_display="window"
        ),
        press,
    )
    assert not script  # every key went in
    human = summary["interventions"]
    assert human["marked_success"] == 1 and human["transitions"] == 10
    data = read_dataset(Path(summary["run_dir"]) / "episodes")
    first = data.episode_frames(0)
    assert len(first["index"]) == 41  # the mark ends the episode on the step it was read
    flags = np.asarray(first["complementary_info.is_intervention"]).reshape(-1)
    np.testing.assert_array_equal(np.flatnonzero(flags), np.arange(20, 30))
    assert np.asarray(first["next.terminated"]).reshape(-1)[-1]
    np.testing.assert_allclose(np.asarray(first["action"])[20:30, 0], 0.01)  # w: +x at half the bound


def test_recorded_demonstrations_fill_the_demonstration_buffer(tmp_path: Path) -> None:
    """``robolearn record`` then ``robolearn train --demos DIR``."""
    from robolearn.hil.config import RecordCmd
    from robolearn.hil.record import record

    demos_dir = tmp_path / "demos"
    recorded = record(RecordCmd("panda_reach", device="scripted", episodes=3, out=demos_dir, display="none"))
    assert recorded["episodes_saved"] == 3 and recorded["successes"] == 3
    summary = train(_hil_cfg(tmp_path, hil=False, steps=200, demos=(demos_dir,)))
    demos = load_checkpoint(Path(summary["run_dir"])).replay("demos")
    # Every step of a successful (terminal) episode is a transition; nothing else is in the buffer.
    assert demos is not None and len(demos) == recorded["frames"]
    assert demos.terminated[: len(demos)].sum() == 3
    with pytest.raises(CorruptFileError, match="not a LeRobot v3 dataset"):
        train(_hil_cfg(tmp_path, hil=False, name="bad", demos=(tmp_path / "nothing",)))
    assert not (tmp_path / "bad").exists()
