"""``robolearn record``: episodes driven from a teleoperation device, written as a LeRobot dataset.

One world of the task runs in simulation. Every control step the device is read with the
current observation; its action drives the world (or, with ``--policy``, the policy drives and
the device's action replaces it while the person intervenes, as in HIL-SERL), and the step is
recorded with :class:`robolearn.data.episodes.EpisodeWriter`, flagged ``is_intervention`` where the
person drove. Frames are added one step late, so a success or failure the person marks after
seeing a step's outcome lands on that step's frame. The episode's initial state is drawn from
the seed and the episode's index in the dataset, so a re-recorded episode starts where the
discarded one did.

Without a person (``--policy scripted|random|RUN_DIR``, no device) the recorder makes datasets by
itself: every camera of a pixel task goes to its own mp4 feature ``observation.images.<camera>``
(a pixel task's scripted policy is its state task's expert on privileged state,
:mod:`robolearn.tasks.teacher`), and ``--action-noise`` perturbs the policy, so the expert at several
noise levels, random and failed episodes make the mixed-quality datasets of issue 11; each episode's
row records its policy and noise.

The simulation is shown in a pygame window where there is a display (the keyboard device reads
its keys there; beside a gamepad or SpaceMouse the window's keys mark episodes); elsewhere a
frame is written as PNG every few seconds beside the dataset and the progress line tells the rest.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym
import numpy as np
import numpy.typing as npt

from robolearn.data.episodes import EpisodeWriter
from robolearn.data.format import ACTION, IMAGES, OBS
from robolearn.data.reader import read_dataset
from robolearn.data.writer import DatasetWriter
from robolearn.envs.task_env import TaskEnv
from robolearn.errors import RobolearnError
from robolearn.hil.config import RecordCmd
from robolearn.sim.backend import FloatArray
from robolearn.tasks import make_task_cfg
from robolearn.tasks.cameras import image_specs
from robolearn.tasks.core import Observation, TaskCfg
from robolearn.tasks.sim_params import apply_sim_params, load_sim_params
from robolearn.tasks.teacher import privileged_expert, teacher_task
from robolearn.teleop.device import (
    HAND_DEVICES,
    INSTALL_PYGAME,
    Device,
    TeleopCommand,
    TeleopEvent,
    display_available,
    import_optional,
    make_device,
)
from robolearn.teleop.scripted import InterventionSchedule

log = logging.getLogger(__name__)

Outcome = Literal["saved", "rerecord", "dropped", "quit"]

DROPPED_IN_A_ROW = 3
"""Episodes in a row not saved for a non-finite frame before recording stops: the device or policy
then produces NaN or infinity, and recording again would never end."""

FRONT = "front"
"""Camera name of the viewer's render (``--camera``)."""
WINDOW_HZ = 25.0
"""Refresh rate of the window: a software-rendered frame costs about 20 ms."""


class RecordError(RobolearnError):
    """A recording that cannot start; the message names the option and what is allowed."""


@dataclass
class Progress:
    """Where a recording stands."""

    saved: int = 0
    """Episodes saved in this session."""
    successes: int = 0
    """Saved episodes that succeeded (by the task or by the person's mark)."""
    rerecorded: int = 0
    """Episodes discarded by re-record."""
    step: int = 0
    """Control step of the episode in progress."""
    max_steps: int = 0
    """Episode length limit."""
    intervening: bool = False
    """The person drove the last step."""
    frames: int = 0
    """Frames saved in this session."""
    intervention_frames: int = 0
    """Of those, frames the person drove."""


