"""Recording deployment runs as rosbag2 folders in MCAP, readable by ``ros2 bag`` and rosbags.

A bag is a folder with ``metadata.yaml`` and one ``.mcap`` file. Messages are stored in CDR, each
topic's schema taken from rosbags' Kilted type store, so any ROS 2 tool decodes them without
robolearn. rosbags serializes them: rclpy's own bytes can carry alignment padding after a trailing
empty sequence (a ``JointState`` without efforts), which strict readers such as rosbags refuse.

Each topic carries the QoS profile it was offered with, in rosbag2's ``offered_qos_profiles``
(``metadata.yaml`` and the MCAP channel's metadata): ``ros2 bag play`` offers the same again, so
sensor topics replay best effort, as the robot published them, and commands reliable (an empty
list makes it fall back to its defaults, reliable for everything).
"""

from __future__ import annotations

import array
import threading
from pathlib import Path
from typing import Any

import numpy as np

from robolearn.hardware.ros._rclpy import RosParameterError

TYPESTORE = "ros2_kilted"
"""rosbags type store that supplies message definitions and hashes."""


def bag_qos(profile: Any) -> Any:
    """An rclpy ``QoSProfile`` as rosbags' ``Qos``, the fields of rosbag2's ``offered_qos_profiles``.

    Durations are kept as the profile has them; 0 s is ROS 2's "the middleware's default".
    """
    from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime

    def duration(d: Any) -> Any:
        sec, nsec = divmod(int(d.nanoseconds), 1_000_000_000)
        return QosTime(sec, nsec)

    return Qos(
        history=QosHistory[profile.history.name],
        depth=int(profile.depth),
        reliability=QosReliability[profile.reliability.name],
        durability=QosDurability[profile.durability.name],
        deadline=duration(profile.deadline),
        lifespan=duration(profile.lifespan),
        liveliness=QosLiveliness[profile.liveliness.name],
        liveliness_lease_duration=duration(profile.liveliness_lease_duration),
        avoid_ros_namespace_conventions=bool(profile.avoid_ros_namespace_conventions),
    )


def msgtype_name(msg_class: Any) -> str:
    """``nav_msgs/msg/Odometry`` for rclpy's ``nav_msgs.msg.Odometry``."""
    return f"{msg_class.__module__.split('.')[0]}/msg/{msg_class.__name__}"


class BagRecorder:
    """Writes messages of declared topics to a new rosbag2 folder (MCAP storage).

    Safe to call from several threads (a node's executor and its control loop).
    """

    def __init__(self, path: Path) -> None:
        from rosbags.rosbag2 import StoragePlugin, Writer
        from rosbags.typesys import Stores, get_typestore

        if path.exists():
            raise RosParameterError(f"bag {path} exists already; give a new folder")
        self._typestore = get_typestore(Stores(TYPESTORE))
        self._writer = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
        self._writer.open()
        self._connections: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.path = path
        self.count = 0

    def add_topic(self, topic: str, msg_class: Any, qos: Any) -> None:
        """Declare a topic (fully qualified name), its message class and the rclpy ``QoSProfile`` it
        is offered with, before writing to it."""
        with self._lock:
            if topic not in self._connections:
                self._connections[topic] = self._writer.add_connection(
                    topic,
                    msgtype_name(msg_class),
                    typestore=self._typestore,
                    offered_qos_profiles=[bag_qos(qos)],
                )

    def write(self, topic: str, message: Any, t_ns: int) -> None:
        """Store one message of a declared topic, received or sent at ``t_ns`` (ns since the epoch)."""
        data = self._typestore.serialize_cdr(self._convert(message), msgtype_name(type(message)))
        with self._lock:
            self._writer.write(self._connections[topic], t_ns, data)
            self.count += 1

    def _convert(self, message: Any) -> Any:
        """An rclpy message as the type store's message of the same type."""
        fields = {}
        for name in message.get_fields_and_field_types():
            value = getattr(message, name)
            if hasattr(value, "get_fields_and_field_types"):
                value = self._convert(value)
            elif isinstance(value, list) and value and hasattr(value[0], "get_fields_and_field_types"):
                value = [self._convert(v) for v in value]
            elif isinstance(value, array.array | np.ndarray):
                value = np.asarray(value)
            fields[name] = value
        return self._typestore.types[msgtype_name(type(message))](**fields)

    def close(self) -> None:
        """Finish the MCAP file and write ``metadata.yaml``."""
        with self._lock:
            self._writer.close()
