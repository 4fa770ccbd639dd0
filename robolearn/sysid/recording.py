"""Recordings system identification reads: measured joint motion and the commands that caused it.

Two sources, found by what the path holds:

- a LeRobot v3 dataset as robolearn writes it (:func:`write_dataset`, ``robolearn sysid --record``):
  ``observation.joint_pos`` and ``observation.joint_vel`` named by joint, ``action`` named by actuator
  (the controller inputs: joint targets, tool pose targets), one frame per control period;
- a rosbag2 folder (MCAP), or a folder of them (one per episode), with ``sensor_msgs/JointState``
  on a topic ending in ``joint_states`` (measured) and on one ending in ``joint_commands`` (``name``
  the actuators, ``position`` their inputs), as a robot's driver or a recorder on the robot
  computer (``robolearn sysid --record --ros``) writes them.

Commands are held from their time to the next (zero-order hold), as a robot's controller does.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from robolearn.sysid.model import SysidError, SysidModel

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]

JOINT_POS, JOINT_VEL, JOINT_EFFORT = "joint_pos", "joint_vel", "joint_effort"
"""Observation keys of a system identification dataset (effort optional)."""


@dataclass(frozen=True)
class Recording:
    """One continuous stretch of measured motion."""

    name: str
    """Where it came from (episode or bag), for reports."""
    times: FloatArray
    """(T,) sample times (s), from 0, increasing."""
    joints: tuple[str, ...]
    """Joint names of the columns of ``qpos`` and ``qvel``."""
    qpos: FloatArray
    """(T, J) measured joint positions (rad or m)."""
    qvel: FloatArray
    """(T, J) measured joint velocities."""
    actuators: tuple[str, ...]
    """Actuator names of the columns of ``ctrl``."""
    ctrl: FloatArray
    """(T, U) the command sent at each sample time, held until the next."""
    effort: FloatArray | None = None
    """(T, J) measured actuator torque or force at each joint; None where the robot reports none."""

    def check(self) -> None:
        """Shapes agree, values finite, times increasing; raises :class:`SysidError`."""
        t, j, u = len(self.times), len(self.joints), len(self.actuators)
        if t < 10:
            raise SysidError(f"{self.name}: {t} samples; system identification needs at least 10")
        if self.qpos.shape != (t, j) or self.qvel.shape != (t, j) or self.ctrl.shape != (t, u):
            raise SysidError(f"{self.name}: positions, velocities and commands do not have {t} rows")
        if self.effort is not None and self.effort.shape != (t, j):
            raise SysidError(f"{self.name}: efforts do not have {t} rows of {j} joints")
        for label, arr in (
            ("times", self.times),
            ("positions", self.qpos),
            ("velocities", self.qvel),
            ("commands", self.ctrl),
            ("efforts", self.effort if self.effort is not None else np.zeros(1)),
        ):
            if not np.isfinite(arr).all():
                raise SysidError(f"{self.name}: non-finite {label}")
        if not (np.diff(self.times) > 0).all():
            raise SysidError(f"{self.name}: sample times must increase")

    def for_model(self, model: SysidModel) -> Recording:
        """The recording with its columns in the model's joint and actuator order."""
        missing_j = sorted(set(model.joints) - set(self.joints))
        missing_u = sorted(set(model.actuators) - set(self.actuators))
        if missing_j or missing_u:
            raise SysidError(
                f"{self.name}: the model of {model.robot} needs joints {missing_j} and actuators "
                f"{missing_u} that the recording lacks (it has joints {list(self.joints)}, actuators "
                f"{list(self.actuators)})"
            )
        jc = [self.joints.index(n) for n in model.joints]
        uc = [self.actuators.index(n) for n in model.actuators]
        return Recording(
            self.name,
            self.times,
            model.joints,
            self.qpos[:, jc],
            self.qvel[:, jc],
            model.actuators,
            self.ctrl[:, uc],
            None if self.effort is None else self.effort[:, jc],
        )

    def split(self, fraction: float) -> tuple[Recording, Recording]:
        """The first ``fraction`` of the samples and the rest (times restarting at 0)."""
        k = int(len(self.times) * fraction)

        def part(s: slice, suffix: str) -> Recording:
            t = self.times[s]
            return Recording(
                f"{self.name}{suffix}",
                t - t[0],
                self.joints,
                self.qpos[s],
                self.qvel[s],
                self.actuators,
                self.ctrl[s],
                None if self.effort is None else self.effort[s],
            )

        return part(slice(0, k), "[fit]"), part(slice(k, None), "[held-out]")


