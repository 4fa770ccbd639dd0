"""LeRobotDataset v3 on disk: layout, round trips, crash safety, damage reports, merging, demo buffers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from robolearn.cli.dataset import DatasetCmd, DatasetInfoCmd, DatasetMergeCmd, DatasetValidateCmd, run_dataset
from robolearn.data.format import ACTION, DONE, INTERVENTION, REWARD, STATE, SUCCESS, TERMINATED, DatasetError
from robolearn.data.merge import dataset_info, merge_datasets
from robolearn.data.reader import read_dataset
from robolearn.data.validate import check_dataset, validate_dataset
from robolearn.data.writer import DatasetWriter
from robolearn.policy.normalization import ActionScaler
from robolearn.rl.demos import load_demo_buffer
from robolearn.tasks import make_task_cfg

SHAPES = {"pos": (3,), "grip": (1,)}
CAM = "observation.images.front"
IMAGE = (16, 24, 3)
LOW, HIGH = np.array([-1.0, 0.0]), np.array([1.0, 0.08])


def _frames(length: int, seed: int, terminal: bool) -> list[dict]:
    """One synthetic episode: what add_frame receives, frame by frame."""
    rng = np.random.default_rng(seed)
    out = []
    for t in range(length):
        image = np.zeros(IMAGE, np.uint8)
        image[..., 0] = 8 * t % 256  # a brightness ramp survives lossy encoding
        image[:, : 2 + t % 20, 1] = 200
        out.append(
            {
                "obs": {"pos": rng.normal(size=3), "grip": np.array([0.01 * t])},
                "action": rng.uniform(LOW, HIGH),
                "reward": float(t) / length,
                "success": t >= length - 3,
                "terminated": terminal and t == length - 1,
                "is_intervention": 5 <= t < 9,
                "image": image,
            }
        )
    return out


def _record(
    root: Path, lengths: list[int], camera: bool = True, task: str = "pick", seed: int = 0
) -> list[list[dict]]:
    writer = DatasetWriter.create(
        root,
        repo_id="test/pick",
        fps=50,
        robot_type="panda",
        obs_shapes=SHAPES,
        obs_names=None,
        action_names=["dx", "grip"],
        image_shape=IMAGE if camera else None,
        obs_units={"pos": "m", "grip": "m"},
        action_units=["m", "m"],
    )
    episodes = []
    for i, n in enumerate(lengths):
        frames = _frames(n, seed + i, terminal=i % 2 == 0)
        for f in frames:
            writer.add_frame(**{**f, "image": f["image"] if camera else None})
        assert writer.save_episode(task) == i
        episodes.append(frames)
    writer.close()
    return episodes


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[list[dict]]]:
    root = tmp_path_factory.mktemp("ds") / "pick"
    return root, _record(root, [12, 7, 10])


def test_round_trip(recorded: tuple[Path, list[list[dict]]]) -> None:
    root, episodes = recorded
    assert validate_dataset(root) == []
    ds = read_dataset(root)
    assert [e.length for e in ds.episodes] == [12, 7, 10]
    assert ds.tasks == ["pick"] and ds.obs_keys == ["pos", "grip"] and ds.camera_keys == [CAM]
    assert ds.units["observation.pos"] == ["m"] * 3 and ds.units[ACTION] == ["m", "m"]
    frames = ds.frames()
    flat = [f for ep in episodes for f in ep]
    np.testing.assert_allclose(frames["observation.pos"], [f["obs"]["pos"] for f in flat], rtol=1e-6)
    np.testing.assert_allclose(frames[STATE][:, 3], [f["obs"]["grip"][0] for f in flat], rtol=1e-6)
    np.testing.assert_allclose(frames[ACTION], [f["action"] for f in flat], rtol=1e-6)
    np.testing.assert_allclose(frames[REWARD], [f["reward"] for f in flat], rtol=1e-6)
    assert frames[SUCCESS].tolist() == [f["success"] for f in flat]
    assert frames[INTERVENTION].tolist() == [f["is_intervention"] for f in flat]
    assert frames[TERMINATED].tolist() == [f["terminated"] for f in flat]
    # next.done marks every episode's last frame, terminal or not.
    assert np.flatnonzero(frames[DONE]).tolist() == [11, 18, 28]
    assert frames["index"].tolist() == list(range(29))
    assert frames["episode_index"].tolist() == [0] * 12 + [1] * 7 + [2] * 10
    np.testing.assert_allclose(frames["timestamp"][12:19], np.arange(7) / 50, atol=1e-6)
    video = ds.video_frames(1, CAM)
    assert video.shape == (7, *IMAGE)
    original = np.stack([f["image"] for f in episodes[1]]).astype(float)
    assert np.abs(video.astype(float) - original).mean() < 6.0  # H.264 is lossy, not wrong


def test_layout_is_lerobot_v3(recorded: tuple[Path, list[list[dict]]]) -> None:
    root, _ = recorded
    info = json.loads((root / "meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0"
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    assert info["video_path"] == "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
    assert (info["total_episodes"], info["total_frames"], info["total_tasks"], info["fps"]) == (3, 29, 1, 50)
    assert info["splits"] == {"train": "0:3"}
    features = info["features"]
    for key in ("timestamp", "frame_index", "episode_index", "index", "task_index"):
        assert features[key]["shape"] == [1]
    assert features[STATE]["names"] == ["pos_0", "pos_1", "pos_2", "grip_0"]
    assert features[INTERVENTION] == {"dtype": "bool", "shape": [1], "names": ["is_intervention"]}
    assert features[CAM]["dtype"] == "video" and features[CAM]["info"]["video.fps"] == 50
    # Shape (1,) features are scalar columns, vectors fixed-size lists (as Hugging Face datasets
    # writes Value and Sequence(length=n)).
    data = pq.read_table(root / "data/chunk-000/file-001.parquet")
    assert str(data.schema.field(REWARD).type) == "float"
    assert str(data.schema.field(DONE).type) == "bool"
    assert data.schema.field("observation.pos").type == pa.list_(pa.float32(), 3)
    episodes = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert [e["dataset_from_index"] for e in episodes] == [0, 12, 19]
    assert episodes[2]["videos/observation.images.front/file_index"] == 2
    assert episodes[1]["videos/observation.images.front/to_timestamp"] == pytest.approx(7 / 50)
    first_actions = read_dataset(root).episode_frames(0)[ACTION]
    np.testing.assert_allclose(episodes[0]["stats/action/mean"], first_actions.mean(axis=0), rtol=1e-6)
    # LeRobot reads the tasks table with pandas: the task text is the index.
    tasks = pq.read_table(root / "meta/tasks.parquet")
    assert json.loads(tasks.schema.metadata[b"pandas"])["index_columns"] == ["task"]
    stats = json.loads((root / "meta/stats.json").read_text())
    assert stats[REWARD]["count"] == [29]
    assert set(stats[ACTION]) == {"min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99"}
    assert np.array(stats[CAM]["mean"]).shape == (3, 1, 1)


def test_stats_aggregate_exactly(recorded: tuple[Path, list[list[dict]]]) -> None:
    root, _ = recorded
    frames = read_dataset(root).frames()
    stats = json.loads((root / "meta/stats.json").read_text())
    np.testing.assert_allclose(stats[ACTION]["mean"], frames[ACTION].mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(stats[ACTION]["std"], frames[ACTION].std(axis=0), rtol=1e-6)
    np.testing.assert_allclose(stats[ACTION]["min"], frames[ACTION].min(axis=0))


CRASH_SCRIPT = """
import sys, time, numpy as np
from pathlib import Path
from robolearn.data.writer import DatasetWriter
w = DatasetWriter.create(Path(sys.argv[1]), repo_id="t/crash", fps=30, robot_type="panda",
    obs_shapes={"pos": (3,)}, obs_names=None, action_names=["a"], image_shape=(16, 16, 3))