class Viewer:
    """Shows the simulation: a pygame window, or PNG frames written every few seconds."""

    def __init__(self, mode: Literal["window", "png", "none"], png_dir: Path, png_every: float) -> None:
        self.mode, self.png_dir, self.png_every = mode, png_dir, png_every
        self.pg: Any = None
        self._last = -np.inf

    def open(self, title: str, size: tuple[int, int]) -> None:
        if self.mode == "window":
            pg = import_optional("pygame", "the simulation window", INSTALL_PYGAME)
            pg.display.init()
            pg.display.set_mode((2 * size[0], 2 * size[1]))
            pg.display.set_caption(title)
            self.pg = pg
        elif self.mode == "png":
            self.png_dir.mkdir(parents=True, exist_ok=True)
            log.info("frames of the simulation go to %s", self.png_dir)

    def due(self) -> bool:
        """Whether a frame is due now (rendering costs, so frames are rate-limited)."""
        period = {"window": 1.0 / WINDOW_HZ, "png": self.png_every}.get(self.mode)
        return period is not None and time.monotonic() - self._last >= period

    def show(self, frame: npt.NDArray[np.uint8], status: str, name: str = "latest.png") -> None:
        self._last = time.monotonic()
        if self.mode == "window":
            pg = self.pg
            h, w = frame.shape[:2]
            surface = pg.display.get_surface()
            image = pg.surfarray.make_surface(np.ascontiguousarray(frame.swapaxes(0, 1)))
            surface.blit(pg.transform.scale(image, (2 * w, 2 * h)), (0, 0))
            pg.display.set_caption(status)
            pg.display.flip()
        elif self.mode == "png":
            import imageio.v2 as imageio

            tmp = self.png_dir / f".{name}.tmp.png"
            imageio.imwrite(tmp, frame)
            tmp.replace(self.png_dir / name)  # a viewer never sees half a file

    def closed(self) -> bool:
        """The window was closed."""
        return self.pg is not None and bool(self.pg.event.get(self.pg.QUIT))

    def close(self) -> None:
        if self.pg is not None:
            self.pg.display.quit()
        self.pg = None


def _device_options(cmd: RecordCmd) -> dict[str, Any]:
    if cmd.device_name in HAND_DEVICES:
        opts: dict[str, Any] = {"drone_mode": cmd.drone_mode}
        if cmd.scale is not None:
            opts["scale"] = cmd.scale
        if cmd.device_name == "gamepad":
            opts["backend"] = cmd.gamepad_backend
        return opts
    if cmd.device_name == "scripted":
        steps, every, prob = cmd.intervene_steps, cmd.intervene_every, cmd.intervene_prob
        scheduled = steps is not None or every != 1 or prob != 1.0
        schedule = InterventionSchedule(steps, every, prob, cmd.seed) if scheduled else None
        return {"policy": cmd.scripted_policy, "schedule": schedule}
    if cmd.replay_from is None:
        raise RecordError("--device replay needs --replay-from DATASET")
    return {"root": cmd.replay_from}


def _base_policy(cmd: RecordCmd, cfg: TaskCfg, env: TaskEnv) -> Callable[[Observation], FloatArray] | None:
    """What drives while nobody intervenes, with ``--action-noise`` applied; None for ``--policy none``."""
    if cmd.policy == "none":
        return None
    if cmd.policy == "scripted" and cfg.expert is None and cfg.cameras:
        # A pixel task has no expert of its own: its state task's expert acts on privileged state.
        policy = privileged_expert(teacher_task(cfg), env)
    elif cmd.policy in ("scripted", "random"):
        from robolearn.eval.evaluation import make_policy

        policy = make_policy(cmd.policy, cfg, 1, cmd.seed)
    else:
        run = Path(cmd.policy)
        if not run.exists():
            raise RecordError(
                f"--policy must be none, scripted, random or a run folder; {run} does not exist"
            )
        from robolearn.policy.loading import load_policy

        loaded, meta = load_policy(run)
        if meta.get("task") != cfg.name:
            raise RecordError(f"--policy {run} was trained on {meta.get('task')}, not {cfg.name}")
        policy = loaded.act
    return policy if cmd.action_noise == 0 else NoisyPolicy(policy, cfg, cmd.action_noise, cmd.seed)


