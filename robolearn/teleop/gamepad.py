"""Gamepad teleoperation through pygame's joystick API, or evdev on Linux.

Default bindings, for an Xbox-style layout (buttons are named by position: ``south`` (A),
``east`` (B), ``west`` (X), ``north`` (Y), ``lb``, ``rb``, ``select`` (Back/View), ``start``,
``mode`` (Guide); an int is a raw button number: pygame's index or evdev's key code). Events can be
rebound with ``bindings={"success": "north", ...}``:

======================  =======================================================
input                   does
======================  =======================================================
left stick up / down    +x / -x (forward / back)
left stick left / right +y / -y
right stick up / down   +z / -z
right stick left/right  +yaw / -yaw
right trigger           close the gripper (latched)
left trigger            open the gripper (latched)
rb (held)               intervene: take over while holding still (deadman)
south (A)               success
east (B)                failure
west (X)                re-record
select (Back)           quit
======================  =======================================================

A stick beyond ``deadzone`` (default 0.1) or a trigger past half-way is an intervention too
(HIL-SERL's rule). ``backend="auto"`` tries pygame, then evdev. State is kept from the device's
events, read without blocking; an unplugged pad raises :class:`DeviceError`.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from robolearn.tasks.core import TaskCfg
from robolearn.teleop.device import (
    INSTALL_PYGAME,
    DeviceError,
    ObsDict,
    TeleopCommand,
    TeleopEvent,
    import_optional,
    resolve_bindings,
)
from robolearn.teleop.mapping import DroneMode, HandDevice, apply_deadzone

GamepadBackend = Literal["auto", "pygame", "evdev"]

Button = str | int

DEFAULT_BINDINGS: dict[TeleopEvent, Button] = {
    TeleopEvent.INTERVENE: "rb",
    TeleopEvent.SUCCESS: "south",
    TeleopEvent.FAILURE: "east",
    TeleopEvent.RERECORD: "west",
    TeleopEvent.QUIT: "select",
    TeleopEvent.RESET_DONE: "start",
}
"""Event to button; INTERVENE is held, the others pressed."""

BUTTON_NAMES = ("south", "east", "west", "north", "lb", "rb", "select", "start", "mode")
"""Named buttons, in the order of SDL's joystick indices for an Xbox pad on Linux."""

# evdev key codes of the named buttons (linux/input-event-codes.h).
EVDEV_BUTTONS = {
    "south": 304,
    "east": 305,
    "north": 307,
    "west": 308,
    "lb": 310,
    "rb": 311,
    "select": 314,
    "start": 315,
    "mode": 316,
}
# Axis names: sticks in [-1, 1] (up and left negative, as both APIs report them), triggers in [0, 1].
PYGAME_AXES = {0: "lx", 1: "ly", 2: "lt", 3: "rx", 4: "ry", 5: "rt"}
EVDEV_AXES = {0: "lx", 1: "ly", 2: "lt", 3: "rx", 4: "ry", 5: "rt"}  # ABS_X, Y, Z, RX, RY, RZ
TRIGGERS = ("lt", "rt")

INSTALL_EVDEV = "pip install 'robolearn[teleop]' (evdev==2.0.0)"


@dataclass
class PadState:
    """A pad's axes and buttons, kept from its events."""

    axes: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PYGAME_AXES.values(), 0.0))
    """Axis name to value: sticks in [-1, 1], triggers in [0, 1]."""
    held: set[Button] = field(default_factory=set)
    """Buttons down (by name where named, else raw number)."""
    pressed: set[Button] = field(default_factory=set)
    """Buttons that went down since the last read (cleared by the device after each read)."""

    def button(self, name: Button, down: bool) -> None:
        if down:
            self.held.add(name)
            self.pressed.add(name)
        else:
            self.held.discard(name)


def _pygame_axis(name: str, value: float) -> float:
    # SDL reports triggers from -1 (released) to 1.
    return (float(value) + 1.0) / 2.0 if name in TRIGGERS else float(value)