for ep in range(1000):
    for t in range(20):
        w.add_frame({"pos": np.full(3, t)}, np.array([0.1]), 0.0, False, False, False,
                    np.full((16, 16, 3), t, np.uint8))
        if ep == 3 and t == 10:
            print("mid-episode", flush=True)
            time.sleep(60)  # killed here, with 11 frames buffered
    w.save_episode("reach")
    print("saved", ep, flush=True)
"""


def test_kill_mid_episode_loses_only_that_episode(tmp_path: Path) -> None:
    root = tmp_path / "crash"
    proc = subprocess.Popen(
        [sys.executable, "-c", CRASH_SCRIPT, str(root)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    for line in proc.stdout:
        if line.startswith("mid-episode") or time.monotonic() > deadline:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert validate_dataset(root) == []
    assert len(read_dataset(root).episodes) == 3
    writer = DatasetWriter.open(root)
    for t in range(5):
        writer.add_frame(
            {"pos": np.full(3, t)}, np.array([0.1]), 0.0, True, True, False, np.zeros((16, 16, 3), np.uint8)
        )
    assert writer.save_episode("reach") == 3
    assert validate_dataset(root) == []
    assert [e.length for e in read_dataset(root).episodes] == [20, 20, 20, 5]


def test_interrupted_save_is_reported_and_repaired(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    _record(root, [6, 5], camera=False)
    # A save killed after its data file was renamed into place but before the commit.
    orphan = root / "data/chunk-000/file-002.parquet"
    orphan.write_bytes((root / "data/chunk-000/file-001.parquet").read_bytes())
    # The committed episodes stay valid; the orphan is reported as what it is, a leftover.
    found = check_dataset(root)
    assert found.problems == []
    assert len(found.warnings) == 1 and "file-002.parquet: no episode refers to it" in found.warnings[0]
    DatasetWriter.open(root).close()
    assert not orphan.exists() and validate_dataset(root) == []


def test_damaged_files_are_named(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    _record(root, [6, 5, 4])
    data = root / "data/chunk-000/file-001.parquet"
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    data.write_bytes(bytes(raw))
    with pytest.raises(DatasetError, match=r"file-001\.parquet: contents do not match"):
        read_dataset(root).frames()
    read_dataset(root).episode_frames(0)  # the other episodes stay readable
    video = root / "videos" / CAM / "chunk-000/file-002.mp4"
    video.write_bytes(video.read_bytes()[:200])
    problems = validate_dataset(root)
    assert any("file-001.parquet" in p for p in problems)
    assert any("file-002.mp4: 200 bytes where" in p for p in problems)
    with pytest.raises(DatasetError, match=r"file-002\.mp4"):
        read_dataset(root).video_frames(2, CAM)

    info = json.loads((root / "meta/info.json").read_text())
    (root / "meta/info.json").write_text(json.dumps(info | {"total_frames": 99}))
    with pytest.raises(DatasetError, match="total_frames is 99, the episodes add up to 15"):
        read_dataset(root)
    (root / "meta/info.json").write_text(json.dumps(info))
    (root / "data/chunk-000/file-000.parquet").unlink()
    with pytest.raises(DatasetError, match=r"file-000.parquet: missing \(episode 0\)"):
        read_dataset(root)
    (root / "meta/tasks.parquet").write_text("not parquet")
    (problem,) = validate_dataset(root)
    assert problem.startswith(f"{root / 'meta/tasks.parquet'}: not a readable parquet file")


def test_writer_rejects_bad_input(tmp_path: Path) -> None:
    kwargs = dict(
        repo_id="t/x", fps=50, robot_type="panda", obs_shapes=SHAPES, obs_names=None, action_names=["a", "b"]
    )
    with pytest.raises(DatasetError, match="even sides"):
        DatasetWriter.create(tmp_path / "odd", image_shape=(15, 24, 3), **kwargs)
    writer = DatasetWriter.create(tmp_path / "ok", image_shape=None, **kwargs)
    with pytest.raises(DatasetError, match="exists and is not empty"):
        DatasetWriter.create(tmp_path / "ok", image_shape=None, **kwargs)
    frame = _frames(1, 0, False)[0]
    with pytest.raises(DatasetError, match="observation keys"):
        writer.add_frame({"pos": frame["obs"]["pos"]}, frame["action"], 0.0, False, False, False)
    with pytest.raises(DatasetError, match="action has shape"):
        writer.add_frame(frame["obs"], np.zeros(3), 0.0, False, False, False)
    with pytest.raises(DatasetError, match="image given to a dataset without a camera"):
        writer.add_frame(frame["obs"], frame["action"], 0.0, False, False, False, frame["image"])
    with pytest.raises(DatasetError, match="no frames"):
        writer.save_episode("x")
    writer.add_frame(frame["obs"], frame["action"], 0.0, False, False, False)
    writer.discard_episode()
    with pytest.raises(DatasetError, match="no frames"):
        writer.save_episode("x")
    with pytest.raises(DatasetError, match="not a LeRobot v3 dataset"):
        read_dataset(tmp_path / "nothing")


def test_merge_reindexes_episodes_and_tasks(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _record(a, [6, 5], task="pick")
    _record(b, [4, 3, 5], task="place", seed=10)
    out = merge_datasets([a, b], tmp_path / "merged")
    assert validate_dataset(out) == []
    merged, da, db = read_dataset(out), read_dataset(a), read_dataset(b)
    assert [e.length for e in merged.episodes] == [6, 5, 4, 3, 5]
    assert merged.tasks == ["pick", "place"]
    frames = merged.frames()
    assert frames["task_index"].tolist() == [0] * 11 + [1] * 12
    assert frames["index"].tolist() == list(range(23))
    np.testing.assert_array_equal(frames[ACTION], np.concatenate([da.frames()[ACTION], db.frames()[ACTION]]))
    # Single-episode video files are copied, not re-encoded.
    np.testing.assert_array_equal(merged.video_frames(3, CAM), db.video_frames(1, CAM))
    c = tmp_path / "c"
    _record(c, [4], camera=False)
    with pytest.raises(DatasetError, match=r"features \['observation.images.front'\] differ"):
        merge_datasets([a, c], tmp_path / "bad")


def test_demo_buffer_from_episodes(recorded: tuple[Path, list[list[dict]]]) -> None:
    root, episodes = recorded
    scaler = ActionScaler(LOW, HIGH)
    buffer = load_demo_buffer(root, scaler, SHAPES, capacity=100)
    # Episodes 0 and 2 end terminal and keep their last frame; episode 1 was truncated.
    assert len(buffer) == 12 + 6 + 10
    np.testing.assert_allclose(buffer.obs["pos"][1], episodes[0][1]["obs"]["pos"], rtol=1e-6)
    np.testing.assert_allclose(buffer.next_obs["pos"][1], episodes[0][2]["obs"]["pos"], rtol=1e-6)
    np.testing.assert_allclose(buffer.action[3], scaler.to_unit(episodes[0][3]["action"]), atol=1e-6)
    assert np.abs(buffer.action[: len(buffer)]).max() <= 1.0
    assert np.flatnonzero(buffer.terminated[: len(buffer)]).tolist() == [11, 27]
    assert buffer.is_intervention[: len(buffer)].sum() == 4 + 1 + 4  # episode 1's last one is left out
    assert buffer.is_intervention[5] and not buffer.is_intervention[4]
    small = load_demo_buffer(root, scaler, SHAPES, capacity=10)
    assert len(small) == 10 and small.is_intervention[:10].sum() == 4  # the newest transitions
    with pytest.raises(DatasetError, match="no observation 'vel'"):
        load_demo_buffer(root, scaler, {"vel": (3,)}, capacity=10)


def test_for_task_uses_units_and_rate(tmp_path: Path) -> None:
    cfg = make_task_cfg("panda_pick_cube")
    writer = DatasetWriter.for_task(tmp_path / "t", cfg, {"ee_pos": (3,), "cube_pos": (3,)}, repo_id="t/p")
    writer.add_frame({"ee_pos": np.zeros(3), "cube_pos": np.ones(3)}, np.zeros(4), 0.0, False, False, True)
    writer.save_episode("pick up the cube")
    info = dataset_info(tmp_path / "t")
    assert info["fps"] == 50 and info["robot_type"] == cfg.scene.robot.name
    assert info["intervention_frames"] == 1 and info["successful_episodes"] == 0
    assert read_dataset(tmp_path / "t").units[ACTION] == list(cfg.action.units)


def test_cli(
    recorded: tuple[Path, list[list[dict]]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, _ = recorded
    run_dataset(DatasetCmd(DatasetInfoCmd(root)))
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["episodes"] == 3 and summary["successful_episodes"] == 3
    run_dataset(DatasetCmd(DatasetValidateCmd(root)))
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["valid"] is True
    run_dataset(DatasetCmd(DatasetMergeCmd((root, root), tmp_path / "twice")))
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["episodes"] == 6
    (tmp_path / "twice/meta/info.json").write_text("{")
    with pytest.raises(DatasetError, match="1 problem"):
        run_dataset(DatasetCmd(DatasetValidateCmd(tmp_path / "twice")))


# -- statistics as LeRobot computes them (issue 12) ------------------------------------------------
def _lerobot_sample(n: int) -> np.ndarray:
    """LeRobot's frame sample for image statistics: n**0.75 frames within [100, 10,000], at most n."""
    k = max(min(100, n), min(int(n**0.75), 10_000))
    return np.round(np.linspace(0, n - 1, k)).astype(int)