# -- LeRobot datasets ------------------------------------------------------------------------------
def write_dataset(
    root: Path,
    recordings: Sequence[Recording],
    robot: str,
    fps: int,
    units: tuple[str, str, str] = ("rad", "rad/s", "N m"),
) -> None:
    """Save recordings sampled at ``fps`` as episodes of a new LeRobot dataset at ``root``."""
    from robolearn.data.writer import DatasetWriter, Frame  # pyarrow: only when writing

    first = recordings[0]
    keys = [JOINT_POS, JOINT_VEL] + ([JOINT_EFFORT] if first.effort is not None else [])
    writer = DatasetWriter.create(
        root,
        repo_id=f"robolearn/sysid_{robot}",
        fps=fps,
        robot_type=robot,
        obs_shapes={k: (len(first.joints),) for k in keys},
        obs_names=dict.fromkeys(keys, first.joints),
        action_names=first.actuators,
        image_shape=None,
        obs_units=dict(zip(keys, units, strict=False)),
    )
    for rec in recordings:
        columns = [rec.qpos, rec.qvel] + ([rec.effort] if rec.effort is not None else [])
        if len(columns) != len(keys):
            raise SysidError(f"{rec.name}: every recording of a dataset has efforts, or none has")
        frames = [
            Frame(
                {k: c[i].astype(np.float32) for k, c in zip(keys, columns, strict=True)},
                rec.ctrl[i].astype(np.float32),
                0.0,
                False,
                False,
                False,
                None,
            )
            for i in range(len(rec.times))
        ]
        writer.save_frames(frames, f"system identification excitation of {robot}")


def _read_dataset(root: Path) -> list[Recording]:
    from robolearn.data.reader import read_dataset

    ds = read_dataset(root)
    keys = {"observation." + JOINT_POS, "observation." + JOINT_VEL, "action"}
    missing = sorted(keys - set(ds.features))
    if missing:
        raise SysidError(
            f"{root}: a system identification dataset needs features {sorted(keys)}; missing {missing} "
            "(record one with robolearn sysid --record)"
        )
    joints = tuple(ds.features["observation." + JOINT_POS]["names"])
    actuators = tuple(ds.features["action"]["names"])
    effort = "observation." + JOINT_EFFORT
    out = []
    for ep in ds.episodes:
        f = ds.episode_frames(ep.index)
        n = len(f["frame_index"])
        out.append(
            Recording(
                f"{root.name} episode {ep.index}",
                np.arange(n) / ds.fps,
                joints,
                np.asarray(f["observation." + JOINT_POS], dtype=np.float64).reshape(n, -1),
                np.asarray(f["observation." + JOINT_VEL], dtype=np.float64).reshape(n, -1),
                actuators,
                np.asarray(f["action"], dtype=np.float64).reshape(n, -1),
                np.asarray(f[effort], dtype=np.float64).reshape(n, -1) if effort in f else None,
            )
        )
    return out


# -- rosbag2 ---------------------------------------------------------------------------------------
def _joint_state_rows(
    reader: Any, conns: list[Any], typestore: Any
) -> tuple[list[float], list[str], list[Any]]:
    times, names, msgs = [], [], []
    for conn, _t, raw in reader.messages(connections=conns):
        m = typestore.deserialize_cdr(raw, conn.msgtype)
        times.append(m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec)
        names = list(m.name)
        msgs.append(m)
    return times, names, msgs


