"""``robolearn record``: episodes driven from a device, read back from the dataset they were written to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import imageio.v2 as imageio
import numpy as np
import pytest

from robolearn.cli.record import run_record
from robolearn.data.format import ACTION, DONE, INTERVENTION, OBS, SUCCESS, TERMINATED
from robolearn.data.reader import read_dataset
from robolearn.data.validate import validate_dataset
from robolearn.envs.task_env import TaskEnv
from robolearn.errors import ConfigError
from robolearn.hil.config import RecordCmd
from robolearn.hil.record import Progress, Recorder, RecordError, record
from robolearn.tasks import make_task_cfg
from robolearn.tasks.sim_params import IdentifiedParam, SimParams, SimParamsError, save_sim_params
from robolearn.tasks.teacher import teacher_task
from robolearn.teleop import DeviceError


def _cmd(out: Path, **overrides: Any) -> RecordCmd:
    base: dict[str, Any] = {
        "task": "panda_pick_cube",
        "device": "scripted",
        "episodes": 3,
        "out": out,
        "display": "none",
    }
    return RecordCmd(**(base | overrides))


def test_scripted_recording_reads_back_with_its_intervention_schedule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "demos"
    run_record(_cmd(out, max_steps=40, intervene_steps=(10, 20), intervene_every=2))
    assert '"episodes_saved": 3' in capsys.readouterr().out.splitlines()[-1]
    assert validate_dataset(out) == []
    ds = read_dataset(out)
    assert [e.length for e in ds.episodes] == [40, 40, 40]  # cut off at --max-steps
    for ep in range(3):
        frames = ds.episode_frames(ep)
        flags = frames[INTERVENTION].astype(bool)
        np.testing.assert_array_equal(np.flatnonzero(flags), np.arange(10, 20) if ep % 2 == 0 else [])
        assert not frames[TERMINATED].any()
        np.testing.assert_array_equal(np.flatnonzero(frames[DONE]), [39])


def test_scripted_demonstrations_are_the_experts_actions_until_success(tmp_path: Path) -> None:
    out = tmp_path / "demos"
    summary = record(_cmd(out, episodes=2))
    assert summary["episodes_saved"] == 2 and summary["successes"] == 2
    ds = read_dataset(out)
    cfg = make_task_cfg("panda_pick_cube")
    assert cfg.expert is not None
    expert = cfg.expert(cfg)
    lengths = [e.length for e in ds.episodes]
    assert all(20 < n < cfg.episode_length for n in lengths) and sum(lengths) == summary["frames"]
    for ep in range(2):
        frames = ds.episode_frames(ep)
        assert frames[SUCCESS][-1] and frames[TERMINATED][-1] and not frames[TERMINATED][:-1].any()
        assert frames[INTERVENTION].all() == True  # noqa: E712 - the stand-in drove every step
        n = len(frames[ACTION])
        obs = {k: frames[OBS + k].reshape(n, -1).astype(np.float32) for k in cfg.observations}
        np.testing.assert_allclose(frames[ACTION], expert(obs), atol=1e-6)


def test_camera_frames_are_recorded_as_video(tmp_path: Path) -> None:
    out = tmp_path / "demos"
    record(
        _cmd(out, episodes=1, max_steps=12, camera=True, image_size=(64, 48), display="png", png_every=0.0)
    )
    ds = read_dataset(out)
    assert ds.camera_keys == ["observation.images.front"]
    video = ds.video_frames(0, "observation.images.front")
    assert video.shape == (12, 48, 64, 3) and video.std() > 1.0  # a rendered scene, not a blank
    # Without a window, frames go to PNG beside the dataset: the latest one and each episode's last.
    for name in ("latest.png", "episode-0000.png"):
        frame = imageio.imread(tmp_path / "demos-preview" / name)
        assert frame.shape == (48, 64, 3) and frame.std() > 1.0


def test_replay_reproduces_a_recording(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    record(_cmd(first, episodes=2, intervene_steps=(5, 25)))
    summary = record(_cmd(second, episodes=2, device="replay", replay_from=first))
    assert summary["episodes_saved"] == 2
    a, b = read_dataset(first), read_dataset(second)
    assert [e.length for e in a.episodes] == [e.length for e in b.episodes]
    for key in (ACTION, INTERVENTION, SUCCESS, "observation.state"):
        np.testing.assert_allclose(a.frames()[key], b.frames()[key], atol=1e-5, err_msg=key)


def test_recording_appends_to_a_matching_dataset_only(tmp_path: Path) -> None:
    out = tmp_path / "demos"
    record(_cmd(out, episodes=1, max_steps=5))
    record(_cmd(out, episodes=2, max_steps=5))
    ds = read_dataset(out)
    assert len(ds.episodes) == 3
    # Each episode's initial state comes from its index in the dataset: appended episodes are new.
    starts = ds.frames()["observation.cube_pos"][::5]
    assert len({tuple(np.round(s, 5)) for s in starts}) == 3
    with pytest.raises(RecordError, match="choose another --out"):
        record(_cmd(out, episodes=1, max_steps=5, camera=True, image_size=(64, 48)))


def test_bad_options_and_missing_devices_leave_no_dataset(tmp_path: Path) -> None:
    out = tmp_path / "demos"
    with pytest.raises(ConfigError, match="--episodes 0: must be at least 1"):
        record(_cmd(out, episodes=0))
    with pytest.raises(RecordError, match="--device replay needs --replay-from"):
        record(_cmd(out, device="replay"))
    with pytest.raises(DeviceError, match=r"^spacemouse: "):
        record(_cmd(out, device="spacemouse"))
    assert not out.exists()


def test_keyboard_recording_marks_rerecords_and_quits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    pg = pytest.importorskip("pygame")
    # (attempt, step just taken) -> keys going down (+) or up (-) before the next step is read.
    script = {
        (0, 5): ["+w"],
        (0, 15): ["-w"],
        (0, 20): ["+y"],
        (1, 3): ["+backspace"],
        (2, 2): ["+space", "-space"],
        (2, 8): ["+n"],
        (3, 4): ["+escape"],
    }
    done: set[tuple[int, int]] = set()

    def press(p: Progress) -> None:
        at = (p.saved + p.rerecorded, p.step)
        if at in script and at not in done:
            done.add(at)
            for key in script[at]:
                kind = pg.KEYDOWN if key[0] == "+" else pg.KEYUP
                pg.event.post(pg.event.Event(kind, key=pg.key.key_code(key[1:])))

    out = tmp_path / "demos"
    summary = record(_cmd(out, device="keyboard", episodes=5, display="window"), press)
    assert summary["quit"] and summary["episodes_saved"] == 2 and summary["rerecorded"] == 1
    assert summary["successes"] == 1
    assert summary["wall_seconds"] >= 0.9 * (20 + 3 + 8 + 4) / 50  # paced at the control rate
    ds = read_dataset(out)
    assert [e.length for e in ds.episodes] == [20, 8]  # the mark lands on the frame last seen
    first, second = ds.episode_frames(0), ds.episode_frames(1)
    np.testing.assert_array_equal(np.flatnonzero(first[INTERVENTION]), np.arange(5, 15))
    np.testing.assert_allclose(first[ACTION][5:15, 0], 0.01)  # w: +x at half the 2 cm bound
    np.testing.assert_allclose(first[ACTION][15:, :3], 0.0)  # released: hold still
    assert first[SUCCESS][-1] and first[TERMINATED][-1]
    np.testing.assert_array_equal(np.flatnonzero(second[INTERVENTION]), [2])  # the gripper toggle
    np.testing.assert_allclose(second[ACTION][:, 3], [0.08, 0.08] + [0.0] * 6)  # closed, latched
    assert not second[SUCCESS].any() and not second[TERMINATED].any() and second[DONE][-1]


def test_pixel_task_records_every_camera_as_video(tmp_path: Path) -> None:
    """``robolearn record panda_pick_cube_pixels --policy scripted``: the state task's expert drives on
    privileged state; each task camera becomes ``observation.images.<camera>``, frame t showing the
    state the frame's terms observe."""
    out = tmp_path / "pixels"
    summary = record(_cmd(out, task="panda_pick_cube_pixels", device="auto", policy="scripted", episodes=2))
    assert summary["device"] == "none" and summary["cameras"] == ["wrist", "scene"]
    assert summary["successes"] == 2  # the privileged teacher succeeds from pixels' worlds too
    assert validate_dataset(out) == []
    ds = read_dataset(out)
    assert ds.camera_keys == ["observation.images.wrist", "observation.images.scene"]
    assert sorted(ds.obs_keys) == ["ee_pos", "ee_target_offset", "ee_vel", "gripper_opening"]
    cfg = make_task_cfg("panda_pick_cube_pixels")
    env = TaskEnv(cfg, "mujoco", 1, seed=0, autoreset=False)
    try:
        for ep in range(2):
            seed = int(np.random.SeedSequence([0, ep]).generate_state(1)[0])
            obs, _ = env.reset(seed=seed)
            for camera in ("wrist", "scene"):
                video = ds.video_frames(ep, f"observation.images.{camera}")
                assert video.shape == (ds.episodes[ep].length, 64, 64, 3)
                # H.264 is lossy: the first frame is the reset state's image up to compression.
                error = np.abs(video[0].astype(float) - obs[f"{camera}_rgb"][0]).mean()
                assert error < 4.0, (camera, error)
                assert np.abs(video[-1].astype(float) - video[0]).mean() > 2.0  # the scene moved
            np.testing.assert_allclose(
                ds.episode_frames(ep)["observation.ee_pos"][0], obs["ee_pos"][0], atol=1e-6
            )
    finally:
        env.close()


