"""The vocabulary of task definitions: typed configs whose terms are small functions.

A task is declared, not programmed (as in Isaac Lab's and mjlab's manager-based configs): a
factory returns a :class:`TaskCfg` whose observation, reward, success, termination and reset terms
are plain functions ``fn(env, **params)`` over all worlds at once. A term that needs memory is a
small class with ``reset(env, ids)``. Terms see the environment only through
:class:`TaskEnvView`, so a task never names a simulator.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from robolearn.errors import RobolearnError
from robolearn.sim.backend import BACKENDS, Backend, FloatArray, IntArray, Marker
from robolearn.sim.scene import CameraSensorCfg, SceneCfg

Embodiment = Literal["arm", "drone", "car", "legged"]
Observation = dict[str, npt.NDArray[Any]]
"""Observation key to (num_envs, ...) values: float32 state terms, uint8 or float32 images."""


class TaskError(RobolearnError):
    """A malformed task definition or an unknown task; the message names the fault."""


class TaskEnvView(Protocol):
    """What terms may read and write: the simulator, per-world task state and counters."""

    cfg: TaskCfg
    num_envs: int
    sim: Backend
    xp: Any
    """Array API namespace terms compute with: the backend's (numpy, or torch's on a device)."""
    device: Any
    """Device of the arrays (None for numpy); pass it to ``xp`` when creating arrays."""
    float_dtype: Any
    """Floating-point type of the task's arrays: float64 on the host, float32 on a device."""
    state: dict[str, npt.NDArray[Any]]
    """Per-world task state declared in ``TaskCfg.state`` (goals, checkpoint indices, ...)."""
    step_count: IntArray
    """(num_envs,) control steps taken in the current episode."""
    action: FloatArray
    """(num_envs, A) the command sent in the last step, in physical units: what a robot's policy knows
    it sent. Under action latency the physics acts on an older one, which a robot does not report."""
    prev_action: FloatArray
    """(num_envs, A) the command sent the step before."""
    rng: np.random.Generator
    """The generator reset terms draw from (on a device backend, one with its interface drawing there)."""
    step_success: npt.NDArray[np.bool_]
    """(num_envs,) the success condition in the current step, evaluated before the rewards."""
    step_terminations: dict[str, npt.NDArray[np.bool_]]
    """Each termination term's (num_envs,) value in the current step, evaluated before the rewards."""

    def constant(self, value: float | tuple[float, ...]) -> FloatArray:
        """``value`` (a term's parameter) as a read-only array of ``float_dtype`` where the worlds
        are: made on the first call, a dictionary look-up after (see :class:`TermConstants`)."""
        ...


class TermConstants:
    """The :meth:`TaskEnvView.constant` of every view: terms run every step, and converting their
    parameters (workspace bounds, gains) each time costs more than the arithmetic (issue 18)."""

    xp: Any
    device: Any
    float_dtype: Any

    _term_constants: dict[Any, Any]

    def constant(self, value: float | tuple[float, ...]) -> FloatArray:
        try:  # the common case in one look-up: terms call this several times a step
            return self._term_constants[value]
        except (AttributeError, KeyError):
            return self._new_constant(value)

    def _new_constant(self, value: float | tuple[float, ...]) -> FloatArray:
        cache: dict[Any, Any] = self.__dict__.setdefault("_term_constants", {})
        array = self.xp.asarray(value, dtype=self.float_dtype, device=self.device)
        if isinstance(array, np.ndarray):
            array.flags.writeable = False  # shared by every call: a term must not write to it
        cache[value] = array
        return array


@dataclass(frozen=True)
class ObsTerm:
    """One named observation, (num_envs, k) in physical units."""

    fn: Callable[..., npt.NDArray[Any]]
    """``fn(env, **params) -> (num_envs, k)``."""
    units: str
    """Physical units of every component, e.g. ``m``, ``m/s``, ``rad``, ``1``."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments of ``fn``."""
    noise_std: float = 0.0
    """Standard deviation of Gaussian sensor noise added under domain randomization (in ``units``)."""


@dataclass(frozen=True)
class RewardTerm:
    """One weighted reward component."""

    fn: Callable[..., npt.NDArray[Any]]
    """``fn(env, **params) -> (num_envs,)``."""
    weight: float
    """Multiplier of the term in the reward sum."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments of ``fn``."""


@dataclass(frozen=True)
class DoneTerm:
    """A condition that ends an episode."""

    fn: Callable[..., npt.NDArray[Any]]
    """``fn(env, **params) -> (num_envs,)`` booleans."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments of ``fn``."""
    time_out: bool = False
    """True for a limit that truncates (the value is bootstrapped), False for a true terminal state."""