def _read_bag(root: Path, commands: str = "joint_commands") -> list[Recording]:
    try:
        from rosbags.rosbag2 import Reader
        from rosbags.typesys import Stores, get_typestore
    except ImportError:
        raise SysidError("reading rosbag2 recordings needs rosbags: pip install 'robolearn[ros]'") from None

    from robolearn.hardware.ros.bag import TYPESTORE

    typestore = get_typestore(Stores(TYPESTORE))
    with Reader(root) as reader:

        def topic(suffix: str) -> list[Any]:
            conns = [
                c
                for c in reader.connections
                if c.topic.endswith(suffix) and c.msgtype == "sensor_msgs/msg/JointState"
            ]
            if not conns:
                raise SysidError(
                    f"{root}: no sensor_msgs/JointState topic ending in {suffix!r} "
                    f"(topics: {sorted({c.topic for c in reader.connections})})"
                )
            return conns[:1]

        t_state, joints, states = _joint_state_rows(reader, topic("joint_states"), typestore)
        t_cmd, actuators, cmds = _joint_state_rows(reader, topic(commands), typestore)
    if len(states) < 10 or not cmds:
        raise SysidError(f"{root}: {len(states)} joint states and {len(cmds)} commands; too few to fit")
    times = np.asarray(t_state)
    order = np.argsort(times, kind="stable")
    qpos = np.array([np.asarray(states[i].position, dtype=np.float64) for i in order])
    qvel = np.array([np.asarray(states[i].velocity, dtype=np.float64) for i in order])
    efforts = [np.asarray(states[i].effort, dtype=np.float64) for i in order]
    effort = np.array(efforts) if all(len(e) == qpos.shape[1] for e in efforts) else None
    cmd_t = np.asarray(t_cmd)
    cmd_order = np.argsort(cmd_t, kind="stable")
    cmd_vals = np.array([np.asarray(cmds[i].position, dtype=np.float64) for i in cmd_order])
    times = times[order]
    start = max(times[0], cmd_t[cmd_order[0]])  # from the first state that follows a command
    keep = times >= start
    held = np.searchsorted(cmd_t[cmd_order], times[keep], side="right") - 1
    if qpos.ndim != 2 or qvel.shape != qpos.shape or cmd_vals.ndim != 2:
        raise SysidError(f"{root}: joint states or commands change their number of joints during the bag")
    return [
        Recording(
            root.name,
            times[keep] - times[keep][0],
            tuple(joints),
            qpos[keep],
            qvel[keep],
            tuple(actuators),
            cmd_vals[held],
            None if effort is None else effort[keep],
        )
    ]


def read_recordings(path: Path | str, commands: str = "joint_commands") -> list[Recording]:
    """Every recording at ``path`` (a LeRobot dataset or a rosbag2 folder), checked; in a bag, the
    commands are on the topic ending in ``commands`` (``sent_commands``: the excitation recorder's
    log of what it sent, beside what the robot applied)."""
    path = Path(path)
    if (path / "meta" / "info.json").is_file():
        recordings = _read_dataset(path)
    elif (path / "metadata.yaml").is_file():
        recordings = _read_bag(path, commands)
    elif path.is_dir() and (bags := sorted(p for p in path.iterdir() if (p / "metadata.yaml").is_file())):
        # A folder of bags, one per episode (robolearn sysid --record --ros writes one).
        recordings = [rec for bag in bags for rec in _read_bag(bag, commands)]
    else:
        raise SysidError(
            f"{path}: neither a LeRobot dataset (meta/info.json), a rosbag2 folder (metadata.yaml) nor a "
            "folder of rosbag2 folders"
        )
    if not recordings:
        raise SysidError(f"{path}: no episodes to fit")
    for rec in recordings:
        rec.check()
    return recordings