def test_action_noise_and_random_policy_make_mixed_quality_data(tmp_path: Path) -> None:
    """``--action-noise SIGMA`` perturbs the expert by SIGMA half-ranges, clipped to the bounds, and
    each episode's row records how it was made; ``--policy random`` appends failures."""
    out = tmp_path / "mixed"
    sigma = 0.3
    record(_cmd(out, device="auto", policy="scripted", action_noise=sigma, episodes=2, max_steps=60))
    record(_cmd(out, device="auto", policy="random", episodes=1, max_steps=60))
    ds = read_dataset(out)
    rows = ds.meta.episodes
    assert [(r["robolearn/policy"], r["robolearn/action_noise"]) for r in rows] == [
        ("scripted", sigma),
        ("scripted", sigma),
        ("random", 0.0),
    ]
    cfg = make_task_cfg("panda_pick_cube")
    assert cfg.expert is not None
    expert = cfg.expert(cfg)
    low, high = np.asarray(cfg.action.low), np.asarray(cfg.action.high)
    frames = ds.frames([0, 1])
    n = len(frames[ACTION])
    obs = {k: frames[OBS + k].reshape(n, -1).astype(np.float32) for k in cfg.observations}
    action = frames[ACTION].astype(np.float64)
    assert (action >= low - 1e-6).all() and (action <= high + 1e-6).all()
    # Unclipped residuals are the noise: its spread in half-ranges is sigma.
    residual = (action - expert(obs)) / ((high - low) / 2.0)
    inside = (action > low + 1e-6) & (action < high - 1e-6)
    spread = residual[inside].std()
    assert 0.6 * sigma < spread < 1.2 * sigma, spread
    random_actions = ds.frames([2])[ACTION]
    assert random_actions.std(axis=0).min() > 0.2 * ((high - low) / 2.0).min()