@dataclass(frozen=True)
class EventTerm:
    """Something done to the worlds being reset (the reset distribution)."""

    fn: Callable[..., None]
    """``fn(env, ids, **params)``; writes the simulator state and ``env.state`` of worlds ``ids``."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments of ``fn``."""


@dataclass(frozen=True)
class StepTerm:
    """Task bookkeeping after every physics step, before rewards: advancing a waypoint, a lap."""

    fn: Callable[..., None]
    """``fn(env, **params)``; updates ``env.state`` for all worlds."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments of ``fn``."""


@dataclass(frozen=True)
class GripperCfg:
    """An action component that commands a gripper, and the observation term that measures it.

    What a discrete gripper learner (HIL-SERL's close/stay/open critic, issue 11) needs to know
    about a task instead of an index: the command that closes and the one that opens, and when the
    measured gripper counts as open (``stay`` keeps that state; a change of it is what is penalised).
    """

    action: str
    """Name of the action component (``gripper_opening``)."""
    closed: float
    """Command that closes the gripper (physical units)."""
    open: float
    """Command that opens it."""
    observation: str
    """Observation term measuring the gripper, in the command's units."""
    open_above: float
    """Measured value above which the gripper counts as open."""


@dataclass(frozen=True)
class ActionCfg:
    """The action space in physical units and how an action becomes controller inputs."""

    names: tuple[str, ...]
    """Name of each action component."""
    units: tuple[str, ...]
    """Physical unit of each component."""
    low: tuple[float, ...]
    """Lower bound of each component (physical units); actions are clipped to it."""
    high: tuple[float, ...]
    """Upper bound of each component."""
    neutral: tuple[float, ...]
    """The action applied in place of a rejected (non-finite) one: hold still, hover, brake."""
    to_controls: Callable[..., FloatArray]
    """``fn(env, action) -> (num_envs, num_controls)``: the action term."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments of ``to_controls``."""
    gripper: GripperCfg | None = None
    """The component that commands a gripper, if one does."""
    max_rate: tuple[float, ...] | None = None
    """Largest change of each component per second between consecutive commands (units per second),
    or None for none: a robot's safety layer rate-limits its commands so (``max_rate`` of
    hardware/config/<robot>.yaml), and ``robolearn train --rate-limits`` trains under the same."""


@dataclass(frozen=True)
class DomainRandCfg:
    """Ranges drawn per world at every reset when randomization is on."""

    mass_scale: tuple[float, float] = (1.0, 1.0)
    """Multiplier on body masses and inertias."""
    friction_scale: tuple[float, float] = (1.0, 1.0)
    """Multiplier on sliding friction."""
    damping_scale: tuple[float, float] = (1.0, 1.0)
    """Multiplier on joint damping."""
    actuator_gain_scale: tuple[float, float] = (1.0, 1.0)
    """Multiplier on actuator gains."""
    action_latency_steps: tuple[int, int] = (0, 0)
    """Delay, in control steps, between an action and its effect (inclusive range)."""
    sensor_noise: bool = True
    """Add each observation term's ``noise_std``."""


class Expert(Protocol):
    """A scripted policy acting on observations only, so it can be deployed like a trained one."""

    def __call__(self, obs: Observation) -> FloatArray:
        """(num_envs, A) actions in physical units."""
        ...


