"""Teleoperation devices through what this machine offers.

The keyboard and gamepad run on pygame's dummy video driver with posted events (pygame cannot
make a virtual joystick); evdev runs on a uinput virtual gamepad where /dev/uinput is writable,
else it is skipped with the reason; a SpaceMouse that is not there must give one clear line.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from types import ModuleType

import numpy as np
import pytest

from robolearn.envs.task_env import TaskEnv
from robolearn.tasks import make_task_cfg
from robolearn.tasks.core import TaskCfg
from robolearn.teleop import DeviceError, TeleopEvent, make_device
from robolearn.teleop.gamepad import GamepadDevice, PadState, PygamePad
from robolearn.teleop.mapping import ActionMapper
from robolearn.teleop.scripted import InterventionSchedule, ScriptedDevice


def _first_obs(cfg: TaskCfg) -> dict[str, np.ndarray]:
    env = TaskEnv(cfg, "mujoco", 1, autoreset=False)
    obs, _ = env.reset(seed=0)
    env.close()
    return {k: v[0] for k, v in obs.items()}


@pytest.fixture
def pygame_dummy(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    pg = pytest.importorskip("pygame")
    yield pg
    pg.display.quit()


# -- registry --------------------------------------------------------------------------------------
def test_make_device_refuses_unknown_names_and_options() -> None:
    cfg = make_task_cfg("panda_reach")
    with pytest.raises(DeviceError, match="unknown device 'joystick'; devices: keyboard, gamepad"):
        make_device("joystick", cfg)
    with pytest.raises(DeviceError, match=r"device keyboard takes options \['bindings', 'scale'"):
        make_device("keyboard", cfg, speed=2)
    with pytest.raises(DeviceError, match="no event 'jump' to bind"):
        make_device("keyboard", cfg, bindings={"jump": "j"})
    with pytest.raises(DeviceError, match="bound twice"):
        make_device("keyboard", cfg, bindings={"success": "w"})
    for name in ("gamepad", "spacemouse"):
        with pytest.raises(DeviceError, match=rf"^{name}: deadzone must be in \[0, 1\), got 1.5$"):
            make_device(name, cfg, deadzone=1.5)


# -- mapping ---------------------------------------------------------------------------------------
def _twist(**axes: float) -> np.ndarray:
    names = ("x", "y", "z", "roll", "pitch", "yaw")
    return np.array([axes.get(n, 0.0) for n in names])


def test_arm_and_car_mappings_reach_the_bounds() -> None:
    arm = make_task_cfg("panda_pick_cube")
    obs = _first_obs(arm)
    m = ActionMapper(arm)
    np.testing.assert_allclose(m(_twist(), False, obs), arm.action.neutral)
    np.testing.assert_allclose(m(_twist(x=1, y=-1, z=1), False, obs), [0.02, -0.02, 0.02, 0.08])
    np.testing.assert_allclose(m(_twist(z=-0.5), True, obs), [0.0, 0.0, -0.01, 0.0])
    np.testing.assert_allclose(ActionMapper(arm, scale=0.5)(_twist(x=1), False, obs)[0], 0.01)

    car = make_task_cfg("car_checkpoints")
    m = ActionMapper(car)
    # Asymmetric bounds: forward reaches 3 m/s, backward 1 m/s; left steers positive.
    np.testing.assert_allclose(m(_twist(x=1, y=1), False, {}), [3.0, 0.5])
    np.testing.assert_allclose(m(_twist(x=-1, y=-1), False, {}), [-1.0, -0.5])
    np.testing.assert_allclose(m(_twist(x=-0.5), False, {}), [-0.5, 0.0])


def test_drone_rates_mapping_is_centred_on_hover() -> None:
    cfg = make_task_cfg("quadrotor_hover")
    m = ActionMapper(cfg, drone_mode="rates")
    hover = cfg.action.neutral[0]
    np.testing.assert_allclose(m(_twist(), False, {}), [hover, 0, 0, 0])
    np.testing.assert_allclose(m(_twist(z=1, x=1, yaw=-1), False, {}), [cfg.action.high[0], 0, 10, -5])
    # Stick left (+y) rolls left: a negative roll rate.
    np.testing.assert_allclose(m(_twist(z=-1, y=1), False, {}), [0.0, -10, 0, 0])


def test_drone_velocity_mode_tracks_the_setpoint_in_simulation() -> None:
    cfg = make_task_cfg("quadrotor_hover")
    m = ActionMapper(cfg, drone_mode="velocity")
    env = TaskEnv(cfg, "mujoco", 1, autoreset=False)
    for twist, want in (
        (_twist(), [0, 0, 0]),
        (_twist(x=0.5), [0.5, 0, 0]),
        (_twist(y=-0.3, z=0.4), [0, -0.3, 0.4]),
    ):
        obs, _ = env.reset(seed=1)
        for _ in range(75):  # 1.5 s
            obs, _, terminated, truncated, _ = env.step(
                m(twist, False, {k: v[0] for k, v in obs.items()})[None]
            )
            assert not (terminated[0] or truncated[0])
        np.testing.assert_allclose(obs["linvel"][0], want, atol=0.08)
    env.close()


def test_hand_devices_refuse_legged_tasks() -> None:
    with pytest.raises(DeviceError, match="ant is legged; hand-held devices drive arm, drone and car"):
        make_device("gamepad", make_task_cfg("ant"))
    with pytest.raises(DeviceError, match=r"scale must be in \(0, 1\]"):
        make_device("spacemouse", make_task_cfg("panda_reach"), scale=2.0)


# -- keyboard --------------------------------------------------------------------------------------
def test_keyboard_keys_drive_the_arm_and_mark_episodes(pygame_dummy: ModuleType) -> None:
    pg = pygame_dummy
    cfg = make_task_cfg("panda_pick_cube")
    obs = _first_obs(cfg)

    def key(name: str, down: bool = True) -> None:
        pg.event.post(pg.event.Event(pg.KEYDOWN if down else pg.KEYUP, key=pg.key.key_code(name)))

    with make_device("keyboard", cfg) as dev:
        idle = dev.read(obs)
        assert not idle.intervening and idle.events == frozenset()
        np.testing.assert_allclose(idle.action, [0, 0, 0, 0.08])  # hold still, gripper open

        key("w")
        cmd = dev.read(obs)
        assert cmd.intervening and cmd.events == {TeleopEvent.INTERVENE}
        np.testing.assert_allclose(cmd.action, [0.01, 0, 0, 0.08])  # scale 0.5 of the 2 cm bound
        key("a")
        np.testing.assert_allclose(dev.read(obs).action, [0.01, 0.01, 0, 0.08])  # w still held
        key("w", down=False)
        key("a", down=False)
        assert not dev.read(obs).intervening

        key("f")
        key("f", down=False)  # a tap within one step still moves for that step
        np.testing.assert_allclose(dev.read(obs).action, [0, 0, -0.01, 0.08])

        key("space")
        key("space", down=False)
        toggled = dev.read(obs)
        assert toggled.intervening and toggled.action[3] == 0.0
        latched = dev.read(obs)
        assert not latched.intervening and latched.action[3] == 0.0  # stays closed

        key("left shift")  # deadman: take over while holding still
        held = dev.read(obs)
        assert held.intervening
        np.testing.assert_allclose(held.action, [0, 0, 0, 0.0])
        key("left shift", down=False)

        for name, event in (("y", TeleopEvent.SUCCESS), ("n", TeleopEvent.FAILURE)):
            key(name)
            assert dev.read(obs).events == {event}
            assert dev.read(obs).events == frozenset()  # once per press, not while held
            key(name, down=False)
        key("backspace")
        assert TeleopEvent.RERECORD in dev.read(obs).events
        key("escape")
        assert TeleopEvent.QUIT in dev.read(obs).events
        pg.event.post(pg.event.Event(pg.QUIT))
        assert TeleopEvent.QUIT in dev.read(obs).events

        key("w")
        assert dev.read(obs).intervening
        pg.event.post(pg.event.Event(pg.WINDOWFOCUSLOST))  # the key-up goes elsewhere
        assert not dev.read(obs).intervening

        dev.reset()  # a new episode: the task reopens the gripper
        assert dev.read(obs).action[3] == 0.08
    with pytest.raises(DeviceError, match="keyboard: unknown key name 'nokey'"):
        make_device("keyboard", cfg, bindings={"success": "nokey"}).connect()


def test_keyboard_needs_a_display(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pygame")
    for var in ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER"):
        monkeypatch.delenv(var, raising=False)
    if sys.platform != "linux":
        pytest.skip("desktop platforms always have a display")
    dev = make_device("keyboard", make_task_cfg("panda_reach"))
    with pytest.raises(DeviceError, match="keyboard: no display for the pygame window"):
        dev.connect()


# -- gamepad ---------------------------------------------------------------------------------------
def test_gamepad_events_map_to_commands(pygame_dummy: ModuleType) -> None:
    pg = pygame_dummy
    pg.display.init()
    arm = make_task_cfg("panda_pick_cube")
    obs = _first_obs(arm)
    dev = GamepadDevice(arm, backend="pygame")
    pad, state = PygamePad(0), PadState()

    def send(kind: int, **fields: float) -> None:
        pg.event.post(pg.event.Event(kind, instance_id=0, joy=0, **fields))
        for ev in pg.event.get((pg.JOYAXISMOTION, pg.JOYBUTTONDOWN, pg.JOYBUTTONUP, pg.JOYDEVICEREMOVED)):
            pad.handle(ev, state)

    idle = dev.command_for(state, obs)
    assert not idle.intervening
    np.testing.assert_allclose(idle.action, [0, 0, 0, 0.08])
    send(pg.JOYAXISMOTION, axis=1, value=-1.0)  # left stick fully up: forward
    send(pg.JOYAXISMOTION, axis=0, value=0.55)  # half right: -y, past the 0.1 deadzone
    cmd = dev.command_for(state, obs)
    assert cmd.intervening
    np.testing.assert_allclose(cmd.action, [0.02, -0.01, 0, 0.08])
    send(pg.JOYAXISMOTION, axis=1, value=0.05)  # within the deadzone: at rest
    send(pg.JOYAXISMOTION, axis=0, value=-0.08)
    assert not dev.command_for(state, obs).intervening
    send(pg.JOYAXISMOTION, axis=5, value=1.0)  # right trigger: close
    assert dev.command_for(state, obs).action[3] == 0.0
    send(pg.JOYAXISMOTION, axis=5, value=-1.0)  # released: the gripper stays closed
    cmd = dev.command_for(state, obs)
    assert cmd.action[3] == 0.0 and not cmd.intervening
    send(pg.JOYBUTTONDOWN, button=5)  # rb: deadman
    assert dev.command_for(state, obs).intervening
    send(pg.JOYBUTTONUP, button=5)
    send(pg.JOYBUTTONDOWN, button=0)  # south: success, once
    assert dev.command_for(state, obs).events == {TeleopEvent.SUCCESS}
    assert dev.command_for(state, obs).events == frozenset()
    send(pg.JOYBUTTONDOWN, button=6)
    assert dev.command_for(state, obs).events == {TeleopEvent.QUIT}
    with pytest.raises(DeviceError, match="joystick 0 was unplugged"):
        send(pg.JOYDEVICEREMOVED)


def test_missing_gamepad_is_one_clear_line(pygame_dummy: ModuleType) -> None:
    dev = make_device("gamepad", make_task_cfg("car_checkpoints"), backend="pygame")
    if pygame_dummy.joystick.get_init() and pygame_dummy.joystick.get_count() > 0:
        pytest.skip("a joystick is plugged in")
    with pytest.raises(DeviceError, match=r"gamepad: no gamepad found: pygame sees 0 joystick\(s\)"):
        dev.connect()
    if sys.platform == "linux":
        pytest.importorskip("evdev")
        with pytest.raises(DeviceError, match="cannot open /dev/input/event999"):
            make_device(
                "gamepad", make_task_cfg("car_checkpoints"), backend="evdev", path="/dev/input/event999"
            ).connect()


def test_gamepad_through_an_evdev_virtual_device() -> None:
    evdev = pytest.importorskip("evdev")
    if not os.access("/dev/uinput", os.W_OK):
        pytest.skip("/dev/uinput is missing or not writable here: no virtual gamepad can be made")
    e = evdev.ecodes
    stick = evdev.AbsInfo(value=0, min=-32768, max=32767, fuzz=0, flat=0, resolution=0)
    trigger = evdev.AbsInfo(value=0, min=0, max=255, fuzz=0, flat=0, resolution=0)
    caps = {
        e.EV_KEY: [e.BTN_SOUTH, e.BTN_EAST, e.BTN_WEST, e.BTN_TR, e.BTN_SELECT],
        e.EV_ABS: [(c, stick) for c in (e.ABS_X, e.ABS_Y, e.ABS_RX, e.ABS_RY)]
        + [(e.ABS_Z, trigger), (e.ABS_RZ, trigger)],
    }
    cfg = make_task_cfg("panda_pick_cube")
    obs = _first_obs(cfg)
    with evdev.UInput(caps, name="robolearn virtual gamepad") as ui:
        time.sleep(0.3)  # udev creates the node
        with make_device("gamepad", cfg, backend="evdev", path=ui.device.path) as dev:
            assert not dev.read(obs).intervening
            ui.write(e.EV_ABS, e.ABS_Y, -32768)
            ui.write(e.EV_ABS, e.ABS_RZ, 255)
            ui.syn()
            time.sleep(0.05)
            cmd = dev.read(obs)
            assert cmd.intervening
            np.testing.assert_allclose(cmd.action, [0.02, 0, 0, 0.0], atol=1e-3)
            ui.write(e.EV_KEY, e.BTN_SOUTH, 1)
            ui.syn()
            time.sleep(0.05)
            assert TeleopEvent.SUCCESS in dev.read(obs).events


# -- spacemouse ------------------------------------------------------------------------------------
def test_missing_spacemouse_is_one_clear_line() -> None:
    dev = make_device("spacemouse", make_task_cfg("panda_pick_cube"))
    start = time.monotonic()
    try:
        dev.connect()
    except DeviceError as exc:
        msg = str(exc)
    else:
        dev.disconnect()
        pytest.skip("a SpaceMouse is plugged in")
    assert time.monotonic() - start < 5.0
    assert "\n" not in msg and msg.startswith("spacemouse: ")
    if "pyspacemouse package" in msg or "hidapi C library" in msg:
        assert "install" in msg  # what is missing is software, and the message says how to get it
    else:
        assert "no 3Dconnexion SpaceMouse among" in msg and "HID device" in msg
        if sys.platform == "linux":
            assert "udev rule" in msg and "/dev/hidraw" in msg


# -- scripted --------------------------------------------------------------------------------------
def test_scripted_device_intervenes_exactly_on_schedule() -> None:
    cfg = make_task_cfg("panda_reach")
    expert = cfg.expert(cfg) if cfg.expert else None
    assert expert is not None
    env = TaskEnv(cfg, "mujoco", 1, autoreset=False)
    with ScriptedDevice(cfg, schedule=InterventionSchedule(steps=(3, 7), every=2)) as dev:
        for episode in range(5):
            obs, _ = env.reset(seed=episode)
            dev.reset()
            flags = []
            for _ in range(10):
                one = {k: v[0] for k, v in obs.items()}
                cmd = dev.read(one)
                np.testing.assert_allclose(cmd.action, expert(obs)[0])
                assert (TeleopEvent.INTERVENE in cmd.events) == cmd.intervening
                flags.append(cmd.intervening)
                obs, *_ = env.step(cmd.action[None])
            assert flags == [episode % 2 == 0 and 3 <= t < 7 for t in range(10)], episode
    env.close()


def test_intervention_probability_is_deterministic_by_seed() -> None:
    picks = [InterventionSchedule(probability=0.3, seed=1).episode_selected(e) for e in range(400)]
    assert 0.22 < np.mean(picks) < 0.38
    assert picks == [InterventionSchedule(probability=0.3, seed=1).episode_selected(e) for e in range(400)]
    assert picks != [InterventionSchedule(probability=0.3, seed=2).episode_selected(e) for e in range(400)]

    cfg = make_task_cfg("panda_reach")
    obs = _first_obs(cfg)
    schedule = InterventionSchedule(steps=(1, 2), every=3, probability=0.5, seed=7)
    with ScriptedDevice(cfg, schedule=schedule) as dev:
        for episode in range(30):
            dev.reset()
            flags = [dev.read(obs).intervening for _ in range(3)]
            assert flags == [False, schedule.intervenes(episode, 1), False]
            assert flags[1] == (episode % 3 == 0 and schedule.episode_selected(episode))


def test_scripted_device_checks_its_options() -> None:
    cfg = make_task_cfg("panda_reach")
    with pytest.raises(DeviceError, match=r"steps \[a, b\) need 0 <= a < b"):
        make_device("scripted", cfg, schedule=InterventionSchedule(steps=(5, 5)))
    with pytest.raises(DeviceError, match="probability must be in"):
        make_device("scripted", cfg, schedule=InterventionSchedule(probability=1.5))
    with pytest.raises(DeviceError, match="runs/none does not exist"):
        make_device("scripted", cfg, policy="runs/none").connect()