def test_noise_and_device_options_are_checked(tmp_path: Path) -> None:
    out = tmp_path / "bad"
    with pytest.raises(ConfigError, match=r"--action-noise 0\.2: perturbs the policy's actions"):
        record(_cmd(out, device="auto", action_noise=0.2))
    with pytest.raises(ConfigError, match=r"--action-noise -0\.1: must be"):
        record(_cmd(out, device="auto", policy="scripted", action_noise=-0.1))
    with pytest.raises(ConfigError, match="--device none: nothing would drive"):
        record(_cmd(out, device="none"))
    assert not out.exists()


def _reach_with_nan_expert(poisoned: Any) -> Any:
    """panda_reach whose scripted expert answers NaN on the calls ``poisoned(call)`` picks."""
    import dataclasses

    base = make_task_cfg("panda_reach")
    assert base.expert is not None
    calls = [0]

    def expert(cfg: Any) -> Any:
        inner = base.expert(cfg)  # type: ignore[misc]

        def act(obs: Any) -> Any:
            calls[0] += 1
            action = np.array(inner(obs), dtype=np.float64)
            return np.full_like(action, np.nan) if poisoned(calls[0]) else action

        return act

    return lambda: dataclasses.replace(base, name="reach_nan", expert=expert)


def test_an_episode_with_a_nan_action_is_recorded_again_and_a_nan_device_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """One NaN action spoils its episode: it is not saved (it would make the dataset's statistics
    NaN), said in a warning, and recorded again; a device that only answers NaN ends the recording
    with one line after three such episodes, the episodes saved before it kept."""
    from robolearn import tasks

    monkeypatch.setitem(tasks._USER, "reach_nan", _reach_with_nan_expert(lambda call: call == 15))
    out = tmp_path / "demos"
    with caplog.at_level("WARNING"):
        summary = record(_cmd(out, task="reach_nan", episodes=2, max_steps=10))
    assert summary["episodes_saved"] == 2 and summary["rerecorded"] == 1
    assert "episode is not saved: the action is not finite" in caplog.text
    ds = read_dataset(out)
    assert len(ds.episodes) == 2 and validate_dataset(out) == []
    assert all(np.isfinite(ds.episode_frames(ep)[ACTION]).all() for ep in range(2))

    monkeypatch.setitem(tasks._USER, "reach_nan", _reach_with_nan_expert(lambda call: call > 10))
    with pytest.raises(RecordError, match=r"^3 episodes in a row held NaN or infinity .*; 1 saved$"):
        record(_cmd(tmp_path / "nan", task="reach_nan", episodes=3, max_steps=10))
    assert len(read_dataset(tmp_path / "nan").episodes) == 1