class NoisyPolicy:
    """A policy whose actions get Gaussian noise, ``sigma`` times each action's half-range, then are
    clipped to the action space: the scripted expert at several noise levels makes the mixed-quality
    datasets offline RL is measured on (issue 11; D4RL's "medium" and "noisy expert" data likewise)."""

    def __init__(
        self, policy: Callable[[Observation], FloatArray], cfg: TaskCfg, sigma: float, seed: int
    ) -> None:
        self.policy, self.sigma = policy, sigma
        self.low, self.high = np.asarray(cfg.action.low, np.float64), np.asarray(cfg.action.high, np.float64)
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, 11]))  # its own stream

    def __call__(self, obs: Observation) -> FloatArray:
        action = np.asarray(self.policy(obs), np.float64)
        noise = self.rng.normal(0.0, self.sigma, action.shape) * (self.high - self.low) / 2.0
        return np.clip(action + noise, self.low, self.high)


def _open_writer(
    out: Path, cfg: TaskCfg, shapes: dict[str, tuple[int, ...]], cameras: dict[str, tuple[int, int, int]]
) -> DatasetWriter:
    if not (out / "meta" / "info.json").is_file():
        return DatasetWriter.for_task(out, cfg, shapes, repo_id=f"local/{cfg.name}", cameras=cameras)
    ds = read_dataset(out)
    theirs = (
        {k: tuple(ds.features[OBS + k]["shape"]) for k in ds.obs_keys},
        {k.removeprefix(IMAGES): tuple(ds.features[k]["shape"]) for k in ds.camera_keys},
        ds.features.get(ACTION, {}).get("names"),
    )
    ours = (shapes, cameras, list(cfg.action.names))
    if theirs != ours:
        raise RecordError(
            f"{out} records observations {theirs[0]}, cameras {theirs[1]}, actions {theirs[2]}; this "
            f"recording has {ours[0]}, cameras {ours[1]}, actions {ours[2]}: choose another --out"
        )
    return DatasetWriter.open(out)


def recorded_cameras(cfg: TaskCfg, cmd: RecordCmd) -> dict[str, str]:
    """Camera name to the observation key its frames come from: each RGB camera of the task, and
    with ``--camera`` the viewer's render as ``front`` (key ``""``). Depth images are not recorded
    (a LeRobot video feature holds RGB)."""
    cameras = {spec.camera: key for key, spec in image_specs(cfg).items() if spec.kind == "rgb"}
    if cmd.camera:
        if FRONT in cameras:
            raise RecordError(f"task {cfg.name} has a camera named {FRONT!r}; record it without --camera")
        cameras[FRONT] = ""
    return cameras


