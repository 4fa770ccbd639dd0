"""3Dconnexion SpaceMouse teleoperation: pyspacemouse 2.1.0 over the hidapi C library.

Both are imported when the device connects, so robolearn runs without them. Axes are read in
ROS's convention, which is the twist's: x away from the person, y to the left, z up, and rotations
about them. Default bindings:

=================================  ===============================================================
input                              does
=================================  ===============================================================
push / pull, slide, lift / press   x, y, z
tilt and twist                     roll, pitch, yaw
left button (0)                    close the gripper (as SERL's SpaceMouse expert)
right button (1)                   open the gripper
any axis beyond ``deadzone``       intervene (HIL-SERL's rule: any input takes over)
either button, at a robot waiting   the scene is reset: start the next episode (HIL-SERL's reset
at its reset pose                  confirmation, ``--robot ros --robot-reset operator``)
success, failure, re-record, quit  the keyboard keys in the simulation window (y, n, backspace,
                                   escape); models with more buttons can bind them by number:
                                   ``bindings={"success": 2, ...}``
=================================  ===============================================================

On Linux a plugged-in SpaceMouse can only be read through a readable ``/dev/hidraw*`` node; the
usual cause of "found but cannot be opened" is a missing udev rule, e.g.
``KERNEL=="hidraw*", ATTRS{idVendor}=="256f", MODE="0666"`` (vendor ``046d`` for older models) in
``/etc/udev/rules.d/99-spacemouse.rules``, then ``udevadm control --reload && udevadm trigger``.
"""

from __future__ import annotations

import contextlib
import glob
import io
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from robolearn.tasks.core import TaskCfg
from robolearn.teleop.device import (
    DeviceError,
    ObsDict,
    TeleopCommand,
    TeleopEvent,
    import_optional,
    resolve_bindings,
)
from robolearn.teleop.mapping import TWIST_AXES, DroneMode, HandDevice, apply_deadzone

CLOSE_BUTTON, OPEN_BUTTON = 0, 1
INSTALL = (
    "pip install 'robolearn[teleop]' (pyspacemouse==2.1.0), and the hidapi C library "
    "(Debian/Ubuntu: apt install libhidapi-hidraw0)"
)
UDEV_HINT = (
    'a udev rule KERNEL=="hidraw*", ATTRS{idVendor}=="256f", MODE="0666" (046d for older models) '
    "makes its /dev/hidraw* node readable"
)
MAX_REPORTS_PER_READ = 32
"""HID reports drained per step: the puck reports at about 60-120 Hz, the loop runs at 10-50 Hz."""


class SpaceMouseDevice(HandDevice):
    """Drive a task from a 3Dconnexion SpaceMouse (see the module docstring for the bindings)."""

    name = "spacemouse"

    def __init__(
        self,
        task_cfg: TaskCfg,
        *,
        path: str | None = None,
        bindings: Mapping[str, int] | None = None,
        deadzone: float = 0.05,
        scale: float = 1.0,
        drone_mode: DroneMode = "velocity",
    ) -> None:
        super().__init__(task_cfg, scale=scale, drone_mode=drone_mode, deadzone=deadzone)
        self.path = path
        self.bindings = resolve_bindings(self.name, {}, bindings)
        self.mouse: Any = None
        self._hid_error: type[Exception] = Exception
        self._held: set[int] = set()
        self._awaiting_reset = False

    def scene_reset_requested(self) -> None:
        self._awaiting_reset = True

    def connect(self) -> None:
        psm = import_optional("pyspacemouse", self.name, INSTALL)
        self._hid_error = import_optional("easyhid", self.name, INSTALL).HIDException
        try:
            found: dict[str, str] = psm.get_connected_devices_by_path()
        except RuntimeError:
            raise DeviceError(
                "spacemouse: the hidapi C library was not found (pyspacemouse reads HID devices through "
                "it); install it: apt install libhidapi-hidraw0 (macOS: brew install hidapi)"
            ) from None
        if self.path is not None:
            found = {p: n for p, n in found.items() if p == self.path}
        if not found:
            models = len(psm.get_supported_devices())
            hid = len(psm.get_all_hid_devices())
            where = f" at {self.path}" if self.path else ""
            hint = ""
            if sys.platform == "linux":
                nodes = len(glob.glob("/dev/hidraw*"))
                hint = f"; this machine has {nodes} /dev/hidraw* node(s): if it is plugged in, {UDEV_HINT}"
            raise DeviceError(
                f"spacemouse: no 3Dconnexion SpaceMouse{where} among {hid} HID device(s) (looked for "
                f"{models} models by USB vendor 0x256f/0x046d and product id){hint}"
            )
        path, model = next(iter(found.items()))
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # pyspacemouse prints what it opens
                self.mouse = psm.open_by_path(path, axis_convention=psm.AxisConvention.ROS, nonblocking=True)
        except (RuntimeError, OSError, ValueError) as exc:
            raise DeviceError(
                f"spacemouse: {model} found at {path} but cannot be opened ({exc}); {UDEV_HINT}"
            ) from None
        self._held.clear()

    def read(self, obs: ObsDict) -> TeleopCommand:
        if self.mouse is None:
            raise DeviceError("spacemouse: read before connect()")
        # Non-blocking reads; each returns one report, so drain what arrived since the last step.
        try:
            state = self.mouse.read()
            for _ in range(MAX_REPORTS_PER_READ - 1):
                last = state.t  # the report's time stamp: unchanged when nothing was read
                state = self.mouse.read()
                if state.t == last:
                    break
        except self._hid_error as exc:
            raise DeviceError(f"spacemouse: reading failed ({exc}): unplugged?") from None
        twist = apply_deadzone(np.array([getattr(state, axis) for axis in TWIST_AXES]), self.deadzone)
        buttons = {i for i, down in enumerate(state.buttons) if down}
        pressed, self._held = buttons - self._held, buttons
        grip = True if CLOSE_BUTTON in buttons else False if OPEN_BUTTON in buttons else None
        events = {e for e, b in self.bindings.items() if e is not TeleopEvent.INTERVENE and b in pressed}
        if self._awaiting_reset and pressed:  # the robot waits at its reset pose: any button confirms
            self._awaiting_reset = False
            events.add(TeleopEvent.RESET_DONE)
        deadman = TeleopEvent.INTERVENE in self.bindings and self.bindings[TeleopEvent.INTERVENE] in buttons
        return self.command(obs, twist, grip=grip, deadman=deadman, events=events)

    def disconnect(self) -> None:
        if self.mouse is not None:
            self.mouse.close()
        self.mouse = None