@dataclass(frozen=True)
class TaskCfg:
    """A complete task definition."""

    name: str
    """Registry name, e.g. ``panda_pick_cube``."""
    embodiment: Embodiment
    """Which kind of robot the task is for."""
    description: str
    """One sentence for listings."""
    scene: SceneCfg
    """Robot, objects and physics step."""
    control_dt: float
    """Control period (s); the physics takes ``control_dt / scene.physics_dt`` substeps per action."""
    episode_length: int
    """Control steps before an episode is truncated."""
    action: ActionCfg
    """Action space and action term."""
    observations: dict[str, ObsTerm]
    """Observation terms; the observation is a dict with these keys, in this order."""
    rewards: dict[str, RewardTerm]
    """Reward terms, summed."""
    success: DoneTerm
    """When the task counts as solved."""
    terminations: dict[str, DoneTerm] = field(default_factory=dict)
    """Conditions that end an episode besides the episode length."""
    reset_events: dict[str, EventTerm] = field(default_factory=dict)
    """Applied in order to worlds being reset, after they return to the nominal state."""
    updates: dict[str, StepTerm] = field(default_factory=dict)
    """Applied in order after every physics step, before rewards, successes and terminations."""
    state: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Per-world task state to allocate: name to the shape of one world's entry."""
    randomization: DomainRandCfg = field(default_factory=DomainRandCfg)
    """Domain randomization ranges (used when an environment is made with randomization on)."""
    end_on_success: bool = True
    """End the episode (as terminal) once the success condition holds."""
    expert: Callable[[TaskCfg], Expert] | None = None
    """Factory of the scripted expert that solves the nominal task."""
    markers: Callable[[TaskEnvView, int], list[Marker]] | None = None
    """Goals and checkpoints to draw in videos of world ``i``."""
    backends: tuple[str, ...] = BACKENDS
    """Backends the task runs on."""
    cameras: dict[str, CameraSensorCfg] = field(default_factory=dict)
    """Named cameras; each adds the image observations ``<name>_rgb`` (and ``<name>_depth``) after
    the state terms (:mod:`robolearn.tasks.cameras`)."""

    @property
    def substeps(self) -> int:
        """Physics steps per control step."""
        return round(self.control_dt / self.scene.physics_dt)

    def validate(self) -> None:
        """Check the definition's internal consistency; raise :class:`TaskError` naming the fault."""
        n = len(self.action.names)
        for label in ("units", "low", "high", "neutral"):
            if len(getattr(self.action, label)) != n:
                raise TaskError(
                    f"task {self.name}: action.{label} has {len(getattr(self.action, label))} "
                    f"entries, action.names has {n}"
                )
        if any(lo >= hi for lo, hi in zip(self.action.low, self.action.high, strict=True)):
            raise TaskError(f"task {self.name}: every action low must be below its high")
        rate = self.action.max_rate
        if rate is not None and (len(rate) != n or not all(r > 0 for r in rate)):
            raise TaskError(f"task {self.name}: action.max_rate needs {n} positive entries, got {rate}")
        if self.control_dt <= 0 or abs(self.substeps * self.scene.physics_dt - self.control_dt) > 1e-9:
            raise TaskError(
                f"task {self.name}: control_dt {self.control_dt} is not a positive multiple of "
                f"physics_dt {self.scene.physics_dt}"
            )
        if self.episode_length < 1:
            raise TaskError(f"task {self.name}: episode_length must be at least 1")
        if not self.observations:
            raise TaskError(f"task {self.name}: no observation terms")
        unknown = set(self.backends) - set(BACKENDS)
        if unknown:
            raise TaskError(f"task {self.name}: unknown backends {sorted(unknown)}; known: {list(BACKENDS)}")
        self._validate_cameras()
        terms: list[tuple[str, Any]] = [("action", self.action), ("success", self.success)]
        for group in ("observations", "rewards", "terminations", "reset_events", "updates"):
            terms += [(f"{group}.{k}", v) for k, v in getattr(self, group).items()]
        for label, term in terms:
            fn = term.to_controls if isinstance(term, ActionCfg) else term.fn
            _check_params(self.name, label, fn, term.params)
            named = term.params.get("termination")  # a term reading a termination's value
            if named is not None and named not in self.terminations:
                raise TaskError(
                    f"task {self.name}: term {label} reads termination {named!r}; "
                    f"terminations: {sorted(self.terminations)}"
                )

    def _validate_cameras(self) -> None:
        for name, cam in self.cameras.items():
            where = f"task {self.name}: camera {name!r}"
            if not name.isidentifier():
                raise TaskError(f"{where}: a camera name must be an identifier (letters, digits, _)")
            if not (1 <= cam.width <= MAX_IMAGE[0] and 1 <= cam.height <= MAX_IMAGE[1]):
                raise TaskError(
                    f"{where}: {cam.width}x{cam.height} pixels; width and height must lie in "
                    f"1..{MAX_IMAGE[0]} and 1..{MAX_IMAGE[1]} (the offscreen buffer's size)"
                )
            if not 0.0 < cam.fovy < 180.0:
                raise TaskError(f"{where}: fovy {cam.fovy} must lie strictly between 0 and 180 degrees")
            clash = {name + "_rgb", name + "_depth"} & set(self.observations)
            if clash:
                raise TaskError(f"{where}: its image key {sorted(clash)[0]} is also a state observation term")


MAX_IMAGE = (1280, 960)
"""Largest camera image (width, height): the MuJoCo backends' offscreen buffer."""


def _check_params(task: str, label: str, fn: Callable[..., Any], params: Mapping[str, Any]) -> None:
    """Refuse term parameters the function does not take (a typo would otherwise be silent)."""
    sig = inspect.signature(fn if inspect.isfunction(fn) else type(fn).__call__)
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return
    unknown = set(params) - set(sig.parameters)
    if unknown:
        raise TaskError(
            f"task {task}: term {label} gets parameters {sorted(unknown)} that "
            f"{getattr(fn, '__name__', type(fn).__name__)} does not take; "
            f"it takes {[p for p in sig.parameters if p not in ('self', 'env', 'ids')]}"
        )
    try:
        sig.bind_partial(**params)
    except TypeError as exc:
        raise TaskError(f"task {task}: term {label}: {exc}") from None