def _lerobot_image_stats(frames: np.ndarray) -> dict[str, np.ndarray]:
    """Per-channel stats in [0, 1] of a frame sample (channel-first, strided down from 300 px)."""
    sample = frames[_lerobot_sample(len(frames))].transpose(0, 3, 1, 2).astype(np.float64)
    _, _, h, w = sample.shape
    if max(h, w) >= 300:
        f = int(w / 150) if w > h else int(h / 150)
        sample = sample[:, :, ::f, ::f]
    return {
        "mean": sample.mean(axis=(0, 2, 3), keepdims=True)[0] / 255,
        "std": sample.std(axis=(0, 2, 3), keepdims=True)[0] / 255,
        "min": sample.min(axis=(0, 2, 3), keepdims=True)[0] / 255,
        "max": sample.max(axis=(0, 2, 3), keepdims=True)[0] / 255,
        "count": np.array([len(sample)]),
    }


def _lerobot_aggregate(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """LeRobot's aggregate: count-weighted mean and quantiles, parallel variance, extremes, summed count."""
    n = np.array([p["count"][0] for p in parts], np.float64)
    total = n.sum()
    weight = [c / total for c in n]
    mean = sum(w * np.asarray(p["mean"]) for w, p in zip(weight, parts, strict=True))
    var = sum(
        w * (np.asarray(p["std"]) ** 2 + (np.asarray(p["mean"]) - mean) ** 2)
        for w, p in zip(weight, parts, strict=True)
    )
    out = {
        "mean": mean,
        "std": np.sqrt(var),
        "min": np.minimum.reduce([np.asarray(p["min"]) for p in parts]),
        "max": np.maximum.reduce([np.asarray(p["max"]) for p in parts]),
        "count": np.array([int(total)]),
    }
    for q in ("q01", "q10", "q50", "q90", "q99"):
        out[q] = sum(w * np.asarray(p[q]) for w, p in zip(weight, parts, strict=True))
    return out


def test_image_stats_count_sampled_frames() -> None:
    from robolearn.data.stats import image_stats

    rng = np.random.default_rng(0)
    for n, shape in [(7, (16, 24, 3)), (300, (8, 8, 3)), (1000, (4, 6, 3)), (3, (240, 320, 3))]:
        frames = rng.integers(0, 256, (n, *shape), dtype=np.uint8)
        ours, theirs = image_stats(frames), _lerobot_image_stats(frames)
        assert ours["count"].tolist() == theirs["count"].tolist()  # frames sampled, not pixels
        for key in ("mean", "std", "min", "max"):
            assert ours[key].shape == (3, 1, 1)
            np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-9, atol=1e-12)
    assert image_stats(np.zeros((1000, 4, 6, 3), np.uint8))["count"].tolist() == [177]


