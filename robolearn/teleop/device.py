"""The teleoperation device interface: what a person (or a stand-in for one) does at each step.

A device is connected once, read once per control step with the step's observation, and
disconnected; it is a context manager. Each read returns a :class:`TeleopCommand`: the device's
action in the task's physical units, whether the person takes over this step (HIL-SERL's
intervention), and the step's events (success, failure, re-record, quit).

Devices are made by name through :func:`make_device`; the registry names modules, so a device's
hardware library (pygame, evdev, pyspacemouse) is imported only when that device is made.
Default bindings of every device are listed in ``docs/teleop.md`` and in each module's docstring.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType, TracebackType
from typing import Any, Protocol, Self, TypeVar

import numpy as np

from robolearn.errors import RobolearnError
from robolearn.sim.backend import FloatArray
from robolearn.tasks.core import TaskCfg

ObsDict = Mapping[str, np.ndarray]
"""One world's observation: term name to its (k,) array, no batch axis."""


class DeviceError(RobolearnError):
    """A device that is missing, unplugged, unreadable or misconfigured; the message names it."""


class TeleopEvent(enum.Enum):
    """What a person signals besides the action.

    ``INTERVENE`` is a level: it is in a command's events on every step the person takes over
    (exactly when ``intervening`` is true). The others are edges: once per button press.
    ``RESET_DONE`` is the operator's word that the scene is reset (the cube put back) while a robot
    waits at its reset pose: the next episode starts on it (HIL-SERL's reset confirmation).
    """

    INTERVENE = "intervene"
    SUCCESS = "success"
    FAILURE = "failure"
    RERECORD = "rerecord"
    QUIT = "quit"
    RESET_DONE = "reset_done"


@dataclass(frozen=True)
class TeleopCommand:
    """One read of a device."""

    action: FloatArray | None
    """(A,) the device's action in the task's physical units, within its bounds; None when the
    device has none this step (the caller applies its policy's or the neutral action)."""
    intervening: bool
    """The person takes over this step: ``action`` replaces the policy's."""
    events: frozenset[TeleopEvent] = frozenset()
    """Events of this step."""

    def merged(self, other: TeleopCommand) -> TeleopCommand:
        """This command with ``other``'s events and intervention added (a second input's events)."""
        return TeleopCommand(self.action, self.intervening or other.intervening, self.events | other.events)


class Device(Protocol):
    """A teleoperation device. Subclass it to inherit the context manager and a no-op ``reset``."""

    name: str
    """Registry name, used in messages."""

    def connect(self) -> None:
        """Open the device; raise :class:`DeviceError` naming what was looked for if it is missing."""
        ...

    def reset(self) -> None:
        """A new episode begins (scripted schedules and replays count episodes)."""
        return None

    def scene_reset_requested(self) -> None:
        """The robot waits at its reset pose for the person to reset the scene and press
        ``RESET_DONE``; the reads that follow ask for that event only. A person sees the robot
        stop: only a scripted stand-in needs telling."""
        return None

    def watch(self, policy_action: FloatArray) -> None:
        """What the robot is about to do this step if nobody takes over: the policy's (A,) action in
        the task's physical units, given before :meth:`read`. A person sees the robot move: only a
        stand-in that steps in when the robot goes wrong needs telling."""
        return None

    def read(self, obs: ObsDict) -> TeleopCommand:
        """The command for this step, given the world's current observation; never blocks long."""
        ...

    def disconnect(self) -> None:
        """Release the device; safe to call twice."""
        ...

    def __enter__(self) -> Self:
        self.connect()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.disconnect()


class SceneResetConfirmation:
    """A person at a device confirming scene resets (``RESET_DONE``) for a robot that waits at its
    reset pose: what :class:`~robolearn.envs.ros_env.RosRobotEnv` asks before the next episode."""

    def __init__(self, device: Device) -> None:
        self.device = device

    def scene_reset_requested(self) -> None:
        self.device.scene_reset_requested()

    def scene_reset_confirmed(self, obs: ObsDict) -> bool:
        return TeleopEvent.RESET_DONE in self.device.read(obs).events


DEVICES: dict[str, str] = {
    "keyboard": "robolearn.teleop.keyboard:KeyboardDevice",
    "gamepad": "robolearn.teleop.gamepad:GamepadDevice",
    "spacemouse": "robolearn.teleop.spacemouse:SpaceMouseDevice",
    "scripted": "robolearn.teleop.scripted:ScriptedDevice",
    "replay": "robolearn.teleop.playback:PlaybackDevice",
}
"""Device name to ``module:class``; every class takes ``(task_cfg, **options)``."""

HAND_DEVICES = ("keyboard", "gamepad", "spacemouse")
"""Devices a person holds (paced in real time, mapped onto the embodiment by ``mapping.py``)."""

INSTALL_PYGAME = "pip install 'robolearn[teleop]' (pygame==2.6.1)"


def make_device(name: str, task_cfg: TaskCfg, **opts: Any) -> Device:
    """A device for a task, not yet connected; options are the device class's keyword arguments."""
    if name not in DEVICES:
        raise DeviceError(f"unknown device {name!r}; devices: {', '.join(DEVICES)}")
    module, cls_name = DEVICES[name].split(":")
    cls = getattr(importlib.import_module(module), cls_name)
    try:
        inspect.signature(cls).bind(task_cfg, **opts)
    except TypeError:
        takes = [p for p in inspect.signature(cls).parameters if p != "task_cfg"]
        raise DeviceError(f"device {name} takes options {takes}; got {sorted(opts)}") from None
    device: Device = cls(task_cfg, **opts)
    return device


T = TypeVar("T")


def resolve_bindings(
    device: str, defaults: Mapping[TeleopEvent, T], overrides: Mapping[str, T] | None
) -> dict[TeleopEvent, T]:
    """The default bindings with ``overrides`` (event name, e.g. ``"success"``, to input) applied."""
    bindings = dict(defaults)
    for event_name, control in (overrides or {}).items():
        try:
            event = TeleopEvent(event_name)
        except ValueError:
            events = ", ".join(e.value for e in TeleopEvent)
            raise DeviceError(f"{device}: no event {event_name!r} to bind; events: {events}") from None
        bindings[event] = control
    return bindings


def import_optional(module: str, device: str, install: str) -> ModuleType:
    """Import a device's hardware library, or raise a :class:`DeviceError` saying how to install it."""
    if module == "pygame":
        os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
        # A software window surface: otherwise SDL may draw the window through a GL context current
        # on this thread, which MuJoCo's renderer then fights for (EGL_BAD_ACCESS, or a black window).
        os.environ.setdefault("SDL_FRAMEBUFFER_ACCELERATION", "0")
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise DeviceError(f"{device} needs the {module} package ({exc}); install it: {install}") from None


def display_available() -> bool:
    """Whether a window can be shown: a desktop session, or an SDL video driver chosen explicitly.

    SDL falls back to an invisible "offscreen" driver without a display, so its own success
    says nothing; an explicit ``SDL_VIDEODRIVER`` (``dummy`` in tests) is taken at its word.
    """
    if os.name == "nt" or os.uname().sysname == "Darwin":
        return True
    return any(os.environ.get(k) for k in ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER"))