class PygamePad:
    """A joystick through pygame (SDL); events come through pygame's event queue."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.pg: Any = import_optional("pygame", "gamepad", INSTALL_PYGAME)
        self.joystick: Any = None

    def open(self, state: PadState) -> str:
        pg = self.pg
        pg.joystick.init()
        count = pg.joystick.get_count()
        if count <= self.index:
            raise DeviceError(
                f"gamepad: pygame sees {count} joystick(s), wanted index {self.index}"
                + ("" if count else " (plugged in? SDL needs read access to /dev/input/event*)")
            )
        # SDL delivers joystick events through the video subsystem's queue; without a display it
        # falls back to an invisible driver, which is all this needs.
        pg.display.init()
        self.joystick = pg.joystick.Joystick(self.index)
        pg.event.pump()
        for i, name in PYGAME_AXES.items():
            if i < self.joystick.get_numaxes():
                state.axes[name] = _pygame_axis(name, self.joystick.get_axis(i))
        return str(self.joystick.get_name())

    @property
    def instance_id(self) -> int:
        return int(self.joystick.get_instance_id()) if self.joystick is not None else -1

    def handle(self, ev: Any, state: PadState) -> None:
        """Apply one pygame joystick event to ``state``."""
        pg = self.pg
        if ev.type == pg.JOYAXISMOTION and ev.axis in PYGAME_AXES:
            name = PYGAME_AXES[ev.axis]
            state.axes[name] = _pygame_axis(name, ev.value)
        elif ev.type in (pg.JOYBUTTONDOWN, pg.JOYBUTTONUP):
            name = BUTTON_NAMES[ev.button] if ev.button < len(BUTTON_NAMES) else ev.button
            state.button(name, ev.type == pg.JOYBUTTONDOWN)
        elif ev.type == pg.JOYDEVICEREMOVED:
            raise DeviceError(f"gamepad: joystick {self.index} was unplugged")

    def poll(self, state: PadState) -> None:
        pg = self.pg
        kinds = (pg.JOYAXISMOTION, pg.JOYBUTTONDOWN, pg.JOYBUTTONUP, pg.JOYDEVICEREMOVED)
        for ev in pg.event.get(kinds):
            if getattr(ev, "instance_id", self.instance_id) == self.instance_id:
                self.handle(ev, state)

    def close(self) -> None:
        if self.joystick is not None:
            self.joystick.quit()
        self.joystick = None


class EvdevPad:
    """A gamepad's Linux input device (``/dev/input/event*``), read without blocking."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.dev: Any = None
        self.ecodes: Any = None
        self._ranges: dict[int, tuple[int, int]] = {}

    def open(self, state: PadState) -> str:
        evdev = import_optional("evdev", "gamepad", INSTALL_EVDEV)
        self.ecodes = evdev.ecodes
        paths = [self.path] if self.path else evdev.list_devices()
        for path in paths:
            try:
                dev = evdev.InputDevice(path)
            except OSError as exc:
                if self.path:
                    raise DeviceError(f"gamepad: cannot open {path}: {exc.strerror}") from None
                continue
            caps = dev.capabilities()
            if EVDEV_BUTTONS["south"] in caps.get(evdev.ecodes.EV_KEY, ()) and any(
                code == 0 for code, _ in caps.get(evdev.ecodes.EV_ABS, ())
            ):
                self.dev = dev
                break
            dev.close()
        if self.dev is None:
            where = self.path or "/dev/input"
            raise DeviceError(
                f"gamepad: evdev sees no gamepad (ABS_X and BTN_SOUTH) among {len(paths)} readable input "
                f"device(s) in {where}" + ("" if paths else " (is your user in the 'input' group?)")
            )
        for code in EVDEV_AXES:
            try:
                info = self.dev.absinfo(code)
            except OSError:
                continue
            self._ranges[code] = (info.min, info.max)
            self._axis(code, info.value, state)
        return str(self.dev.name)

    def _axis(self, code: int, value: int, state: PadState) -> None:
        lo, hi = self._ranges[code]
        unit = (value - lo) / max(hi - lo, 1)
        name = EVDEV_AXES[code]
        state.axes[name] = unit if name in TRIGGERS else 2.0 * unit - 1.0

    def poll(self, state: PadState) -> None:
        names = {code: name for name, code in EVDEV_BUTTONS.items()}
        try:
            for ev in self.dev.read():
                if ev.type == self.ecodes.EV_ABS and ev.code in self._ranges:
                    self._axis(ev.code, ev.value, state)
                elif ev.type == self.ecodes.EV_KEY and ev.value in (0, 1):  # 2 is auto-repeat
                    state.button(names.get(ev.code, ev.code), ev.value == 1)
        except BlockingIOError:
            return  # nothing new
        except OSError as exc:
            raise DeviceError(
                f"gamepad: reading {self.dev.path} failed ({exc.strerror}): unplugged?"
            ) from None

    def close(self) -> None:
        if self.dev is not None:
            self.dev.close()
        self.dev = None