def test_sim_params_record_on_the_identified_robot_with_its_expert(tmp_path: Path) -> None:
    # Tyres at 0.375 of their grip (bench finetune's car gap at strength 1.25), where the nominal
    # expert slides wide of its checkpoints (tests/test_car.py): the scripted person recording on
    # that robot is its expert, which brakes and corners within the grip and finishes its laps.
    grip = tmp_path / "grip.yaml"
    save_sim_params(SimParams("racecar", {"robot_friction_scale": IdentifiedParam(0.375, 0.0, 1.0)}), grip)
    laps = {}
    for name, params in (("nominal", None), ("identified", grip)):
        cmd = _cmd(tmp_path / name, task="car_checkpoints", episodes=3, sim_params=params)
        summary = record(cmd)
        assert summary["successes"] == 3 and summary["sim_params"] == (None if params is None else str(grip))
        laps[name] = [e.length for e in read_dataset(tmp_path / name).episodes]
    recorder = Recorder(_cmd(tmp_path / "x", task="car_checkpoints", sim_params=grip))
    identified = recorder.cfg.scene.robot.identified
    assert identified is not None and identified.robot_friction_scale == 0.375
    # A pixel task's scripted policy is its state task's expert: of the same identified robot.
    pixels = Recorder(
        _cmd(tmp_path / "y", task="car_checkpoints_pixels", policy="scripted", device="none", sim_params=grip)
    )
    assert teacher_task(pixels.cfg).scene.robot.identified == identified
    # The same seeds' laps, driven slower where the tyres grip less.
    assert all(slow > fast for slow, fast in zip(laps["identified"], laps["nominal"], strict=True))
    save_sim_params(SimParams("panda", {"mass_scale": IdentifiedParam(1.1, 0.0, 1.0)}), tmp_path / "arm.yaml")
    with pytest.raises(SimParamsError, match="robot 'panda'; task car_checkpoints runs robot 'racecar'"):
        record(_cmd(tmp_path / "bad", task="car_checkpoints", sim_params=tmp_path / "arm.yaml"))
    with pytest.raises(ConfigError, match="--sim-params records on an identified robot"):
        record(_cmd(tmp_path / "bad", sim_params=grip, excitation=True))
    with pytest.raises(SimParamsError, match="no such parameter file"):
        record(_cmd(tmp_path / "bad", sim_params=tmp_path / "missing.yaml"))
    assert not (tmp_path / "bad").exists()