class Recorder:
    """The recording loop of :func:`record`."""

    def __init__(self, cmd: RecordCmd, progress: Callable[[Progress], None] | None = None) -> None:
        cmd.check()  # ranges, before a device is opened or a file written
        cfg = make_task_cfg(cmd.task)
        if cmd.sim_params is not None:
            # The identified robot made nominal: the environment simulates it and the task's expert
            # (the scripted device, --policy scripted) is that robot's, as in robolearn train.
            cfg = apply_sim_params(cfg, load_sim_params(cmd.sim_params))
        if cmd.max_steps is not None:
            cfg = replace(cfg, episode_length=cmd.max_steps)
        if cmd.continue_after_success:
            cfg = replace(cfg, end_on_success=False)
        self.cmd, self.cfg = cmd, cfg
        self.out = cmd.dataset
        self.cameras = recorded_cameras(cfg, cmd)
        self.image_keys = set(image_specs(cfg))
        device = cmd.device_name
        self.device: Device | None = (
            None if device == "none" else make_device(device, cfg, **_device_options(cmd))
        )
        self.policy: Callable[[Observation], FloatArray] | None = None  # made with the environment
        self.neutral = np.asarray(cfg.action.neutral, np.float64)
        hand = device in HAND_DEVICES
        fps = cmd.fps if cmd.fps is not None else (1.0 / cfg.control_dt if hand else 0.0)
        self.period = 1.0 / fps if fps > 0 else 0.0
        mode = cmd.display
        if mode == "auto":
            mode = "window" if display_available() else "png"
        if device == "keyboard" and mode != "window":
            raise RecordError(
                "--device keyboard reads keys from the simulation window, which needs a display "
                "(DISPLAY or WAYLAND_DISPLAY) and --display auto or window"
            )
        self.viewer = Viewer(mode, self.out.parent / f"{self.out.name}-preview", cmd.png_every)
        # Beside a gamepad or SpaceMouse, the window's keys mark episodes (those devices' few
        # buttons drive); the scripted and replay devices mark nothing, a person watching may.
        self.key_events: Device | None = None
        if mode == "window" and device != "keyboard":
            from robolearn.teleop.keyboard import KeyboardEvents

            self.key_events = KeyboardEvents()
        self.progress = Progress(max_steps=cfg.episode_length)
        self.on_progress = progress

    def run(self) -> dict[str, Any]:
        cmd, cfg = self.cmd, self.cfg
        start = time.monotonic()
        quit_early = False
        with contextlib.ExitStack() as stack:
            env = TaskEnv(cfg, cmd.backend, 1, seed=cmd.seed, autoreset=False, render_size=cmd.image_size)
            stack.callback(env.close)
            self.policy = _base_policy(cmd, cfg, env)
            self.viewer.open(f"robolearn record {cfg.name}", cmd.image_size)
            stack.callback(self.viewer.close)
            # Devices first: a missing device must not leave an empty dataset behind.
            if self.device is not None:
                stack.enter_context(self.device)
            if self.key_events is not None:
                stack.enter_context(self.key_events)
            space = env.single_observation_space
            assert isinstance(space, gym.spaces.Dict)
            images = image_specs(cfg)
            shapes = {k: tuple(s.shape or ()) for k, s in space.items() if k not in images}
            w, h = cmd.image_size
            cameras = {
                name: (h, w, 3) if not key else images[key].shape for name, key in self.cameras.items()
            }
            writer = EpisodeWriter(
                _open_writer(self.out, cfg, shapes, cameras),
                cfg.description,
                episode_meta={"robolearn/policy": cmd.policy, "robolearn/action_noise": cmd.action_noise},
            )
            stack.callback(writer.close)
            dropped = 0
            while self.progress.saved < cmd.episodes:
                index = writer.num_episodes
                seed = int(np.random.SeedSequence([cmd.seed, index]).generate_state(1)[0])
                outcome = self._episode(env, writer, seed)
                if outcome == "quit":
                    quit_early = True
                    break
                dropped = dropped + 1 if outcome == "dropped" else 0
                if dropped >= DROPPED_IN_A_ROW:
                    raise RecordError(
                        f"{dropped} episodes in a row held NaN or infinity (the warnings name the values): "
                        f"the device or policy produces non-finite actions; {self.progress.saved} saved"
                    )
                if outcome in ("rerecord", "dropped"):
                    self.progress.rerecorded += 1
                    log.info("episode %d discarded: re-recording it", index)
        p = self.progress
        return {
            "task": cfg.name,
            "device": cmd.device_name,
            "policy": cmd.policy,
            "action_noise": cmd.action_noise,
            "sim_params": None if cmd.sim_params is None else str(cmd.sim_params),
            "cameras": list(self.cameras),
            "out": str(self.out),
            "episodes_saved": p.saved,
            "successes": p.successes,
            "success_rate": p.successes / p.saved if p.saved else float("nan"),
            "frames": p.frames,
            "intervention_frames": p.intervention_frames,
            "rerecorded": p.rerecorded,
            "quit": quit_early,
            "wall_seconds": time.monotonic() - start,
        }

    def _read(self, obs: dict[str, np.ndarray]) -> TeleopCommand:
        command = self.device.read(obs) if self.device is not None else TeleopCommand(None, False)
        if self.key_events is not None:
            command = command.merged(self.key_events.read(obs))
        if self.viewer.closed():
            command = command.merged(TeleopCommand(None, False, frozenset({TeleopEvent.QUIT})))
        return command

    def _episode(self, env: TaskEnv, writer: EpisodeWriter, seed: int) -> Outcome:
        """Run one episode; save it unless it is re-recorded or the person quits."""
        p = self.progress
        obs_batch, _ = env.reset(seed=seed)
        if self.device is not None:
            self.device.reset()
        pending: dict[str, Any] | None = None  # the last step's frame, added one step late
        success = False
        intervened = p.step = 0
        next_tick = time.monotonic()
        for step in range(self.cfg.episode_length):
            obs = {k: v[0] for k, v in obs_batch.items()}
            command = self._read(obs)
            if TeleopEvent.QUIT in command.events:
                writer.discard()
                return "quit"
            if TeleopEvent.RERECORD in command.events:
                writer.discard()
                return "rerecord"
            marked = command.events & {TeleopEvent.SUCCESS, TeleopEvent.FAILURE}
            if marked and pending is not None:
                # Success is a terminal state; a failure cuts the episode off, like a time-out.
                success = TeleopEvent.SUCCESS in marked
                pending |= {"success": success, "terminated": success}
                break
            human = command.intervening and command.action is not None
            if command.action is not None and (human or self.policy is None):
                action = command.action
            elif self.policy is not None:
                action = np.asarray(self.policy({k: v[None] for k, v in obs.items()}), np.float64)[0]
            else:
                action = self.neutral
            # A frame's images are of the state it observes, taken before the step, as its terms are.
            images = {name: obs[key] if key else env.render() for name, key in self.cameras.items()}
            obs_batch, reward, terminated, truncated, info = env.step(action[None])
            if pending is not None:
                writer.add_frame(0, **pending)
            pending = {
                "obs": {k: v for k, v in obs.items() if k not in self.image_keys},
                "action": action,
                "reward": float(reward[0]),
                "success": bool(info["success"][0]),
                "terminated": bool(terminated[0]),
                "is_intervention": human,
                "image": images or None,
            }
            success |= pending["success"]
            intervened += human
            p.step, p.intervening = step + 1, human
            self._show(env, images.get(FRONT))
            if self.on_progress is not None:
                self.on_progress(p)
            if terminated[0] or truncated[0]:
                break
            if self.period:
                next_tick += self.period
                delay = next_tick - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                else:  # fell behind: carry on from now rather than race to catch up
                    next_tick = time.monotonic()
        assert pending is not None  # the first iteration either returned or stepped
        writer.add_frame(0, **pending)
        if writer.end_episode() is None:  # a frame was not finite: said, not saved, recorded again
            return "dropped"
        p.saved += 1
        p.successes += success
        p.frames += p.step
        p.intervention_frames += intervened
        if self.viewer.mode == "png":
            self.viewer.show(env.render(), self._status(), f"episode-{writer.num_episodes - 1:04d}.png")
        if self.on_progress is not None:
            self.on_progress(p)
        return "saved"

    def _show(self, env: TaskEnv, image: npt.NDArray[np.uint8] | None) -> None:
        if self.viewer.due():
            self.viewer.show(image if image is not None else env.render(), self._status())

    def _status(self) -> str:
        p = self.progress
        return (
            f"{self.cfg.name}: episode {p.saved + 1}/{self.cmd.episodes}, step {p.step}/{p.max_steps}, "
            f"{'HUMAN' if p.intervening else 'policy'}, {p.successes} successes"
        )


def record(cmd: RecordCmd, progress: Callable[[Progress], None] | None = None) -> dict[str, Any]:
    """Record ``cmd.episodes`` episodes; returns a summary (episodes, successes, frames, ...)."""
    return Recorder(cmd, progress).run()