def test_stats_follow_lerobot_formulas(recorded: tuple[Path, list[list[dict]]]) -> None:
    root, episodes = recorded
    rows = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    stats = json.loads((root / "meta/stats.json").read_text())
    for key in ("observation.state", ACTION, CAM):
        parts = [
            {
                s: np.asarray(row[f"stats/{key}/{s}"])
                for s in ("mean", "std", "min", "max", "count", "q01", "q10", "q50", "q90", "q99")
            }
            for row in rows
        ]
        if key == CAM:
            for part, frames in zip(parts, episodes, strict=True):
                expected = _lerobot_image_stats(np.stack([f["image"] for f in frames]))
                assert part["count"].tolist() == expected["count"].tolist() == [len(frames)]
                np.testing.assert_allclose(part["mean"], expected["mean"], rtol=1e-9)
        else:
            values = read_dataset(root).frames()[key]
            bounds = np.cumsum([0] + [len(e) for e in episodes])
            for i, part in enumerate(parts):
                x = values[bounds[i] : bounds[i + 1]].astype(np.float64)
                assert part["count"].tolist() == [len(x)]
                np.testing.assert_allclose(part["mean"], x.mean(axis=0), rtol=1e-9)
                np.testing.assert_allclose(part["std"], x.std(axis=0), rtol=1e-6, atol=1e-9)
                # Histogram quantiles (5,000 bins) sit within a bin or two of the exact ones.
                width = (x.max(axis=0) - x.min(axis=0)) / 5000 + 1e-9
                assert np.all(
                    np.abs(part["q50"] - np.quantile(x, 0.5, axis=0, method="inverted_cdf")) <= 2 * width
                )
        expected = _lerobot_aggregate(parts)
        assert stats[key]["count"] == expected["count"].tolist()
        for s in ("mean", "std", "min", "max", "q01", "q10", "q50", "q90", "q99"):
            np.testing.assert_allclose(
                stats[key][s], expected[s], rtol=1e-9, atol=1e-12, err_msg=f"{key} {s}"
            )


