"""Keyboard teleoperation: keys pressed in the pygame window that shows the simulation.

Default bindings (movement keys act while held; events can be rebound with
``bindings={"success": "return", ...}``, pygame key names):

=====================  ==========================================================
key                    does
=====================  ==========================================================
w / s                  +x / -x (forward / back)
a / d                  +y / -y (left / right)
r / f                  +z / -z (up / down)
q / e                  +yaw / -yaw (turn left / right)
space                  toggle the gripper (close / open)
left shift (held)      intervene: take over while holding still (deadman)
y                      success: end the episode as a success
n                      failure: end the episode as a failure
backspace              re-record: discard the episode and start it again
escape, closing window quit
=====================  ==========================================================

Any movement key held or a gripper toggle is an intervention as well (HIL-SERL's rule). Keys are
binary, so a key is full deflection: ``scale`` (default 0.5) sets the speed. The window needs a
display; the key state is kept from key-down and key-up events (so posted events drive it in
tests), and losing focus releases every key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType

import numpy as np

from robolearn.tasks.core import TaskCfg
from robolearn.teleop.device import (
    INSTALL_PYGAME,
    Device,
    DeviceError,
    ObsDict,
    TeleopCommand,
    TeleopEvent,
    display_available,
    import_optional,
    resolve_bindings,
)
from robolearn.teleop.mapping import DroneMode, HandDevice

MOTION_KEYS: dict[str, tuple[int, float]] = {
    "w": (0, 1.0),
    "s": (0, -1.0),
    "a": (1, 1.0),
    "d": (1, -1.0),
    "r": (2, 1.0),
    "f": (2, -1.0),
    "q": (5, 1.0),
    "e": (5, -1.0),
}
"""Key name to (twist axis, direction)."""

GRIPPER_KEY = "space"
"""Toggles the gripper."""

DEFAULT_BINDINGS: dict[TeleopEvent, str] = {
    TeleopEvent.INTERVENE: "left shift",
    TeleopEvent.SUCCESS: "y",
    TeleopEvent.FAILURE: "n",
    TeleopEvent.RERECORD: "backspace",
    TeleopEvent.QUIT: "escape",
    TeleopEvent.RESET_DONE: "return",
}
"""Event to pygame key name; INTERVENE is held, the others pressed."""


@dataclass
class KeyPoll:
    """The keys since the last poll."""

    held: set[int] = field(default_factory=set)
    """Keys down now, and keys pressed and released since the last poll (a short tap counts)."""
    pressed: set[int] = field(default_factory=set)
    """Keys that went down since the last poll."""
    closed: bool = False
    """The window was closed."""


class KeyReader:
    """Key state of the pygame window, kept from its key events."""

    def __init__(self, device: str, bindings: Mapping[str, str] | None, extra_keys: tuple[str, ...]) -> None:
        self.device = device
        self.names = resolve_bindings(device, DEFAULT_BINDINGS, bindings)
        clash = set(self.names.values()) & set(extra_keys)
        if clash:
            raise DeviceError(f"{device}: keys {sorted(clash)} are bound twice (events and movement)")
        self.extra_keys = extra_keys
        self.pg: ModuleType | None = None
        self.codes: dict[TeleopEvent, int] = {}
        self._held: set[int] = set()
        self._owns_window = False

    def open(self) -> ModuleType:
        pg = import_optional("pygame", self.device, INSTALL_PYGAME)
        if not display_available():
            raise DeviceError(
                f"{self.device}: no display for the pygame window that receives the keys (DISPLAY and "
                "WAYLAND_DISPLAY are unset); use --device gamepad, spacemouse or scripted"
            )
        pg.display.init()  # before key names: pygame reads them from the video subsystem
        for name in [*self.names.values(), *self.extra_keys]:
            try:
                pg.key.key_code(name)
            except ValueError:
                raise DeviceError(
                    f"{self.device}: unknown key name {name!r}; pygame's names are like 'y', 'space', "
                    "'left shift', 'return', 'escape', 'backspace', 'f1'"
                ) from None
        self.codes = {event: pg.key.key_code(name) for event, name in self.names.items()}
        if pg.display.get_surface() is None:
            pg.display.set_mode((480, 120))
            pg.display.set_caption("robolearn teleop: focus this window to drive")
            self._owns_window = True
        self._held.clear()
        self.pg = pg
        return pg

    def poll(self) -> KeyPoll:
        pg = self.pg
        if pg is None:
            raise DeviceError(f"{self.device}: read before connect()")
        out = KeyPoll()
        for ev in pg.event.get((pg.KEYDOWN, pg.KEYUP, pg.WINDOWFOCUSLOST, pg.QUIT)):
            if ev.type == pg.KEYDOWN:
                self._held.add(ev.key)
                out.pressed.add(ev.key)
            elif ev.type == pg.KEYUP:
                self._held.discard(ev.key)
            elif ev.type == pg.WINDOWFOCUSLOST:
                self._held.clear()  # an unfocused window hears no key-up: release everything
            else:
                out.closed = True
        out.held = self._held | out.pressed
        return out

    def events(self, keys: KeyPoll) -> set[TeleopEvent]:
        """The edge events of a poll (INTERVENE, a level, is the caller's)."""
        events: set[TeleopEvent] = {
            e for e, code in self.codes.items() if e is not TeleopEvent.INTERVENE and code in keys.pressed
        }
        if keys.closed:
            events.add(TeleopEvent.QUIT)
        return events

    def close(self) -> None:
        if self.pg is not None and self._owns_window:
            self.pg.display.quit()
        self.pg = None
        self._owns_window = False


class KeyboardDevice(HandDevice):
    """Drive a task from the keyboard (see the module docstring for the keys)."""

    name = "keyboard"

    def __init__(
        self,
        task_cfg: TaskCfg,
        *,
        bindings: Mapping[str, str] | None = None,
        scale: float = 0.5,
        drone_mode: DroneMode = "velocity",
    ) -> None:
        super().__init__(task_cfg, scale=scale, drone_mode=drone_mode)
        self.keys = KeyReader(self.name, bindings, (*MOTION_KEYS, GRIPPER_KEY))
        self._motion: dict[int, tuple[int, float]] = {}
        self._gripper_code = -1

    def connect(self) -> None:
        pg = self.keys.open()
        self._motion = {pg.key.key_code(name): axis for name, axis in MOTION_KEYS.items()}
        self._gripper_code = pg.key.key_code(GRIPPER_KEY)

    def read(self, obs: ObsDict) -> TeleopCommand:
        keys = self.keys.poll()
        twist = np.zeros(6)
        for code in keys.held & self._motion.keys():
            axis, direction = self._motion[code]
            twist[axis] += direction
        grip = (not self.gripper_closed) if self._gripper_code in keys.pressed else None
        deadman = self.keys.codes[TeleopEvent.INTERVENE] in keys.held
        return self.command(
            obs, np.clip(twist, -1.0, 1.0), grip=grip, deadman=deadman, events=self.keys.events(keys)
        )

    def disconnect(self) -> None:
        self.keys.close()


class KeyboardEvents(Device):
    """Only the keyboard's event keys (success, failure, re-record, quit), never an action.

    Shown beside a gamepad or SpaceMouse, whose few buttons go to driving and the gripper.
    """

    name = "keyboard events"

    def __init__(self, task_cfg: TaskCfg | None = None, *, bindings: Mapping[str, str] | None = None) -> None:
        self.keys = KeyReader(self.name, bindings, ())

    def connect(self) -> None:
        self.keys.open()

    def read(self, obs: ObsDict) -> TeleopCommand:
        return TeleopCommand(None, False, frozenset(self.keys.events(self.keys.poll())))

    def disconnect(self) -> None:
        self.keys.close()
