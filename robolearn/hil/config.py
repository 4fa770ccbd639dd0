"""Options of recording and of the reward classifier: typed configs whose field docstrings are the
CLI's help.

This module imports neither torch nor pyarrow, so ``robolearn --help`` stays fast (issue 9). Every
numeric option has a stated valid range, checked in its config's ``check()`` before a device is
opened or a file written (issue 15).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import tyro

from robolearn.errors import ConfigError
from robolearn.options import (
    check_output_dir,
    check_range,
    check_seed,
    check_step_window,
    check_threads,
    check_widths,
)
from robolearn.sim.backend import BackendName
from robolearn.tasks import DEFAULT_TASK, make_task_cfg
from robolearn.tasks.sim_params import apply_sim_params, load_sim_params
from robolearn.teleop.mapping import DroneMode

DeviceName = Literal["auto", "none", "keyboard", "gamepad", "spacemouse", "scripted", "replay"]
Display = Literal["auto", "window", "png", "none"]
ThresholdRule = Literal["f1", "balanced"]

MAX_IMAGE_SIZE = 4_096
"""Largest rendered frame side (pixels)."""
MAX_FPS = 10_000.0
"""Fastest loop pace one may ask for; 0 means unpaced."""


@dataclass(frozen=True)
class RecordCmd:
    """Record episodes of a task driven from a device into a LeRobot v3 dataset.

    An episode ends when the task ends it (success, a terminal state, the step limit) or when the
    person marks it a success or a failure; re-record discards it and starts it again from the
    same initial state; quit drops the episode in progress and stops. Default device bindings:
    docs/teleop.md. The last line printed is one JSON object.
    """

    task: tyro.conf.Positional[str] = DEFAULT_TASK
    """Task name (see ``robolearn tasks``)."""
    device: DeviceName = "auto"
    """Who drives: a person (keyboard, gamepad, SpaceMouse), a scripted stand-in, a replayed dataset,
    or none (``--policy`` drives alone); auto: none with a ``--policy``, else the keyboard."""
    episodes: int = 10
    """Episodes to save."""
    out: Path | None = None
    """Dataset folder (default ``datasets/<task>``); a dataset with the same features is appended to."""
    backend: BackendName = "mujoco"
    """Simulator (one world)."""
    seed: int = 0
    """Seed of the initial states (with each episode's index in the dataset)."""
    max_steps: int | None = None
    """Control steps before an episode is cut off (default: the task's episode length)."""
    fps: float | None = None
    """Loop pace in steps per wall-clock second (default: real time for a person, else 0: unpaced).
    The dataset's fps is always the task's control rate, so a slower pace is slow motion."""
    camera: bool = False
    """Also record the rendered viewer image as a video feature (``observation.images.front``). A
    task with cameras records each of them (``observation.images.<camera>``) in any case."""
    image_size: tuple[int, int] = (320, 240)
    """Width and height of rendered frames (even numbers)."""
    policy: str = "none"
    """What drives while nobody intervenes: none (the device: hold still), scripted, random, RUN_DIR.
    A pixel task's scripted policy is its state task's expert acting on privileged state."""
    action_noise: float = 0.0
    """Standard deviation of Gaussian noise added to the policy's actions, as a fraction of each
    action's half-range (sigma in the normalized [-1, 1] action space), clipped to the action
    space; stored in each episode's row of the episodes table (``robolearn/action_noise``). With
    ``--policy scripted`` it makes datasets of mixed quality (issue 11)."""
    continue_after_success: bool = False
    """Do not end an episode at the task's success: step on to the step limit, so success frames are
    many (a reward classifier's positives; LeRobot's HIL-SERL recorder does the same)."""
    scripted_policy: str = "scripted"
    """For ``--device scripted``: the task's ``scripted`` expert, or a run folder."""
    intervene_steps: tuple[int, int] | None = None
    """For ``--device scripted``: it takes over only during steps [a, b) of an episode."""
    intervene_every: int = 1
    """For ``--device scripted``: only in every k-th episode."""
    intervene_prob: float = 1.0
    """For ``--device scripted``: only with this probability per episode (drawn from ``--seed``)."""
    replay_from: Path | None = None
    """For ``--device replay``: the dataset whose episodes are replayed, in order."""
    drone_mode: DroneMode = "velocity"
    """Drones on a hand-held device: velocity setpoints via a hover controller, or rates (acro)."""
    scale: float | None = None
    """Hand-held devices: fraction of the action bounds at full deflection (default 0.5 keys, 1 else)."""
    gamepad_backend: Literal["auto", "pygame", "evdev"] = "auto"
    """How the gamepad is read."""
    display: Display = "auto"
    """window (pygame), png (frames beside the dataset), none; auto: a window if there is a display."""
    png_every: float = 2.0
    """Seconds between PNG frames (0: every control step)."""
    sim_params: Path | None = None
    """A parameter file from ``robolearn sysid``: record on the identified robot (its dynamics made
    nominal), and the scripted device and ``--policy scripted`` drive as that robot's expert (the
    car's within its tyres' grip), as ``robolearn train --sim-params`` does."""
    excitation: bool = False
    """Instead of a person or a policy: multisine joint trajectories for system identification
    (``robolearn sysid TASK --data OUT`` fits them), 8 s per episode; with --ros over ROS 2."""
    ros: bool = False
    """With --excitation: drive the robot speaking docs/ros.md's topics on this ROS domain, every
    command through the safety layer (one rosbag2 folder per episode)."""
    amplitude: float | None = None
    """With --excitation: largest excursion from the start (rad or m; default 0.8 of the joints in
    simulation, 0.04 m of the tool over ROS 2)."""

    @property
    def dataset(self) -> Path:
        """The dataset folder written to: ``--out``, or ``datasets/<task>``."""
        return self.out if self.out is not None else Path("datasets") / self.task

    def check(self) -> None:
        """Refuse options outside their ranges, naming the option, the value and the range."""
        task = make_task_cfg(self.task)  # an unknown task fails here
        if (self.ros or self.amplitude is not None) and not self.excitation:
            raise ConfigError("--ros and --amplitude record an excitation: add --excitation")
        if self.sim_params is not None:
            if self.excitation:
                raise ConfigError(
                    "--sim-params records on an identified robot, --excitation the robot to identify: "
                    "drop one"
                )
            apply_sim_params(task, load_sim_params(self.sim_params))  # a bad file, or another robot's
        check_range("--episodes", self.episodes, 1)
        check_seed("--seed", self.seed)
        check_range("--max-steps", self.max_steps, 1, allow_none=True)
        check_range("--fps", self.fps, 0, MAX_FPS, allow_none=True)
        if any(not 2 <= s <= MAX_IMAGE_SIZE or s % 2 for s in self.image_size):
            raise ConfigError(
                f"--image-size {self.image_size[0]} {self.image_size[1]}: must be two even numbers of "
                f"pixels in [2, {MAX_IMAGE_SIZE}]"
            )
        check_step_window("--intervene-steps", self.intervene_steps)
        check_range("--intervene-every", self.intervene_every, 1)
        check_range("--intervene-prob", self.intervene_prob, 0, 1)
        check_range("--scale", self.scale, 0, 1, low_open=True, allow_none=True)
        check_range("--png-every", self.png_every, 0)
        check_range("--action-noise", self.action_noise, 0, 10)
        if self.action_noise > 0 and self.policy == "none":
            raise ConfigError(
                f"--action-noise {self.action_noise}: perturbs the policy's actions; give --policy "
                "scripted, random or a run folder"
            )
        if self.device_name == "none" and self.policy == "none":
            raise ConfigError(
                "--device none: nothing would drive; give --policy scripted, random or a run folder"
            )
        check_output_dir("--out", self.dataset)

    @property
    def device_name(self) -> str:
        """The device that reads input: ``--device``, auto resolved (none with a policy, else keyboard)."""
        if self.device != "auto":
            return self.device
        return "none" if self.policy != "none" else "keyboard"


@dataclass(frozen=True)
class RewardTrainCmd:
    """Train a success classifier (HIL-SERL's learned reward) from a recorded dataset.

    A frame is labelled by whether the state it observes is a success (the previous step's
    ``next.success``), since the classifier judges observations reached. Episodes, not frames, are
    split into training, validation (choosing the epoch and the threshold) and held-out ones, and
    the held-out precision and recall are reported. The last line printed is one JSON object.
    """

    dataset: tyro.conf.Positional[Path]
    """Dataset folder (LeRobotDataset v3.0) with successful and failed episodes."""
    out: Path | None = None
    """Folder to write the classifier to (default: ``runs/reward-<dataset name>``)."""
    features: tuple[str, ...] = ()
    """Observation terms the classifier sees (default: every recorded term)."""
    state: bool = True
    """Use observation terms at all (``--no-state``: a classifier that sees only the cameras)."""
    images: bool = True
    """Use the camera images (a small CNN per camera) when the dataset has them."""
    cameras: tuple[str, ...] = ()
    """Cameras it sees, by name (``wrist scene``; default: every camera the dataset records)."""
    augment: bool = False
    """DrQ's random shift (4 pixels) on training images, for a camera that may move by a few pixels.
    Off by default: on pick-cube's fixed scene camera the cube's height in the image is the signal,
    and shifting blurs it (held-out precision 0.937 with it, 0.967 without: docs/pixels.md)."""
    held_out: float = 0.25
    """Share of episodes kept out of training to measure precision and recall."""
    validation: float = 0.2
    """Share of the remaining episodes that choose the epoch and, without ``--threshold``, the threshold."""
    epochs: int = 40
    """Passes over the training frames."""
    batch_size: int = 256
    """Frames per gradient step."""
    lr: float = 1e-3
    """Adam learning rate."""
    hidden: tuple[int, ...] = (128, 128)
    """Hidden layer widths of the MLP head."""
    encoder: Literal["small", "drq"] = "small"
    """Each camera's CNN: small (three strided convolutions, fast on a CPU) or drq (DrQ's encoder,
    as pixel training uses; also writes ``encoder.safetensors``, a pretrained encoder for
    ``robolearn train --pretrained-encoder``, issue 13)."""
    threshold: float | None = None
    """Probability above which a frame counts as a success (reward 1); None: the one with the best
    score of ``--threshold-rule`` on the validation episodes."""
    threshold_rule: ThresholdRule = "f1"
    """What chooses the epoch and the threshold on the validation episodes: f1 (F1 score) or
    balanced (the lower of precision and recall, the measure of a goal on both)."""
    seed: int = 0
    """Seed of the episode split, initialization, augmentation and batch order."""
    torch_threads: int = 1
    """CPU threads for torch; 0 keeps torch's default."""

    @property
    def folder(self) -> Path:
        """The classifier folder written: ``--out``, or ``runs/reward-<dataset name>``."""
        return self.out if self.out is not None else Path("runs") / f"reward-{self.dataset.name}"

    def check(self) -> None:
        """Refuse options outside their ranges, naming the option, the value and the range."""
        check_range("--held-out", self.held_out, 0, 1, low_open=True, high_open=True)
        check_range("--validation", self.validation, 0, 1, high_open=True)
        check_range("--epochs", self.epochs, 1)
        check_range("--batch-size", self.batch_size, 1)
        check_range("--lr", self.lr, 0, 1, low_open=True)
        check_widths("--hidden", self.hidden)
        check_range("--threshold", self.threshold, 0, 1, allow_none=True)
        check_seed("--seed", self.seed)
        check_threads("--torch-threads", self.torch_threads)
        check_output_dir("--out", self.folder)


@dataclass(frozen=True)
class RewardEvalCmd:
    """Measure a trained success classifier on another dataset (e.g. new recordings of the robot).

    Prints frame-level precision and recall; the last line printed is one JSON object.
    """

    classifier: tyro.conf.Positional[Path]
    """Classifier folder written by ``robolearn reward train``."""
    dataset: tyro.conf.Positional[Path]
    """Dataset folder (LeRobotDataset v3.0) with ``next.success`` labels."""
    threshold: float | None = None
    """Probability above which a frame counts as a success (None: the one saved with it)."""

    def check(self) -> None:
        """Refuse a threshold outside [0, 1]."""
        check_range("--threshold", self.threshold, 0, 1, allow_none=True)