def test_a_non_finite_frame_is_refused_and_spoils_only_its_episode(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """NaN or infinity in an observation, the action or the reward is refused in one line naming it
    (written, it would make the dataset's statistics NaN); through EpisodeWriter, the training runs'
    and recorders' writer, that world's episode is dropped with a warning and every other is saved."""
    from robolearn.data.episodes import EpisodeWriter
    from robolearn.data.format import NonFiniteFrameError

    root = tmp_path / "ds"
    writer = DatasetWriter.create(
        root, repo_id="t/x", fps=50, robot_type="panda", obs_shapes=SHAPES, obs_names=None,
        action_names=["a", "b"], image_shape=None,
    )  # fmt: skip
    f = _frames(1, 0, False)[0]
    flags = (False, False, False)
    with pytest.raises(NonFiniteFrameError, match=r"^the action is not finite \(\[nan"):
        writer.add_frame(f["obs"], np.array([np.nan, 0.0]), 0.0, *flags)
    with pytest.raises(NonFiniteFrameError, match=r"^observation 'pos' is not finite"):
        writer.add_frame({**f["obs"], "pos": np.array([0.0, np.inf, 0.0])}, f["action"], 0.0, *flags)
    with pytest.raises(NonFiniteFrameError, match=r"^the reward is not finite"):
        writer.add_frame(f["obs"], f["action"], float("nan"), *flags)

    episodes = EpisodeWriter(writer, "pick", num_worlds=2)
    frames = _frames(6, 1, terminal=True)
    with caplog.at_level("WARNING", logger="robolearn.data.episodes"):
        for t, g in enumerate(frames):
            for world in (0, 1):
                action = np.array([np.nan, 0.0]) if (world, t) == (0, 2) else g["action"]
                episodes.add_frame(world, g["obs"], action, g["reward"], g["success"], g["terminated"], False)
    assert episodes.end_episode(0) is None and episodes.end_episode(1) == 0
    assert "world 0's episode is not saved: the action is not finite" in caplog.text
    for g in frames:  # world 0's next episode is whole again
        episodes.add_frame(0, g["obs"], g["action"], g["reward"], g["success"], g["terminated"], False)
    assert episodes.end_episode(0) == 1
    assert (episodes.episodes_written, episodes.episodes_dropped) == (2, 1)
    episodes.close()
    data = read_dataset(root)
    assert len(data.episodes) == 2 and not validate_dataset(root)
    stats = json.loads((root / "meta/stats.json").read_text())
    assert all(np.isfinite(np.asarray(v, dtype=float)).all() for s in stats.values() for v in s.values())
