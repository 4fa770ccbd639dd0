"""Teleoperation: a person (or a scripted stand-in) driving a task, and marking its episodes.

``make_device(name, task_cfg, **options)`` makes one of :data:`DEVICES` (keyboard, gamepad,
spacemouse, scripted, replay); every device is a :class:`Device` whose ``read(obs)`` returns a
:class:`TeleopCommand`. Hardware libraries are imported only when their device connects.
Default bindings: ``docs/teleop.md``.
"""

from robolearn.teleop.device import (
    DEVICES,
    HAND_DEVICES,
    Device,
    DeviceError,
    SceneResetConfirmation,
    TeleopCommand,
    TeleopEvent,
    make_device,
)

__all__ = [
    "DEVICES",
    "HAND_DEVICES",
    "Device",
    "DeviceError",
    "SceneResetConfirmation",
    "TeleopCommand",
    "TeleopEvent",
    "make_device",
]