class GamepadDevice(HandDevice):
    """Drive a task from a gamepad (see the module docstring for the bindings)."""

    name = "gamepad"

    def __init__(
        self,
        task_cfg: TaskCfg,
        *,
        backend: GamepadBackend = "auto",
        index: int = 0,
        path: str | None = None,
        bindings: Mapping[str, Button] | None = None,
        deadzone: float = 0.1,
        scale: float = 1.0,
        drone_mode: DroneMode = "velocity",
    ) -> None:
        super().__init__(task_cfg, scale=scale, drone_mode=drone_mode, deadzone=deadzone)
        if backend not in ("auto", "pygame", "evdev"):
            raise DeviceError(f"gamepad: backend must be auto, pygame or evdev, got {backend!r}")
        self.backend, self.index, self.path = backend, index, path
        self.bindings = resolve_bindings(self.name, DEFAULT_BINDINGS, bindings)
        self.state = PadState()
        self.pad: PygamePad | EvdevPad | None = None

    def connect(self) -> None:
        self.state = PadState()
        failures = []
        for kind in ("pygame", "evdev") if self.backend == "auto" else (self.backend,):
            if kind == "evdev" and sys.platform != "linux":
                failures.append("evdev works on Linux only")
                continue
            try:
                pad: PygamePad | EvdevPad = PygamePad(self.index) if kind == "pygame" else EvdevPad(self.path)
                pad.open(self.state)
            except DeviceError as exc:
                failures.append(str(exc).removeprefix("gamepad: "))
                continue
            self.pad = pad
            return
        raise DeviceError("gamepad: no gamepad found: " + "; ".join(failures))

    def read(self, obs: ObsDict) -> TeleopCommand:
        if self.pad is None:
            raise DeviceError("gamepad: read before connect()")
        self.pad.poll(self.state)
        return self.command_for(self.state, obs)

    def command_for(self, state: PadState, obs: ObsDict) -> TeleopCommand:
        """The command for a pad state; clears the state's presses."""
        a = state.axes
        twist = apply_deadzone(np.array([-a["ly"], -a["lx"], -a["ry"], 0.0, 0.0, -a["rx"]]), self.deadzone)
        grip = True if a["rt"] > 0.5 else False if a["lt"] > 0.5 else None
        events = {
            e for e, b in self.bindings.items() if e is not TeleopEvent.INTERVENE and b in state.pressed
        }
        deadman = self.bindings[TeleopEvent.INTERVENE] in state.held
        state.pressed.clear()
        return self.command(obs, twist, grip=grip, deadman=deadman, events=events)

    def disconnect(self) -> None:
        if self.pad is not None:
            self.pad.close()
        self.pad = None
